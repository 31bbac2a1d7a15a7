//! How long the progress thread stays away while the application busy-polls (see `run` in
//! `device.rs`): its looks whether the application still polls.
//!
//! Each look preempts a busy core for a moment (a few microseconds here), so the looks thin
//! out while the application keeps polling: every [`WATCH_POLLING`] at first, twice as late
//! each time it still does, up to [`WATCH_POLLING_MAX`]. An application that stops polling
//! with packets pending waits up to the current interval for the thread.
//!
//! Some applications stop polling as part of their work: perftest's `ib_write_lat` polls for
//! its send completion, then spins on its memory for the peer's RDMA WRITE. The WRITE
//! usually arrives with the ACK that completes the send, inside the poll; when it comes a
//! moment after it, no poll will take it, and it waited for the thread's next look: in four
//! runs of six, more than one iteration in a hundred took 150 to 250 us, against 7 us
//! typical (p99 25 times the typical). So a round after a look that finds packets the polls
//! left is evidence of such an application: the thread then looks every [`WATCH_STRANDED`]
//! for [`STRANDED_FOR`] (each such round renewing it). An application that polls for
//! everything it waits for never leaves packets behind and keeps the thin looks.

use std::time::{Duration, Instant};

/// An application that polled this recently, and at least [`BUSY_POLLS`] times since the
/// progress thread last looked, is taken to be busy-polling. One that waits for completion
/// events polls its CQ empty once per event and is not.
pub const POLLING: Duration = Duration::from_micros(50);

/// See [`POLLING`]: a busy poller makes that many polls in a few microseconds.
pub const BUSY_POLLS: u64 = 32;

/// How soon the progress thread looks again whether the application still polls, after it
/// first found it polling; see the module comment.
pub const WATCH_POLLING: Duration = Duration::from_micros(100);

/// The longest the progress thread goes without looking while the application polls.
pub const WATCH_POLLING_MAX: Duration = Duration::from_micros(250);

/// How often the thread looks while the application is known to leave packets behind.
pub const WATCH_STRANDED: Duration = Duration::from_micros(20);

/// How long the thread keeps looking every [`WATCH_STRANDED`] after the polls last left
/// packets behind.
pub const STRANDED_FOR: Duration = Duration::from_millis(20);

/// The progress thread's looks (see the module comment).
#[derive(Debug, Clone)]
pub(super) struct Watch {
    /// The next look's interval while the polls leave nothing behind.
    interval: Duration,
    /// Whether the thread stayed away for a poller since its last round.
    away: bool,
    /// Until when the thread looks every [`WATCH_STRANDED`].
    stranded_until: Option<Instant>,
}

impl Watch {
    pub(super) fn new() -> Watch {
        Watch {
            interval: WATCH_POLLING,
            away: false,
            stranded_until: None,
        }
    }

    /// Whether the polls left packets behind lately (see the module comment).
    fn stranded(&self, now: Instant) -> bool {
        self.stranded_until.is_some_and(|t| now < t)
    }

    /// The application busy-polls at `now`: how long the thread stays away.
    pub(super) fn stay_away(&mut self, now: Instant) -> Duration {
        self.away = true;
        if self.stranded(now) {
            return WATCH_STRANDED;
        }
        let d = self.interval;
        self.interval = (self.interval * 2).min(WATCH_POLLING_MAX);
        d
    }

    /// The thread made a round at `now`, which received `packets`.
    pub(super) fn round(&mut self, packets: usize, now: Instant) {
        if self.away && packets > 0 {
            // Packets came while the application polled, and it did not take them.
            self.stranded_until = Some(now + STRANDED_FOR);
        }
        self.away = false;
        self.interval = WATCH_POLLING;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_thin_out_while_the_polls_leave_nothing_behind() {
        let (mut w, t) = (Watch::new(), Instant::now());
        let looks: Vec<_> = (0..4).map(|_| w.stay_away(t)).collect();
        assert_eq!(
            looks,
            [100, 200, 250, 250].map(Duration::from_micros).to_vec()
        );
        // A round that finds nothing (the application stopped polling, nothing came).
        w.round(0, t);
        assert_eq!(w.stay_away(t), WATCH_POLLING);
        // A round after no stay away that receives (packets woke the thread) is no evidence.
        w.round(0, t);
        w.round(3, t);
        assert_eq!(w.stay_away(t), WATCH_POLLING);
    }

    #[test]
    fn packets_left_by_the_polls_make_the_looks_frequent_for_a_while() {
        let (mut w, t) = (Watch::new(), Instant::now());
        w.stay_away(t);
        w.stay_away(t);
        w.round(1, t);
        for _ in 0..5 {
            assert_eq!(w.stay_away(t + Duration::from_millis(1)), WATCH_STRANDED);
        }
        // Renewed by the next such round, and over once it has not come for STRANDED_FOR.
        w.round(2, t + Duration::from_millis(10));
        let later = t + Duration::from_millis(10) + STRANDED_FOR;
        assert_eq!(
            w.stay_away(later - Duration::from_micros(1)),
            WATCH_STRANDED
        );
        assert_eq!(w.stay_away(later), WATCH_POLLING);
    }
}
