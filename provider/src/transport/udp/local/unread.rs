//! A sender's watch over the datagrams it wrote into a lane and the receiver has not read:
//! when the receiver stops reading, the sender rings its doorbell (see `local/mod.rs`).
//!
//! A receiver whose application busy-polls is not rung: its polls read the lane within a
//! microsecond. But an application may stop polling with a datagram on its way, or never
//! poll for it: perftest's `ib_write_lat` polls for its send completion, then spins on its
//! memory for the peer's RDMA WRITE, which only a round of progress puts there. Without the
//! doorbell such a datagram waits for the receiver's progress thread to look, and for that
//! the thread would have to wake often while the application polls, taking the core from it
//! (on two cores, each look preempted one of the two `ib_write_lat` processes: some 8000 a
//! second, one iteration in twenty). The sender knows better: it sees the lane's `head`,
//! the receiver's count of datagrams read. If `head` has not moved for [`STALE`] while
//! datagrams wait, nobody is reading, and the sender rings once (until `head` moves again).
//! The receiver's thread then needs no frequent looks for the host-local path
//! (`driver/watch.rs`).
//!
//! Whoever on the sending side polls looks (each receive of the device's transport), so a
//! sender waiting for its answer rings for it; the clock is read only while `head` stands
//! still with datagrams behind it.

use std::time::{Duration, Instant};

/// How long datagrams may wait with the receiver's `head` standing still before the sender
/// rings: far beyond a polling receiver's reading (under a microsecond), and beyond most of
/// the stretches a busy receiver is preempted for. A receiver that was only preempted reads
/// its datagrams once it runs again, and its woken thread, which cannot help it, takes a
/// core from somebody else: at 10 us each of two `ib_write_lat` processes on this 2-core VM
/// was rung some 1300 times a second, at 50 us one to two hundred times (a round trip in a
/// thousand), and the rounds of the woken threads preempted more iterations, whose peers
/// rang in turn (some runs settled at 1400 wakes a second per thread). Datagrams nobody
/// will read are rarer: with no ring at all, about one round trip in 10 000 waited for the
/// thread's look (over 1 ms). At 250 us: 140-340 wakes a second per thread, p99 / median
/// 2.3x-3.3x, against 290-1440 and 3.1x-3.4x at 50 us in alternating runs.
pub const STALE: Duration = Duration::from_micros(250);

/// What a look at a lane found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Everything written was read: nothing more to watch.
    Read,
    /// Datagrams wait, and the receiver reads, or has not left them long: look again.
    Waiting,
    /// Datagrams waited [`STALE`] with `head` standing still: ring the doorbell (once).
    Ring,
}

/// The watch over one lane's unread datagrams.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unread {
    /// `head` at the last look.
    head: u64,
    /// Since when `head` has stood still (`None`: it moved at the last look, or the watch
    /// just began).
    since: Option<Instant>,
    /// Rung since `head` last moved.
    rung: bool,
}

impl Unread {
    /// A watch beginning with `head` as last seen.
    pub fn new(head: u64) -> Unread {
        Unread {
            head,
            since: None,
            rung: false,
        }
    }

    /// Looks at the lane: the receiver's `head`, the sender's `tail`; `now` is called only
    /// if `head` stood still since the last look.
    pub fn look(&mut self, head: u64, tail: u64, now: impl FnOnce() -> Instant) -> Look {
        if head == tail {
            return Look::Read;
        }
        if head != self.head {
            *self = Unread::new(head);
            return Look::Waiting;
        }
        let now = now();
        match self.since {
            None => {
                self.since = Some(now);
                Look::Waiting
            }
            Some(t) if !self.rung && now.saturating_duration_since(t) >= STALE => {
                self.rung = true;
                Look::Ring
            }
            Some(_) => Look::Waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_that_stops_reading_is_rung_once() {
        let t0 = Instant::now();
        let mut u = Unread::new(0);
        assert_eq!(u.look(0, 3, || t0), Look::Waiting, "the watch begins");
        assert_eq!(u.look(0, 3, || t0 + STALE / 2), Look::Waiting);
        assert_eq!(u.look(0, 3, || t0 + STALE), Look::Ring);
        assert_eq!(u.look(0, 3, || t0 + STALE * 5), Look::Waiting, "rung once");
        // The receiver read one: it reads again, and the watch starts over.
        assert_eq!(
            u.look(1, 3, || unreachable!("no clock when head moved")),
            Look::Waiting
        );
        assert_eq!(u.look(1, 3, || t0 + STALE * 6), Look::Waiting);
        assert_eq!(u.look(1, 3, || t0 + STALE * 7), Look::Ring);
        assert_eq!(u.look(3, 3, || unreachable!()), Look::Read);
    }

    #[test]
    fn a_receiver_that_keeps_reading_is_not_rung_however_long_it_is_behind() {
        let t0 = Instant::now();
        let mut u = Unread::new(0);
        for i in 0..100u64 {
            // Each look finds `head` moved, a thousand datagrams behind.
            let at = t0 + STALE * i as u32;
            assert_eq!(u.look(i, i + 1000, || at), Look::Waiting);
        }
    }
}
