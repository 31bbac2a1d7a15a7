//! Duplicate requests (IBTA 9.7.5.1.2): answered, never executed twice. A SEND or WRITE with
//! AckReq is re-ACKed with the latest PSN, or NAKed at a gap that requests wait behind and no
//! NAK reported yet (the requester's timer fired, and it probes); a READ is read again from
//! the original request's saved resource (the duplicate's RETH may ask for the rest only); an
//! atomic replays its saved original value; FLUSH and ATOMIC WRITE get their empty READ
//! RESPONSE again. At most `max_dest_rd_atomic` answers wait at once, and a READ has one
//! response stream however often it is duplicated: a duplicate of a READ being answered
//! restarts that stream from its PSN if the stream is past it (9.7.5.1.2 lets the responder
//! restart a response in progress), and adds nothing otherwise, so that a flood of
//! duplicates can neither grow the output queue nor multiply what a READ sends.

use softrnic_wire::aeth::{CreditCode, NakCode, Syndrome};
use softrnic_wire::opcode::Operation;
use softrnic_wire::roce::RocePacket;

use super::{check_read, Resource, Responder, Response};
use crate::mr::MrTable;
use crate::qp::context::QpContext;
use crate::qp::segment::packets_for;

impl Responder {
    /// Answers a duplicate request (IBTA 9.7.5.1.2).
    pub(super) fn duplicate(&mut self, ctx: &QpContext, pkt: &RocePacket<'_>, mrs: &MrTable) {
        let repr = &pkt.repr;
        let psn = repr.bth.psn;
        let Ok(info) = repr.info() else { return };
        match info.operation {
            Operation::Send | Operation::RdmaWrite if repr.bth.ack_req && self.deferred_nak() => {
                // Requests wait behind a gap not yet NAKed (`reorder.rs`), and the requester
                // probes with an old one: its retransmit timer fired, and it learns where the
                // gap is from this NAK (which acknowledges everything before it) rather than
                // from its timer again. C9-102 would have sent it at the first request held.
                let epsn = self.epsn;
                self.nak_sent = true;
                self.queue_ack(epsn, Syndrome::Nak(NakCode::PsnSequenceError));
                self.note_queued(false);
            }
            Operation::Send | Operation::RdmaWrite if repr.bth.ack_req => {
                let last = self.epsn.sub(1);
                self.queue_ack(last, Syndrome::Ack(CreditCode::UNLIMITED));
                // The peer retransmits: it waits for this ACK, which must not be held.
                self.note_queued(false);
            }
            Operation::RdmaReadRequest => {
                let Some(reth) = repr.reth else { return };
                let saved = self.resources.iter().find_map(|r| match *r {
                    Resource::Read { first_psn, npkts }
                        if psn.distance_from(first_psn) < npkts
                            && packets_for(reth.dma_len, ctx.pmtu)
                                <= npkts - psn.distance_from(first_psn) =>
                    {
                        Some((first_psn, npkts))
                    }
                    _ => None,
                });
                let Some((first, npkts)) = saved else {
                    return; // nothing saved for it: drop, as rxe
                };
                if check_read(ctx, mrs, reth.rkey, reth.va, reth.dma_len).is_err() {
                    return; // no longer readable: drop, as rxe
                }
                let restart = Response::Read {
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                    first_psn: psn,
                    offset: 0,
                    msn: self.msn,
                };
                // One response stream per READ, however often it is asked again: a stream
                // of it already queued restarts from the duplicate's PSN if that is behind
                // the stream (its packets from there were lost), and is left alone if not
                // (it will get there).
                let wanted = psn.distance_from(first);
                let stream = self.out.iter_mut().find(|r| {
                    matches!(**r, Response::Read { first_psn, .. }
                        if first_psn.distance_from(first) < npkts)
                });
                if let Some(r) = stream {
                    if let Response::Read {
                        first_psn, offset, ..
                    } = *r
                    {
                        if wanted < first_psn.distance_from(first) + offset / ctx.pmtu {
                            *r = restart;
                        }
                    }
                    return;
                }
                if self.answers_queued() >= answer_limit(ctx) {
                    return; // a flood: the requester retries
                }
                self.note_queued(false);
                self.out.push_back(restart);
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

    /// Whether requests are held behind a gap that no NAK has reported yet.
    fn deferred_nak(&self) -> bool {
        self.reorder.is_holding() && !self.nak_sent
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
