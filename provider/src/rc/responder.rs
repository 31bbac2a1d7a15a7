//! The RC responder (IBTA 9.7.5 "Responder", 9.7.4 "Responder: generating responses"; kernel
//! rxe's `rxe_resp.c`).
//!
//! * **PSN checks** (9.7.5.1.1): the expected PSN (ePSN) executes; a duplicate is answered
//!   but never executed twice — SEND/WRITE are re-ACKed, a READ is re-read from the original
//!   request's saved resource (with the duplicate's RETH, which may ask for the rest only), an
//!   atomic replays its saved original value; an out-of-sequence PSN gets one NAK "PSN
//!   sequence error" per episode (C9-102).
//! * **Opcode sequence** (9.7.5.1.3): inside a SEND or WRITE only its MIDDLE/LAST packets may
//!   come; otherwise NAK Invalid Request.
//! * **SEND** consumes a receive WQE at its first packet — from the QP's receive queue, or from
//!   its shared receive queue when it has one (10.2.9) — ; with none posted, an RNR NAK with
//!   `min_rnr_timer` (9.7.5.2.8). The WQE's buffers are checked against the PD of the queue it
//!   was posted to. **WRITE** checks the R_Key for the whole DMA length at its
//!   first packet (not for zero length, C9-88); WRITE with immediate consumes a receive WQE at
//!   its last packet. **READ** and **atomics** take a responder resource
//!   (`max_dest_rd_atomic`), kept so that duplicates can be answered. Atomics need 8-byte
//!   alignment (else NAK Invalid Request).
//! * **Responses** (ACK, NAK, READ responses, ATOMIC ACK) leave in PSN order from one queue;
//!   consecutive ACKs coalesce into the latest, and the QP may hold a plain ACK a little to
//!   cover the next message too (`rc/ack_coalesce.rs`). Every AETH carries the MSN, the count
//!   of completed messages (9.7.5.1.4).
//! * **SEND with Invalidate** (9.4.1.1) invalidates the R_Key of its IETH at its last packet,
//!   and the receive completion says so (`IBV_WC_WITH_INV`, `invalidated_rkey`).
//! * **Duplicates** (9.7.5.1.2): `responder/duplicate.rs`.
//! * **Reordering**: a request a few PSNs ahead is held, not NAKed at once
//!   (`responder/reorder.rs`).
//! * **FLUSH** and **ATOMIC WRITE** (IBTA 1.5): `responder/flush_atomic_write.rs`.
//! * A fatal error (Invalid Request, Remote Access, Remote Operational NAK) completes the
//!   receive WQE in use with an error and moves the QP to ERR; the NAK still goes out.

use std::collections::VecDeque;

use softrnic_wire::aeth::{AethRepr, CreditCode, NakCode, RnrTimer, Syndrome};
use softrnic_wire::atomic_ack_eth::AtomicAckEthRepr;
use softrnic_wire::opcode::{Operation, Position, Transport as WireTransport};
use softrnic_wire::roce::RocePacket;
use softrnic_wire::{Opcode, Psn};

use super::ack_coalesce::Queued;
use super::sequence::{classify, PsnClass};
use crate::mr::{Access, AccessError, MrTable, PinFor};
use crate::qp::context::{CqSide, Events, QpContext};
use crate::qp::inbound::{recv_wc, send_wc, write_imm_wc, InMessage, PlaceError};
use crate::qp::recv::Receives;
use crate::qp::segment::{packets_for, payload_fits, MessageKind, Segments};
use crate::qp::transmit::{Chunk, Payload, Transmit};
use crate::wc::WcStatus;

mod duplicate;
mod flush_atomic_write;
mod reorder;

/// A saved READ or atomic (a responder resource, IBTA 9.7.5.1.2).
#[derive(Debug, Clone, Copy)]
enum Resource {
    Read {
        first_psn: Psn,
        npkts: u32,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
    /// A FLUSH or ATOMIC WRITE, answered by a zero-length READ response.
    Reply {
        psn: Psn,
    },
}

/// A response waiting to be sent.
#[derive(Debug, Clone, Copy)]
enum Response {
    Ack {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    Read {
        rkey: u32,
        va: u64,
        len: u32,
        first_psn: Psn,
        offset: u32,
        msn: u32,
    },
    AtomicAck {
        psn: Psn,
        orig: u64,
        msn: u32,
    },
}

/// The responder of one RC QP.
#[derive(Debug)]
pub(crate) struct Responder {
    pub epsn: Psn,
    /// Message sequence number, 24 bits.
    pub msn: u32,
    msg: Option<InMessage>,
    /// A NAK (sequence or RNR) was sent and the expected PSN has not arrived since.
    nak_sent: bool,
    resources: VecDeque<Resource>,
    out: VecDeque<Response>,
    /// What the requests handled since [`Responder::take_queued`] queued, if anything.
    queued: Option<Queued>,
    /// The MSN of the last response with an AETH sent.
    acked_msn: u32,
    /// The MSN before the request being handled (which ended a message if it moved).
    noted_msn: u32,
    /// Requests a few PSNs ahead, held while the expected one may still come
    /// (`responder/reorder.rs`).
    reorder: reorder::Reorder,
}

const MSN_MASK: u32 = 0x00ff_ffff;

/// Why a request failed fatally: the NAK and the receive completion status.
struct Fatal(NakCode, WcStatus);

impl Responder {
    pub fn new() -> Responder {
        Responder {
            epsn: Psn::new(0),
            msn: 0,
            msg: None,
            nak_sent: false,
            resources: VecDeque::new(),
            out: VecDeque::new(),
            queued: None,
            acked_msn: 0,
            noted_msn: 0,
            reorder: reorder::Reorder::default(),
        }
    }

    /// Forgets everything (RESET).
    pub fn reset(&mut self) {
        *self = Responder::new();
    }

    /// Completes the receive WQE of a message in progress with `IBV_WC_WR_FLUSH_ERR` (it is
    /// older than those still in the receive queue, which the QP flushes next); drops queued
    /// READ responses (ACKs and NAKs still go out).
    pub fn flush(&mut self, ctx: &QpContext, ev: &mut Events) {
        if let Some(InMessage::Send { wqe, .. }) = self.msg.take() {
            ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, WcStatus::WrFlushErr));
        }
        self.out.retain(|r| matches!(r, Response::Ack { .. }));
    }

    /// Handles a request packet for this QP.
    pub fn handle_request(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
        mut recv: Receives<'_>,
        ev: &mut Events,
    ) {
        self.noted_msn = self.msn;
        let psn = pkt.repr.bth.psn;
        match classify(self.epsn, psn) {
            PsnClass::Expected => {
                // It fills a gap (a loss NAKed, or requests held behind it): the requester is
                // resending and waits for the ACK, which must not be held.
                let fills_gap = std::mem::take(&mut self.nak_sent) || self.reorder.is_holding();
                self.run(ctx, pkt, mrs, &mut recv, ev);
                // The held requests that now follow, in PSN order.
                while self.reorder.is_holding() && !ev.fatal && !self.nak_sent {
                    let (epsn, mut held) = (self.epsn, std::mem::take(&mut self.reorder));
                    let ran = held.release(epsn, |p| {
                        self.noted_msn = self.msn;
                        self.run(ctx, p, mrs, &mut recv, ev);
                    });
                    self.reorder = held;
                    if !ran {
                        break;
                    }
                }
                if fills_gap {
                    // Requests are still held, beyond a further gap longer than reordering
                    // makes: a second loss. The requester resending the first waits for this
                    // answer (`resend_probe`) and sends nothing that would show the gap, so
                    // NAK it now: it resends the lost request alone. An ACK instead would
                    // have it go back to the gap and resend everything after it, which is
                    // held here already (a window of duplicates for each loss after the
                    // first of a window).
                    if self.reorder.is_holding()
                        && self.reorder.gap_is_loss(self.epsn)
                        && !self.nak_sent
                        && !ev.fatal
                    {
                        self.nak_sent = true;
                        // The NAK acknowledges what ran: a plain ACK before it says nothing more.
                        if let Some(Response::Ack {
                            syndrome: Syndrome::Ack(_),
                            ..
                        }) = self.out.back()
                        {
                            self.out.pop_back();
                        }
                        let epsn = self.epsn;
                        self.queue_ack(epsn, Syndrome::Nak(NakCode::PsnSequenceError));
                    }
                    self.note_queued(false);
                }
            }
            PsnClass::Duplicate => {
                ev.counters.duplicate_request += 1;
                debug_event!(target: "softrnic::rc", qpn = ctx.qpn, expected = self.epsn.value(), got = psn.value(), ack_req = pkt.repr.bth.ack_req, "duplicate request");
                self.duplicate(ctx, pkt, mrs);
            }
            PsnClass::OutOfSequence => {
                // Held for its turn, or dropped (`responder/reorder.rs`); once the gap is
                // longer than reordering makes, it is NAKed, once (C9-102).
                let held = self.reorder.hold(self.epsn, pkt);
                if !self.nak_sent && (!held || self.reorder.gap_is_loss(self.epsn)) {
                    self.nak_sent = true;
                    ev.counters.out_of_seq_request += 1;
                    let epsn = self.epsn;
                    debug_event!(target: "softrnic::rc", qpn = ctx.qpn, expected = epsn.value(), got = pkt.repr.bth.psn.value(), "NAK sent: PSN sequence error");
                    self.queue_ack(epsn, Syndrome::Nak(NakCode::PsnSequenceError));
                }
            }
        }
    }

    /// Executes the request at the expected PSN; a fatal error NAKs it and ends the QP.
    fn run(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
        recv: &mut Receives<'_>,
        ev: &mut Events,
    ) {
        if let Err(Fatal(code, status)) = self.execute(ctx, pkt, mrs, recv, ev) {
            debug_event!(target: "softrnic::rc", qpn = ctx.qpn, psn = pkt.repr.bth.psn.value(), code = ?code, "NAK sent; the QP enters ERR");
            self.queue_ack(pkt.repr.bth.psn, Syndrome::Nak(code));
            if let Some(InMessage::Send { wqe, .. }) = self.msg.take() {
                ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, status));
            }
            self.reorder.clear();
            ev.fatal = true;
        }
    }

    /// Refuses the request `pkt` without executing it: at the expected PSN, NAK Invalid
    /// Request and the QP enters ERR (an XRC request naming no SRQ of the target's domain,
    /// annex A14.6.3); a duplicate or out-of-sequence one is dropped.
    pub fn refuse(&mut self, pkt: &RocePacket<'_>, ev: &mut Events) {
        self.noted_msn = self.msn;
        let psn = pkt.repr.bth.psn;
        if classify(self.epsn, psn) == PsnClass::Expected {
            self.queue_ack(psn, Syndrome::Nak(NakCode::InvalidRequest));
            ev.fatal = true;
        }
    }

    /// Executes the request at the expected PSN.
    fn execute(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
        recv: &mut Receives<'_>,
        ev: &mut Events,
    ) -> Result<(), Fatal> {
        const INVALID: Fatal = Fatal(NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        let repr = &pkt.repr;
        let psn = repr.bth.psn;
        let info = repr.info().map_err(|_| INVALID)?;
        if info.transport != ctx.transport {
            return Err(INVALID);
        }
        // Opcode sequence: a message in progress admits only its own MIDDLE/LAST.
        let continues = matches!(info.position, Position::Middle | Position::Last);
        let in_sequence = match (&self.msg, info.operation) {
            (Some(InMessage::Send { .. }), Operation::Send) => continues,
            (Some(InMessage::Write { .. }), Operation::RdmaWrite) => continues,
            (Some(_), _) => false,
            (None, _) => !continues,
        };
        if !in_sequence {
            return Err(INVALID);
        }
        match info.operation {
            Operation::Send => {
                if self.msg.is_none() {
                    let Some(wqe) = recv.take() else {
                        return self.rnr(ctx, psn, ev);
                    };
                    self.msg = Some(InMessage::Send { wqe, offset: 0 });
                }
                if !payload_fits(info.position, pkt.payload.len(), ctx.pmtu) {
                    return Err(INVALID); // the WQE just taken completes in error
                }
                let last = matches!(info.position, Position::Last | Position::Only);
                let msg = self.msg.as_mut().expect("set above");
                msg.place(ctx, mrs, pkt.payload, last)
                    .map_err(|e| match e {
                        PlaceError::Length => Fatal(NakCode::InvalidRequest, WcStatus::LocLenErr),
                        PlaceError::Access(_) => {
                            Fatal(NakCode::RemoteOperationalError, WcStatus::LocProtErr)
                        }
                    })?;
                if last {
                    if let Some(ieth) = repr.ieth {
                        invalidate(ctx, mrs, ieth.0)?;
                    }
                    let Some(InMessage::Send { wqe, offset }) = self.msg.take() else {
                        unreachable!("set above")
                    };
                    let wc = send_wc(ctx, &wqe, offset, repr.immdt, repr.ieth);
                    ev.complete(CqSide::Recv, wc);
                    self.msn = (self.msn + 1) & MSN_MASK;
                }
            }
            Operation::RdmaWrite => {
                if !ctx.access.contains(Access::REMOTE_WRITE)
                    || !payload_fits(info.position, pkt.payload.len(), ctx.pmtu)
                {
                    return Err(INVALID);
                }
                // WRITE with immediate takes a receive WQE at its last packet. Without one,
                // RNR NAK before anything of this packet is done (as rxe checks resources
                // before the R_Key): the resend starts with this packet again, so an ONLY
                // packet must not leave a message begun.
                let last = matches!(info.position, Position::Last | Position::Only);
                if last && repr.immdt.is_some() && !recv.ready() {
                    return self.rnr(ctx, psn, ev);
                }
                if let Some(reth) = &repr.reth {
                    self.msg = Some(InMessage::write(ctx, mrs, reth).map_err(remote_fatal)?);
                }
                let msg = self.msg.as_mut().expect("in_sequence checked it");
                msg.place(ctx, mrs, pkt.payload, last)
                    .map_err(|e| match e {
                        // The payloads do not add up to the DMA length.
                        PlaceError::Length => INVALID,
                        PlaceError::Access(a) => remote_fatal(a),
                    })?;
                if last {
                    let Some(InMessage::Write { len: total, .. }) = self.msg.take() else {
                        unreachable!("in_sequence checked it")
                    };
                    if let Some(imm) = repr.immdt {
                        let wqe = recv.take().expect("checked above, in this call");
                        ev.complete(CqSide::Recv, write_imm_wc(ctx, &wqe, total, imm));
                    }
                    self.msn = (self.msn + 1) & MSN_MASK;
                }
            }
            Operation::RdmaReadRequest => {
                let reth = repr.reth.ok_or(INVALID)?;
                if !ctx.access.contains(Access::REMOTE_READ) || ctx.max_dest_rd_atomic == 0 {
                    return Err(INVALID);
                }
                check_read(ctx, mrs, reth.rkey, reth.va, reth.dma_len)?;
                let npkts = packets_for(reth.dma_len, ctx.pmtu);
                self.save(
                    ctx,
                    Resource::Read {
                        first_psn: psn,
                        npkts,
                    },
                );
                self.msn = (self.msn + 1) & MSN_MASK;
                self.note_queued(false);
                self.out.push_back(Response::Read {
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                    first_psn: psn,
                    offset: 0,
                    msn: self.msn,
                });
                self.epsn = psn.add(npkts);
                return Ok(());
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let a = repr.atomic_eth.ok_or(INVALID)?;
                if !ctx.access.contains(Access::REMOTE_ATOMIC) || ctx.max_dest_rd_atomic == 0 {
                    return Err(INVALID);
                }
                let cmp_swap = info.operation == Operation::CompareSwap;
                let orig = mrs
                    .with_remote_atomic(a.rkey, ctx.pd, ctx.qpn, a.va, |orig| {
                        if !cmp_swap {
                            orig.wrapping_add(a.swap_add)
                        } else if orig == a.compare {
                            a.swap_add
                        } else {
                            orig
                        }
                    })
                    .map_err(remote_fatal)?;
                self.save(ctx, Resource::Atomic { psn, orig });
                self.msn = (self.msn + 1) & MSN_MASK;
                let msn = self.msn;
                self.note_queued(false);
                self.out.push_back(Response::AtomicAck { psn, orig, msn });
                self.epsn = psn.add(1);
                return Ok(());
            }
            Operation::Flush => return self.flush_request(ctx, pkt, mrs),
            Operation::AtomicWrite => return self.atomic_write_request(ctx, pkt, mrs),
            _ => return Err(INVALID),
        }
        self.epsn = psn.add(1);
        if repr.bth.ack_req {
            self.queue_ack(psn, Syndrome::Ack(CreditCode::UNLIMITED));
        }
        Ok(())
    }

    fn rnr(&mut self, ctx: &QpContext, psn: Psn, ev: &mut Events) -> Result<(), Fatal> {
        ev.counters.send_rnr_err += 1;
        self.nak_sent = true;
        self.reorder.clear(); // the requester resends from `psn`
        debug_event!(target: "softrnic::rc", qpn = ctx.qpn, psn = psn.value(), "RNR NAK sent: no receive WQE");
        self.queue_ack(psn, Syndrome::RnrNak(RnrTimer(ctx.min_rnr_timer)));
        Ok(())
    }

    /// Keeps a READ/atomic resource, dropping the oldest beyond `max_dest_rd_atomic` (a
    /// requester that honours its `max_rd_atomic` never has more outstanding).
    fn save(&mut self, ctx: &QpContext, r: Resource) {
        while self.resources.len() >= usize::from(ctx.max_dest_rd_atomic).max(1) {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }

    /// Queues an ACK or NAK; an ACK right behind another replaces it (coalescing).
    fn queue_ack(&mut self, psn: Psn, syndrome: Syndrome) {
        self.note_queued(matches!(syndrome, Syndrome::Ack(_)));
        let msn = self.msn;
        if let (
            Syndrome::Ack(_),
            Some(Response::Ack {
                syndrome: Syndrome::Ack(_),
                ..
            }),
        ) = (syndrome, self.out.back())
        {
            self.out.pop_back();
        }
        self.out.push_back(Response::Ack { psn, syndrome, msn });
    }

    /// Writes the next response packet into `out`; `false` if there is none.
    pub fn poll_transmit(&mut self, ctx: &QpContext, out: &mut Transmit) -> bool {
        let Some(resp) = self.out.front_mut() else {
            return false;
        };
        out.dst = ctx.dst;
        out.src_port = ctx.src_port;
        let payload = &mut out.payload;
        self.acked_msn = match resp {
            Response::Ack { msn, .. }
            | Response::AtomicAck { msn, .. }
            | Response::Read { msn, .. } => *msn,
        };
        out.roce = match resp {
            Response::Ack { psn, syndrome, msn } => {
                let mut roce = ctx.header(Opcode::RC_ACKNOWLEDGE, *psn, false);
                roce.aeth = Some(AethRepr {
                    syndrome: *syndrome,
                    msn: *msn,
                });
                self.out.pop_front();
                *payload = Payload::None;
                roce
            }
            Response::AtomicAck { psn, orig, msn } => {
                let mut roce = ctx.header(Opcode::RC_ATOMIC_ACKNOWLEDGE, *psn, false);
                roce.aeth = Some(AethRepr {
                    syndrome: Syndrome::Ack(CreditCode::UNLIMITED),
                    msn: *msn,
                });
                roce.atomic_ack_eth = Some(AtomicAckEthRepr { orig_rem_dt: *orig });
                self.out.pop_front();
                *payload = Payload::None;
                roce
            }
            Response::Read {
                rkey,
                va,
                len,
                first_psn,
                offset,
                msn,
            } => {
                let seg = Segments::new(
                    WireTransport::Rc,
                    MessageKind::ReadResponse,
                    *len,
                    ctx.pmtu,
                    *offset,
                )
                .next()
                .expect("a READ response has a packet at every offset before its end");
                let psn = first_psn.add(*offset / ctx.pmtu);
                let mut roce = ctx.header(seg.opcode, psn, false);
                let info = seg.opcode.info().expect("segment opcodes are in the table");
                if info.has(softrnic_wire::opcode::ExtHeader::Aeth) {
                    roce.aeth = Some(AethRepr {
                        syndrome: Syndrome::Ack(CreditCode::UNLIMITED),
                        msn: *msn,
                    });
                }
                roce.payload_len = seg.len as usize;
                if seg.len == 0 {
                    *payload = Payload::None;
                } else {
                    let why = PinFor::RemoteRead { qpn: ctx.qpn };
                    payload.set_memory(ctx.pd, why).push(Chunk {
                        key: *rkey,
                        va: *va + u64::from(seg.offset),
                        len: seg.len,
                    });
                }
                *offset += seg.len;
                if seg.last {
                    self.out.pop_front();
                }
                roce
            }
        };
        true
    }

    /// Notes a response queued: a plain ACK (`plain`) or anything else, for the ACK
    /// coalescer to decide on (`ack_coalesce.rs`, [`Queued::after`]).
    fn note_queued(&mut self, plain: bool) {
        let alone = self.out.iter().all(|r| {
            matches!(
                r,
                Response::Ack {
                    syndrome: Syndrome::Ack(_),
                    ..
                }
            )
        });
        let ended = self.msn != self.noted_msn;
        let unacked = self.msn.wrapping_sub(self.acked_msn) & MSN_MASK;
        self.queued = Some(Queued::after(self.queued, plain && alone, ended, unacked));
    }

    /// What the requests handled since the last call queued (see [`Responder::note_queued`]),
    /// if anything.
    pub(crate) fn take_queued(&mut self) -> Option<Queued> {
        self.queued.take()
    }

    /// Whether responses are queued.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether the next response is an ACK or NAK without data.
    pub fn next_is_plain_ack(&self) -> bool {
        matches!(self.out.front(), Some(Response::Ack { .. }))
    }
}

/// A failed remote access: NAK Invalid Request for a misaligned atomic, Remote Access Error
/// otherwise (as rxe).
fn remote_fatal(e: AccessError) -> Fatal {
    match e {
        AccessError::Misaligned => Fatal(NakCode::InvalidRequest, WcStatus::RemInvReqErr),
        _ => Fatal(NakCode::RemoteAccessError, WcStatus::RemAccessErr),
    }
}

/// The invalidation a SEND with Invalidate asks for (IBTA 9.4.1.1 "Send with Invalidate"),
/// before its receive completion: the R_Key must be that of a type 2 window bound to this QP
/// (see `MrTable::invalidate`).
///
/// On failure the receive WQE completes with `IBV_WC_REM_INV_REQ_ERR` and the QP goes to ERR,
/// as in rxe (its "class J" error). rxe then still acknowledges the SEND, so its requester
/// sees success; softrnic NAKs it Invalid Request instead, so that the requester does not
/// report success for a message whose invalidation failed (and its SEND completes with
/// `IBV_WC_REM_INV_REQ_ERR`).
fn invalidate(ctx: &QpContext, mrs: &MrTable, rkey: u32) -> Result<(), Fatal> {
    mrs.invalidate(ctx.pd, rkey, Some(ctx.qpn))
        .map_err(|_| Fatal(NakCode::InvalidRequest, WcStatus::RemInvReqErr))
}

/// Checks that a READ of `len` bytes at `va` through `rkey` is allowed (not for zero length).
fn check_read(ctx: &QpContext, mrs: &MrTable, rkey: u32, va: u64, len: u32) -> Result<(), Fatal> {
    if len == 0 {
        return Ok(());
    }
    mrs.with_remote_read(rkey, ctx.pd, ctx.qpn, va, len as usize, |_| ())
        .map_err(remote_fatal)
}
