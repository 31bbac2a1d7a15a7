//! The machine's phase around a bandwidth run, and ratios taken only within one phase.
//!
//! On the 2-core VMs this project is measured on, the speed at which one core's writes reach
//! the other changes abruptly and stays for seconds to tens of seconds: a plain copy between
//! two threads through a ring moves 12-13 GB/s in one phase, 9-10 or 2-3 in others, with no
//! other load. Every host-local bandwidth figure follows it (one QP's 64 KiB WRITEs moved 105
//! and 19 Gbit/s a minute apart), so the ratio of two figures says mostly which phase each
//! fell in. [`Prober`] measures that copy ([`copy_speed`], a quarter of a second) before the
//! first run and after every run, and [`phase_ratio`] judges a figure against its baseline
//! only in the rounds where the four probes around the two runs agree.

use std::cell::UnsafeCell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::median;

/// How long one probe copies, after a warm-up of 50 ms.
pub const PROBE_TIME: Duration = Duration::from_millis(200);

/// How long a probe copies before it starts counting: the threads' start, first faults.
const PROBE_WARMUP: Duration = Duration::from_millis(50);

/// Probes agree when the fastest is at most this many times the slowest: within a phase they
/// vary by a few percent (10 % in a 100 ms sample), between phases by 1.3x to 6x.
pub const AGREE: f64 = 1.2;

/// Bytes each probe copy moves: one 4 KiB page, as a lane's slot holds one packet.
const BLOCK: usize = 4096;

/// A ring slot's size: a lane's (`provider/src/driver/transport/udp/local/lane.rs`).
const SLOT: usize = 4352;

/// Slots in the probe's ring.
const SLOTS: usize = 256;

/// The probe's ring: one thread writes slot `head % SLOTS`, the other reads slot
/// `tail % SLOTS`, and a slot belongs to one of them at a time (writer while `head - tail <
/// SLOTS` says it is free, reader while `tail < head`).
struct Ring {
    slots: Box<[UnsafeCell<[u8; SLOT]>]>,
    head: AtomicUsize,
    tail: AtomicUsize,
    stop: AtomicBool,
}

// SAFETY: a slot is touched by the one thread that owns it by the head/tail protocol above,
// whose Release stores and Acquire loads order each hand-over.
unsafe impl Sync for Ring {}

/// The machine's copy speed between two threads, in GB/s (10^9 bytes per second): one copies
/// 4 KiB blocks into a ring of 256 slots, the other out of it, for [`PROBE_TIME`]: what the
/// host-local path does with every packet, without softrnic.
///
/// # Errors
/// A thread could not be started.
pub fn copy_speed() -> io::Result<f64> {
    let ring = Arc::new(Ring {
        slots: (0..SLOTS).map(|_| UnsafeCell::new([0; SLOT])).collect(),
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let writer = {
        let ring = Arc::clone(&ring);
        thread::Builder::new()
            .name("phase-writer".into())
            .spawn(move || {
                let src = [1u8; BLOCK];
                let mut head = 0;
                while !ring.stop.load(Ordering::Relaxed) {
                    if head - ring.tail.load(Ordering::Acquire) >= SLOTS {
                        std::hint::spin_loop();
                        continue;
                    }
                    // SAFETY: slot `head` is free (the reader has passed it) and only this
                    // thread writes it until `head` is published.
                    let slot = unsafe { &mut *ring.slots[head % SLOTS].get() };
                    slot[..BLOCK].copy_from_slice(&src);
                    head += 1;
                    ring.head.store(head, Ordering::Release);
                }
            })?
    };
    let reader = {
        let ring = Arc::clone(&ring);
        thread::Builder::new()
            .name("phase-reader".into())
            .spawn(move || {
                let mut dst = [0u8; BLOCK];
                let mut tail = 0;
                while !ring.stop.load(Ordering::Relaxed) {
                    if tail == ring.head.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                        continue;
                    }
                    // SAFETY: slot `tail` is written (published by `head`) and the writer
                    // leaves it alone until `tail` passes it.
                    let slot = unsafe { &*ring.slots[tail % SLOTS].get() };
                    dst.copy_from_slice(&slot[..BLOCK]);
                    std::hint::black_box(&dst);
                    tail += 1;
                    ring.tail.store(tail, Ordering::Release);
                }
            })?
    };
    thread::sleep(PROBE_WARMUP);
    let (t0, n0) = (Instant::now(), ring.tail.load(Ordering::Acquire));
    thread::sleep(PROBE_TIME);
    let (t1, n1) = (Instant::now(), ring.tail.load(Ordering::Acquire));
    ring.stop.store(true, Ordering::Relaxed);
    for t in [writer, reader] {
        t.join()
            .map_err(|_| io::Error::other("a phase probe thread panicked"))?;
    }
    Ok(((n1 - n0) * BLOCK) as f64 / (t1 - t0).as_secs_f64() / 1e9)
}

/// The copy speed probed right before and right after one run, in GB/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// Probed before the run.
    pub before: f64,
    /// Probed after it.
    pub after: f64,
}

/// Runs measurements one after the other with a probe between each two: the probe after one
/// run is the probe before the next.
pub struct Prober {
    last: f64,
}

impl Prober {
    /// Probes once, before the first run.
    ///
    /// # Errors
    /// As [`copy_speed`].
    pub fn new() -> io::Result<Prober> {
        Ok(Prober {
            last: copy_speed()?,
        })
    }

    /// Runs `run`, then probes; its result with the probes around it.
    ///
    /// # Errors
    /// `run`'s, or the probe's.
    pub fn measure<T>(&mut self, run: impl FnOnce() -> io::Result<T>) -> io::Result<(T, Span)> {
        let value = run()?;
        let after = copy_speed()?;
        let span = Span {
            before: self.last,
            after,
        };
        self.last = after;
        Ok((value, span))
    }
}

/// Whether every probe of `spans` agrees with every other (see [`AGREE`]).
pub fn one_phase(spans: &[Span]) -> bool {
    let all = spans.iter().flat_map(|s| [s.before, s.after]);
    let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p), hi.max(p))
    });
    lo > 0.0 && hi <= lo * AGREE
}

/// A figure judged against its baseline round by round, within one phase of the machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairedRatio {
    /// The median, over the rounds judged, of the figure over the baseline's figure of the
    /// same round.
    pub ratio: f64,
    /// Rounds judged.
    pub rounds: usize,
    /// How those rounds were kept within one phase.
    pub pairing: Pairing,
}

/// How a [`PairedRatio`]'s rounds were kept within one phase of the machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pairing {
    /// Runs of whole seconds, judged only where the probes around both agreed.
    Probed {
        /// The copy speed of those rounds (the median of their probes), GB/s.
        copy_gb_per_s: f64,
    },
    /// Slices taking turns on the same devices, each judged against the baseline's slice of
    /// the same turn, at most a few slices earlier: shorter than the machine's phases, so
    /// rarely in another (`qps/interleave.rs`).
    Slices {
        /// How long each slice kept posting.
        slice: Duration,
    },
    /// Each run judged against the mean of two runs of the baseline, one just before it and
    /// one just after, where those two agree (see [`AGREE`]): the baseline itself says the
    /// machine's phase held across the run, which catches the changes the copy probe does
    /// not see ([`bracket_ratio`]).
    Bracketed,
}

/// Each figure over its baseline figure, pair by pair: `None` when there is no pair, or a
/// baseline figure is not a positive number (a raw round the kernel refused is NaN).
pub fn ratios(pairs: impl IntoIterator<Item = (f64, f64)>) -> Option<Vec<f64>> {
    let ratios: Option<Vec<f64>> = pairs
        .into_iter()
        .map(|(v, b)| (b.is_finite() && b > 0.0).then(|| v / b))
        .collect();
    ratios.filter(|r| !r.is_empty())
}

/// The figure `rounds[i].0` over `baseline[i].0` in each round `i` whose two runs' probes are
/// in one phase, and the median of those ratios; `None` when no round was (or a baseline
/// figure there is not a positive number).
pub fn phase_ratio(rounds: &[(f64, Span)], baseline: &[(f64, Span)]) -> Option<PairedRatio> {
    let in_phase: Vec<_> = rounds
        .iter()
        .zip(baseline)
        .filter(|((_, vs), (_, bs))| one_phase(&[*vs, *bs]))
        .collect();
    let ratios = ratios(in_phase.iter().map(|((v, _), (b, _))| (*v, *b)))?;
    let probes: Vec<f64> = in_phase
        .iter()
        .flat_map(|((_, vs), (_, bs))| [vs.before, vs.after, bs.before, bs.after])
        .collect();
    Some(PairedRatio {
        ratio: median(&ratios),
        rounds: ratios.len(),
        pairing: Pairing::Probed {
            copy_gb_per_s: median(&probes),
        },
    })
}

/// Each `rounds[i]` over the mean of `before[i]` and `after[i]`, two runs of its baseline just
/// before and just after it, in each round where those two agree within [`AGREE`], and the
/// median of those ratios; `None` when no round's two did.
///
/// Between two copy probes that agree a run can still fall in a phase of its own: on this
/// project's VM one QP's figure in one copy phase was either about 64 or about 108 Gbit/s, and
/// two runs side by side differed by that much in either order. A baseline measured on both
/// sides of the run, and found the same twice, is the nearest this machine comes to measuring
/// the two at once.
pub fn bracket_ratio(rounds: &[f64], before: &[f64], after: &[f64]) -> Option<PairedRatio> {
    let agree = |b: f64, a: f64| b > 0.0 && a > 0.0 && b.max(a) <= b.min(a) * AGREE;
    let kept = rounds
        .iter()
        .zip(before.iter().zip(after))
        .filter(|(_, (&b, &a))| agree(b, a))
        .map(|(&v, (&b, &a))| (v, (b + a) / 2.0));
    let ratios = ratios(kept)?;
    Some(PairedRatio {
        ratio: median(&ratios),
        rounds: ratios.len(),
        pairing: Pairing::Bracketed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(before: f64, after: f64) -> Span {
        Span { before, after }
    }

    #[test]
    fn probes_agree_within_a_fifth() {
        assert!(one_phase(&[span(12.0, 13.0), span(12.5, 14.0)]));
        assert!(!one_phase(&[span(12.0, 13.0), span(2.1, 14.0)]));
        assert!(!one_phase(&[span(10.0, 12.1)]));
        assert!(!one_phase(&[span(0.0, 0.0)]), "a probe that moved nothing");
    }

    /// Round 2's baseline fell in a slow phase (2 GB/s) and its figure in a fast one: its
    /// ratio of 5 is left out, and so is round 4, whose run changed phase while it ran.
    #[test]
    fn only_rounds_in_one_phase_are_judged() {
        let fast = span(12.0, 12.5);
        let slow = span(2.1, 2.2);
        let rounds = [
            (90.0, fast),
            (100.0, fast),
            (95.0, fast),
            (10.0, span(12.0, 2.0)),
        ];
        let baseline = [(100.0, fast), (20.0, slow), (95.0, fast), (100.0, fast)];
        let p = phase_ratio(&rounds, &baseline).unwrap();
        assert_eq!((p.ratio, p.rounds), (0.95, 2));
        assert_eq!(
            p.pairing,
            Pairing::Probed {
                copy_gb_per_s: 12.25
            }
        );
        assert_eq!(phase_ratio(&rounds[1..2], &baseline[1..2]), None);
        let refused = [(f64::NAN, fast)];
        assert_eq!(phase_ratio(&rounds[..1], &refused), None);
    }

    /// Round 2's two baseline runs disagree (the phase changed around the run): it is left
    /// out. The others are judged against the mean of theirs (95 and 60).
    #[test]
    fn a_run_is_judged_only_between_two_baseline_runs_that_agree() {
        let p = bracket_ratio(
            &[76.0, 20.0, 57.0],
            &[100.0, 100.0, 60.0],
            &[90.0, 20.0, 60.0],
        );
        let p = p.unwrap();
        assert_eq!((p.rounds, p.pairing), (2, Pairing::Bracketed));
        assert!(
            (p.ratio - (76.0 / 95.0 + 57.0 / 60.0) / 2.0).abs() < 1e-12,
            "{p:?}"
        );
        // 100 and 80 are 1.25x apart: past AGREE.
        assert_eq!(bracket_ratio(&[90.0], &[100.0], &[80.0]), None);
        assert_eq!(bracket_ratio(&[90.0], &[100.0], &[20.0]), None);
        assert_eq!(
            bracket_ratio(&[90.0], &[0.0], &[0.0]),
            None,
            "nothing moved"
        );
        assert_eq!(bracket_ratio(&[], &[], &[]), None);
    }

    /// The probe moves something and says so in plausible units (a machine copies more than
    /// 10 MB/s and less than 1 TB/s between two threads).
    #[test]
    fn the_probe_measures_a_copy() {
        let gb = copy_speed().unwrap();
        assert!(gb > 0.01 && gb < 1000.0, "{gb} GB/s");
    }
}
