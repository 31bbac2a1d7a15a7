//! `softrnic perf --qps 1,2,4,16,...`: how throughput scales with the number of QPs. For each
//! count N, N RC QP pairs between two devices in this process (127.0.0.1 and 127.0.0.2) stream
//! RDMA WRITEs of 64 KiB at once, and the line gives the aggregate received payload next to
//! one QP's figure of the same run, with their ratio.
//!
//! The writer's thread polls its device (`Progress::Polling`) and posts; the target's
//! device has its own progress thread (`Progress::Thread`) and its application never polls,
//! as perftest's `ib_write_bw` server does not. (One thread driving both devices, as before,
//! measured itself at 1024 QPs: its posts wrote up to 64 messages into the target's lane
//! per loop while the target, driven by the same loop, took 32 packets; full lanes, drops
//! and timeouts made that figure swing from 0.56x to 0.88x of one QP from run to run.)
//!
//! Each QP keeps [`depth`] WRITEs outstanding (16, as one QP has, and fewer per QP when
//! there are many, so that the device has a similar number of messages queued however many
//! QPs share them), and posts the next one as soon as one of its own completes: a busy QP is
//! never short of work, and how the device shares its transmit between them (turns and one
//! send window, `provider/src/nic/turns.rs`) is what the figure measures. Every QP writes to
//! the same 64 KiB of the target, as perftest's do.

pub mod interleave;
mod pairs;

use std::io;
use std::time::Duration;

use serde_json::json;
use softrnic_uapi::Context;

use super::phase::{phase_ratio, PairedRatio, Prober, Span};
use super::{parse_list, Measurement, Unit};
use pairs::Pairs;

/// Bytes per WRITE.
const MSG: usize = 65536;

/// WRITEs each of `qps` QPs keeps outstanding: 16 (one QP's, as in `rc_write_bw`), fewer
/// once 256 messages in all would be exceeded, and one at least (beyond 256 QPs, one each).
/// (At least two, as before, queued 2 048 messages at 1024 QPs, eight times one QP's: the
/// round trip was a 27 ms standing queue.)
pub fn depth(qps: usize) -> usize {
    (256 / qps.max(1)).clamp(1, 16)
}

/// The QP counts `--qps` accepts: 1 to the device's `max_qp` (1024).
pub const MAX_QPS: usize = 1024;

/// One count's result.
#[derive(Clone, Debug)]
pub struct Scaling {
    /// QPs writing at once.
    pub qps: usize,
    /// Aggregate received payload, 10^9 bits per second.
    pub gbit_per_s: f64,
    /// WRITEs completed.
    pub messages: u64,
    /// The fewest WRITEs one QP completed (with `max_per_qp`: how evenly the device shared).
    pub min_per_qp: u64,
    /// The most WRITEs one QP completed.
    pub max_per_qp: u64,
    /// What the two devices counted meanwhile (why a count falls short of one QP's figure).
    pub recovery: Recovery,
    /// The rounds this count ran; the figures are those of the median one.
    pub rounds: usize,
    /// Beyond the first count: its ratio to the first count's figure, round by round, in the
    /// rounds where the machine stayed in one phase ([`super::phase`]).
    pub paired: Option<PairedRatio>,
    /// Every round's figure (Gbit/s), in order.
    pub each_round: Vec<f64>,
    /// The copy speed probed before and after each round, where it was.
    pub probes: Vec<Span>,
}

impl Scaling {
    /// One run of `qps` QPs that moved `gbit_per_s`, each QP completing `done[i]` WRITEs,
    /// through `recovery`.
    fn of(qps: usize, gbit_per_s: f64, done: &[u64], recovery: Recovery) -> Scaling {
        Scaling {
            qps,
            gbit_per_s,
            messages: done.iter().sum(),
            min_per_qp: done.iter().copied().min().unwrap_or(0),
            max_per_qp: done.iter().copied().max().unwrap_or(0),
            recovery,
            rounds: 1,
            paired: None,
            each_round: Vec::new(),
            probes: Vec::new(),
        }
    }
}

/// The recovery the two devices went through during a count: packets sent, packets the
/// writer resent, and the NAKs and duplicates behind them (`provider/src/counters.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Packets the writer's device sent.
    pub sent_pkts: u64,
    /// Packets the target's device sent (ACKs).
    pub acks: u64,
    /// The writer's retransmit timer expiries that resent (early ones and counted ones).
    pub timeout_resends: u64,
    /// Of those, the ones a whole local ACK timeout without progress (counted as retries).
    pub retries: u64,
    /// PSN Sequence Error NAKs the target sent.
    pub seq_naks: u64,
    /// Requests the target saw twice.
    pub duplicate_request: u64,
    /// Packets of either device dropped for a full lane of the other's inbox (the
    /// host-local path, `transport/udp/local/`).
    pub lane_drops: u64,
}

impl Recovery {
    fn of(writer: &Context, target: &Context) -> Recovery {
        let (w, _) = writer.device().observe();
        let (t, _) = target.device().observe();
        Recovery {
            sent_pkts: w.sent_pkts,
            acks: t.sent_pkts,
            timeout_resends: w.timeout_resends,
            retries: w.completer_retry_err,
            seq_naks: t.out_of_seq_request,
            duplicate_request: t.duplicate_request,
            lane_drops: w.local_dropped + t.local_dropped,
        }
    }

    /// What was counted between `before` and `self` (both read from the same devices),
    /// added to `total`.
    fn add_since(self, before: Recovery, total: &mut Recovery) {
        total.sent_pkts += self.sent_pkts - before.sent_pkts;
        total.acks += self.acks - before.acks;
        total.timeout_resends += self.timeout_resends - before.timeout_resends;
        total.retries += self.retries - before.retries;
        total.seq_naks += self.seq_naks - before.seq_naks;
        total.duplicate_request += self.duplicate_request - before.duplicate_request;
        total.lane_drops += self.lane_drops - before.lane_drops;
    }
}

/// Runs every count of `counts` for `dur` each, on two fresh devices per count, in `rounds`
/// rounds (each round every count once, in order), with the machine's copy speed probed
/// between runs, and returns each count's median round, in order, each count after the
/// first with its ratio to the first within one phase.
///
/// Why rounds: the figures of one run moved by a third from run to run on this 2-core VM,
/// the one-QP baseline as much as the others, so that one run's ratio at 1024 QPs ranged
/// 0.57x to 0.98x; and why phases: the machine's own copy speed changes by up to 6x for
/// seconds at a time.
///
/// # Errors
/// Opening the devices or a QP, or a WRITE that fails.
pub fn run(counts: &[usize], dur: Duration, rounds: usize) -> io::Result<Vec<Scaling>> {
    let mut runs: Vec<Vec<(Scaling, Span)>> = vec![Vec::new(); counts.len()];
    let mut prober = Prober::new()?;
    for _ in 0..rounds.max(1) {
        for (i, &n) in counts.iter().enumerate() {
            runs[i].push(prober.measure(|| one_count(n, dur))?);
        }
    }
    let figures = |runs: &[(Scaling, Span)]| -> Vec<(f64, Span)> {
        runs.iter().map(|(s, p)| (s.gbit_per_s, *p)).collect()
    };
    let first = figures(&runs[0]);
    Ok(runs
        .iter()
        .enumerate()
        .map(|(i, r)| Scaling {
            paired: (i > 0).then(|| phase_ratio(&figures(r), &first)).flatten(),
            each_round: r.iter().map(|(s, _)| s.gbit_per_s).collect(),
            probes: r.iter().map(|(_, p)| *p).collect(),
            ..median_round(r.iter().map(|(s, _)| s.clone()).collect())
        })
        .collect())
}

/// The round of median throughput (of an even number, the lower of the middle two): its
/// counters are those of the run the figure comes from.
fn median_round(mut rounds: Vec<Scaling>) -> Scaling {
    rounds.sort_by(|x, y| x.gbit_per_s.total_cmp(&y.gbit_per_s));
    let rounds_run = rounds.len();
    Scaling {
        rounds: rounds_run,
        ..rounds.swap_remove((rounds_run - 1) / 2)
    }
}

/// The report line of each count, the first one (one QP, if asked for) the baseline of the
/// others.
pub fn lines(results: &[Scaling]) -> Vec<Measurement> {
    results
        .iter()
        .enumerate()
        .map(|(i, s)| Measurement {
            key: key(i),
            label: format!("RC RDMA WRITE 64 KiB, {} QP{}", s.qps, plural(s.qps)),
            value: s.gbit_per_s,
            unit: Unit::GbitPerSec,
            detail: format!(
                "{}{} outstanding per QP; {} to {} WRITEs per QP; {} packets, {} ACKs, {} \
                 timeouts ({} counted), {} NAKs, {} duplicates, {} dropped in full lanes",
                match s.rounds {
                    0 | 1 => String::new(),
                    r => format!("median of {r} rounds; "),
                },
                depth(s.qps),
                s.min_per_qp,
                s.max_per_qp,
                s.recovery.sent_pkts,
                s.recovery.acks,
                s.recovery.timeout_resends,
                s.recovery.retries,
                s.recovery.seq_naks,
                s.recovery.duplicate_request,
                s.recovery.lane_drops
            ),
            baseline: (i > 0).then(|| key(0)),
            paired: s.paired,
            fields: serde_json::Map::from_iter([
                ("qps".to_owned(), json!(s.qps)),
                ("rounds".to_owned(), json!(s.rounds)),
                ("rounds_gbit_per_s".to_owned(), json!(s.each_round)),
                (
                    "rounds_copy_gb_per_s".to_owned(),
                    json!(s
                        .probes
                        .iter()
                        .map(|p| [p.before, p.after])
                        .collect::<Vec<_>>()),
                ),
                ("gbit_per_s".to_owned(), json!(s.gbit_per_s)),
                ("messages".to_owned(), json!(s.messages)),
                ("min_per_qp".to_owned(), json!(s.min_per_qp)),
                ("max_per_qp".to_owned(), json!(s.max_per_qp)),
                ("sent_pkts".to_owned(), json!(s.recovery.sent_pkts)),
                ("acks".to_owned(), json!(s.recovery.acks)),
                (
                    "timeout_resends".to_owned(),
                    json!(s.recovery.timeout_resends),
                ),
                ("retries".to_owned(), json!(s.recovery.retries)),
                ("seq_naks".to_owned(), json!(s.recovery.seq_naks)),
                (
                    "duplicate_request".to_owned(),
                    json!(s.recovery.duplicate_request),
                ),
            ]),
        })
        .collect()
}

/// The key of the line of the `i`-th count: `rc_write_qps_<i>`.
fn key(i: usize) -> String {
    format!("rc_write_qps_{i}")
}

/// The counts `--all` measures when `--qps` does not say.
pub const DEFAULT_COUNTS: [usize; 6] = [1, 4, 16, 64, 256, 1024];

/// Most counts one `--qps` takes.
pub const MAX_COUNTS: usize = 12;

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `n` QP pairs streaming WRITEs from `a` to `b` for `dur`, on two fresh devices.
fn one_count(n: usize, dur: Duration) -> io::Result<Scaling> {
    let d = depth(n);
    let mut pairs = Pairs::open(n, d)?;
    let s = pairs.stream(n, d, dur)?;
    Ok(Scaling::of(n, s.gbit_per_s(), &s.done, pairs.recovery()))
}

/// The QP counts of `--qps`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpCounts(pub Vec<usize>);

/// Parses `1,2,4,16`: counts from 1 to [`MAX_QPS`], at most [`MAX_COUNTS`] of them.
///
/// # Errors
/// A word that is not such a count, or too many.
pub fn parse_counts(s: &str) -> Result<QpCounts, String> {
    parse_list(s, 1..=MAX_QPS, MAX_COUNTS, "QP count").map(QpCounts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One round's result for `qps` QPs.
    fn scaling(qps: usize, gbit_per_s: f64, messages: u64) -> Scaling {
        Scaling {
            qps,
            gbit_per_s,
            messages,
            min_per_qp: 1,
            max_per_qp: 2,
            recovery: Recovery::default(),
            rounds: 1,
            paired: None,
            each_round: Vec::new(),
            probes: Vec::new(),
        }
    }

    #[test]
    fn a_count_reports_its_median_round_with_that_round_s_counters() {
        let round = |gbit, messages| scaling(4, gbit, messages);
        let m = median_round(vec![round(9.0, 90), round(3.0, 30), round(5.0, 50)]);
        assert_eq!((m.gbit_per_s, m.messages, m.rounds), (5.0, 50, 3));
        let m = median_round(vec![round(9.0, 90), round(3.0, 30)]);
        assert_eq!((m.gbit_per_s, m.rounds), (3.0, 2), "the lower of two");
    }

    #[test]
    fn depth_keeps_16_per_qp_up_to_256_messages_and_1_at_least() {
        assert_eq!(
            [1, 16, 32, 64, 128, 256, 1024].map(depth),
            [16, 16, 8, 4, 2, 1, 1]
        );
    }

    #[test]
    fn counts_parse_within_the_device_limit() {
        assert_eq!(parse_counts("1,2,4, 16"), Ok(QpCounts(vec![1, 2, 4, 16])));
        assert!(parse_counts("0").is_err());
        assert!(parse_counts("1025").is_err());
        assert!(parse_counts("1,x").is_err());
        assert!(parse_counts(&["1"; 13].join(",")).is_err());
    }

    #[test]
    fn every_line_but_the_first_is_judged_against_the_first() {
        let s = |qps, gbit_per_s| scaling(qps, gbit_per_s, 10);
        let lines = lines(&[s(1, 10.0), s(4, 9.0)]);
        assert_eq!(lines[0].baseline, None);
        assert_eq!(lines[1].baseline, Some(lines[0].key.clone()));
        assert_eq!(lines[1].label, "RC RDMA WRITE 64 KiB, 4 QPs");
        let report = super::super::Report { lines };
        let r = report.ratio_to_baseline(&report.lines[1]).unwrap();
        assert!((r - 0.9).abs() < 1e-9);
    }

    /// A count measured with probes around its runs is judged by its ratio within one phase.
    #[test]
    fn a_count_with_rounds_in_one_phase_is_judged_by_them() {
        use crate::perf::phase::Pairing;
        let phase = PairedRatio {
            ratio: 0.5,
            rounds: 3,
            pairing: Pairing::Probed { copy_gb_per_s: 8.5 },
        };
        let lines = lines(&[
            scaling(1, 36.0, 10),
            Scaling {
                paired: Some(phase),
                ..scaling(1024, 45.0, 10)
            },
        ]);
        assert_eq!(lines[1].paired, Some(phase));
        let report = super::super::Report { lines };
        assert_eq!(report.ratio_to_baseline(&report.lines[1]), Some(0.5));
    }
}
