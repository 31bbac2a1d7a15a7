//! XRC, the eXtended Reliable Connected transport (IBTA annex A14; `ibv_open_xrcd(3)`,
//! `ibv_create_srq_ex(3)` with `IBV_SRQT_XRC`, `ibv_create_qp_ex(3)` with `IBV_QPT_XRC_SEND` /
//! `IBV_QPT_XRC_RECV`).
//!
//! * An **XRC domain** (A14.2.1) groups XRC SRQs and XRC target QPs; it is all a target QP is
//!   bound to (no PD, no CQ).
//! * An **XRC SRQ** (A14.2.2) is an SRQ of a PD that also belongs to an XRC domain and
//!   completes its receives on its own CQ; the requester names it by its 24-bit SRQ number.
//! * An **XRC INI QP** (`XRC_SEND`) is an RC requester whose requests carry the XRC opcodes
//!   and, in the XRCETH, the SRQ number the work request gives (`remote_srqn`).
//! * An **XRC TGT QP** (`XRC_RECV`) is an RC responder: for each request it takes the SRQ the
//!   XRCETH names, which must be an XRC SRQ of the QP's domain (else the request is refused:
//!   NAK Invalid Request, A14.6.3), places the data and checks R_Keys in that SRQ's PD, and
//!   completes on that SRQ's CQ.
//!
//! The RC engine does the rest ([`crate::qp::Qp`]); this module holds the types and the
//! target's choice of SRQ.

use crate::error::{Error, Result};
use crate::mr::PdHandle;
use crate::nic::CqId;
use crate::srq::{SrqId, SrqTable};
use crate::wr::{SendOpcode, SendWr};

/// An XRC domain handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct XrcdId(pub u32);

/// What makes an SRQ an XRC SRQ: its domain and its completion queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XrcSrq {
    /// The XRC domain.
    pub xrcd: XrcdId,
    /// Where the receives it serves complete.
    pub cq: CqId,
}

/// The SRQ an XRC request for a target QP of `xrcd` uses: the XRC SRQ numbered `srqn` (the
/// SRQ handle is its number) if it belongs to `xrcd`, with its PD and CQ; `None` otherwise.
pub fn target_srq(srqs: &mut SrqTable, xrcd: XrcdId, srqn: u32) -> Option<(SrqId, PdHandle, CqId)> {
    let id = SrqId(srqn);
    let srq = srqs.get_mut(id)?;
    let x = srq.xrc().filter(|x| x.xrcd == xrcd)?;
    Some((id, srq.pd(), x.cq))
}

/// Checks a send WR posted to an XRC INI QP: the SRQ number is 24 bits, and the operation is
/// one XRC has (annex A14.6 defines no FLUSH or ATOMIC WRITE opcode; local operations run as
/// on RC).
///
/// # Errors
/// `EINVAL` for an SRQ number over 24 bits or FLUSH / ATOMIC WRITE.
pub fn check_send(wr: &SendWr) -> Result<()> {
    if wr.xrc_srqn > softrnic_wire::xrceth::SRQN_MASK {
        return Err(Error::InvalidArgument("remote_srqn is 24 bits"));
    }
    if matches!(wr.opcode, SendOpcode::Flush | SendOpcode::AtomicWrite) {
        return Err(Error::InvalidArgument("XRC has no FLUSH or ATOMIC WRITE"));
    }
    Ok(())
}
