//! `softrnic perf`: throughput and latency figures, each RC (RDMA) figure printed next to the
//! baseline it is judged against, measured in the same run on the same machine.
//!
//! The baseline is raw kernel UDP over loopback ([`raw_udp`]): for throughput, runs of 15
//! segments of a RoCEv2 WRITE packet's length sent with UDP GSO and read whole with UDP GRO (as
//! softrnic moves a 64 KiB WRITE), beside 4 KiB datagrams with `sendmmsg`/`recvmmsg` (what the
//! kernel does a datagram at a time); a 64-byte busy-poll ping-pong for latency. softrnic
//! carries RoCEv2 over the same kernel UDP, so these are the ceilings for RC RDMA WRITE
//! throughput and RC SEND ping-pong latency. A kernel without UDP GSO or GRO gets a line that
//! says so, and RC WRITE is then compared with the `sendmmsg` line.
//!
//! The RC lines (`rc_write_bw`, `rc_send_pingpong`) are [`Measurement`]s whose `baseline` names
//! the raw UDP line they are compared with; [`Report::print`] and [`Report::to_json`] show the
//! [`ratio`] beside them. They run two devices in this process, both driven from the poll loop
//! (`Progress::Polling`), as the raw baseline's threads busy-poll too.

pub mod host;
pub mod pair;
pub mod qps;
pub mod raw_udp;
pub mod rtt;
mod sock;

use std::io::{self, Write};
use std::time::Duration;

use serde_json::{Map, Value};

/// What `softrnic perf` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long each throughput test sends (after a warm-up of a quarter of it, at most 200 ms).
    pub duration: Duration,
    /// Round trips measured by each latency test.
    pub iters: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            duration: Duration::from_secs(3),
            iters: 100_000,
        }
    }
}

/// The latency tests run in this many rounds, each round a share of every test's round trips
/// in turn. This machine's speed drifts by tens of percent over seconds (the host schedules
/// its vCPUs), and a ratio of two figures taken seconds apart would measure the drift as well;
/// in rounds, every test sees the same stretches of fast and slow.
pub const LATENCY_ROUNDS: usize = 5;

/// Runs every measurement, one after the other, so that none disturbs another; the latency
/// tests in [`LATENCY_ROUNDS`] interleaved rounds.
pub fn run(opts: &Options) -> io::Result<Report> {
    let bw = raw_udp::udp_bandwidth(&raw_udp::BwConfig {
        duration: opts.duration,
        warmup: (opts.duration / 4).min(Duration::from_millis(200)),
        ..Default::default()
    })?;
    let gso_cfg = raw_udp::GsoConfig {
        duration: opts.duration,
        warmup: (opts.duration / 4).min(Duration::from_millis(200)),
        ..Default::default()
    };
    let gso = match raw_udp::udp_gso_bandwidth(&gso_cfg) {
        Ok(r) => r.measurement(),
        Err(e) if e.kind() == io::ErrorKind::Unsupported => gso_cfg.refused(&e),
        Err(e) => return Err(e),
    };
    // RC WRITE against the kernel's real limit for the same packets, where it has one.
    let write_baseline = if gso.value.is_finite() {
        "raw_udp_gso_bw"
    } else {
        "raw_udp_bw"
    };
    // RC over the same loopback, one process driving both devices from its poll loop.
    let a = "127.0.0.1".parse().expect("literal");
    let b = "127.0.0.2".parse().expect("literal");
    let mut rig = crate::rig::Rig::new(a, b, 4 << 20, softrnic_uapi::Progress::Polling)?;
    let gbit = crate::demo::write_throughput(&rig, crate::demo::WRITE_MSG, opts.duration)?;
    let mut ns: [Vec<u64>; 4] = Default::default();
    for round in 0..LATENCY_ROUNDS {
        // The rounds share the round trips out; the first ones take the remainder.
        let iters = opts.iters / LATENCY_ROUNDS + usize::from(round < opts.iters % LATENCY_ROUNDS);
        if iters == 0 {
            continue;
        }
        let lat = raw_udp::udp_pingpong(&raw_udp::LatConfig {
            iters,
            ..Default::default()
        })?;
        let pattern = raw_udp::udp_rc_pattern_pingpong(&raw_udp::PatternConfig {
            iters,
            ..Default::default()
        })?;
        let rtt = crate::demo::pingpong_threads(&mut rig, iters, 1)?;
        let rtt1 = crate::demo::pingpong(&rig, iters)?;
        for (all, one) in ns.iter_mut().zip([lat.rtt, pattern.rtt, rtt, rtt1]) {
            all.extend(one.ns);
        }
    }
    let [lat, pattern, rtt, rtt1] = ns.map(rtt::Rtt::from_ns);
    let none = || io::Error::new(io::ErrorKind::InvalidInput, "no round trip to measure");
    let lat = raw_udp::LatResult {
        datagram_len: raw_udp::LatConfig::default().datagram_len,
        rtt: lat.ok_or_else(none)?,
    };
    let pattern = raw_udp::PatternResult {
        rtt: pattern.ok_or_else(none)?,
    };
    let (rtt, rtt1) = (rtt.ok_or_else(none)?, rtt1.ok_or_else(none)?);
    let mut report = Report::default();
    report.lines.push(bw.measurement());
    report.lines.push(gso);
    report.lines.push(lat.measurement());
    report.lines.push(pattern.measurement());
    report.lines.push(Measurement {
        key: "rc_write_bw".into(),
        label: "RC RDMA WRITE 64 KiB, PMTU 4096, 1 QP".to_owned(),
        value: gbit,
        unit: Unit::GbitPerSec,
        detail: "16 outstanding, one thread polls both devices".to_owned(),
        baseline: Some(write_baseline.into()),
        fields: Map::from_iter([("gbit_per_s".to_owned(), gbit.into())]),
    });
    // How the devices receive: a packet ring where the process may, else their sockets.
    let ring = rig.a.ctx.device().transport_stats().rx_from_ring;
    let how = if ring {
        "inline, a busy-polling thread per device, receiving from a packet ring"
    } else {
        "inline, a busy-polling thread per device, receiving from a socket"
    };
    report.lines.push(rc_pingpong_line(
        "rc_send_pingpong",
        "RC SEND 64 B ping-pong",
        &rtt,
        how,
    ));
    report.lines.push(rc_pingpong_line(
        "rc_send_pingpong_1t",
        "RC SEND 64 B ping-pong, 1 thread",
        &rtt1,
        "inline, one thread polls both devices",
    ));
    Ok(report)
}

/// An RC ping-pong line, judged against the raw UDP ping-pong.
fn rc_pingpong_line(key: &str, label: &str, rtt: &rtt::Rtt, how: &str) -> Measurement {
    Measurement {
        key: key.to_owned(),
        label: label.to_owned(),
        value: rtt.mean_us,
        unit: Unit::MeanRttUs,
        detail: format!("{how}; {}", rtt.detail()),
        baseline: Some("raw_udp_pingpong".into()),
        fields: rtt.fields(),
    }
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
    pub unit: Unit,
    /// Printed in parentheses after the figure.
    pub detail: String,
    /// The key of the line this one is compared with: the raw UDP line for an RC line.
    pub baseline: Option<String>,
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
    pub lines: Vec<Measurement>,
}

impl Report {
    /// The line named `key`.
    pub fn get(&self, key: &str) -> Option<&Measurement> {
        self.lines.iter().find(|m| m.key == key)
    }

    /// `m`'s figure over that of its baseline line, if it has one and it was measured.
    pub fn ratio_to_baseline(&self, m: &Measurement) -> Option<f64> {
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
                match self.ratio_to_baseline(m) {
                    Some(r) => write!(out, "  = {r:.2}x {b}")?,
                    None => write!(out, "  (no {b} to compare with)")?,
                }
            }
            writeln!(out)?;
        }
        Ok(())
    }

    /// One object: per line, its key mapped to its label and fields, and for a line with a
    /// baseline, `baseline` (the key) and `ratio`.
    pub fn to_json(&self) -> Value {
        let mut all = Map::new();
        for m in &self.lines {
            let mut o = Map::new();
            o.insert("label".into(), m.label.clone().into());
            o.extend(m.fields.clone());
            if let Some(b) = &m.baseline {
                o.insert("baseline".into(), b.clone().into());
                o.insert("ratio".into(), self.ratio_to_baseline(m).into());
            }
            all.insert(m.key.clone(), Value::Object(o));
        }
        Value::Object(all)
    }
}

/// `4 KiB` for whole kibibytes, else `64 B`.
fn size_text(bytes: usize) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests;
