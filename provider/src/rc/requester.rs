//! What RC adds to the requester of [`crate::qp::requester`] (IBTA 9.7.2.1.1 on AckReq, 9.7.6
//! "Requester: timeouts and retries"): when a packet asks for an ACK, go-back-N
//! retransmission from the oldest unacknowledged PSN, the retransmit timer (`requester/rto.rs`),
//! the device's send window (`requester/window.rs`), and FLUSH and ATOMIC WRITE (IBTA 1.5,
//! `requester/flush_atomic_write.rs`). The completer (`completer.rs`) processes the
//! responses: it moves `una`, pops completed WQEs, and calls [`Requester::go_back`].
//!
//! A retransmit ([`Requester::go_back`]) moves `cur` back to the WQE holding a PSN, resuming a
//! multi-packet message at that packet, and an RDMA READ at the response it still waits for
//! (IBTA 9.7.6.2.2: the re-issued READ asks only for the rest).

use std::time::Instant;

use softrnic_wire::Psn;

use crate::qp::context::QpContext;
use crate::qp::requester::Requester;
use crate::qp_state::Retries;
use crate::timer::{Timer, TimerTable};
use crate::wr::SendOpcode;

pub(crate) mod flush_atomic_write;
pub mod rto;
pub mod window;

pub use window::{DeviceWindow, Seat, DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS};

/// AckReq is set on every this-many packets at least with a whole window: a quarter of
/// [`WINDOW_PSNS`], and no fewer than half of [`MIN_SHARE_PSNS`].
pub const ACK_REQ_INTERVAL: u32 = ack_req_interval(WINDOW_PSNS);

/// How many packets go without AckReq at most with a window of `window` PSNs: a quarter of
/// it, so that ACKs open the window before it closes, but no fewer than half the smallest
/// share (IBTA 9.7.2.1.1 leaves the frequency to the requester; [`Requester::ack_req`] says
/// when the last packet of a message asks).
pub const fn ack_req_interval(window: u32) -> u32 {
    let quarter = window / 4;
    if quarter > MIN_SHARE_PSNS / 2 {
        quarter
    } else {
        MIN_SHARE_PSNS / 2
    }
}

/// What RC's acknowledgements and retransmissions keep in a [`Requester`] (its field `rc`).
#[derive(Debug)]
pub(crate) struct RcState {
    /// Retries left after timeouts and sequence NAKs / after RNR NAKs.
    pub retry: Retries,
    pub rnr: Retries,
    /// Waiting for the RNR timer: send nothing.
    pub rnr_wait: bool,
    /// The `una` of the last go-back, so that a burst of late responses retransmits once.
    pub last_go_back: Option<Psn>,
    /// What went without AckReq since a packet last asked.
    pub unasked: Unasked,
    /// The round-trip estimate the retransmit timer runs by (`requester/rto.rs`).
    pub rto: rto::Rto,
    /// After a sequence NAK or a retransmit timeout: the PSN before which resending may go
    /// until the peer makes progress. A responder that held what followed the lost packet
    /// acknowledges all of it once the lost one arrives (`rc/responder/reorder.rs`);
    /// resending the whole window meanwhile would only repeat what it has.
    pub resend_probe: Option<Psn>,
    /// The next SEND or WRITE packet asks for an ACK whatever else holds: it is the one
    /// allowed past a full window so that an ACK comes (`qp/requester.rs`).
    pub ask_next: bool,
    /// READ responses of the front WQE that arrived ahead of `una` and were placed: bit `i`
    /// is PSN `una + i` (`completer.rs`).
    pub read_ahead: u64,
    /// After an early resend (`requester/rto.rs`): the furthest PSN sent before going back.
    /// The packets before it may still wait unread at the peer, so they stay counted in the
    /// device's send window (`qp/window.rs`) until the peer makes progress or a counted
    /// timeout says they were lost; progress past the probe resumes transmission here, not
    /// at `una` (`Requester::progress`).
    pub held: Option<Psn>,
}

impl RcState {
    /// The state of a requester that has sent nothing (the completer's `reset_retries` sets
    /// the retry budgets on RTS).
    pub fn new() -> RcState {
        RcState {
            retry: Retries::Limited(0),
            rnr: Retries::Limited(0),
            rnr_wait: false,
            last_go_back: None,
            unasked: Unasked::default(),
            rto: rto::Rto::default(),
            resend_probe: None,
            ask_next: false,
            read_ahead: 0,
            held: None,
        }
    }
}

/// What the requester sent without AckReq since a packet last asked (see
/// [`Requester::ack_req`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unasked {
    /// Packets.
    pub packets: u32,
    /// Messages whose last packet did not ask.
    pub messages: u32,
}

impl Requester {
    /// Whether packets are sent and not acknowledged.
    pub fn outstanding(&self) -> bool {
        self.una != self.max_psn
    }

    /// Whether the SEND or RDMA WRITE packet `psn` (the `last` of its message or not, of a
    /// `signaled` WR, a `resend` or not) asks for an ACK, and counts it.
    ///
    /// The last packet of a SEND or RDMA WRITE asks for an ACK (AckReq) when the WR is
    /// signaled (its completion waits for that ACK), when the messages that asked for none
    /// since the last ask would fill half the send queue (so that posting never stalls for
    /// want of ACKs), and when it is a resend (the ACK it asks for is what ends the retry).
    /// An unsignaled WR's last packet asks for none the first time: the responder may then
    /// leave it unacknowledged until a later packet asks (IBTA 9.7.5.1 lets it coalesce ACKs;
    /// rxe, like softrnic, ACKs only AckReq), so a program that signals every Nth send, as
    /// perftest's bandwidth tests do (every 100th, `--cq-mod`), costs its peer one ACK per N
    /// messages instead of one per message. A tail of unsignaled WRs that nothing follows is
    /// acknowledged once the ACK timer resends it (with timeout 0, no timer: when a later WR
    /// asks). Every [`ack_req_interval`] packets of the QP's window ask in any case.
    pub(crate) fn ack_req(
        &mut self,
        ctx: &QpContext,
        psn: Psn,
        last: bool,
        signaled: bool,
        resend: bool,
    ) -> bool {
        self.rc.unasked.packets += 1;
        // Asking once the unasked messages would fill half the send queue frees its slots
        // before it is full.
        let sq_half = (self.max_send_wr / 2).max(1) as u32;
        let asks = signaled || resend || self.rc.unasked.messages + 1 >= sq_half;
        // UC and UD packets never ask for an ACK (rxe's captures: AckReq 0).
        let interval = ack_req_interval(self.seat.window());
        // A resend probe asks wherever it is in its message: its ACK is what says how far
        // the responder got.
        let probe = resend && self.rc.resend_probe == Some(psn.add(1));
        // The packet after which the window lets no more leave asks too: a requester that
        // stopped there without asking waited for its retransmit timer (with 16 QPs
        // writing, one resend every few messages).
        let stops = self
            .seat
            .stops_after(psn.add(1).distance_from(self.una), last)
            || std::mem::take(&mut self.rc.ask_next);
        let ack_req = ctx.is_reliable()
            && ((last && asks) || probe || stops || self.rc.unasked.packets >= interval);
        if ack_req {
            self.rc.unasked = Unasked::default();
        } else if last {
            self.rc.unasked.messages += 1;
        }
        ack_req
    }

    /// Records packet `psn`, sent at `now`, for the round-trip estimate the retransmit timer
    /// runs by (`requester/rto.rs`). UC and UD expect no ACK: nothing to time.
    pub(crate) fn time_packet(
        &mut self,
        ctx: &QpContext,
        psn: Psn,
        now: Instant,
        resend: bool,
        ack_req: bool,
    ) {
        if ctx.is_reliable() {
            self.rc.rto.sent(psn, now, resend, ack_req);
        }
    }

    /// Starts the retransmit timer (the local ACK timeout, IBTA 9.7.6.1) after a packet is
    /// sent, unless it runs. UC and UD expect no ACK: nothing to time out.
    pub(crate) fn arm_retransmit(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        timers: &mut TimerTable,
    ) {
        if ctx.is_reliable() && !timers.is_armed(Timer::Retransmit) {
            if let Some(d) = ctx.ack_timeout {
                timers.set(Timer::Retransmit, self.rc.rto.arm(now, d));
            }
        }
    }

    /// The PSN after the furthest one sent: `next_psn`, or where it was before an early
    /// resend went back from it, if further.
    pub fn sent_through(&self) -> Psn {
        match self.rc.held {
            Some(h) if h.cmp_modular(self.next_psn) == std::cmp::Ordering::Greater => h,
            _ => self.next_psn,
        }
    }

    /// Moves transmission back to `psn` (which some WQE holds), to resend from there.
    pub fn go_back(&mut self, ctx: &QpContext, psn: Psn) {
        debug_event!(target: "softrnic::rc", qpn = ctx.qpn, psn = psn.value(), "resend from PSN");
        self.rc.last_go_back = Some(psn);
        self.resume_at(ctx, psn);
    }

    /// Moves transmission to `psn`: a PSN some started WQE holds, or `max_psn`, the one after
    /// everything ever sent (transmission then goes on with the first WQE not started). Any
    /// other PSN leaves it where it is.
    pub(crate) fn resume_at(&mut self, ctx: &QpContext, psn: Psn) {
        let Some(i) = self.sq.iter().position(|w| w.holds(psn)) else {
            if psn == self.max_psn {
                self.cur = self.sq.iter().take_while(|w| w.started).count();
                self.cur_offset = 0;
                self.next_psn = psn;
            }
            return;
        };
        let w = &self.sq[i];
        self.cur = i;
        self.cur_offset = match w.opcode {
            SendOpcode::AtomicCmpAndSwp
            | SendOpcode::AtomicFetchAndAdd
            | SendOpcode::Flush
            | SendOpcode::AtomicWrite => 0,
            _ => psn.distance_from(w.first_psn) * ctx.pmtu,
        };
        self.next_psn = psn;
    }
}
