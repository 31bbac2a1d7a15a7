//! The UD (unreliable datagram) transport (IBTA Vol. 1 chapter 9, its UD rules; chapter 10 on
//! Q_Keys; the RoCE v2 annex A17 for the GRH of a received datagram, which is its IP header).
//!
//! A UD QP is not connected: every send WR names its destination (an address handle, the
//! remote QP number and a Q_Key) and is one SEND ONLY packet, with immediate data or not, of
//! at most one MTU, carrying a DETH (the Q_Key and the source QP). Nothing is acknowledged.
//! The receiver checks the Q_Key, and a receive completion says who sent the datagram
//! (`src_qp`) and is preceded in the buffer by 40 bytes of GRH.
//!
//! A UD QP is a [`crate::qp::Qp`] — its state, `ibv_modify_qp`, send and receive queues — and
//! sends with the requester every transport shares (`qp/requester.rs`), completing at
//! hand-out as UC does ([`crate::uc`]); this module
//! keeps what differs:
//!
//! * [`requester`] — the WR checks and the per-WR addressing (BTH DestQP, DETH);
//! * [`responder`] — the Q_Key check and delivery with the GRH.

pub mod requester;
pub mod responder;

use crate::qp::QpLimits;

/// The largest datagram of a UD QP, its path MTU: a UD QP has no path, so the port's active
/// MTU (as rxe's `get_mtu`), whatever `ibv_modify_qp` said.
pub(crate) fn max_datagram(limits: &QpLimits) -> u32 {
    limits.active_mtu.bytes()
}
