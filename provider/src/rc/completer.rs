//! The RC completer: what the requester does with the responder's packets (IBTA 9.7.5.1.4
//! "Requester: response processing", 9.7.6 timeouts and retries; kernel rxe's `rxe_comp.c`).
//!
//! * **ACK** for PSN `a` acknowledges every PSN up to `a` (coalesced ACKs, 9.7.5.1.4): the
//!   SEND and WRITE WQEs it covers complete in order. READ and atomic WQEs complete only with
//!   their responses; an ACK beyond one means its responses were lost (an "implied NAK"), and
//!   the requester resends from the oldest unacknowledged PSN.
//! * **READ responses** implicitly acknowledge all earlier requests; each is written to the
//!   READ's local SGEs at its offset. One ahead of the expected response (reordered, or
//!   after a loss) is placed too, up to 64 PSNs ahead, and the READ completes once every
//!   response has come; a response still missing is asked for again after the retransmit
//!   timer: go-back-N, resuming the READ at the first missing response (further ahead, a
//!   response is dropped and the READ resumed at once).
//! * A FLUSH or ATOMIC WRITE completes with its zero-length RDMA READ RESPONSE ONLY.
//! * **ATOMIC ACKNOWLEDGE** carries the original remote value, written to the local buffer.
//! * **NAKs**: PSN sequence error (resend from the NAK's PSN, counting against `retry_cnt`),
//!   RNR (wait the RNR timer, then resend; counting against `rnr_retry`, 7 = infinite), and the
//!   fatal ones, completed as `IBV_WC_REM_INV_REQ_ERR`, `IBV_WC_REM_ACCESS_ERR`,
//!   `IBV_WC_REM_OP_ERR`.
//! * **Local ACK timeout** (4.096 µs × 2^timeout after the last progress): resend from the
//!   oldest unacknowledged PSN; after `retry_cnt` retries, `IBV_WC_RETRY_EXC_ERR`. Before it,
//!   early resends after a measured round trip, which cost no retry (`requester/rto.rs`).
//!
//! Every completion error moves the QP to ERR, which flushes the rest.

use std::cmp::Ordering;
use std::time::{Duration, Instant};

use softrnic_wire::aeth::{NakCode, Syndrome};
use softrnic_wire::opcode::{Operation, Position};
use softrnic_wire::roce::RocePacket;
use softrnic_wire::Psn;

use crate::mr::MrTable;
use crate::qp::context::{Events, QpContext};
use crate::qp::requester::Requester;
use crate::qp::transmit::scatter;
use crate::qp_state::{rnr_retries, transport_retries, Retries};
use crate::timer::{Timer, TimerTable};
use crate::wc::WcStatus;
use crate::wr::SendOpcode;

/// How far ahead of the expected response a READ response is placed (and noted in a `u64`).
const READ_AHEAD: u32 = 64;

/// What to do with a READ or atomic WQE that an acknowledgement reaches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AtRdAtomic {
    /// An ACK reached it: its responses were lost, resend.
    Retry,
    /// A response or NAK reached it: stop there, the caller handles it.
    Stop,
}

impl Requester {
    /// Handles a response packet (ACK, NAK, READ response, atomic ACK) for this QP.
    pub(crate) fn handle_response(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        pkt: &RocePacket<'_>,
        timers: &mut TimerTable,
        mrs: &MrTable,
        ev: &mut Events,
    ) {
        let psn = pkt.repr.bth.psn;
        // A response to a PSN never sent is a ghost (IBTA 9.7.5.1.4): drop it.
        if psn.cmp_modular(self.max_psn) != Ordering::Less {
            return;
        }
        let Ok(info) = pkt.repr.info() else { return };
        match info.operation {
            Operation::Acknowledge => {
                let Some(aeth) = pkt.repr.aeth else { return };
                match aeth.syndrome {
                    Syndrome::Ack(_) => {
                        self.ack_through(ctx, now, psn, AtRdAtomic::Retry, timers, ev);
                    }
                    Syndrome::RnrNak(timer) => {
                        debug_event!(target: "softrnic::rc", qpn = ctx.qpn, psn = psn.value(), wait_us = timer.micros(), "RNR NAK received");
                        ev.counters.rcvd_rnr_err += 1;
                        self.ack_through(ctx, now, psn.sub(1), AtRdAtomic::Stop, timers, ev);
                        if !self.front_holds(psn) {
                            return;
                        }
                        if self.rc.rnr.try_consume() {
                            self.go_back(ctx, psn);
                            self.rc.rnr_wait = true;
                            timers.stop(Timer::Retransmit);
                            let wait = Duration::from_micros(u64::from(timer.micros()));
                            timers.set(Timer::Rnr, now + wait);
                        } else {
                            ev.counters.retry_rnr_exceeded_err += 1;
                            self.fail_front(ctx, WcStatus::RnrRetryExcErr, ev);
                        }
                    }
                    Syndrome::Nak(code) => {
                        debug_event!(target: "softrnic::rc", qpn = ctx.qpn, psn = psn.value(), code = ?code, "NAK received");
                        ev.counters.rcvd_seq_err += u64::from(code == NakCode::PsnSequenceError);
                        self.ack_through(ctx, now, psn.sub(1), AtRdAtomic::Stop, timers, ev);
                        if !self.front_holds(psn) {
                            return;
                        }
                        let status = match code {
                            NakCode::PsnSequenceError => {
                                // One for a PSN acknowledged since (a later ACK overtook
                                // it) or for the one being resent already (a duplicate)
                                // says nothing new: going back before `una` would stall
                                // the window until the timer, and each would cost a retry.
                                if psn.cmp_modular(self.una) == Ordering::Less
                                    || self.rc.resend_probe == Some(psn.add(1))
                                {
                                    return;
                                }
                                self.retry_from(ctx, psn, ev);
                                // One packet first: a responder that held what followed the
                                // lost one acknowledges all of it once that one arrives.
                                self.rc.resend_probe = Some(psn.add(1));
                                return;
                            }
                            NakCode::InvalidRequest | NakCode::InvalidRdRequest => {
                                WcStatus::RemInvReqErr
                            }
                            NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                            NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                        };
                        self.fail_front(ctx, status, ev);
                    }
                }
            }
            Operation::RdmaReadResponse => {
                self.ack_through(ctx, now, psn.sub(1), AtRdAtomic::Stop, timers, ev);
                let answers = |op| {
                    matches!(
                        op,
                        SendOpcode::RdmaRead | SendOpcode::Flush | SendOpcode::AtomicWrite
                    )
                };
                if self.read_response_ahead(ctx, pkt, info.position, mrs, ev) {
                    return;
                }
                if !self.expected_response(ctx, psn, answers, ev) {
                    return;
                }
                if self
                    .sq
                    .front()
                    .is_some_and(|w| w.opcode != SendOpcode::RdmaRead)
                {
                    // A FLUSH's or ATOMIC WRITE's zero-length answer.
                    self.reply_response(ctx, now, pkt, info.position, timers, ev);
                    return;
                }
                self.read_response(ctx, now, pkt, info.position, timers, mrs, ev);
            }
            Operation::AtomicAcknowledge => {
                self.ack_through(ctx, now, psn.sub(1), AtRdAtomic::Stop, timers, ev);
                if !self.expected_response(ctx, psn, SendOpcode::is_atomic, ev) {
                    return;
                }
                let Some(ack) = pkt.repr.atomic_ack_eth else {
                    return;
                };
                let w = self.sq.front().expect("expected_response saw it");
                let bytes = ack.orig_rem_dt.to_ne_bytes();
                if scatter(mrs, ctx.pd, &w.sges, 0, &bytes).is_err() {
                    self.fail_front(ctx, WcStatus::LocProtErr, ev);
                    return;
                }
                self.una = psn.add(1);
                self.complete_front(ctx, ev);
                self.progress(ctx, now, timers);
            }
            _ => {}
        }
    }

    /// The local ACK timeout and the RNR timer.
    pub(crate) fn handle_timeout(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        timers: &mut TimerTable,
        ev: &mut Events,
    ) {
        if timers.expire(Timer::Rnr, now) {
            self.rc.rnr_wait = false;
        }
        if timers.expire(Timer::Retransmit, now) && self.outstanding() && !self.rc.rnr_wait {
            if let Some(at) = ctx.ack_timeout.and_then(|d| self.rc.rto.postponed(now, d)) {
                timers.set(Timer::Retransmit, at);
                return;
            }
            let una = self.una;
            // An early resend (`requester/rto.rs`) costs no retry; one a whole local ACK
            // timeout after the last progress does.
            let counted = ctx.ack_timeout.is_none_or(|d| self.rc.rto.fired(now, d));
            // The round-trip estimate says why the timer waited as long as it did.
            let (srtt_us, rttvar_us) = self.rc.rto.estimate().map_or((0, 0), |(s, v)| {
                (s.as_micros() as u64, v.as_micros() as u64)
            });
            // `unasked`: packets sent since one last asked for an ACK (none would come).
            let unasked = self.rc.unasked.packets;
            debug_event!(target: "softrnic::rc", qpn = ctx.qpn, psn = una.value(), next = self.next_psn.value(), max = self.max_psn.value(), waits = self.seat.waits(), unasked, counted, srtt_us, rttvar_us, "local ACK timeout");
            let resent = if counted {
                self.rc.held = None;
                self.retry_from(ctx, una, ev)
            } else {
                self.rc.held = Some(self.sent_through());
                self.go_back(ctx, una);
                true
            };
            ev.counters.timeout_resends += u64::from(resent);
            self.rc.resend_probe = Some(una.add(1));
        }
    }

    /// Resets the retry budgets (on RTS, and whenever the peer makes progress).
    pub(crate) fn reset_retries(&mut self, ctx: &QpContext) {
        self.rc.retry = transport_retries(ctx.retry_cnt).unwrap_or(Retries::Limited(0));
        self.rc.rnr = rnr_retries(ctx.rnr_retry).unwrap_or(Retries::Limited(0));
    }

    fn front_holds(&self, psn: Psn) -> bool {
        self.sq.front().is_some_and(|w| w.holds(psn))
    }

    /// Resends from `psn` if the transport retry budget allows; otherwise
    /// `IBV_WC_RETRY_EXC_ERR`. Says whether it resent.
    fn retry_from(&mut self, ctx: &QpContext, psn: Psn, ev: &mut Events) -> bool {
        if self.rc.retry.try_consume() {
            ev.counters.completer_retry_err += 1;
            self.go_back(ctx, psn);
            true
        } else {
            ev.counters.retry_exceeded_err += 1;
            self.fail_front(ctx, WcStatus::RetryExcErr, ev);
            false
        }
    }

    /// Whether a READ response or atomic ACK at `psn` is the one awaited: the front WQE is a
    /// started WQE whose opcode `answers` holding `psn`, and `psn` is the oldest unacknowledged. A response beyond
    /// it means earlier ones were lost (go back once); one before it is a duplicate.
    fn expected_response(
        &mut self,
        ctx: &QpContext,
        psn: Psn,
        answers: fn(SendOpcode) -> bool,
        ev: &mut Events,
    ) -> bool {
        let ok_front = self
            .sq
            .front()
            .is_some_and(|w| w.holds(psn) && answers(w.opcode));
        if !ok_front {
            // Not a response to the oldest WQE: a duplicate of a completed one, or garbage.
            return false;
        }
        match psn.cmp_modular(self.una) {
            Ordering::Equal => true,
            Ordering::Less => false,
            Ordering::Greater => {
                if self.rc.last_go_back != Some(self.una) {
                    let una = self.una;
                    self.retry_from(ctx, una, ev);
                }
                false
            }
        }
    }

    /// A response of the front READ ahead of the expected one (`una`), less than
    /// [`READ_AHEAD`] PSNs ahead: placed in the READ's buffer at its offset and noted in
    /// `read_ahead`, so that it need not come again; `una` moves past it once the responses
    /// before it have come (`read_response`). It does not go back: on a path that reorders,
    /// the responses of one READ, sent back to back, arrive in nearly any order, and going
    /// back at each one ahead had the responder restart the READ each time (a 64-packet READ
    /// through 2 ms of jitter took some 2000 responses). A response that is really lost is
    /// resent after the retransmit timer, as the last of a READ always was. Returns whether
    /// it handled `pkt`.
    fn read_response_ahead(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        position: Position,
        mrs: &MrTable,
        ev: &mut Events,
    ) -> bool {
        let psn = pkt.repr.bth.psn;
        let ahead = psn.distance_from(self.una);
        let Some(w) = self.sq.front() else {
            return false;
        };
        if w.opcode != SendOpcode::RdmaRead
            || !w.holds(psn)
            || !w.holds(self.una)
            || ahead == 0
            || ahead >= READ_AHEAD
        {
            return false;
        }
        if self.rc.read_ahead & (1 << ahead) == 0 {
            let k = psn.distance_from(w.first_psn);
            let ends = matches!(position, Position::Last | Position::Only);
            let offset = k * ctx.pmtu;
            let expect_len = (w.total - offset).min(ctx.pmtu);
            if ends != (k == w.npkts - 1) || pkt.payload.len() != expect_len as usize {
                self.fail_front(ctx, WcStatus::BadRespErr, ev);
                return true;
            }
            if scatter(mrs, ctx.pd, &w.sges, offset, pkt.payload).is_err() {
                self.fail_front(ctx, WcStatus::LocProtErr, ev);
                return true;
            }
            self.rc.read_ahead |= 1 << ahead;
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn read_response(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        pkt: &RocePacket<'_>,
        position: Position,
        timers: &mut TimerTable,
        mrs: &MrTable,
        ev: &mut Events,
    ) {
        let psn = pkt.repr.bth.psn;
        let w = self.sq.front().expect("expected_response saw it");
        let k = psn.distance_from(w.first_psn);
        // The last response ends the READ; the others do not. (The FIRST/MIDDLE distinction
        // is not checked: after a retry the responder numbers a resumed READ's responses from
        // its new FIRST, while responses to the original request may still arrive.)
        let ends = matches!(position, Position::Last | Position::Only);
        let is_last = k == w.npkts - 1;
        let offset = k * ctx.pmtu;
        let expect_len = (w.total - offset).min(ctx.pmtu);
        if ends != is_last || pkt.payload.len() != expect_len as usize {
            self.fail_front(ctx, WcStatus::BadRespErr, ev);
            return;
        }
        if scatter(mrs, ctx.pd, &w.sges, offset, pkt.payload).is_err() {
            self.fail_front(ctx, WcStatus::LocProtErr, ev);
            return;
        }
        self.una = psn.add(1);
        // The responses placed ahead of it that now follow it.
        self.rc.read_ahead >>= 1;
        while self.rc.read_ahead & 1 == 1 {
            self.una = self.una.add(1);
            self.rc.read_ahead >>= 1;
        }
        if self.una == w.first_psn.add(w.npkts) {
            self.rc.read_ahead = 0;
            self.complete_front(ctx, ev);
        }
        self.progress(ctx, now, timers);
    }

    /// Acknowledges every PSN up to and including `a`.
    fn ack_through(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        a: Psn,
        at_rd_atomic: AtRdAtomic,
        timers: &mut TimerTable,
        ev: &mut Events,
    ) {
        let end = a.add(1);
        if end.cmp_modular(self.una) != Ordering::Greater {
            return; // nothing new: a duplicate or stale acknowledgement
        }
        let old_una = self.una;
        let mut una = end;
        while let Some(w) = self.sq.front() {
            if !w.started || w.is_local() {
                break; // a local operation that ran left the queue with the WQE before it
            }
            if w.is_rd_atomic() {
                if w.first_psn.cmp_modular(una) == Ordering::Less {
                    // The acknowledgement reaches into the READ/atomic: it is not its response.
                    una = if w.first_psn.cmp_modular(self.una) == Ordering::Greater {
                        w.first_psn
                    } else {
                        self.una
                    };
                    if at_rd_atomic == AtRdAtomic::Retry && self.rc.last_go_back != Some(una) {
                        if una != old_una {
                            // It acknowledged the WQEs before the READ/atomic: progress,
                            // which restores the retry budget before this implied NAK draws
                            // on it. On a path that reorders, this ACK may merely have
                            // overtaken the response; a budget spent by the timeouts before
                            // the progress must not end the QP.
                            self.reset_retries(ctx);
                        }
                        self.una = una;
                        self.retry_from(ctx, una, ev);
                    }
                }
                break;
            }
            if w.last_psn().cmp_modular(a) == Ordering::Greater {
                break; // partly acknowledged
            }
            self.complete_front(ctx, ev);
        }
        if una.cmp_modular(self.una) == Ordering::Greater {
            self.una = una;
        }
        if self.una != old_una {
            self.progress(ctx, now, timers);
        }
    }

    /// Pops the front WQE, completing it successfully (if signaled).
    pub(super) fn complete_front(&mut self, ctx: &QpContext, ev: &mut Events) {
        let Some(w) = self.sq.pop_front() else { return };
        w.complete_ok(ctx.qpn, ev);
        if self.cur == 0 {
            // It was about to be resent (after a go-back): the next WQE starts afresh.
            self.cur_offset = 0;
        } else {
            self.cur -= 1;
        }
        // Local operations that ran behind it complete now, in order.
        self.complete_done_local_ops(ctx, ev);
    }

    /// The peer made progress (`una` moved): fresh retry budgets, the timer restarted, and
    /// transmission moved past anything now acknowledged.
    ///
    /// After an early resend, progress past the probe's PSN shows that the timer fired on a
    /// peer that was slow, not on a loss (as F-RTO tells a spurious timeout, RFC 5682): what
    /// was sent before the probe reaches the peer before it, so the packets between `una`
    /// and where transmission was ([`RcState::held`]) are waiting there, or lost. Resending
    /// them repeated a whole window each time a receiver's thread paused past the early
    /// interval (hundreds of duplicates a second under `ib_write_bw`). So transmission goes
    /// on from where it was: a loss among them shows in a sequence NAK once later packets
    /// arrive, and in the responder's answer to the probe, which NAKs a gap it holds
    /// packets behind (`rc/responder/duplicate.rs`); failing both, the timer fires again.
    pub(super) fn progress(&mut self, ctx: &QpContext, now: Instant, timers: &mut TimerTable) {
        self.reset_retries(ctx);
        self.rc.resend_probe = None;
        let held = self.rc.held.take();
        self.rc.rto.progress(self.una, now);
        match ctx.ack_timeout {
            Some(d) if self.outstanding() => timers.set(Timer::Retransmit, self.rc.rto.arm(now, d)),
            _ => timers.stop(Timer::Retransmit),
        }
        if self.next_psn.cmp_modular(self.una) == Ordering::Less {
            let una = self.una;
            if let Some(h) = held.filter(|h| h.cmp_modular(una) == Ordering::Greater) {
                debug_event!(target: "softrnic::rc", qpn = ctx.qpn, una = una.value(), psn = h.value(), "early resend was spurious: resume");
                self.resume_at(ctx, h);
                self.rc.last_go_back = None;
            } else if self.sq.iter().any(|w| w.holds(una)) {
                self.go_back(ctx, una);
                self.rc.last_go_back = None;
            } else {
                self.cur = self.sq.iter().take_while(|w| w.started).count();
                self.cur_offset = 0;
                self.next_psn = una;
            }
        }
    }
}
