//! Placing an inbound SEND or RDMA WRITE, which the RC and UC responders share (IBTA 9.4.1
//! "Send", 9.4.2 "RDMA Write", executed as 9.7.5.2 says): a SEND's payload goes into the
//! buffers of its receive WQE at the message's running offset, and may not exceed them; an
//! RDMA WRITE's goes into the region its RETH names, whose whole range is checked at the first
//! packet (not for zero length, C9-88), and the payloads must add up to the DMA length
//! exactly. Also the receive completions these messages end with.
//!
//! What a failure means is the responder's to say: a NAK and the error state for RC, a
//! silently dropped message for UC.

use softrnic_wire::ieth::IethRepr;
use softrnic_wire::immdt::ImmDtRepr;
use softrnic_wire::reth::RethRepr;

use super::context::QpContext;
use super::transmit::scatter;
use crate::mr::{AccessError, MrTable};
use crate::wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
use crate::wr::RecvWqe;

/// The message being received.
#[derive(Debug)]
pub(crate) enum InMessage {
    /// A SEND into `wqe`, `offset` bytes placed so far.
    Send { wqe: RecvWqe, offset: u32 },
    /// An RDMA WRITE of `len` bytes at `va` through `rkey`, `offset` bytes placed so far.
    Write {
        rkey: u32,
        va: u64,
        len: u32,
        offset: u32,
    },
}

/// Why a packet's payload was not placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlaceError {
    /// The payloads do not fit: more than the receive WQE holds (a SEND), or not adding up to
    /// the DMA length (a WRITE).
    Length,
    /// A key check failed: the SEND's receive buffers, or the WRITE's region.
    Access(AccessError),
}

impl InMessage {
    /// The RDMA WRITE `reth` starts, its whole range checked for `REMOTE_WRITE` (nothing is
    /// checked for a zero-length one).
    ///
    /// # Errors
    /// The failed check.
    pub(crate) fn write(
        ctx: &QpContext,
        mrs: &MrTable,
        reth: &RethRepr,
    ) -> Result<InMessage, AccessError> {
        if reth.dma_len > 0 {
            let len = reth.dma_len as usize;
            mrs.with_remote_write(reth.rkey, ctx.pd, ctx.qpn, reth.va, len, |_| ())?;
        }
        Ok(InMessage::Write {
            rkey: reth.rkey,
            va: reth.va,
            len: reth.dma_len,
            offset: 0,
        })
    }

    /// Places the message's next `payload` at its running offset and advances it; `last`
    /// says the packet ends the message (a WRITE must then have reached its DMA length).
    ///
    /// # Errors
    /// [`PlaceError`]; nothing of this payload is placed after a length error.
    pub(crate) fn place(
        &mut self,
        ctx: &QpContext,
        mrs: &MrTable,
        payload: &[u8],
        last: bool,
    ) -> Result<(), PlaceError> {
        let n = payload.len() as u32;
        match self {
            InMessage::Send { wqe, offset } => {
                if offset.checked_add(n).is_none_or(|end| end > wqe.total) {
                    return Err(PlaceError::Length);
                }
                scatter(mrs, wqe.pd, &wqe.sges, *offset, payload).map_err(PlaceError::Access)?;
                *offset += n;
            }
            InMessage::Write {
                rkey,
                va,
                len,
                offset,
            } => {
                let end = offset.checked_add(n).filter(|&e| e <= *len);
                let Some(end) = end.filter(|&e| !last || e == *len) else {
                    return Err(PlaceError::Length);
                };
                if n > 0 {
                    let at = va.wrapping_add(u64::from(*offset));
                    mrs.with_remote_write(*rkey, ctx.pd, ctx.qpn, at, n as usize, |mut d| {
                        d.copy_from(payload)
                    })
                    .map_err(PlaceError::Access)?;
                }
                *offset = end;
            }
        }
        Ok(())
    }
}

/// A receive completion of `wqe` with `status` (the opcode RECV, from the QP's peer).
pub(crate) fn recv_wc(ctx: &QpContext, wqe: &RecvWqe, status: WcStatus) -> WorkCompletion {
    WorkCompletion {
        src_qp: ctx.dest_qpn,
        ..WorkCompletion::error(wqe.wr_id, status, WcOpcode::Recv, ctx.qpn)
    }
}

/// The receive completion of a SEND of `byte_len` bytes into `wqe`, with its immediate data
/// or the R_Key it invalidated.
pub(crate) fn send_wc(
    ctx: &QpContext,
    wqe: &RecvWqe,
    byte_len: u32,
    imm: Option<ImmDtRepr>,
    inv: Option<IethRepr>,
) -> WorkCompletion {
    let mut wc = recv_wc(ctx, wqe, WcStatus::Success);
    wc.byte_len = byte_len;
    if let Some(imm) = imm {
        wc.imm_data_or_inv_rkey = imm.0;
        wc.wc_flags |= WcFlags::WITH_IMM;
    }
    if let Some(inv) = inv {
        wc.imm_data_or_inv_rkey = inv.0;
        wc.wc_flags |= WcFlags::WITH_INV;
    }
    wc
}

/// The receive completion of an RDMA WRITE with immediate `imm`, `byte_len` bytes, for the
/// WQE it consumed.
pub(crate) fn write_imm_wc(
    ctx: &QpContext,
    wqe: &RecvWqe,
    byte_len: u32,
    imm: ImmDtRepr,
) -> WorkCompletion {
    let mut wc = recv_wc(ctx, wqe, WcStatus::Success);
    wc.opcode = WcOpcode::RecvRdmaWithImm;
    wc.byte_len = byte_len;
    wc.imm_data_or_inv_rkey = imm.0;
    wc.wc_flags |= WcFlags::WITH_IMM;
    wc
}
