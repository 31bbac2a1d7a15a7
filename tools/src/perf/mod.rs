//! `softrnic perf`: throughput and latency figures, each RC (RDMA) figure printed next to the
//! baseline it is judged against, measured in the same run on the same machine.
//!
//! A run measures the sets of lines its [`Options`] ask for, one after the other, in this
//! order:
//!
//! - [`standard`]: the raw kernel UDP baselines over loopback and the RC lines judged against
//!   them, RC RDMA WRITE throughput of 64 KiB messages and RC SEND ping-pong latency (the
//!   default);
//! - [`sizes`]: RC RDMA WRITE throughput against message size, each size beside the kernel's
//!   limit for the same packets;
//! - [`qps`]: RC RDMA WRITE throughput against the number of QPs writing at once, beside one
//!   QP's.
//!
//! ([`host`], `softrnic perf --host`, measures what sharing a device among processes costs, on
//! its own.) Every line is a [`Measurement`] whose `baseline` names the line it is compared
//! with; [`Report::print`] and [`Report::to_json`] show the [`ratio`] beside it, and
//! [`machine`] says in the JSON what the run ran on. Bandwidth lines measured in rounds on a
//! machine whose speed changes by phases are judged round by round within one phase
//! ([`phase`]).

pub mod host;
pub mod machine;
pub mod pair;
pub mod perftest;
pub mod perftest_bw;
pub mod phase;
pub mod qps;
pub mod raw_udp;
pub mod rtt;
pub mod sizes;
mod sock;
pub mod standard;

use std::io::{self, Write};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::rig::Rig;

/// What `softrnic perf` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long each throughput test sends (a raw one after a warm-up of a quarter of it, at
    /// most 200 ms).
    pub duration: Duration,
    /// Round trips measured by each latency test.
    pub iters: usize,
    /// Whether to measure the [`standard`] lines.
    pub standard: bool,
    /// The message sizes of [`sizes`], in bytes (none: that set is not measured).
    pub sizes: Vec<usize>,
    /// The QP counts of [`qps`] (none: that set is not measured).
    pub qps: Vec<usize>,
    /// Rounds of the [`qps`] set (each count's figure is its median round).
    pub qps_rounds: usize,
    /// Whether the [`qps`] counts take turns in slices on one pair of devices
    /// ([`qps::interleave`]) rather than a run each on fresh devices, in rounds.
    pub qps_interleave: bool,
}

impl Default for Options {
    /// The standard lines alone, as `softrnic perf` with no option runs them.
    fn default() -> Self {
        Options {
            duration: Duration::from_secs(3),
            iters: 100_000,
            standard: true,
            sizes: Vec::new(),
            qps: Vec::new(),
            qps_rounds: 1,
            qps_interleave: false,
        }
    }
}

/// Measures the sets `opts` asks for, one after the other, so that none disturbs another.
pub fn run(opts: &Options) -> io::Result<Report> {
    let mut report = Report::default();
    if opts.standard {
        report
            .lines
            .extend(standard::run(opts.duration, opts.iters)?);
    }
    if !opts.sizes.is_empty() {
        report.lines.extend(sizes::run(&opts.sizes, opts.duration)?);
    }
    if !opts.qps.is_empty() {
        let counts = if opts.qps_interleave {
            qps::interleave::run(&opts.qps, opts.duration)?
        } else {
            qps::run(&opts.qps, opts.duration, opts.qps_rounds)?
        };
        report.lines.extend(qps::lines(&counts));
    }
    Ok(report)
}

/// How long a raw throughput test that sends for `duration` warms up first (uncounted): a
/// quarter of it, at most 200 ms.
fn warmup(duration: Duration) -> Duration {
    (duration / 4).min(Duration::from_millis(200))
}

/// Bytes of buffer each side of [`loopback_rig`] registers: room for the largest message of
/// [`sizes`].
const RIG_MEM: usize = 4 << 20;

/// The RC lines' two devices: 127.0.0.1 and 127.0.0.2 in this process, both driven from the
/// poll loop (`Progress::Polling`), one QP each, connected.
fn loopback_rig() -> io::Result<Rig> {
    let a = "127.0.0.1".parse().expect("literal");
    let b = "127.0.0.2".parse().expect("literal");
    Rig::new(a, b, RIG_MEM, softrnic_uapi::Progress::Polling)
}

/// The line of RC RDMA WRITE throughput of `msg`-byte messages on [`loopback_rig`]
/// ([`crate::demo::write_throughput`]): `gbit`, judged against the line `baseline`.
fn rc_write_line(key: &str, msg: usize, gbit: f64, baseline: &str) -> Measurement {
    Measurement {
        key: key.to_owned(),
        label: format!("RC RDMA WRITE {}, PMTU 4096, 1 QP", size_text(msg)),
        value: gbit,
        unit: Unit::GbitPerSec,
        detail: "16 outstanding, one thread polls both devices".to_owned(),
        baseline: Some(baseline.to_owned()),
        paired: None,
        fields: Map::from_iter([
            ("message_len".to_owned(), msg.into()),
            ("gbit_per_s".to_owned(), gbit.into()),
        ]),
    }
}

/// Parses a comma-separated list of whole numbers, each within `range`, at most `most` of
/// them (`--qps 1,4,16`, `--sizes 4096,65536`); `what` names one in the errors.
///
/// # Errors
/// A word that is not such a number, or too many.
fn parse_list(
    s: &str,
    range: std::ops::RangeInclusive<usize>,
    most: usize,
    what: &str,
) -> Result<Vec<usize>, String> {
    let list = s
        .split(',')
        .map(|w| match w.trim().parse::<usize>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(format!(
                "{w:?} is not a {what} from {} to {}",
                range.start(),
                range.end()
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if list.len() > most {
        return Err(format!("at most {most} {what}s"));
    }
    Ok(list)
}

/// The unit of a measurement's headline figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Received payload, 10^9 bits per second: higher is better.
    GbitPerSec,
    /// Mean round trip in microseconds: lower is better.
    MeanRttUs,
    /// Microseconds per ping-pong iteration (a round trip), as `ibv_rc_pingpong` reports
    /// it: lower is better.
    UsPerIter,
    /// Milliseconds a step took: lower is better.
    Ms,
    /// A latency in microseconds: lower is better.
    Us,
}

impl Unit {
    fn format(self, v: f64) -> String {
        if !v.is_finite() {
            return "not measured".to_owned();
        }
        match self {
            Unit::GbitPerSec => format!("{v:.2} Gbit/s"),
            Unit::MeanRttUs => format!("{v:.1} us mean RTT"),
            Unit::UsPerIter => format!("{v:.2} us/iter"),
            Unit::Ms => format!("{v:.1} ms"),
            Unit::Us => format!("{v:.2} us"),
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Stable name, the key in JSON: `raw_udp_bw`, `raw_udp_pingpong`.
    pub key: String,
    /// What was measured, as printed: `raw UDP  4 KiB sendmmsg/recvmmsg`.
    pub label: String,
    /// The headline figure, in `unit`; not finite (NaN) when it could not be measured, and
    /// then printed as "not measured".
    pub value: f64,
    /// The unit of `value`.
    pub unit: Unit,
    /// Printed in parentheses after the figure.
    pub detail: String,
    /// The key of the line this one is compared with: the raw UDP line for an RC line.
    pub baseline: Option<String>,
    /// For a bandwidth figure measured in rounds within one phase of the machine ([`phase`]):
    /// its ratio to the baseline round by round, which is then the ratio the report gives;
    /// the ratio of the two figures is printed beside it.
    pub paired: Option<phase::PairedRatio>,
    /// Every figure of the measurement, for `--json`.
    pub fields: Map<String, Value>,
}

/// `a / b`: how many times the baseline `b` the figure `a` is (for a latency, above 1 is
/// slower). `None` when it has no meaning (`b` zero, either not finite).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    let r = a / b;
    (b != 0.0 && r.is_finite()).then_some(r)
}

/// The measurements of one run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The lines, in the order they are printed.
    pub lines: Vec<Measurement>,
}

impl Report {
    /// The line named `key`.
    pub fn get(&self, key: &str) -> Option<&Measurement> {
        self.lines.iter().find(|m| m.key == key)
    }

    /// `m`'s ratio to its baseline line, if it has one: the ratio within one phase where
    /// `m` has one, else its figure over the baseline's, if both were measured.
    pub fn ratio_to_baseline(&self, m: &Measurement) -> Option<f64> {
        match m.paired {
            Some(p) => Some(p.ratio),
            None => self.ratio_of_figures(m),
        }
    }

    /// `m`'s figure over that of its baseline line, if it has one and both were measured.
    pub fn ratio_of_figures(&self, m: &Measurement) -> Option<f64> {
        ratio(m.value, self.get(m.baseline.as_deref()?)?.value)
    }

    /// One line per measurement, labels aligned, with the ratio to the baseline where there is
    /// one.
    pub fn print(&self, out: &mut dyn Write) -> io::Result<()> {
        let width = self.lines.iter().map(|m| m.label.len()).max().unwrap_or(0);
        for m in &self.lines {
            let pad = width - m.label.len();
            write!(
                out,
                "{}:{:pad$} {} ({})",
                m.label,
                "",
                m.unit.format(m.value),
                m.detail
            )?;
            if let Some(b) = &m.baseline {
                match (m.paired, self.ratio_of_figures(m)) {
                    (Some(p), figures) => {
                        write!(out, "  = {:.2}x {b} ", p.ratio)?;
                        match p.pairing {
                            phase::Pairing::Probed { copy_gb_per_s } => write!(
                                out,
                                "in one phase ({} rounds, copy {copy_gb_per_s:.1} GB/s",
                                p.rounds
                            )?,
                            phase::Pairing::Slices { slice } => write!(
                                out,
                                "slice by slice ({} slices of {} ms",
                                p.rounds,
                                slice.as_millis()
                            )?,
                            phase::Pairing::Bracketed => write!(
                                out,
                                "between two of its runs that agree ({} rounds",
                                p.rounds
                            )?,
                        }
                        if let Some(f) = figures {
                            write!(out, "; figures {f:.2}x")?;
                        }
                        write!(out, ")")?;
                    }
                    (None, Some(r)) => write!(out, "  = {r:.2}x {b}")?,
                    (None, None) => write!(out, "  (no {b} to compare with)")?,
                }
            }
            writeln!(out)?;
        }
        Ok(())
    }

    /// One object: per line, its key mapped to its label and fields, and for a line with a
    /// baseline, `baseline` (the key) and `ratio` (for a line judged within one phase, also
    /// `ratio_of_figures`, `paired_rounds`, and `phase_copy_gb_per_s`, `slice_ms` or
    /// `bracket_agree`).
    pub fn to_json(&self) -> Value {
        let mut all = Map::new();
        for m in &self.lines {
            let mut o = Map::new();
            o.insert("label".into(), m.label.clone().into());
            o.extend(m.fields.clone());
            if let Some(b) = &m.baseline {
                o.insert("baseline".into(), b.clone().into());
                o.insert("ratio".into(), self.ratio_to_baseline(m).into());
                if let Some(p) = m.paired {
                    o.insert("ratio_of_figures".into(), self.ratio_of_figures(m).into());
                    o.insert("paired_rounds".into(), p.rounds.into());
                    match p.pairing {
                        phase::Pairing::Probed { copy_gb_per_s } => {
                            o.insert("phase_copy_gb_per_s".into(), copy_gb_per_s.into())
                        }
                        phase::Pairing::Slices { slice } => {
                            o.insert("slice_ms".into(), (slice.as_millis() as u64).into())
                        }
                        phase::Pairing::Bracketed => {
                            o.insert("bracket_agree".into(), phase::AGREE.into())
                        }
                    };
                }
            }
            all.insert(m.key.clone(), Value::Object(o));
        }
        Value::Object(all)
    }
}

/// The median of `v` (the mean of the middle two for an even count); 0 for none. Figures
/// taken in rounds are reported as the median of their rounds.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// `1 MiB` for whole mebibytes, `4 KiB` for whole kibibytes, else `64 B`.
fn size_text(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        0 => "0 B".to_owned(),
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests;
