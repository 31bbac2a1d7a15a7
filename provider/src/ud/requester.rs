//! What UD adds to the requester every transport shares (`qp/requester.rs`): only SEND (with immediate), one packet of at most
//! one MTU per WR, addressed per WR (IBTA 9.8.2: DestQP from the WR, a DETH with the Q_Key and
//! the source QP), no AckReq, no retransmission, completion at hand-out.

use softrnic_wire::deth::DethRepr;
use softrnic_wire::roce::RoceRepr;

use crate::error::{Error, Result};
use crate::qp::context::QpContext;
use crate::wr::{SendOpcode, SendWr, UdDest};

/// The high bit of a WR's Q_Key: use the QP's Q_Key instead (IBTA chapter 10, Q_Keys: a
/// Q_Key with the high-order bit set is a controlled Q_Key that the consumer may not send
/// itself; the channel adapter substitutes the QP's).
pub const QKEY_USE_QP: u32 = 0x8000_0000;

/// Checks a send WR for a UD QP.
///
/// # Errors
/// `EINVAL` for an operation UD does not have (only SEND and SEND with immediate), a WR
/// without a destination, a remote QPN over 24 bits, or a message longer than the MTU.
pub fn check(ctx: &QpContext, wr: &SendWr) -> Result<()> {
    if !matches!(wr.opcode, SendOpcode::Send | SendOpcode::SendWithImm) {
        return Err(Error::InvalidArgument(
            "UD has only SEND and SEND with immediate",
        ));
    }
    let Some(ud) = wr.ud else {
        return Err(Error::InvalidArgument("a UD send needs an address handle"));
    };
    if ud.remote_qpn > 0x00ff_ffff {
        return Err(Error::InvalidArgument("remote_qpn is 24 bits"));
    }
    if wr.message_len().is_none_or(|n| n > ctx.pmtu) {
        return Err(Error::InvalidArgument("a UD message is at most one MTU"));
    }
    Ok(())
}

/// Addresses a UD packet: BTH DestQP from the WR, and the DETH.
pub fn address(ctx: &QpContext, ud: &UdDest, roce: &mut RoceRepr) {
    roce.bth.dest_qp = ud.remote_qpn;
    let qkey = if ud.remote_qkey & QKEY_USE_QP != 0 {
        ctx.qkey
    } else {
        ud.remote_qkey
    };
    roce.deth = Some(DethRepr {
        qkey,
        src_qp: ctx.qpn,
    });
}
