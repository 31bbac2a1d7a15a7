//! How long the progress thread stays away while the application busy-polls (see
//! `thread.rs`): its looks whether the application still polls.
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
//!
//! Packets of the host-local path are *watched*: their sender rings the receiver's doorbell
//! when they are left unread (`transport/udp/local/unread.rs`), and the thread waits on the
//! doorbell while it stays away. So while every packet the device received since the last
//! look was watched, the looks thin out further, up to [`WATCH_WATCHED_MAX`]: the looks at
//! 250 us preempted each of two `ib_write_lat` processes 4000 times a second on two cores,
//! and one iteration in twenty took twice the typical or more; at 1 ms, 1000 times, and
//! p99 was still 3.7x to 4.5x the median. Nor is a watched packet that a look finds
//! evidence of stranding: its sender rings for it if it stays; a look finds it on its way
//! to the next poll. While it waits so long the thread also wakes for a packet over UDP
//! (the socket readable), which would be unwatched, and for the application arming a CQ
//! (`Device::arm_cq`), which is how an application says it stops polling. What the long
//! looks leave late is what the polls alone would have done, for an application that
//! stops polling without a word: a transmit deferred for its next post (the thread sees
//! one that is owed at its look and wakes for its deadline) and the timers (retransmission,
//! RNR), until the next look.

use std::time::{Duration, Instant};

/// An application that polled this recently, and [`BUSY_POLLS`] times since the progress
/// thread last looked or at that rate per `POLLING` ([`busy_polling`]), is taken to be
/// busy-polling. One that waits for completion events polls its CQ empty once per event and
/// is not.
pub const POLLING: Duration = Duration::from_micros(50);

/// See [`POLLING`]: a busy poller makes that many polls in a few microseconds.
pub const BUSY_POLLS: u64 = 32;

/// The fewest polls since the last look that may show busy-polling, however short the
/// while: an application waiting for events makes one or two per event.
pub const BUSY_POLLS_AT_LEAST: u64 = 4;

/// Whether `polls` polls in `elapsed` since the thread last looked are a busy poller's:
/// [`BUSY_POLLS`] of them, or at least [`BUSY_POLLS_AT_LEAST`] at the rate of [`BUSY_POLLS`]
/// per [`POLLING`].
///
/// The rate as well as the count: a thread that a sender's doorbell wakes for every packet
/// (it sleeps rung, `transport/udp/local/`) looks every few microseconds, and a busy poller
/// makes fewer than [`BUSY_POLLS`] polls between two looks. Counting alone took it for an
/// application that does not poll, and the thread, now making the rounds, slept rung for
/// every packet: once in that state (a peer preempted for 50 us was enough), two
/// `ib_write_lat` processes stayed in it, each thread woken 10 000 times a second. (The
/// count alone serves pollers slower than the rate, as a debug build's.)
pub fn busy_polling(polls: u64, elapsed: Duration) -> bool {
    polls >= BUSY_POLLS
        || (polls >= BUSY_POLLS_AT_LEAST
            && u128::from(polls) * POLLING.as_nanos()
                >= u128::from(BUSY_POLLS) * elapsed.as_nanos())
}

/// How soon the progress thread looks again whether the application still polls, after it
/// first found it polling; see the module comment.
pub const WATCH_POLLING: Duration = Duration::from_micros(100);

/// The longest the progress thread goes without looking while the application polls.
pub const WATCH_POLLING_MAX: Duration = Duration::from_micros(250);

/// The same while every packet received since the last look was watched (see the module
/// comment). Ten times the thread's longest sleep without packets (`MAX_SLEEP` in
/// `thread.rs`): what waits for the look is only what an application that stopped polling
/// without arming a CQ left to the polls.
pub const WATCH_WATCHED_MAX: Duration = Duration::from_millis(10);

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
    /// Every interval while the packets come watched, if a test fixed it
    /// (`Device::stay_away_for`).
    pub(super) watched_for: Option<Duration>,
}

impl Watch {
    pub(super) fn new() -> Watch {
        Watch {
            interval: WATCH_POLLING,
            away: false,
            stranded_until: None,
            watched_for: None,
        }
    }

    /// Whether the polls left packets behind lately (see the module comment).
    fn stranded(&self, now: Instant) -> bool {
        self.stranded_until.is_some_and(|t| now < t)
    }

    /// The application busy-polls at `now`, and every packet the device received since the
    /// last look was `watched` (or not): how long the thread stays away.
    pub(super) fn stay_away(&mut self, now: Instant, watched: bool) -> Duration {
        self.away = true;
        if watched {
            // Whatever was stranded came unwatched (over UDP, before a sender's lane was
            // given: the first millisecond of a host-local conversation); packets now come
            // watched, and their senders ring for those left unread.
            self.stranded_until = None;
        } else if self.stranded(now) {
            return WATCH_STRANDED;
        }
        if let Some(d) = self.watched_for.filter(|_| watched) {
            return d;
        }
        let max = if watched {
            WATCH_WATCHED_MAX
        } else {
            WATCH_POLLING_MAX
        };
        let d = self.interval.min(max);
        self.interval = (d * 2).min(max);
        d
    }

    /// The thread made a round at `now`, which received `unwatched` packets no sender
    /// watches (and any number of watched ones); `rung`: a sender's ring woke it for it
    /// while it stayed away.
    ///
    /// A round for a ring keeps the interval, unless it found unwatched packets: the ring
    /// says the application left watched ones a while (it was preempted, or it stopped
    /// polling), the look after the round tells which, and the senders watch on. Starting
    /// the looks afresh after each ring cost eight looks more per ring with looks up to
    /// 20 ms, each preempting a busy core.
    pub(super) fn round(&mut self, unwatched: usize, now: Instant, rung: bool) {
        if self.away && unwatched > 0 {
            // Packets came while the application polled, and it did not take them.
            self.stranded_until = Some(now + STRANDED_FOR);
        }
        self.away = false;
        if !rung || unwatched > 0 {
            self.interval = WATCH_POLLING;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_thin_out_while_the_polls_leave_nothing_behind() {
        let (mut w, t) = (Watch::new(), Instant::now());
        let looks: Vec<_> = (0..4).map(|_| w.stay_away(t, false)).collect();
        assert_eq!(
            looks,
            [100, 200, 250, 250].map(Duration::from_micros).to_vec()
        );
        // A round that finds nothing (the application stopped polling, nothing came).
        w.round(0, t, false);
        assert_eq!(w.stay_away(t, false), WATCH_POLLING);
        // A round after no stay away that receives (packets woke the thread) is no evidence.
        w.round(0, t, false);
        w.round(3, t, false);
        assert_eq!(w.stay_away(t, false), WATCH_POLLING);
    }

    #[test]
    fn packets_left_by_the_polls_make_the_looks_frequent_for_a_while() {
        let (mut w, t) = (Watch::new(), Instant::now());
        w.stay_away(t, false);
        w.stay_away(t, false);
        w.round(1, t, false);
        for _ in 0..5 {
            assert_eq!(
                w.stay_away(t + Duration::from_millis(1), false),
                WATCH_STRANDED
            );
        }
        // Renewed by the next such round, and over once it has not come for STRANDED_FOR.
        w.round(2, t + Duration::from_millis(10), false);
        let later = t + Duration::from_millis(10) + STRANDED_FOR;
        assert_eq!(
            w.stay_away(later - Duration::from_micros(1), false),
            WATCH_STRANDED
        );
        assert_eq!(w.stay_away(later, false), WATCH_POLLING);
    }

    #[test]
    fn looks_thin_out_further_while_every_packet_is_watched() {
        let (mut w, t) = (Watch::new(), Instant::now());
        let looks: Vec<_> = (0..9).map(|_| w.stay_away(t, true)).collect();
        assert_eq!(
            looks,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
                .map(Duration::from_micros)
                .to_vec()
        );
        // An unwatched packet came: back to the short looks at once.
        assert_eq!(w.stay_away(t, false), WATCH_POLLING_MAX);
        // Stranded unwatched packets make the looks frequent, until packets come watched.
        w.round(1, t, false);
        assert_eq!(w.stay_away(t, false), WATCH_STRANDED);
        assert_eq!(w.stay_away(t, true), WATCH_POLLING);
        assert_eq!(
            w.stay_away(t, false),
            2 * WATCH_POLLING,
            "no longer stranded"
        );
        // A round that found no unwatched packets starts no frequent looks.
        w.round(0, t, false);
        assert_eq!(w.stay_away(t, true), WATCH_POLLING);
        assert_eq!(w.stay_away(t, true), 2 * WATCH_POLLING);
    }

    #[test]
    fn a_round_for_a_ring_keeps_the_interval() {
        let (mut w, t) = (Watch::new(), Instant::now());
        for _ in 0..4 {
            w.stay_away(t, true);
        }
        // Rung for watched packets the application left a while: the looks go on as far
        // apart as before.
        w.round(0, t, true);
        assert_eq!(w.stay_away(t, true), 16 * WATCH_POLLING);
        // Unwatched packets in the rung round: stranded, and the looks start afresh.
        w.round(1, t, true);
        assert_eq!(w.stay_away(t, false), WATCH_STRANDED);
        w.round(0, t, false);
        assert_eq!(w.stay_away(t, true), WATCH_POLLING);
    }

    #[test]
    fn busy_polling_is_a_rate() {
        let us = Duration::from_micros;
        // A poller woken often: 5 polls in 4 us is a busy one's rate.
        assert!(busy_polling(5, us(4)));
        // 32 polls in 50 us is the line of the rate.
        assert!(busy_polling(16, us(25)));
        assert!(!busy_polling(15, us(25)));
        // An application waiting for events: a poll or two per event, however soon.
        assert!(!busy_polling(2, Duration::ZERO));
        assert!(!busy_polling(3, us(10)));
        // 32 since the last look, however long ago: the count.
        assert!(busy_polling(32, Duration::from_millis(1)));
        assert!(!busy_polling(31, Duration::from_millis(1)));
    }
}
