//! The QP's timers (IBTA 9.7.6.1 "Timers"): the local ACK timeout the requester runs for
//! unacknowledged packets, and the RNR timer after a Receiver Not Ready NAK; and the
//! responder's own, the end of an ACK's hold (`rc/ack_coalesce.rs`). As in quinn-proto,
//! one small table of optional deadlines; the engine's next wakeup is the earliest of them. Time
//! is whatever the driver passes in: the engine reads no clock.

use std::time::Instant;

/// The timers of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// Local ACK timeout: 4.096 us x 2^timeout after the oldest unacknowledged packet was
    /// sent; on expiry the requester retransmits from the oldest unacknowledged PSN.
    Retransmit = 0,
    /// RNR wait: after an RNR NAK, the time its timer code says; on expiry, resend.
    Rnr = 1,
    /// The end of a plain ACK's hold (not an IBTA timer: see `rc/ack_coalesce.rs`); on
    /// expiry the ACK leaves.
    AckHold = 2,
}

const COUNT: usize = 3;

/// Deadlines indexed by [`Timer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerTable {
    data: [Option<Instant>; COUNT],
}

impl TimerTable {
    /// Arms `timer` to fire at `at` (replacing any earlier deadline).
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.data[timer as usize] = Some(at);
    }

    /// Disarms `timer`.
    pub fn stop(&mut self, timer: Timer) {
        self.data[timer as usize] = None;
    }

    /// The deadline of `timer`, if armed.
    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.data[timer as usize]
    }

    /// Whether `timer` is armed.
    pub fn is_armed(&self, timer: Timer) -> bool {
        self.data[timer as usize].is_some()
    }

    /// The earliest deadline of all armed timers.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.data.iter().flatten().min().copied()
    }

    /// Whether `timer` is armed and its deadline is not after `now`; if so, disarms it.
    pub fn expire(&mut self, timer: Timer, now: Instant) -> bool {
        match self.data[timer as usize] {
            Some(at) if at <= now => {
                self.data[timer as usize] = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::time::Duration;

    #[test]
    fn next_timeout_is_the_earliest_and_expiry_disarms() {
        let t0 = Instant::now();
        let mut t = TimerTable::default();
        assert_eq!(t.next_timeout(), None);
        t.set(Timer::Retransmit, t0 + Duration::from_millis(5));
        t.set(Timer::Rnr, t0 + Duration::from_millis(2));
        assert_eq!(t.next_timeout(), Some(t0 + Duration::from_millis(2)));
        assert!(!t.expire(Timer::Rnr, t0 + Duration::from_millis(1)));
        assert!(t.expire(Timer::Rnr, t0 + Duration::from_millis(2)));
        assert!(!t.is_armed(Timer::Rnr));
        assert_eq!(t.next_timeout(), Some(t0 + Duration::from_millis(5)));
        t.stop(Timer::Retransmit);
        assert_eq!(t.next_timeout(), None);
    }
}
