//! Duplicate requests (IBTA 9.7.5.1.2): answered, never executed twice. A SEND or WRITE with
//! AckReq is re-ACKed with the latest PSN; a READ is read again from the original request's
//! saved resource (the duplicate's RETH may ask for the rest only); an atomic replays its saved
//! original value; FLUSH and ATOMIC WRITE get their empty READ RESPONSE again. At most
//! `max_dest_rd_atomic` answers wait at once, and a duplicate of a READ already being answered
//! adds nothing, so that a flood of duplicates cannot grow the output queue.

use softrnic_wire::aeth::{CreditCode, Syndrome};
use softrnic_wire::opcode::Operation;
use softrnic_wire::roce::RocePacket;

use super::{check_read, Resource, Responder, Response};
use crate::mr::MrTable;
use crate::rc::context::QpContext;
use crate::rc::segment::packets_for;

impl Responder {
    /// Answers a duplicate request (IBTA 9.7.5.1.2).
    pub(super) fn duplicate(&mut self, ctx: &QpContext, pkt: &RocePacket<'_>, mrs: &MrTable) {
        let repr = &pkt.repr;
        let psn = repr.bth.psn;
        let Ok(info) = repr.info() else { return };
        match info.operation {
            Operation::Send | Operation::RdmaWrite if repr.bth.ack_req => {
                let last = self.epsn.sub(1);
                self.queue_ack(last, Syndrome::Ack(CreditCode::UNLIMITED));
                // The peer retransmits: it waits for this ACK, which must not be held.
                self.note_queued(false);
            }
            Operation::RdmaReadRequest => {
                let Some(reth) = repr.reth else { return };
                let found = self.resources.iter().any(|r| match *r {
                    Resource::Read { first_psn, npkts } => {
                        psn.distance_from(first_psn) < npkts
                            && packets_for(reth.dma_len, ctx.pmtu)
                                <= npkts - psn.distance_from(first_psn)
                    }
                    Resource::Atomic { .. } | Resource::Reply { .. } => false,
                });
                if !found || check_read(ctx, mrs, reth.rkey, reth.va, reth.dma_len).is_err() {
                    return; // nothing saved for it (or no longer readable): drop, as rxe
                }
                let queued = self
                    .out
                    .iter()
                    .any(|r| matches!(*r, Response::Read { first_psn, .. } if first_psn == psn));
                if queued || self.answers_queued() >= answer_limit(ctx) {
                    return; // already being answered, or a flood: the requester retries
                }
                let msn = self.msn;
                self.note_queued(false);
                self.out.push_back(Response::Read {
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                    first_psn: psn,
                    offset: 0,
                    msn,
                });
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let saved = self.resources.iter().find_map(|r| match *r {
                    Resource::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = saved {
                    if self.answers_queued() >= answer_limit(ctx) {
                        return; // a flood of duplicates: the requester retries
                    }
                    let msn = self.msn;
                    self.note_queued(false);
                    self.out.push_back(Response::AtomicAck { psn, orig, msn });
                }
            }
            Operation::Flush | Operation::AtomicWrite => self.duplicate_reply(ctx, psn),
            _ => {}
        }
    }

    /// READ responses and atomic ACKs waiting to be sent.
    pub(super) fn answers_queued(&self) -> usize {
        self.out
            .iter()
            .filter(|r| matches!(r, Response::Read { .. } | Response::AtomicAck { .. }))
            .count()
    }
}

/// The most READ responses and atomic ACKs queued for duplicates: the responder resources
/// (`max_dest_rd_atomic`), so that a flood of duplicate requests cannot grow the queue.
pub(super) fn answer_limit(ctx: &QpContext) -> usize {
    usize::from(ctx.max_dest_rd_atomic).max(1)
}
