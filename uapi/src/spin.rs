//! How a thread that busy-polls an empty CQ shares its core.
//!
//! Programs poll `ibv_poll_cq` in a tight loop (perftest, MPI, `ibv_rc_pingpong` without
//! `-e`), as they would against a hardware NIC that does its work on its own silicon. A
//! software NIC does that work on the host's cores: a progress thread, or another process
//! on the same device. On this 2-core machine two `softrnic perf-pair` writers spinning on
//! their CQs left their targets so little CPU that two pairs moved 0.54-0.77x what one pair
//! moves alone; with the rule below, 1.14x (`softrnic perf --host`, median of 9 rounds).
//!
//! The rule: a thread whose polls have found nothing for [`DEFAULT_SPIN`] yields its core
//! (`sched_yield(2)`) after every further empty poll, until a poll finds a completion. A
//! yield returns at once when nothing else wants the core, so a lone poller loses only the
//! system call (some 0.7 µs here); within the budget, an empty poll costs what it did, so a
//! ping-pong's answer, which comes well within it, waits no longer.
//!
//! The streak is per thread (a thread that polls two CQs spins on both), and the budget per
//! process: `SOFTRNIC_SPIN` (microseconds, or `forever` to never yield) or [`set_spin`].

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a poller spins on empty polls before it starts yielding.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// Empty polls between reads of the clock while within the budget (reading it on every
/// poll would cost a busy poller a tenth of its time).
const CLOCK_EVERY: u32 = 16;

/// The budget in nanoseconds; `u64::MAX` never yields. [`UNSET`] until first read (then
/// `SOFTRNIC_SPIN`'s) or set.
static BUDGET_NS: AtomicU64 = AtomicU64::new(UNSET);
const UNSET: u64 = u64::MAX - 1;

/// Sets how long a thread polls empty CQs before it yields its core after each empty poll
/// (`None`: it never yields). Overrides `SOFTRNIC_SPIN` for the whole process.
pub fn set_spin(budget: Option<Duration>) {
    BUDGET_NS.store(budget_to_ns(budget), Ordering::Relaxed);
}

/// A budget as stored: `u64::MAX` for never, and never [`UNSET`].
fn budget_to_ns(budget: Option<Duration>) -> u64 {
    budget.map_or(u64::MAX, |d| {
        u64::try_from(d.as_nanos()).map_or(UNSET - 1, |ns| ns.min(UNSET - 1))
    })
}

/// A value of `SOFTRNIC_SPIN`: microseconds, or `forever` (`Some(None)`); `None` if it is
/// neither.
fn parse_spin(v: &str) -> Option<Option<Duration>> {
    match v.trim() {
        "forever" => Some(None),
        us => us.parse().ok().map(|us| Some(Duration::from_micros(us))),
    }
}

/// The budget: [`set_spin`]'s, else the one `SOFTRNIC_SPIN` sets, else [`DEFAULT_SPIN`].
fn budget_ns() -> u64 {
    match BUDGET_NS.load(Ordering::Relaxed) {
        UNSET => {
            let set = std::env::var("SOFTRNIC_SPIN")
                .ok()
                .and_then(|v| parse_spin(&v));
            let ns = budget_to_ns(set.unwrap_or(Some(DEFAULT_SPIN)));
            // A set_spin meanwhile wins.
            let _ = BUDGET_NS.compare_exchange(UNSET, ns, Ordering::Relaxed, Ordering::Relaxed);
            BUDGET_NS.load(Ordering::Relaxed)
        }
        ns => ns,
    }
}

/// This thread's streak of empty polls.
#[derive(Clone, Copy)]
struct Streak {
    /// When the streak's first empty poll came.
    since: Option<Instant>,
    /// Empty polls in the streak.
    polls: u32,
    /// The budget is spent: yield after every empty poll.
    yielding: bool,
}

thread_local! {
    static STREAK: Cell<Streak> = const {
        Cell::new(Streak { since: None, polls: 0, yielding: false })
    };
}

/// Called after every poll of a CQ with the number of completions it found.
pub(crate) fn after_poll(found: usize) {
    STREAK.with(|cell| {
        if found > 0 {
            cell.set(Streak {
                since: None,
                polls: 0,
                yielding: false,
            });
            return;
        }
        let mut s = cell.get();
        if !s.yielding {
            s.polls = s.polls.wrapping_add(1);
            match s.since {
                None => s.since = Some(Instant::now()),
                Some(since) if s.polls % CLOCK_EVERY == 0 => {
                    let budget = budget_ns();
                    s.yielding =
                        budget != u64::MAX && since.elapsed().as_nanos() >= u128::from(budget);
                }
                Some(_) => {}
            }
            cell.set(s);
        }
        if s.yielding {
            std::thread::yield_now();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_yields_once_its_budget_is_spent_and_a_completion_ends_it() {
        // The budget is process-wide: this is the only test in the crate that sets it.
        set_spin(Some(Duration::from_micros(200)));
        after_poll(1);
        let start = Instant::now();
        while !STREAK.with(|c| c.get().yielding) {
            after_poll(0);
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "never began to yield"
            );
        }
        assert!(
            start.elapsed() >= Duration::from_micros(200),
            "yielded within the budget"
        );
        after_poll(1);
        assert!(
            !STREAK.with(|c| c.get().yielding),
            "a completion ends the streak"
        );

        set_spin(None);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(2) {
            after_poll(0);
        }
        assert!(!STREAK.with(|c| c.get().yielding), "None never yields");
        set_spin(Some(DEFAULT_SPIN));
    }

    #[test]
    fn softrnic_spin_is_microseconds_or_forever() {
        assert_eq!(parse_spin("20"), Some(Some(Duration::from_micros(20))));
        assert_eq!(parse_spin(" 0\n"), Some(Some(Duration::ZERO)));
        assert_eq!(parse_spin("forever"), Some(None));
        assert_eq!(parse_spin("-1"), None);
        assert_eq!(parse_spin("50us"), None);
        assert_eq!(budget_to_ns(None), u64::MAX);
        assert_eq!(budget_to_ns(Some(Duration::MAX)), UNSET - 1);
        assert_eq!(budget_to_ns(Some(Duration::from_micros(3))), 3000);
    }
}
