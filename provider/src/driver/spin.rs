//! When the progress thread spins instead of sleeping: between the packets of a request
//! stream to an application that makes no verbs calls.
//!
//! A passive side, such as `ib_read_lat`'s server, leaves every packet to the thread: the
//! READ requests come a few microseconds apart, and the thread slept between them. Waking
//! it cost more than the rest of the round trip: on this VM an idle virtual CPU halts, and
//! its wake-up goes through the host (the guest's halt polling is off), so `ib_read_lat`'s
//! typical round trip was 3 us in a good phase and 17 to 19 us in a bad one, with p99 5 to
//! 10 times the typical. So for [`SPIN_FOR`] after a round that moved packets the thread
//! makes its rounds without sleeping, yielding the CPU between them ([`Spin::spins`]).
//!
//! Not while the application polls or posts (within [`PASSIVE`]): then it makes progress
//! itself (`thread.rs`), or it spins on its own memory (`ib_write_lat`), and a thread that
//! spun beside it would run only when the scheduler took the CPU from the application, not
//! when a packet came as a woken thread does. Nor once a yield took longer than
//! [`CONTENDED`]: another thread wanted this CPU (a writer's application beside a passive
//! receiver, two cores for three threads), and the thread sleeps until the next packet
//! rather than take turns with it.

use std::time::{Duration, Instant};

/// How long after a round that moved packets the thread spins.
pub const SPIN_FOR: Duration = Duration::from_micros(50);

/// An application that made no verbs call for this long is passive: the thread may spin.
pub const PASSIVE: Duration = Duration::from_millis(10);

/// A yield that took longer gave the CPU to another thread.
pub const CONTENDED: Duration = Duration::from_micros(10);

/// The thread's spinning state: when its last round moved packets.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Spin {
    moved_at: Option<Instant>,
}

impl Spin {
    /// A round at `now` moved packets.
    pub(super) fn moved(&mut self, now: Instant) {
        self.moved_at = Some(now);
    }

    /// Whether the thread spins at `now` rather than sleep; `active`: the application polled
    /// or posted within [`PASSIVE`].
    pub(super) fn spins(&self, now: Instant, active: bool) -> bool {
        !active
            && self
                .moved_at
                .is_some_and(|t| now.saturating_duration_since(t) < SPIN_FOR)
    }

    /// The thread yielded the CPU, which took `took`: if another thread ran meanwhile, no
    /// more spinning until the next round that moves packets.
    pub(super) fn yielded(&mut self, took: Duration) {
        if took > CONTENDED {
            self.moved_at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn the_thread_spins_only_after_packets_and_only_for_a_passive_application() {
        let t0 = Instant::now();
        let mut s = Spin::default();
        assert!(!s.spins(t0, false), "no packets yet");
        s.moved(t0);
        assert!(s.spins(t0 + 10 * US, false));
        assert!(
            !s.spins(t0 + 10 * US, true),
            "the application polls: no spinning"
        );
        assert!(s.spins(t0 + SPIN_FOR - US, false));
        assert!(!s.spins(t0 + SPIN_FOR, false), "the packets stopped coming");
        s.moved(t0 + SPIN_FOR);
        assert!(
            s.spins(t0 + SPIN_FOR + US, false),
            "a new packet starts it again"
        );
    }

    #[test]
    fn a_contended_yield_ends_the_spinning_until_the_next_packets() {
        let t0 = Instant::now();
        let mut s = Spin::default();
        s.moved(t0);
        s.yielded(CONTENDED);
        assert!(
            s.spins(t0 + US, false),
            "a quick yield: nobody else wanted the CPU"
        );
        s.yielded(CONTENDED + US);
        assert!(!s.spins(t0 + 2 * US, false));
        s.moved(t0 + 3 * US);
        assert!(s.spins(t0 + 4 * US, false));
    }
}
