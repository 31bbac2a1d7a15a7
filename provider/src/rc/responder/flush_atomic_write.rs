//! The responder's FLUSH (0x1C) and ATOMIC WRITE (0x1D), IBTA Vol. 1 release 1.5 (9.4.7
//! "FLUSH", 9.4.8 "ATOMIC WRITE"), answered as kernel rxe does (`process_flush`,
//! `atomic_write_reply`, `send_read_response` in `rxe_resp.c`):
//!
//! * Both take a responder resource (`max_dest_rd_atomic`), like READ and atomics, and are
//!   answered with an **RDMA READ RESPONSE ONLY of zero length** whose AETH is an ACK.
//! * **FLUSH** carries a FETH (selectivity level, placement type) and a RETH. The QP needs the
//!   `FLUSH_GLOBAL` / `FLUSH_PERSISTENT` access flags its placement type asks for (rxe's
//!   `check_qp_attr_access`; else NAK Invalid Request), and the region the same rights (else
//!   NAK Remote Access Error). A placement type with neither bit, or with a reserved bit, is
//!   an Invalid Request. The key table does the work before the response is queued
//!   (`mr/persist.rs`: a fence, and `msync` for persistence), so the response means "done".
//! * **ATOMIC WRITE** carries a RETH and exactly 8 bytes of payload, stored at once at an
//!   8-byte aligned address. The QP needs `REMOTE_WRITE` (else NAK Invalid Request), the
//!   region `REMOTE_WRITE` (else NAK Remote Access Error); misaligned: NAK Invalid Request.
//! * **Duplicates** (IBTA 9.7.5.1.2, as for atomics): a duplicate whose resource is still
//!   saved gets the zero-length response again and is *not* executed again — a replayed
//!   ATOMIC WRITE must not overwrite what a later WRITE stored (rxe's `res->replay`). One
//!   whose resource was dropped is ignored: the requester has moved past it.

use softrnic_wire::aeth::NakCode;
use softrnic_wire::feth::{Selectivity, PLACEMENT_GLOBAL_VISIBILITY, PLACEMENT_PERSISTENCE};
use softrnic_wire::roce::RocePacket;
use softrnic_wire::Psn;

use super::duplicate::answer_limit;
use super::{remote_fatal, Fatal, Resource, Responder, Response, MSN_MASK};
use crate::mr::{flush_rights, FlushError, MrTable};
use crate::qp::context::QpContext;
use crate::wc::WcStatus;

const INVALID: Fatal = Fatal(NakCode::InvalidRequest, WcStatus::RemInvReqErr);

impl Responder {
    /// A FLUSH at the expected PSN.
    pub(super) fn flush_request(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
    ) -> Result<(), Fatal> {
        let repr = &pkt.repr;
        let (feth, reth) = repr.feth.zip(repr.reth).ok_or(INVALID)?;
        let placement = feth.placement;
        let known = PLACEMENT_GLOBAL_VISIBILITY | PLACEMENT_PERSISTENCE;
        if placement == 0 || placement & !known != 0 || !pkt.payload.is_empty() {
            return Err(INVALID);
        }
        if !ctx.access.contains(flush_rights(placement)) || ctx.max_dest_rd_atomic == 0 {
            return Err(INVALID);
        }
        // Selectivity level 0 over zero bytes names no memory (as C9-88 for READ/WRITE).
        if feth.selectivity == Selectivity::MemoryRegion || reth.dma_len > 0 {
            mrs.remote_flush(
                reth.rkey,
                ctx.pd,
                ctx.qpn,
                reth.va,
                reth.dma_len as usize,
                placement,
                feth.selectivity,
            )
            .map_err(|e| match e {
                FlushError::Access(a) => remote_fatal(a),
                FlushError::Sync(_) => Fatal(NakCode::RemoteOperationalError, WcStatus::RemOpErr),
            })?;
        }
        self.answered(ctx, repr.bth.psn);
        Ok(())
    }

    /// An ATOMIC WRITE at the expected PSN.
    pub(super) fn atomic_write_request(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
    ) -> Result<(), Fatal> {
        let reth = pkt.repr.reth.ok_or(INVALID)?;
        let value: [u8; 8] = pkt.payload.try_into().map_err(|_| INVALID)?;
        if !ctx.access.contains(crate::mr::Access::REMOTE_WRITE) || ctx.max_dest_rd_atomic == 0 {
            return Err(INVALID);
        }
        mrs.with_remote_atomic_write(reth.rkey, ctx.pd, ctx.qpn, reth.va, value)
            .map_err(remote_fatal)?;
        self.answered(ctx, pkt.repr.bth.psn);
        Ok(())
    }

    /// Saves the resource of an executed FLUSH / ATOMIC WRITE at `psn` and queues its answer.
    fn answered(&mut self, ctx: &QpContext, psn: Psn) {
        self.save(ctx, Resource::Reply { psn });
        self.msn = (self.msn + 1) & MSN_MASK;
        let msn = self.msn;
        self.note_queued(false);
        self.out.push_back(zero_length_read_response(psn, msn));
        self.epsn = psn.add(1);
    }

    /// A duplicate FLUSH / ATOMIC WRITE at `psn`: answered again if its resource is saved,
    /// never executed again.
    pub(super) fn duplicate_reply(&mut self, ctx: &QpContext, psn: Psn) {
        let saved = self
            .resources
            .iter()
            .any(|r| matches!(*r, Resource::Reply { psn: p } if p == psn));
        let queued = self
            .out
            .iter()
            .any(|r| matches!(*r, Response::Read { first_psn, len: 0, .. } if first_psn == psn));
        if saved && !queued && self.answers_queued() < answer_limit(ctx) {
            let msn = self.msn;
            self.note_queued(false);
            self.out.push_back(zero_length_read_response(psn, msn));
        }
    }
}

/// The answer to a FLUSH or ATOMIC WRITE: an RDMA READ RESPONSE ONLY without payload.
fn zero_length_read_response(psn: Psn, msn: u32) -> Response {
    Response::Read {
        rkey: 0,
        va: 0,
        len: 0,
        first_psn: psn,
        offset: 0,
        msn,
    }
}
