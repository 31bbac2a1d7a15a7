//! The requester's FLUSH (0x1C) and ATOMIC WRITE (0x1D), IBTA Vol. 1 release 1.5 (9.4.7,
//! 9.4.8; kernel rxe's `rxe_req.c` and `rxe_comp.c`).
//!
//! How a [`SendWr`] asks for them (the fields `ibv_wr_flush` / `ibv_wr_atomic_write` fill):
//!
//! | operation | `remote` | length | other |
//! |-----------|----------|--------|-------|
//! | FLUSH | R_Key and VA of the range | `compare_add` (at most 2^31) | `imm_data_or_inv_rkey`: the FETH's low byte, placement type in bits 0–3 (1 global visibility, 2 persistence, 3 both), selectivity level in bits 4–5 (0 the range, 1 the whole region); no SGEs |
//! | ATOMIC WRITE | R_Key and VA (8-byte aligned) | — | the 8 bytes to store: `sg_list` totalling 8 bytes (or inline), copied at post time |
//!
//! Both are one request packet with AckReq, count against `max_rd_atomic`, and complete when
//! the zero-length RDMA READ RESPONSE ONLY answering them arrives (`IBV_WC_FLUSH`,
//! `IBV_WC_ATOMIC_WRITE`). ATOMIC WRITE's value is copied when posted, so a retransmission
//! sends the same 8 bytes.

use std::time::Instant;

use softrnic_wire::feth::{
    FethRepr, Selectivity, PLACEMENT_GLOBAL_VISIBILITY, PLACEMENT_PERSISTENCE,
};
use softrnic_wire::opcode::Position;
use softrnic_wire::reth::RethRepr;
use softrnic_wire::roce::{RocePacket, RoceRepr};
use softrnic_wire::{Opcode, Psn};

use super::Requester;
use crate::error::{Error, Result};
use crate::mr::MrTable;
use crate::qp::context::{Events, QpContext};
use crate::qp::send_queue::{gather_inline, SendWqe};
use crate::qp::transmit::{Payload, MAX_INLINE};
use crate::timer::TimerTable;
use crate::wc::WcStatus;
use crate::wr::InlineData;
use crate::wr::{SendOpcode, SendWr, SgeList};

/// The FETH a FLUSH work request asks for (module doc), checked.
///
/// # Errors
/// `EINVAL`: no placement type bit, a reserved bit, or a reserved selectivity level.
pub(super) fn feth_of(word: u32) -> Result<FethRepr> {
    let placement = (word & 0x0f) as u8;
    let known = PLACEMENT_GLOBAL_VISIBILITY | PLACEMENT_PERSISTENCE;
    if placement == 0 || placement & !known != 0 {
        return Err(Error::InvalidArgument("FLUSH placement type"));
    }
    let selectivity = match (word >> 4) & 0x3 {
        0 => Selectivity::MemoryRange,
        1 => Selectivity::MemoryRegion,
        _ => return Err(Error::InvalidArgument("FLUSH selectivity level")),
    };
    if word >> 6 != 0 {
        return Err(Error::InvalidArgument("FLUSH reserved bits"));
    }
    Ok(FethRepr {
        selectivity,
        placement,
    })
}

/// Checks a FLUSH or ATOMIC WRITE work request; returns its total (0, or 8) and its value.
///
/// # Errors
/// `EINVAL` (module doc's table).
pub(super) fn check_post(
    ctx: &QpContext,
    wr: &SendWr,
    mrs: &MrTable,
) -> Result<(u32, Option<InlineData>)> {
    match wr.opcode {
        SendOpcode::Flush => {
            feth_of(wr.imm_data_or_inv_rkey)?;
            if !wr.sg_list.is_empty() {
                return Err(Error::InvalidArgument("a FLUSH has no local buffers"));
            }
            if wr.compare_add > 1 << 31 {
                return Err(Error::InvalidArgument("FLUSH longer than 2^31 bytes"));
            }
            Ok((0, None))
        }
        _ => {
            let total = wr
                .message_len()
                .ok_or(Error::InvalidArgument("message longer than 2^31 bytes"))?;
            if total != 8 {
                return Err(Error::InvalidArgument("an ATOMIC WRITE carries 8 bytes"));
            }
            Ok((8, Some(gather_inline(ctx, wr, total, mrs)?)))
        }
    }
}

/// The request packet of a FLUSH or ATOMIC WRITE WQE at `psn`, with its payload.
pub(crate) fn request(ctx: &QpContext, w: &SendWqe, psn: Psn) -> (RoceRepr, Payload) {
    if w.opcode == SendOpcode::Flush {
        let mut roce = ctx.header(Opcode::RC_FLUSH, psn, true);
        roce.feth = feth_of(w.imm).ok(); // checked at post
        roce.reth = Some(RethRepr {
            va: w.remote.addr,
            rkey: w.remote.rkey,
            dma_len: w.compare_add as u32, // at most 2^31, checked at post
        });
        return (roce, Payload::None);
    }
    let mut roce = ctx.header(Opcode::RC_ATOMIC_WRITE, psn, true);
    roce.reth = Some(RethRepr {
        va: w.remote.addr,
        rkey: w.remote.rkey,
        dma_len: 8,
    });
    roce.payload_len = 8;
    let mut bytes = [0u8; MAX_INLINE];
    if let Some(v) = &w.inline {
        let n = v.len().min(8);
        bytes[..n].copy_from_slice(&v[..n]);
    }
    (roce, Payload::Inline { bytes, len: 8 })
}

impl Requester {
    /// The zero-length READ RESPONSE ONLY answering the front FLUSH / ATOMIC WRITE at `psn`
    /// (the caller checked it is the one awaited): completes it.
    pub(in crate::rc) fn reply_response(
        &mut self,
        ctx: &QpContext,
        now: Instant,
        pkt: &RocePacket<'_>,
        position: Position,
        timers: &mut TimerTable,
        ev: &mut Events,
    ) {
        if position != Position::Only || !pkt.payload.is_empty() {
            self.fail_front(ctx, WcStatus::BadRespErr, ev);
            return;
        }
        self.una = pkt.repr.bth.psn.add(1);
        self.complete_front(ctx, ev);
        self.progress(ctx, now, timers);
    }
}

impl Requester {
    /// `ibv_post_send` of a FLUSH or ATOMIC WRITE (the queue has room): checks and queues it.
    ///
    /// # Errors
    /// `EINVAL` (module doc's table).
    pub(crate) fn post_flush_or_atomic_write(
        &mut self,
        ctx: &QpContext,
        wr: &SendWr,
        mrs: &MrTable,
    ) -> Result<()> {
        let (total, inline) = check_post(ctx, wr, mrs)?;
        self.sq.push_back(SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            signaled: ctx.sq_sig_all || wr.flags.contains(crate::wr::SendFlags::SIGNALED),
            fence: wr.flags.contains(crate::wr::SendFlags::FENCE),
            solicited: false,
            sges: SgeList::new(),
            inline,
            total,
            imm: wr.imm_data_or_inv_rkey,
            remote: wr.remote,
            compare_add: wr.compare_add,
            swap: 0,
            bind: None,
            ud: None,
            xrc_srqn: 0,
            started: false,
            first_psn: Psn::new(0),
            npkts: 0,
        });
        Ok(())
    }
}
