//! The requester of a QP of any transport (IBTA 9.7.2 "Requester: generating request
//! packets"): transmission from the send queue, segmentation by path MTU ([`super::segment`]),
//! PSN assignment with the 24-bit wrap, the opcodes of each operation, the READ/atomic limit
//! (`max_rd_atomic`), fences, and the check of local buffers before a WR starts.
//!
//! The send queue (`send_queue.rs`: the WQEs and `ibv_post_send`'s checks) holds every work
//! request that has not completed. `cur`/`cur_offset` say where transmission stands;
//! everything before it has been sent at least once. PSNs of a WQE are fixed when it is first
//! sent; retransmissions reuse them.
//!
//! What each transport adds lives with it:
//!
//! * RC (`rc/requester.rs` and `rc/requester/`): the AckReq policy, go-back-N retransmission
//!   from the oldest unacknowledged PSN (IBTA 9.7.6), the retransmit timer, the send window,
//!   FLUSH and ATOMIC WRITE; its completer (`rc/completer.rs`) moves `una` and pops the
//!   front. The state those need is [`Requester`]'s field `rc` (`RcState`), which UC and UD
//!   leave as it starts: `ctx.is_reliable()` says whether a packet asks for an ACK and is
//!   timed.
//! * UC (`uc/requester.rs`): which operations it has, completion at hand-out.
//! * UD (`ud/requester.rs`): the WR checks and the per-WR addressing (DestQP, DETH).

use std::collections::VecDeque;
use std::time::Instant;

use softrnic_wire::atomic_eth::AtomicEthRepr;
use softrnic_wire::ieth::IethRepr;
use softrnic_wire::immdt::ImmDtRepr;
use softrnic_wire::opcode::ExtHeader;
use softrnic_wire::reth::RethRepr;
use softrnic_wire::xrceth::XrcethRepr;
use softrnic_wire::{Opcode, Psn};

use crate::mr::MrTable;
use crate::mr::PinFor;
use crate::qp::context::{CqSide, Events, QpContext};
use crate::qp::segment::{packets_for, MessageKind, Segments};
use crate::qp::send_queue::SendWqe;
use crate::qp::transmit::{Payload, Transmit};
use crate::rc::requester::{flush_atomic_write, RcState, Seat, Unasked};
use crate::timer::TimerTable;
use crate::wc::WcStatus;
use crate::wr::SendOpcode;

mod local_ops;

/// The requester of one QP: its send queue, where transmission stands, its place in the
/// device's send window, and RC's state in `rc`.
#[derive(Debug)]
pub(crate) struct Requester {
    pub sq: VecDeque<SendWqe>,
    /// The WQE the next packet comes from.
    pub cur: usize,
    /// Byte offset of the next packet in `sq[cur]`.
    pub cur_offset: u32,
    /// The next PSN never used yet (`sq_psn`).
    pub max_psn: Psn,
    /// The oldest PSN not acknowledged.
    pub una: Psn,
    /// The PSN after the last packet sent (where the window is measured to).
    pub next_psn: Psn,
    /// The PSN after the furthest packet ever sent: a packet before it is a resend.
    pub sent_end: Psn,
    pub max_send_wr: usize,
    /// Its place in the device's send window (`window.rs`).
    pub seat: Seat,
    /// RC's acknowledgement and retransmission state (`rc/requester.rs`).
    pub rc: RcState,
}

impl Requester {
    pub fn new(max_send_wr: usize) -> Requester {
        Requester {
            sq: VecDeque::with_capacity(max_send_wr),
            cur: 0,
            cur_offset: 0,
            max_psn: Psn::new(0),
            una: Psn::new(0),
            next_psn: Psn::new(0),
            sent_end: Psn::new(0),
            max_send_wr,
            seat: Seat::default(),
            rc: RcState::new(),
        }
    }

    /// Sets the starting PSN (`sq_psn`, on RTR -> RTS).
    pub fn set_sq_psn(&mut self, psn: Psn) {
        self.max_psn = psn;
        self.una = psn;
        self.next_psn = psn;
        self.sent_end = psn;
    }

    /// Whether a WQE is started and not completed (begun, or sent and not acknowledged):
    /// what SQD waits for. Started WQEs are the front of the queue.
    pub fn in_progress(&self) -> bool {
        self.sq.front().is_some_and(|w| w.started)
    }

    /// Completes `sq[0]` with `status` and asks for the error state (the rest is flushed).
    pub fn fail_front(&mut self, ctx: &QpContext, status: WcStatus, ev: &mut Events) {
        debug_event!(target: "softrnic::rc", qpn = ctx.qpn, status = ?status, "work request fails; the QP enters ERR");
        if let Some(w) = self.sq.pop_front() {
            ev.complete(CqSide::Send, w.completion(ctx.qpn, status));
            self.cur = self.cur.saturating_sub(1);
        }
        ev.fatal = true;
    }

    /// Forgets everything (RESET).
    pub fn reset(&mut self) {
        *self = Requester::new(self.max_send_wr);
    }

    /// Writes the next request packet into `out`, if the window, the fence and
    /// `max_rd_atomic` allow one (then returns `true`). Without `start_new` (SQD) only WQEs
    /// already begun send (their rest, or a resend). Local operations reached on the way are
    /// executed (`requester/local_ops.rs`).
    #[allow(clippy::too_many_arguments)]
    pub fn poll_transmit(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        start_new: bool,
        timers: &mut TimerTable,
        mrs: &MrTable,
        ev: &mut Events,
        out: &mut Transmit,
    ) -> bool {
        while self.run_local_op(ctx, start_new, mrs, ev) {}
        self.poll_packet(ctx, now, start_new, timers, mrs, ev, out)
    }

    #[allow(clippy::too_many_arguments)]
    fn poll_packet(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        start_new: bool,
        timers: &mut TimerTable,
        mrs: &MrTable,
        ev: &mut Events,
        out: &mut Transmit,
    ) -> bool {
        if self.rc.rnr_wait || self.cur >= self.sq.len() {
            return false;
        }
        if !start_new && !self.sq[self.cur].started {
            return false;
        }
        let starts = !self.sq[self.cur].started;
        let outstanding = self.next_psn.distance_from(self.una);
        // What an early resend went back over, short of the furthest PSN sent, is counted in
        // the window already (`RcState::held`): resending it takes no room, and must not wait
        // for room its own count fills.
        let counted = self.next_psn.cmp_modular(self.sent_through()) == std::cmp::Ordering::Less;
        if !counted && !self.seat.may_send(outstanding, starts) {
            // Refused with packets out whose newest asked for no ACK: none would come, and
            // the QP would sit until its retransmit timer (the device's window filled behind
            // them as other QPs sent). One more packet goes, and asks.
            if outstanding == 0 || self.rc.unasked.packets == 0 || !ctx.is_reliable() {
                return false;
            }
            self.rc.ask_next = true;
        }
        if self
            .rc
            .resend_probe
            .is_some_and(|end| self.next_psn.cmp_modular(end) != std::cmp::Ordering::Less)
        {
            return false; // the probe is out: its ACK says how far the peer is
        }
        let w = &self.sq[self.cur];
        if w.is_local() {
            return false; // waits for its turn (run_local_op)
        }
        if w.is_rd_atomic() || w.fence {
            let in_flight = self.rd_atomic_in_flight();
            if w.fence && in_flight > 0 {
                return false;
            }
            if w.is_rd_atomic() && in_flight >= usize::from(ctx.max_rd_atomic) {
                return false;
            }
        }
        if !w.started {
            if let Err(status) = check_local_buffers(ctx, w, mrs) {
                if self.cur > 0 {
                    // WRs before it are still in flight. Send completions come in posting
                    // order, so its error waits until they complete (or fail, flushing it),
                    // and nothing behind it is sent meanwhile (rxe's completer does the
                    // same).
                    return false;
                }
                // It is the front: a local error ends the QP (rxe does the same).
                let w = self.sq.pop_front().expect("cur < len");
                ev.complete(CqSide::Send, w.completion(ctx.qpn, status));
                ev.fatal = true;
                return false;
            }
            let npkts = match w.opcode {
                SendOpcode::AtomicCmpAndSwp
                | SendOpcode::AtomicFetchAndAdd
                | SendOpcode::Flush
                | SendOpcode::AtomicWrite => 1,
                _ => packets_for(w.total, ctx.pmtu),
            };
            let w = &mut self.sq[self.cur];
            w.started = true;
            w.first_psn = self.max_psn;
            w.npkts = npkts;
            self.max_psn = self.max_psn.add(npkts);
            self.next_psn = w.first_psn;
        }
        self.build(ctx, now, out);
        self.arm_retransmit(ctx, now, timers);
        true
    }

    /// READs and atomics before `cur` (sent, not completed).
    pub fn rd_atomic_in_flight(&self) -> usize {
        self.sq
            .iter()
            .take(self.cur)
            .filter(|w| w.is_rd_atomic())
            .count()
    }

    /// Builds the packet at `cur`/`cur_offset` into `out` and moves past it. Whether a SEND
    /// or RDMA WRITE packet asks for an ACK is RC's policy (`rc/requester.rs`); READs and
    /// atomics always ask: their response is the ACK.
    fn build(&mut self, ctx: &QpContext, now: Instant, out: &mut Transmit) {
        let w = &self.sq[self.cur];
        let xrc_srqn = w.xrc_srqn;
        let psn = w.first_psn.add(self.cur_offset / ctx.pmtu);
        let resend = psn != self.sent_end;
        if !resend {
            self.sent_end = psn.add(1);
        }
        // A UD SEND goes where its WR says; a connected QP's packets to its peer.
        out.dst = w.ud.map_or(ctx.dst, |ud| ud.dest);
        out.src_port = ctx.src_port;
        // Every branch sets the payload; an inline array or chunk list already in the slot is
        // reused (see `TxQueue`).
        let payload = &mut out.payload;
        out.roce = if let Some(kind) = MessageKind::of(w.opcode) {
            let seg = Segments::new(ctx.transport, kind, w.total, ctx.pmtu, self.cur_offset)
                .next()
                .expect("a message has a packet at every offset before its end");
            let signaled = w.signaled;
            let ack_req = self.ack_req(ctx, psn, seg.last, signaled, resend);
            let w = &self.sq[self.cur];
            let mut roce = ctx.header(seg.opcode, psn, ack_req);
            roce.bth.solicited = w.solicited && seg.last;
            let info = seg.opcode.info().expect("segment opcodes are in the table");
            if let Some(ud) = &w.ud {
                crate::ud::requester::address(ctx, ud, &mut roce);
            }
            if info.has(softrnic_wire::opcode::ExtHeader::Reth) {
                roce.reth = Some(RethRepr {
                    va: w.remote.addr,
                    rkey: w.remote.rkey,
                    dma_len: w.total,
                });
            }
            if info.has(softrnic_wire::opcode::ExtHeader::ImmDt) {
                roce.immdt = Some(ImmDtRepr(w.imm));
            }
            if info.has(softrnic_wire::opcode::ExtHeader::Ieth) {
                roce.ieth = Some(IethRepr(w.imm));
            }
            roce.payload_len = seg.len as usize;
            match &w.inline {
                Some(bytes) => {
                    payload.set_inline(&bytes[seg.offset as usize..(seg.offset + seg.len) as usize])
                }
                None if seg.len == 0 => *payload = Payload::None,
                None => payload
                    .set_memory(ctx.pd, PinFor::Local)
                    .fill_from_sges(&w.sges, seg.offset, seg.len),
            }
            self.cur_offset += seg.len;
            if seg.last {
                self.cur += 1;
                self.cur_offset = 0;
            }
            self.next_psn = psn.add(1);
            roce
        } else if matches!(w.opcode, SendOpcode::Flush | SendOpcode::AtomicWrite) {
            let (roce, p) = flush_atomic_write::request(ctx, w, psn);
            *payload = p;
            self.next_psn = psn.add(1);
            self.cur += 1;
            self.cur_offset = 0;
            self.rc.unasked = Unasked::default();
            roce
        } else if w.opcode == SendOpcode::RdmaRead {
            *payload = Payload::None;
            let mut roce = ctx.header(Opcode::RC_RDMA_READ_REQUEST, psn, true);
            roce.reth = Some(RethRepr {
                va: w.remote.addr.wrapping_add(u64::from(self.cur_offset)),
                rkey: w.remote.rkey,
                dma_len: w.total - self.cur_offset,
            });
            self.next_psn = w.first_psn.add(w.npkts);
            if !resend {
                // The READ's response PSNs are spent with its request.
                self.sent_end = self.next_psn;
            }
            self.cur += 1;
            self.cur_offset = 0;
            self.rc.unasked = Unasked::default();
            roce
        } else {
            let opcode = if w.opcode == SendOpcode::AtomicCmpAndSwp {
                Opcode::RC_COMPARE_SWAP
            } else {
                Opcode::RC_FETCH_ADD
            };
            *payload = Payload::None;
            let mut roce = ctx.header(opcode, psn, true);
            let (swap_add, compare) = if w.opcode == SendOpcode::AtomicCmpAndSwp {
                (w.swap, w.compare_add)
            } else {
                (w.compare_add, 0)
            };
            roce.atomic_eth = Some(AtomicEthRepr {
                va: w.remote.addr,
                rkey: w.remote.rkey,
                swap_add,
                compare,
            });
            self.next_psn = psn.add(1);
            self.cur += 1;
            self.cur_offset = 0;
            self.rc.unasked = Unasked::default();
            roce
        };
        // An XRC request names the SRQ at the target (annex A14.6.1).
        if out.roce.info().is_ok_and(|i| i.has(ExtHeader::Xrceth)) {
            out.roce.xrceth = Some(XrcethRepr { srqn: xrc_srqn });
        }
        self.time_packet(ctx, psn, now, resend, out.roce.bth.ack_req);
    }
}

/// Checks the local buffers of a WQE about to start (no byte is touched): sources of SEND /
/// WRITE need any registered region of the PD; sinks of READ / atomics need `LOCAL_WRITE`
/// (FLUSH has no buffers; ATOMIC WRITE's 8 bytes were copied at post time).
fn check_local_buffers(
    ctx: &QpContext,
    w: &SendWqe,
    mrs: &MrTable,
) -> core::result::Result<(), WcStatus> {
    let sink = w.opcode == SendOpcode::RdmaRead || w.opcode.is_atomic();
    for s in &w.sges {
        if s.length == 0 {
            continue;
        }
        let ok = if sink {
            mrs.with_local_write(s.lkey, ctx.pd, s.addr, s.length as usize, |_| ())
        } else {
            mrs.with_local_read(s.lkey, ctx.pd, s.addr, s.length as usize, |_| ())
        };
        ok.map_err(|_| WcStatus::LocProtErr)?;
    }
    Ok(())
}
