//! `softrnic perf --perftest`'s bandwidth lines: perftest's `ib_write_bw -s 65536` (RC RDMA
//! WRITE, 64 KiB messages, for `--secs` seconds) through the drop-in library, with one QP,
//! four and sixteen QPs, and four QPs each way at once (`-b`), as a user runs it.
//!
//! One QP is judged against what the kernel itself moves over loopback for the same packets:
//! UDP GSO sends and GRO receives of a 64 KiB WRITE's 16 segments (at most 15 to a run,
//! [`GsoConfig::for_message`]), measured in the same round with no device open. Several QPs
//! are judged against one QP: more QPs must not cost throughput. perftest reports `-b` as
//! the sum of both directions, and so does this line.
//!
//! The machine's speed drifts (single runs of the same library differ by a quarter here), so
//! the runs take turns in rounds and each figure is the median of its rounds. But on a
//! machine whose phases change within a run two medians may come from different phases,
//! and even a round's two figures, seconds apart (`paired_ratio`, in every phase). So the
//! machine's copy speed is probed between runs ([`super::phase`]), and one QP's ratio to the
//! kernel is the median of the rounds' ratios taken where both runs' probes agree.
//!
//! The probes miss some changes: in one copy phase one QP moved either about 64 or about 108
//! Gbit/s, run by run. So every other variant runs between two runs of one QP (a round is
//! raw, `-q 1`, `-q 4`, `-q 1`, `-q 16`, `-q 1`, `-b -q 4`, `-q 1`), and its ratio is judged
//! against the mean of those two, in the rounds where they agree
//! ([`super::phase::bracket_ratio`]).

use serde_json::Map;
use std::io;
use std::path::Path;

use super::perftest::{figures_after, run_pair, Options};
use super::phase::{bracket_ratio, phase_ratio, ratios, Prober, Span};
use super::raw_udp::{udp_gso_bandwidth, GsoConfig};
use super::{median, warmup, Measurement, Unit};

/// The message size every run writes.
pub const MESSAGE_LEN: usize = 64 << 10;

/// One `ib_write_bw` run of the set: its arguments beside `-s`, its key, and the key of the
/// line it is judged against.
struct Variant {
    args: &'static [&'static str],
    key: &'static str,
    baseline: &'static str,
}

/// The key of the raw kernel line.
const RAW_KEY: &str = "raw_udp_gso_bw";

const VARIANTS: [Variant; 4] = [
    Variant {
        args: &["-q", "1"],
        key: "perftest_write_bw_q1",
        baseline: RAW_KEY,
    },
    Variant {
        args: &["-q", "4"],
        key: "perftest_write_bw_q4",
        baseline: "perftest_write_bw_q1",
    },
    Variant {
        args: &["-q", "16"],
        key: "perftest_write_bw_q16",
        baseline: "perftest_write_bw_q1",
    },
    Variant {
        args: &["-b", "-q", "4"],
        key: "perftest_write_bw_b_q4",
        baseline: "perftest_write_bw_q1",
    },
];

/// Runs the raw baseline and every variant once per round, `next_port` giving each run its
/// own TCP port; the lines, raw first.
///
/// # Errors
/// A run that fails or prints no result line, or a raw test that fails other than by the
/// kernel refusing GSO or GRO (then the raw line says so, with no figure).
pub fn run(
    bin: &Path,
    o: &Options,
    mut next_port: impl FnMut() -> u16,
) -> io::Result<Vec<Measurement>> {
    let cfg = GsoConfig {
        duration: o.secs,
        warmup: warmup(o.secs),
        ..GsoConfig::for_message(MESSAGE_LEN)
    };
    let mut raw = Vec::new();
    let mut raw_rounds = Vec::new();
    let mut runs: [Vec<(f64, Span)>; VARIANTS.len()] = Default::default();
    // Round by round, the one-QP runs just before and just after each other variant's: the
    // bracket it is judged in.
    let mut one_before: [Vec<f64>; VARIANTS.len()] = Default::default();
    let mut one_after: [Vec<f64>; VARIANTS.len()] = Default::default();
    let mut prober = Prober::new()?;
    for _ in 0..o.rounds {
        let (m, span) = prober.measure(|| match udp_gso_bandwidth(&cfg) {
            Ok(r) => Ok(r.measurement()),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok(cfg.refused(&e)),
            Err(e) => Err(e),
        })?;
        raw_rounds.push((m.value, span));
        raw.push(m);
        let mut last_one = f64::NAN;
        for (i, v) in VARIANTS.iter().enumerate() {
            let run = prober.measure(|| run_variant(bin, v, next_port(), o))?;
            runs[i].push(run);
            if i == 0 {
                last_one = run.0;
            } else {
                let (one, _) = prober.measure(|| run_variant(bin, &VARIANTS[0], next_port(), o))?;
                one_before[i].push(last_one);
                one_after[i].push(one);
                last_one = one;
            }
        }
    }
    let mut lines = vec![median_line(raw)];
    lines.push(variant_line(&VARIANTS[0], &runs[0], &raw_rounds, None));
    for i in 1..VARIANTS.len() {
        let bracket = Some((&one_before[i][..], &one_after[i][..]));
        lines.push(variant_line(&VARIANTS[i], &runs[i], &runs[0], bracket));
    }
    Ok(lines)
}

/// The median of each round's figure over its `baseline` figure of the same round, in every
/// phase; `None` if a baseline round has no figure.
fn paired_ratio(rounds: &[(f64, Span)], baseline: &[(f64, Span)]) -> Option<f64> {
    let pairs = rounds.iter().zip(baseline).map(|((r, _), (b, _))| (*r, *b));
    ratios(pairs).map(|r| median(&r))
}

/// The raw round whose figure is the median (the lower middle one of an even count).
fn median_line(mut rounds: Vec<Measurement>) -> Measurement {
    rounds.sort_by(|a, b| a.value.total_cmp(&b.value));
    let n = rounds.len();
    let mut m = rounds.swap_remove((n - 1) / 2);
    m.detail = format!("{}; median of {n} rounds", m.detail);
    m
}

/// A variant's line: the median of its rounds' Gbit/s, every round's figure beside it (with
/// the copy speed probed before and after it), the median of the rounds' ratios to
/// `baseline`'s rounds, and the ratio judged: between the baseline's runs just before and
/// after each round's (`bracket`), where there are such runs, else within one copy phase
/// (see the module comment).
fn variant_line(
    v: &Variant,
    rounds: &[(f64, Span)],
    baseline: &[(f64, Span)],
    bracket: Option<(&[f64], &[f64])>,
) -> Measurement {
    let figures: Vec<f64> = rounds.iter().map(|(g, _)| *g).collect();
    let gbit = median(&figures);
    let each: Vec<String> = rounds
        .iter()
        .map(|(g, s)| format!("{g:.1} [{:.1}-{:.1}]", s.before, s.after))
        .collect();
    let paired = paired_ratio(rounds, baseline);
    let mut detail = format!(
        "median of {} rounds, copy GB/s before-after: {}",
        rounds.len(),
        each.join(", ")
    );
    let probes: Vec<[f64; 2]> = rounds.iter().map(|(_, s)| [s.before, s.after]).collect();
    let mut fields = Map::from_iter([
        ("gbit_per_s".to_owned(), gbit.into()),
        ("rounds_gbit_per_s".to_owned(), figures.clone().into()),
        ("rounds_copy_gb_per_s".to_owned(), serde_json::json!(probes)),
        ("message_len".to_owned(), MESSAGE_LEN.into()),
    ]);
    if let Some(p) = paired {
        detail = format!("{detail}; round by round {p:.2}x {}", v.baseline);
        fields.insert("paired_ratio".to_owned(), p.into());
    }
    let in_phase = phase_ratio(rounds, baseline);
    let judged = match bracket {
        Some((before, after)) => {
            let each: Vec<String> = before
                .iter()
                .zip(after)
                .map(|(b, a)| format!("{b:.1}/{a:.1}"))
                .collect();
            detail = format!("{detail}; {} before/after: {}", v.baseline, each.join(", "));
            if let Some(p) = in_phase {
                detail = format!(
                    "{detail}; in one copy phase {:.2}x ({} rounds)",
                    p.ratio, p.rounds
                );
            }
            fields.insert("rounds_baseline_before".to_owned(), before.into());
            fields.insert("rounds_baseline_after".to_owned(), after.into());
            bracket_ratio(&figures, before, after)
        }
        None => in_phase,
    };
    Measurement {
        key: v.key.to_owned(),
        label: format!("perftest ib_write_bw -s 65536 {}", v.args.join(" ")),
        value: gbit,
        unit: Unit::GbitPerSec,
        detail,
        baseline: Some(v.baseline.to_owned()),
        paired: judged,
        fields,
    }
}

/// One run of `v` for `o.secs`: the client's average, in Gbit/s.
fn run_variant(bin: &Path, v: &Variant, port: u16, o: &Options) -> io::Result<f64> {
    let secs = o.secs.as_secs_f64().ceil().max(1.0).to_string();
    let mut args: Vec<String> = ["-s", "65536", "-D", &secs, "--report_gbits"]
        .iter()
        .chain(v.args)
        .map(|a| (*a).to_owned())
        .collect();
    args.extend(["-x", "1"].map(str::to_owned));
    let out = run_pair(bin, "ib_write_bw", &args, port, o)?;
    parse(&out).ok_or_else(|| io::Error::other(format!("ib_write_bw: no result line in {out:?}")))
}

/// The average of perftest's bandwidth report, from the line after the header that names
/// `BW average[Gb/sec]` (`#bytes #iterations BW peak BW average MsgRate`).
pub fn parse(out: &str) -> Option<f64> {
    let v = figures_after(out, "BW average[Gb/sec]")?;
    v.get(3).copied().filter(|g| g.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail of `ib_write_bw -b -q 4 --report_gbits`'s report as perftest 4.5 prints it.
    const REPORT: &str = "\
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:18:01
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      74239            0.00               40.28  \t\t   0.076825
---------------------------------------------------------------------------------------
";

    #[test]
    fn the_average_follows_the_header() {
        assert_eq!(parse(REPORT), Some(40.28));
        assert_eq!(parse("no report"), None);
        // MiB/s headers (no --report_gbits) are not taken for Gbit/s.
        assert_eq!(
            parse(" #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n 65536 1 0.0 4000.0 0.1\n"),
            None
        );
    }

    #[test]
    fn several_qps_are_judged_against_one_and_one_against_the_kernel() {
        assert_eq!(VARIANTS[0].baseline, RAW_KEY);
        assert!(VARIANTS[1..].iter().all(|v| v.baseline == VARIANTS[0].key));
        let line = variant_line(
            &VARIANTS[3],
            &in_phase(&[30.0, 10.0, 20.0]),
            &in_phase(&[30.0, 20.0, 10.0]),
            None,
        );
        assert_eq!(line.value, 20.0);
        assert_eq!(
            line.detail,
            "median of 3 rounds, copy GB/s before-after: 30.0 [12.0-12.5], 10.0 [12.0-12.5], \
             20.0 [12.0-12.5]; round by round 1.00x perftest_write_bw_q1"
        );
        assert_eq!(line.paired.map(|p| (p.ratio, p.rounds)), Some((1.0, 3)));
        assert_eq!(line.label, "perftest ib_write_bw -s 65536 -b -q 4");
    }

    /// Rounds whose probes all said 12-12.5 GB/s.
    fn in_phase(figures: &[f64]) -> Vec<(f64, Span)> {
        let s = Span {
            before: 12.0,
            after: 12.5,
        };
        figures.iter().map(|&g| (g, s)).collect()
    }

    /// Each round against its own baseline: the medians alone (30 over 35) would say 0.86x
    /// where every round but one was twice its baseline.
    #[test]
    fn the_paired_ratio_is_the_median_of_each_rounds_ratio() {
        let rounds = in_phase(&[20.0, 40.0, 100.0, 10.0]);
        let baseline = in_phase(&[10.0, 20.0, 50.0, 100.0]);
        assert_eq!(paired_ratio(&rounds, &baseline), Some(2.0));
        let nan = in_phase(&[10.0, f64::NAN, 50.0, 100.0]);
        assert_eq!(paired_ratio(&rounds, &nan), None);
        assert_eq!(paired_ratio(&[], &[]), None);
        let line = variant_line(&VARIANTS[1], &rounds, &baseline, None);
        assert_eq!(line.fields["paired_ratio"], 2.0);
        // A raw round the kernel refused has no figure (`GsoConfig::refused`: NaN).
        let refused = variant_line(&VARIANTS[0], &rounds, &in_phase(&[f64::NAN; 4]), None);
        assert!(!refused.fields.contains_key("paired_ratio"));
        assert_eq!(refused.paired, None);
        let zero = variant_line(&VARIANTS[0], &rounds, &in_phase(&[0.0; 4]), None);
        assert!(!zero.fields.contains_key("paired_ratio"));
    }

    /// The report judges the line by its ratio within one phase: here the one round whose
    /// four probes agree (2.0x), not the medians' 0.86x nor every round's 2.0x and 0.1x.
    #[test]
    fn the_ratio_judged_is_the_one_within_one_phase() {
        let fast = Span {
            before: 12.0,
            after: 12.5,
        };
        let slow = Span {
            before: 2.1,
            after: 2.2,
        };
        let rounds = [(20.0, fast), (40.0, slow), (10.0, fast)];
        let baseline = [(10.0, fast), (35.0, fast), (100.0, slow)];
        let line = variant_line(&VARIANTS[1], &rounds, &baseline, None);
        let p = line.paired.unwrap();
        assert_eq!((p.ratio, p.rounds), (2.0, 1));
        let report = super::super::Report {
            lines: vec![
                Measurement {
                    key: VARIANTS[0].key.to_owned(),
                    label: "q1".to_owned(),
                    value: 35.0,
                    unit: Unit::GbitPerSec,
                    detail: String::new(),
                    baseline: None,
                    paired: None,
                    fields: Map::new(),
                },
                line,
            ],
        };
        assert_eq!(report.ratio_to_baseline(&report.lines[1]), Some(2.0));
        let r = report.ratio_of_figures(&report.lines[1]).unwrap();
        assert!((r - 20.0 / 35.0).abs() < 1e-9);
        let json = report.to_json();
        assert_eq!(json[VARIANTS[1].key]["ratio"], 2.0);
        assert_eq!(json[VARIANTS[1].key]["paired_rounds"], 1);
        let mut text = Vec::new();
        report.print(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("= 2.00x perftest_write_bw_q1 in one phase (1 rounds, copy 12.2 GB/s; figures 0.57x)"),
            "{text}"
        );
    }

    /// Four QPs judged between one-QP runs just before and after: round 1's two agree (100,
    /// 90: 0.95x), round 2's do not (the phase changed) and is left out, though its copy
    /// probes agreed; the line says the runs around each round.
    #[test]
    fn several_qps_are_judged_between_two_one_qp_runs_that_agree() {
        let rounds = in_phase(&[90.0, 60.0]);
        let baseline = in_phase(&[100.0, 100.0]);
        let (before, after) = ([100.0, 100.0], [90.0, 60.0]);
        let line = variant_line(&VARIANTS[1], &rounds, &baseline, Some((&before, &after)));
        let p = line.paired.unwrap();
        assert_eq!((p.ratio, p.rounds), (90.0 / 95.0, 1));
        assert_eq!(p.pairing, super::super::phase::Pairing::Bracketed);
        assert!(
            line.detail.ends_with(
                "perftest_write_bw_q1 before/after: 100.0/90.0, 100.0/60.0; \
                 in one copy phase 0.75x (2 rounds)"
            ),
            "{}",
            line.detail
        );
        assert_eq!(
            line.fields["rounds_baseline_after"],
            serde_json::json!([90.0, 60.0])
        );
        let none_agree = variant_line(
            &VARIANTS[1],
            &rounds,
            &baseline,
            Some((&before, &[10.0; 2])),
        );
        assert_eq!(none_agree.paired, None);
    }

    #[test]
    fn the_raw_line_is_the_median_round() {
        let round = |g: f64| Measurement {
            key: RAW_KEY.to_owned(),
            label: "raw".to_owned(),
            value: g,
            unit: Unit::GbitPerSec,
            detail: format!("round {g}"),
            baseline: None,
            paired: None,
            fields: Map::new(),
        };
        let m = median_line(vec![round(3.0), round(1.0), round(2.0), round(4.0)]);
        assert_eq!(m.value, 2.0);
        assert_eq!(m.detail, "round 2; median of 4 rounds");
    }
}
