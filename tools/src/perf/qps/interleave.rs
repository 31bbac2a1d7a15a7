//! `softrnic perf --qps 1,1024 --interleave`: the counts take turns on one pair of devices
//! in short slices, and each count is judged against the first slice by slice.
//!
//! A run per count on fresh devices (`super::run`) measures each count for whole seconds,
//! and on a machine whose speed changes by up to 6x for seconds at a time (`super::phase`)
//! the figures of two such runs, even probed, differed by half from round to round. Here
//! the writer device holds the largest count's QPs; a slice of count `k` keeps the first `k`
//! writing (at `depth(k)` WRITEs each, as a run of that count would) for [`SLICE`], then
//! lets their WRITEs complete before the next count's slice begins. A slice's figure is its
//! payload over the time from its first post to its last completion, so every slice pays
//! its own start and drain alike. One slice of every count first warms the devices up
//! (first touches of the QPs' state and memory) and is not counted.

use std::io;
use std::time::Duration;

use super::pairs::Pairs;
use super::{depth, Recovery, Scaling};
use crate::perf::median;
use crate::perf::phase::{ratios, PairedRatio, Pairing};

/// How long each slice keeps posting: far shorter than the machine's phases (seconds), far
/// longer than a slice's start and drain (the 1024 QPs' 64 MiB take ~6 ms at 90 Gbit/s).
pub const SLICE: Duration = Duration::from_millis(200);

/// One count's slices so far.
#[derive(Default)]
struct Slices {
    gbit_per_s: Vec<f64>,
    done: Vec<u64>,
    recovery: Recovery,
}

/// Streams every count of `counts` in turns of [`SLICE`] until each has had `dur`; each
/// count's figure is the median of its slices, and each count after the first carries the
/// median of its slices' ratios to the first count's slice of the same turn.
///
/// # Errors
/// Opening the devices or a QP, or a WRITE that fails.
pub fn run(counts: &[usize], dur: Duration) -> io::Result<Vec<Scaling>> {
    let most = counts.iter().copied().max().unwrap_or(1);
    let mut pairs = Pairs::open(most, depth(1))?;
    for &k in counts {
        pairs.stream(k, depth(k), SLICE)?;
    }
    let turns = (dur.as_secs_f64() / SLICE.as_secs_f64()).ceil().max(1.0) as usize;
    let mut all: Vec<Slices> = counts.iter().map(|_| Slices::default()).collect();
    for _ in 0..turns {
        for (&k, slices) in counts.iter().zip(&mut all) {
            let before = pairs.recovery();
            let s = pairs.stream(k, depth(k), SLICE)?;
            pairs.recovery().add_since(before, &mut slices.recovery);
            slices.gbit_per_s.push(s.gbit_per_s());
            slices.done.resize(k, 0);
            for (total, d) in slices.done.iter_mut().zip(&s.done) {
                *total += d;
            }
        }
    }
    let first = all[0].gbit_per_s.clone();
    Ok(counts
        .iter()
        .zip(all)
        .enumerate()
        .map(|(i, (&k, s))| {
            let one = Scaling::of(k, median(&s.gbit_per_s), &s.done, s.recovery);
            Scaling {
                rounds: turns,
                paired: (i > 0)
                    .then(|| slice_ratio(&s.gbit_per_s, &first))
                    .flatten(),
                each_round: s.gbit_per_s,
                ..one
            }
        })
        .collect())
}

/// The median of each slice's figure over the baseline's slice of the same turn (`None`, as
/// [`ratios`] says, for no slice or a baseline slice that moved nothing).
fn slice_ratio(slices: &[f64], baseline: &[f64]) -> Option<PairedRatio> {
    let ratios = ratios(slices.iter().copied().zip(baseline.iter().copied()))?;
    Some(PairedRatio {
        ratio: median(&ratios),
        rounds: ratios.len(),
        pairing: Pairing::Slices { slice: SLICE },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turn 2's slices both fell in a slow phase, turn 3's baseline alone did: each turn is
    /// its own pair, so the count is judged by the middle of 0.5, 0.5, 0.25 and 0.5.
    #[test]
    fn each_slice_is_judged_against_the_baseline_slice_of_its_turn() {
        let p = slice_ratio(&[50.0, 10.0, 5.0, 45.0], &[100.0, 20.0, 20.0, 90.0]).unwrap();
        assert_eq!((p.ratio, p.rounds), (0.5, 4));
        assert_eq!(p.pairing, Pairing::Slices { slice: SLICE });
        assert_eq!(
            slice_ratio(&[1.0], &[0.0]),
            None,
            "a baseline slice of nothing"
        );
        assert_eq!(slice_ratio(&[], &[]), None);
    }

    /// Two counts on real devices: every turn measured, every QP of the larger count wrote,
    /// and the ratio is that of the slices.
    #[test]
    fn counts_take_turns_on_one_pair_of_devices() {
        let r = run(&[1, 4], Duration::from_millis(400)).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].rounds, r[1].rounds), (2, 2));
        assert_eq!(r[1].each_round.len(), 2);
        assert!(r[1].min_per_qp > 0, "{:?}", r[1]);
        assert!(r.iter().all(|s| s.gbit_per_s > 0.0), "{r:?}");
        let p = r[1].paired.unwrap();
        assert_eq!(Some(p), slice_ratio(&r[1].each_round, &r[0].each_round));
        assert!(r[0].paired.is_none());
    }
}
