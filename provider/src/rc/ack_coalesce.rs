//! When the responder's plain ACKs leave: at once, or held a little so that one ACK covers
//! several requests. An ACK acknowledges every request up to its PSN (IBTA 9.7.5.1.4: the
//! requester completes every WQE the PSN and MSN cover), so a responder may answer a run of
//! requests with one; this module decides when to wait for the run.
//!
//! **Why.** Over kernel UDP every datagram costs the sender's CPU a whole trip through the
//! stack (on this project's loopback measurements about as much as the request itself), and a
//! request-response exchange whose requester does not wait for its send completions (an RPC
//! over SEND, a ping-pong that polls for the answer only) pays for an ACK per message that
//! nobody is waiting for.
//!
//! **The rule.** A plain ACK (syndrome ACK, nothing else queued) of a request that ends a
//! message, when it covers the only message not yet acknowledged, is *held* — only in RTS,
//! and only in one of two cases:
//! * *coalescing*: the peer's next message came while an earlier ACK was held: it does not
//!   wait for ACKs, so holding costs it nothing;
//! * *probing*: in the first state ("immediate"), one ACK in `backoff` is held to find out.
//!
//! While an ACK is held, each new ACK replaces it (the responder's queue already coalesces
//! consecutive ACKs). The held ACK leaves
//! * once it covers [`MAX_COVERED`] messages: so a requester never has more than that many
//!   messages unacknowledged for want of an ACK (a message that ends a run of unsignaled
//!   ones, which the peer may have many of, is never held). A requester that posts its next
//!   SEND as soon as the answer comes, without polling its send completions, needs a send
//!   queue of three (two with immediate ACKs): the ACK that leaves with an answer arrives
//!   behind it;
//! * at once when anything else is queued (a NAK, a READ response, an atomic ACK, the ACK of
//!   a packet inside a message), for a duplicate request (the peer is retransmitting: it
//!   waits), when the QP leaves RTS, or in a flush before the QP is destroyed;
//! * when its hold ends ([`HOLD`], at most a quarter of the QP's local ACK timeout, so that a
//!   peer with the same timeout does not retransmit). The peer sent nothing more during the
//!   hold: either it went quiet, or it was waiting for the ACK (a ping-pong that waits for
//!   its send completion, a send queue of one). Which one, its next request says: one that
//!   comes within [`WAITED`] of the ACK was waiting for it. Then ACKs leave at once again,
//!   and the next probe comes twice as late (up to [`MAX_BACKOFF`] ACKs; a probe that finds
//!   the peer going on starts the backoff again from [`FIRST_BACKOFF`]). A peer that went
//!   quiet changes nothing.
//!
//! So an application that waits for every ACK pays one hold now and then (at most one per
//! [`MAX_BACKOFF`] messages once settled), and in a ping-pong that does not, half the ACKs
//! are left out. kernel rxe ACKs every request with AckReq at once; a coalesced ACK is one it
//! handles (its completer walks its send queue up to the ACK's PSN).
//!
//! **The order.** Responses that carry data (READ responses, atomic ACKs) go before the QP's
//! requests. A plain ACK or NAK lets one requester packet go before it: in a ping-pong the
//! answer then reaches the peer ahead of the ACK of the question, which only completes a send
//! WR the peer is not waiting on. One packet at most, so ACKs are never starved by a long
//! message. A held ACK is not waiting for its turn: it leaves when its hold ends.
//!
//! **Who calls what.** The RC responder says what each request queued ([`Queued::after`]); the
//! QP (`qp/mod.rs`) hands that over ([`AckCoalescer::request_handled`]), asks whose packet is
//! next ([`AckCoalescer::response_first`], [`AckCoalescer::request_sent`]), runs the hold's
//! timer and releases a held ACK when it leaves RTS; the NIC releases them all before a QP
//! goes away (`Nic::release_acks`). Only this module decides.

use std::time::{Duration, Instant};

use super::responder::Responder;
use crate::timer::{Timer, TimerTable};

/// The longest an ACK is held.
pub const HOLD: Duration = Duration::from_micros(50);

/// A request this soon after a held ACK left at the end of its hold shows that the peer was
/// waiting for the ACK (generous: a peer that was quiet and came back this soon is taken for
/// a waiting one, which only makes ACKs immediate).
pub const WAITED: Duration = Duration::from_micros(200);

/// The most messages one held ACK covers: it leaves when it covers this many.
pub const MAX_COVERED: u32 = 2;

/// ACKs sent at once before the first probe.
pub const FIRST_BACKOFF: u32 = 16;

/// The most ACKs sent at once between two probes.
pub const MAX_BACKOFF: u32 = 1024;

/// What the responder queued with a request just handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queued {
    /// A plain ACK, the only response waiting, of a request that ended a message; it covers
    /// `unacked` messages (those since the last acknowledgement sent).
    PlainAck { unacked: u32 },
    /// Anything else: a NAK, a response with data, an ACK behind other responses, the ACK of
    /// a packet inside a message, or of a duplicate request.
    Other,
}

impl Queued {
    /// What the requests handled so far queued, `before` (if anything), and then a response:
    /// a plain ACK with no other kind of response waiting (`lone_plain_ack`) or anything
    /// else; `ended`: the request ended a message; `unacked`: the messages the ACK covers.
    /// Only a lone plain ACK of a request that ended a message, after nothing but such ones,
    /// may be held.
    pub(crate) fn after(
        before: Option<Queued>,
        lone_plain_ack: bool,
        ended: bool,
        unacked: u32,
    ) -> Queued {
        match before {
            None | Some(Queued::PlainAck { .. }) if lone_plain_ack && ended => {
                Queued::PlainAck { unacked }
            }
            _ => Queued::Other,
        }
    }
}

/// The ACK-holding state of one QP (see the module comment). An ACK is held while the QP's
/// [`Timer::AckHold`] is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckCoalescer {
    /// The peer's requests went on while an ACK was held.
    coalescing: bool,
    /// ACKs to send at once before the next probe.
    until_probe: u32,
    /// What `until_probe` is set to after a failed probe (doubling).
    backoff: u32,
    /// When the last hold ended by its deadline, until the next request.
    expired: Option<Instant>,
    /// A plain ACK or NAK let one requester packet go first (see "The order").
    yielded: bool,
}

impl Default for AckCoalescer {
    fn default() -> Self {
        AckCoalescer {
            coalescing: false,
            until_probe: FIRST_BACKOFF,
            backoff: FIRST_BACKOFF,
            expired: None,
            yielded: false,
        }
    }
}

impl AckCoalescer {
    /// Whether the plain ACK at the head of the responder's queue waits.
    pub(crate) fn holds(timers: &TimerTable) -> bool {
        timers.is_armed(Timer::AckHold)
    }

    /// Whether the response at the head of the responder's queue waits: a plain ACK held.
    pub(crate) fn held(resp: &Responder, timers: &TimerTable) -> bool {
        Self::holds(timers) && resp.next_is_plain_ack()
    }

    /// Whether the responder has a response to send now (a held ACK waits for its deadline).
    pub(crate) fn may_respond(resp: &Responder, timers: &TimerTable) -> bool {
        resp.has_output() && !Self::holds(timers)
    }

    /// Before the requester's packet: whether the responder's next response goes first (see
    /// "The order"); `held` as [`AckCoalescer::held`] said.
    pub(crate) fn response_first(&mut self, resp: &Responder, held: bool) -> bool {
        let first = (!resp.next_is_plain_ack() || self.yielded) && !held;
        if first {
            self.yielded = false;
        }
        first
    }

    /// The requester sent a packet: a plain ACK waiting behind it has had it go first (a held
    /// one has not: it must not jump the next request).
    pub(crate) fn request_sent(&mut self, resp: &Responder, held: bool) {
        self.yielded = resp.next_is_plain_ack() && !held;
    }

    /// The responder handled a request at `now`: what it queued, if anything, is held or
    /// released (ACKs are held in RTS only, `in_rts`); `ack_timeout` is the QP's local ACK
    /// timeout (`None`: infinite).
    pub(crate) fn request_handled(
        &mut self,
        resp: &mut Responder,
        in_rts: bool,
        now: Instant,
        ack_timeout: Option<Duration>,
        timers: &mut TimerTable,
    ) {
        if let Some(queued) = resp.take_queued() {
            if in_rts {
                self.queued(queued, now, ack_timeout, timers);
            } else {
                self.release(timers);
            }
        }
    }

    /// The responder queued `what` at `now`; `ack_timeout` is the QP's local ACK timeout
    /// (`None`: infinite).
    pub(crate) fn queued(
        &mut self,
        what: Queued,
        now: Instant,
        ack_timeout: Option<Duration>,
        timers: &mut TimerTable,
    ) {
        if self.expired.take().is_some_and(|at| now < at + WAITED) {
            // The peer was waiting for the ACK whose hold ended.
            self.coalescing = false;
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            trace_event!(target: "softrnic::rc", backoff = self.backoff, "ACK coalescing off: the peer waited for the held ACK");
            self.until_probe = self.backoff;
        }
        let Queued::PlainAck { unacked } = what else {
            self.release(timers);
            return;
        };
        if Self::holds(timers) {
            // The peer went on without the ACK.
            if !self.coalescing {
                trace_event!(target: "softrnic::rc", "ACK coalescing on: the peer went on without the held ACK");
            }
            self.coalescing = true;
            self.backoff = FIRST_BACKOFF;
            if unacked >= MAX_COVERED {
                self.release(timers);
            }
            return;
        }
        if unacked >= MAX_COVERED {
            return;
        }
        if !self.coalescing {
            if self.until_probe > 0 {
                self.until_probe -= 1;
                return;
            }
            self.until_probe = self.backoff;
        }
        let hold = ack_timeout.map_or(HOLD, |t| HOLD.min(t / 4));
        trace_event!(target: "softrnic::rc", hold_us = hold.as_micros() as u64, "ACK held");
        timers.set(Timer::AckHold, now + hold);
    }

    /// At `now`: if the hold has ended, the ACK leaves, and the next request says whether
    /// the peer was waiting for it.
    pub(crate) fn handle_timeout(&mut self, now: Instant, timers: &mut TimerTable) {
        if timers.expire(Timer::AckHold, now) {
            self.expired = Some(now);
        }
    }

    /// Lets the held ACK go now (the coalescing state stays).
    pub(crate) fn release(&mut self, timers: &mut TimerTable) {
        timers.stop(Timer::AckHold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Option<Duration> = Some(Duration::from_millis(67));
    const ONE: Queued = Queued::PlainAck { unacked: 1 };
    const TWO: Queued = Queued::PlainAck { unacked: 2 };

    /// A QP that has found its peer not waiting for ACKs.
    fn coalescing() -> AckCoalescer {
        AckCoalescer {
            coalescing: true,
            ..AckCoalescer::default()
        }
    }

    fn holds(timers: &TimerTable) -> bool {
        AckCoalescer::holds(timers)
    }

    /// Queues `n` ACKs of one message each at `now`, each sent before the next (as a peer
    /// that waits sees them); how many were held.
    fn waited_for(c: &mut AckCoalescer, n: u32, now: Instant, timers: &mut TimerTable) -> u32 {
        (0..n)
            .filter(|_| {
                c.queued(ONE, now, T, timers);
                let held = holds(timers);
                c.release(timers);
                held
            })
            .count() as u32
    }

    #[test]
    fn acks_leave_at_once_until_a_probe_which_a_waiting_peer_makes_rarer() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        let mut c = AckCoalescer::default();
        assert_eq!(waited_for(&mut c, FIRST_BACKOFF, t0, &mut timers), 0);
        // The probe: held until its deadline, which is the QP's next wakeup.
        c.queued(ONE, t0, T, &mut timers);
        assert!(holds(&timers));
        assert_eq!(timers.next_timeout(), Some(t0 + HOLD));
        // Nothing came, and the next request comes right after the ACK left: the peer was
        // waiting. Twice as many immediate ACKs before the next probe.
        let end = t0 + HOLD;
        c.handle_timeout(end - Duration::from_nanos(1), &mut timers);
        assert!(holds(&timers), "not yet");
        c.handle_timeout(end, &mut timers);
        assert!(!holds(&timers));
        assert_eq!(waited_for(&mut c, 2 * FIRST_BACKOFF, end, &mut timers), 0);
        assert_eq!(waited_for(&mut c, 1, end, &mut timers), 1);
        // The backoff stops growing at MAX_BACKOFF (every probe's hold ends unanswered).
        for _ in 0..20 {
            c.until_probe = 0;
            c.queued(ONE, end, T, &mut timers);
            assert!(holds(&timers));
            c.handle_timeout(end + HOLD, &mut timers);
            c.queued(ONE, end + HOLD, T, &mut timers);
            c.release(&mut timers);
        }
        assert_eq!(c.backoff, MAX_BACKOFF);
    }

    #[test]
    fn a_peer_that_goes_on_gets_one_ack_per_max_covered_messages() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        let mut c = AckCoalescer::default();
        waited_for(&mut c, FIRST_BACKOFF, t0, &mut timers);
        c.queued(ONE, t0, T, &mut timers);
        assert!(holds(&timers));
        // The next message comes while the ACK is held: it leaves, covering both.
        c.queued(TWO, t0, T, &mut timers);
        assert!(!holds(&timers) && c.coalescing);
        // Coalescing now: every other ACK leaves.
        let mut sent = 0;
        for _ in 0..8 {
            c.queued(ONE, t0, T, &mut timers);
            c.queued(TWO, t0, T, &mut timers);
            sent += u32::from(!holds(&timers));
        }
        assert_eq!(sent, 8);
        // An ACK that already covers MAX_COVERED messages (the last of unsignaled ones) is
        // never held.
        c.queued(Queued::PlainAck { unacked: 16 }, t0, T, &mut timers);
        assert!(!holds(&timers));
    }

    #[test]
    fn anything_but_a_lone_plain_ack_releases_the_held_one() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        let mut c = coalescing();
        c.queued(ONE, t0, T, &mut timers);
        assert!(holds(&timers));
        c.queued(Queued::Other, t0, T, &mut timers);
        assert!(!holds(&timers));
    }

    #[test]
    fn a_peer_that_went_quiet_is_not_taken_for_a_waiting_one() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        let mut c = coalescing();
        c.queued(ONE, t0, T, &mut timers);
        // The peer stops; the hold ends; its next request comes much later.
        c.handle_timeout(t0 + HOLD, &mut timers);
        assert!(!holds(&timers));
        let later = t0 + HOLD + WAITED;
        c.queued(ONE, later, T, &mut timers);
        assert!(holds(&timers) && c.coalescing && c.backoff == FIRST_BACKOFF);
    }

    #[test]
    fn the_hold_is_at_most_a_quarter_of_the_local_ack_timeout() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        let mut c = coalescing();
        let short = Some(Duration::from_micros(32)); // timeout 3
        c.queued(ONE, t0, short, &mut timers);
        assert_eq!(
            timers.get(Timer::AckHold),
            Some(t0 + Duration::from_micros(8))
        );
        c.release(&mut timers);
        c.queued(ONE, t0, None, &mut timers);
        assert_eq!(timers.get(Timer::AckHold), Some(t0 + HOLD));
    }
}
