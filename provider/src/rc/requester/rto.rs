//! The retransmission timer, adapted to the round trip (IBTA 9.7.6.1.3 sets its bound).
//!
//! The local ACK timeout the QP was given (`timeout`: 4.096 µs × 2^timeout, 67 ms for
//! `ibv_rc_pingpong`'s 14) is what the spec counts retries by: after `retry_cnt` retries that
//! each waited that long without progress, the WR completes with `IBV_WC_RETRY_EXC_ERR`. A
//! requester that waited the whole timeout for every lost packet that nothing follows (the
//! last of a message, before the sender pauses) lost 67 ms each time: through a link losing
//! 1 % of its packets, `ib_write_bw` moved 26 times less than on a clean one.
//!
//! So the requester also resends early, as TCP does (RFC 6298): it measures the round trip
//! (one packet timed at a time, never a resent one, Karn's rule), keeps a smoothed estimate
//! and its variation, and resends once no ACK came within `srtt + 4 · rttvar` (at least
//! `2 · srtt` and [`MIN_RTO`]; [`INITIAL_RTO`] until a round trip was measured), doubling
//! the interval after each early resend. Early resends cost no retry: only a resend a whole
//! `timeout` after the last progress (or the last counted retry) does, and the timer never
//! runs later than that, so a dead peer is reported exactly when the spec says.

use std::time::{Duration, Instant};

use softrnic_wire::Psn;

/// The shortest early resend interval: well above a round trip on loopback or a LAN (tens of
/// microseconds), and above a scheduler's time slice, so that a peer that is merely slow to
/// run is rarely resent to.
pub const MIN_RTO: Duration = Duration::from_millis(1);

/// The early resend interval before a round trip was measured (RFC 6298 2.1 has 1 s for the
/// Internet; RoCE runs on a LAN). Without it, a loss among a connection's first packets (or
/// of the first ACK asked for, which is the one timed) cost a whole local ACK timeout: 67 ms
/// of an `ib_write_bw` run of 0.85 s through a link losing 1 %. Too short costs little: an
/// early resend is one packet (the probe) and the next interval is twice as long.
pub const INITIAL_RTO: Duration = Duration::from_millis(10);

/// The round-trip estimate and the timer's state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rto {
    /// Smoothed round trip and its mean deviation, once one was measured.
    estimate: Option<(Duration, Duration)>,
    /// The packet being timed: its PSN and when it left.
    timing: Option<(Psn, Instant)>,
    /// When the last packet left (a resend too).
    last_sent: Option<Instant>,
    /// The current early interval: the estimate's, doubled by each early resend.
    backoff: Option<Duration>,
    /// When the counted timeout began: the last progress, or the last counted retry.
    since: Option<Instant>,
    /// The timer fired and its resend has not left yet: arming it again continues the
    /// counted timeout rather than starting one.
    resending: bool,
}

impl Rto {
    /// A packet at `psn` left at `now` (`resend`: it had left before; `asks`: with AckReq).
    /// Only a packet that asks for its ACK is timed: the ACK of one that does not comes when
    /// a later packet asks, which may leave much later (an unsignaled WRITE, then a signaled
    /// one when the program posts it; the first packets of a long message), and such a
    /// "round trip" of 52 ms on a 2 ms path put the early resend past the local ACK timeout.
    pub fn sent(&mut self, psn: Psn, now: Instant, resend: bool, asks: bool) {
        self.last_sent = Some(now);
        if resend {
            // Karn's rule: an ACK after a resend may answer either copy.
            self.timing = None;
        } else if asks && self.timing.is_none() {
            self.timing = Some((psn, now));
        }
    }

    /// Every PSN before `una` is acknowledged, at `now`: the timed packet gives a sample if
    /// it is among them; the counted timeout starts over, and so does the early interval. A
    /// resend the timer asked for and that has not left yet is no longer one that continues
    /// the counted timeout: the ACK it waited for came (often just after the timer fired).
    pub fn progress(&mut self, una: Psn, now: Instant) {
        if let Some((psn, at)) = self.timing {
            if una.distance_from(psn) != 0 && una.distance_from(psn) <= Psn::MASK / 2 {
                self.sample(now.saturating_duration_since(at));
                self.timing = None;
            }
        }
        self.since = Some(now);
        self.backoff = None;
        self.resending = false;
    }

    /// The timer is armed at `now` for a QP whose local ACK timeout is `timeout`: returns its
    /// deadline. Armed for anything but the resend after it fired (the first packet when
    /// nothing was outstanding, a resend after an RNR wait), it starts the counted timeout.
    pub fn arm(&mut self, now: Instant, timeout: Duration) -> Instant {
        if !std::mem::take(&mut self.resending) {
            self.since = Some(now);
        }
        self.deadline(now, timeout)
    }

    /// RFC 6298 2.2 and 2.3: the first sample sets the estimate, later ones move it by 1/8
    /// (the deviation by 1/4).
    fn sample(&mut self, rtt: Duration) {
        self.estimate = Some(match self.estimate {
            None => (rtt, rtt / 2),
            Some((srtt, rttvar)) => {
                let dev = srtt.abs_diff(rtt);
                (srtt * 7 / 8 + rtt / 8, rttvar * 3 / 4 + dev / 4)
            }
        });
    }

    /// When the timer armed at `now` fires, for a QP whose local ACK timeout is `timeout`:
    /// the early interval, but never after the counted timeout.
    pub fn deadline(&self, now: Instant, timeout: Duration) -> Instant {
        let counted = self.since.unwrap_or(now) + timeout;
        (now + self.early()).min(counted)
    }

    /// The smoothed round trip and its mean deviation, once one was measured.
    pub fn estimate(&self) -> Option<(Duration, Duration)> {
        self.estimate
    }

    /// The early interval now: the backed-off one, else the estimate's `srtt + 4 rttvar`, at
    /// least twice `srtt` and at least [`MIN_RTO`]; [`INITIAL_RTO`] before a round trip was
    /// measured.
    ///
    /// Why twice `srtt`: when the round trip is mostly a standing queue (QPs keeping the
    /// device's send window full: the receiver always a window behind), it varies little, and
    /// `srtt + 4 rttvar` came within a few percent of it. The first hiccup then resent what
    /// was still queued, the resends lengthened the queue, and every QP timed out every few
    /// messages from then on (16 QPs writing: 9 000 early resends a second).
    fn early(&self) -> Duration {
        self.backoff.unwrap_or_else(|| {
            self.estimate.map_or(INITIAL_RTO, |(srtt, rttvar)| {
                (srtt + rttvar * 4).max(srtt * 2).max(MIN_RTO)
            })
        })
    }

    /// The timer fired at `now`, but packets left after it was armed: when it should fire
    /// instead, if that is later. The early interval runs from the last packet sent, not from
    /// the last progress: a QP that sent the head of a message and then waited for its turn
    /// (the device's QPs take turns, `nic/turns.rs`) has no ACK due until the tail that asks
    /// for it has left, and resending what is still on its way only adds duplicates (with
    /// 1024 QPs writing, a quarter of the packets sent). A packet lost in the middle of a
    /// message is still found at once: the peer NAKs the gap when the next one arrives. The
    /// counted timeout keeps its own start.
    pub fn postponed(&self, now: Instant, timeout: Duration) -> Option<Instant> {
        if self.resending {
            return None;
        }
        // As if armed when the last packet left: `deadline` keeps the counted timeout's start.
        let at = self.deadline(self.last_sent?, timeout);
        (at > now).then_some(at)
    }

    /// The timer fired at `now`: whether this resend counts as a retry (a whole `timeout`
    /// without progress). Either way the next early interval is twice this one.
    pub fn fired(&mut self, now: Instant, timeout: Duration) -> bool {
        let since = *self.since.get_or_insert(now);
        let counted = now >= since + timeout;
        if counted {
            self.since = Some(now);
        }
        self.backoff = Some((self.early() * 2).min(timeout));
        self.timing = None;
        self.resending = true;
        counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(67);

    #[test]
    fn without_a_measured_round_trip_the_first_early_resend_is_after_the_initial_interval() {
        let (mut r, t0) = (Rto::default(), Instant::now());
        let mut at = r.arm(t0, TIMEOUT);
        assert_eq!(at, t0 + INITIAL_RTO);
        // Early at 10 ms, then 20 ms later (30), then the counted retry at the timeout.
        let mut early = 0;
        while !r.fired(at, TIMEOUT) {
            early += 1;
            at = r.arm(at, TIMEOUT);
        }
        assert_eq!((early, at), (2, t0 + TIMEOUT), "a whole timeout counts");
        // A timeout shorter than the initial interval is the timer.
        let (mut r, short) = (Rto::default(), Duration::from_millis(4));
        assert_eq!(r.arm(t0, short), t0 + short);
        assert!(r.fired(t0 + short, short));
    }

    #[test]
    fn a_measured_round_trip_resends_early_without_counting_and_backs_off_to_the_timeout() {
        let (mut r, t0) = (Rto::default(), Instant::now());
        r.arm(t0, TIMEOUT);
        r.sent(Psn::new(10), t0, false, true);
        let rtt = Duration::from_micros(30);
        r.progress(Psn::new(11), t0 + rtt);
        // The next packet is lost: the first resend after MIN_RTO (the estimate is below).
        let t1 = t0 + rtt;
        r.sent(Psn::new(11), t1, false, true);
        let mut at = r.deadline(t1, TIMEOUT);
        assert_eq!(at, t1 + MIN_RTO, "armed at progress");
        let mut early = 0;
        while !r.fired(at, TIMEOUT) {
            early += 1;
            r.sent(Psn::new(11), at, true, true);
            let next = r.arm(at, TIMEOUT);
            assert!(next - at <= TIMEOUT && next > at);
            at = next;
        }
        // 1, 2, 4, ... 32 ms early (63 ms), then the counted retry exactly at the timeout.
        assert_eq!(early, 6);
        assert_eq!(at, t1 + TIMEOUT);
        // After a counted retry, the next one a whole timeout later at most.
        r.sent(Psn::new(11), at, true, true);
        assert_eq!(r.arm(at, TIMEOUT), at + TIMEOUT);
    }

    #[test]
    fn the_early_interval_runs_from_the_last_packet_sent_but_never_past_the_timeout() {
        let (mut r, t0) = (Rto::default(), Instant::now());
        let ms = Duration::from_millis;
        r.arm(t0, TIMEOUT);
        r.sent(Psn::new(1), t0, false, true);
        let t1 = t0 + Duration::from_micros(100);
        r.progress(Psn::new(2), t1);
        let at = r.arm(t1, TIMEOUT);
        assert_eq!(at, t1 + MIN_RTO);
        // The rest of the message leaves 3 ms later: the QP waited for its turn.
        r.sent(Psn::new(2), t1 + ms(3), false, false);
        assert_eq!(r.postponed(at, TIMEOUT), Some(t1 + ms(3) + MIN_RTO));
        assert_eq!(r.postponed(t1 + ms(4), TIMEOUT), None, "due: it resends");
        r.sent(Psn::new(3), t1 + ms(66), false, true);
        assert_eq!(r.postponed(t1 + ms(5), TIMEOUT), Some(t1 + TIMEOUT));
        assert_eq!(r.postponed(t1 + TIMEOUT, TIMEOUT), None);
    }

    #[test]
    fn a_steady_round_trip_leaves_the_early_resend_room_for_a_hiccup() {
        let (mut r, mut t) = (Rto::default(), Instant::now());
        let rtt = Duration::from_millis(5);
        for i in 0..64 {
            r.sent(Psn::new(i), t, false, true);
            t += rtt;
            r.progress(Psn::new(i + 1), t);
        }
        let (srtt, rttvar) = r.estimate.unwrap();
        assert_eq!(srtt, rtt);
        assert!(rttvar < rtt / 100, "{rttvar:?}");
        assert_eq!(r.deadline(t, TIMEOUT), t + 2 * rtt);
    }

    #[test]
    fn a_packet_that_asks_for_no_ack_is_not_timed() {
        let (mut r, t0) = (Rto::default(), Instant::now());
        r.sent(Psn::new(5), t0, false, false);
        r.sent(Psn::new(6), t0 + Duration::from_millis(50), false, true);
        r.progress(Psn::new(7), t0 + Duration::from_millis(52));
        assert_eq!(
            r.estimate,
            Some((Duration::from_millis(2), Duration::from_millis(1)))
        );
    }

    #[test]
    fn a_resent_packet_gives_no_sample() {
        let (mut r, t0) = (Rto::default(), Instant::now());
        r.sent(Psn::new(5), t0, true, true);
        r.progress(Psn::new(6), t0 + Duration::from_secs(1));
        assert!(r.estimate.is_none());
        r.sent(Psn::new(6), t0, false, true);
        r.progress(Psn::new(6), t0 + Duration::from_secs(1));
        assert!(r.estimate.is_none(), "PSN 6 itself is not acknowledged yet");
        r.progress(Psn::new(7), t0 + Duration::from_micros(40));
        assert_eq!(
            r.estimate,
            Some((Duration::from_micros(40), Duration::from_micros(20)))
        );
    }

    /// The timer fired, but the ACK came before the probe left and acknowledged everything.
    /// The QP's next message, posted after a pause much longer than the timeout, starts a
    /// counted timeout of its own: it is not a retry of the last one. (Before, its first
    /// packet armed a deadline already past, and the QP spent a retry and resent the whole
    /// message at once: 1024 QPs writing in 200 ms slices had tens of such "counted" timeouts
    /// per run.)
    #[test]
    fn progress_after_the_timer_fired_ends_the_resend_it_asked_for() {
        let (mut r, t0) = (Rto::default(), Instant::now());
        let ms = Duration::from_millis;
        r.arm(t0, TIMEOUT);
        r.sent(Psn::new(1), t0, false, true);
        assert!(!r.fired(t0 + INITIAL_RTO, TIMEOUT), "early");
        r.progress(Psn::new(2), t0 + INITIAL_RTO + ms(1));
        let t1 = t0 + ms(200);
        r.sent(Psn::new(2), t1, false, true);
        let at = r.arm(t1, TIMEOUT);
        assert!(
            at > t1,
            "armed at {:?} after the post",
            at.checked_duration_since(t1)
        );
        assert!(
            !r.fired(at, TIMEOUT),
            "an early resend, not a counted retry"
        );
    }
}
