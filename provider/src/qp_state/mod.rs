//! The QP state machine and the `ibv_modify_qp` attribute-mask rules.
//!
//! Read first: IBTA 1.4 vol. 1 §10.3 "Queue pair and EE context states" (the states, the
//! state diagram and what each state does to the send and receive queues), §10.8 on posting
//! work requests, and §11.2.5.2 "Modify Queue Pair" (which attributes each transition
//! requires or accepts). The transition table itself (module `table`) follows the Linux kernel's
//! `qp_state_table` / `ib_modify_qp_is_ok()` (`drivers/infiniband/core/verbs.c`) for RC, UC and
//! UD, so that a program that works against kernel rxe or a RoCE NIC gets the same answers here.
//!
//! | from \ to | RESET | INIT | RTR | RTS | SQD | SQE | ERR |
//! |-----------|-------|------|-----|-----|-----|-----|-----|
//! | RESET     | yes   | yes  |     |     |     |     |     |
//! | INIT      | yes   | yes  | yes |     |     |     | yes |
//! | RTR       | yes   |      |     | yes |     |     | yes |
//! | RTS       | yes   |      |     | yes | yes |     | yes |
//! | SQD       | yes   |      |     | yes | yes |     | yes |
//! | SQE       | yes   |      |     | yes |     |     | yes |
//! | ERR       | yes   |      |     |     |     |     | yes |
//!
//! The table governs `ibv_modify_qp` only. SQE can be entered only by the RNIC itself (a UD or
//! UC send error), and the engine also moves a QP to ERR on its own (a fatal completion error);
//! those transitions do not go through [`check_transition`].
//!
//! Choices, where the kernel and the IBTA leave room:
//!
//! * **RESET -> ERR is refused**, as in the kernel table (its RESET row has only RESET and
//!   INIT). Every other state may go to RESET or ERR with no attribute but `IBV_QP_STATE`.
//! * **`IBV_QP_STATE` absent** means "stay in the current state": the mask is checked against
//!   the `current -> current` entry, so it fails in RTR and SQE (no such entry) and, in RESET
//!   and ERR, passes only with an empty mask. This is what uverbs does.
//! * **`IBV_QP_CUR_STATE`** is accepted only when the QP is in RTR, RTS, SQD or SQE and the
//!   transition lists it as optional (exactly `ib_modify_qp_is_ok()`). Its *value* is checked by
//!   [`check_modify`]: it must equal the QP's actual state. The kernel instead substitutes the
//!   claimed state for the actual one before the table lookup; softrnic refuses the mismatch,
//!   because the attribute exists so that the consumer can say which state it believes the QP is
//!   in (e.g. SQE after an asynchronous send error) and a wrong belief should not let a modify
//!   skip the attributes its real transition requires.
//! * Unknown mask bits (bits 21..=24 and 26..=31) are refused.

mod attr_mask;
mod encoding;
mod table;
#[cfg(test)]
mod tests;

pub use attr_mask::AttrMask;
pub use encoding::{local_ack_timeout, rnr_retries, transport_retries, Mtu, Retries};

use crate::error::{Error, Result};
use attr_mask::{missing, not_allowed, UNKNOWN};
use core::fmt;

/// A QP state, with libibverbs' `enum ibv_qp_state` values (IBTA §10.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpState {
    /// `IBV_QPS_RESET`: just created or reset; no work request may be posted.
    Reset = 0,
    /// `IBV_QPS_INIT`: initialised; receives may be posted but no packet is processed.
    Init = 1,
    /// `IBV_QPS_RTR`: ready to receive; incoming requests are processed.
    Rtr = 2,
    /// `IBV_QPS_RTS`: ready to send; both queues are processed.
    Rts = 3,
    /// `IBV_QPS_SQD`: send queue drain(ed); new sends are queued but not started.
    Sqd = 4,
    /// `IBV_QPS_SQE`: send queue error (UD and UC only); receive processing goes on.
    Sqe = 5,
    /// `IBV_QPS_ERR`: error; every work request completes with `IBV_WC_WR_FLUSH_ERR`.
    Err = 6,
}

impl QpState {
    /// All states, in numeric order.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// The state with libibverbs value `v`.
    ///
    /// # Errors
    /// `EINVAL` if `v` is not an `ibv_qp_state` (7, `IBV_QPS_UNKNOWN`, is refused too).
    pub fn from_ibv(v: u32) -> Result<QpState> {
        QpState::ALL
            .get(v as usize)
            .copied()
            .ok_or(Error::InvalidArgument("unknown QP state"))
    }

    /// The libibverbs value.
    pub fn ibv(self) -> u32 {
        self as u32
    }

    /// The name used in the IBTA and in error messages ("RTS", ...).
    pub fn name(self) -> &'static str {
        ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"][self as usize]
    }

    /// Whether `ibv_post_send` is accepted: RTS, SQD, SQE and ERR.
    ///
    /// Follows kernel rxe (`rxe_post_send`: "qp not ready to send", `EINVAL` when the state is
    /// below RTS) and IBTA §10.3.1: in SQD new WRs are queued and start on the return to RTS; in
    /// SQE and ERR they are accepted and completed with `IBV_WC_WR_FLUSH_ERR`. RESET, INIT and
    /// RTR refuse them with `EINVAL`.
    pub fn can_post_send(self) -> bool {
        matches!(
            self,
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
        )
    }

    /// Whether `ibv_post_recv` is accepted: every state but RESET.
    ///
    /// Follows kernel rxe (`rxe_post_recv`, citing C10-97.2.1: `EINVAL` below INIT). In INIT
    /// and later the WR is queued; in ERR it is flushed.
    pub fn can_post_recv(self) -> bool {
        self != QpState::Reset
    }

    /// Whether incoming request packets are processed: RTR, RTS, SQD and SQE (IBTA §10.3.1:
    /// receive processing starts in RTR and continues through SQD and SQE). In RESET and INIT
    /// they are silently dropped; in ERR they are dropped (kernel rxe passes them to its
    /// responder, which drops them while flushing).
    pub fn accepts_incoming(self) -> bool {
        matches!(
            self,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    }

    /// Whether incoming *response* packets (ACK, read response, atomic ACK) are processed:
    /// RTS, SQD and SQE, as kernel rxe's `check_type_state` (responses below RTS are dropped,
    /// since nothing has been sent).
    pub fn accepts_responses(self) -> bool {
        matches!(self, QpState::Rts | QpState::Sqd | QpState::Sqe)
    }

    /// Whether entering this state flushes the queues: true for ERR only. Every outstanding WR
    /// of both queues, and every WR posted while the QP stays in ERR, completes with
    /// `IBV_WC_WR_FLUSH_ERR` (IBTA §10.3.1, "Error"); the engine does the flushing. Entering
    /// RESET discards the queues *without* completions.
    pub fn flushes_on_entry(self) -> bool {
        self == QpState::Err
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A QP transport type, with libibverbs' `enum ibv_qp_type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpType {
    /// `IBV_QPT_RC`: reliable connected.
    Rc = 2,
    /// `IBV_QPT_UC`: unreliable connected.
    Uc = 3,
    /// `IBV_QPT_UD`: unreliable datagram.
    Ud = 4,
    /// `IBV_QPT_XRC_SEND`: the initiator of an XRC connection (IBTA A14.4), an RC requester
    /// without a receive queue whose messages name an XRC SRQ at the target.
    XrcSend = 9,
    /// `IBV_QPT_XRC_RECV`: the target of an XRC connection, an RC responder without a send
    /// queue that takes receive WQEs from the XRC SRQs of its XRC domain.
    XrcRecv = 10,
}

impl QpType {
    /// All supported types.
    pub const ALL: [QpType; 5] = [
        QpType::Rc,
        QpType::Uc,
        QpType::Ud,
        QpType::XrcSend,
        QpType::XrcRecv,
    ];

    /// The type with libibverbs value `v`.
    ///
    /// # Errors
    /// `EOPNOTSUPP` for `IBV_QPT_RAW_PACKET` (8) and `IBV_QPT_DRIVER` (0xff); `EINVAL` for
    /// anything else that is not RC, UC, UD, XRC_SEND or XRC_RECV.
    pub fn from_ibv(v: u32) -> Result<QpType> {
        match v {
            2 => Ok(QpType::Rc),
            3 => Ok(QpType::Uc),
            4 => Ok(QpType::Ud),
            9 => Ok(QpType::XrcSend),
            10 => Ok(QpType::XrcRecv),
            8 | 0xff => Err(Error::NotSupported(
                "QP type not supported (only RC, UC, UD and XRC)",
            )),
            _ => Err(Error::InvalidArgument("unknown QP type")),
        }
    }

    /// The libibverbs value.
    pub fn ibv(self) -> u32 {
        self as u32
    }

    /// The name used in the IBTA and by `rdma resource show qp` ("RC", ...).
    pub fn name(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
            QpType::XrcSend => "XRC_INI",
            QpType::XrcRecv => "XRC_TGT",
        }
    }

    /// Whether the QP is one end of an XRC connection.
    pub fn is_xrc(self) -> bool {
        matches!(self, QpType::XrcSend | QpType::XrcRecv)
    }
}

/// The attributes of one transition, for one QP type, `IBV_QP_STATE` included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionMasks {
    /// Must all be present. Contains `STATE` when the state changes.
    pub required: AttrMask,
    /// May be present. Contains `STATE` when the state stays the same (`RTS -> RTS`).
    pub optional: AttrMask,
}

/// The masks of `current -> next` for `qp_type`, or `None` if the transition is not allowed.
pub fn transition_masks(
    qp_type: QpType,
    current: QpState,
    next: QpState,
) -> Option<TransitionMasks> {
    let cell = table::row(current, next)?.cell(qp_type);
    Some(if current == next {
        TransitionMasks {
            required: cell.req,
            optional: cell.opt | AttrMask::STATE,
        }
    } else {
        TransitionMasks {
            required: cell.req | AttrMask::STATE,
            optional: cell.opt,
        }
    })
}

/// Whether a modify of a `qp_type` QP from `current` to `next` with `mask` is allowed: the
/// transition is in the table, every required attribute is in `mask` and nothing else but
/// optional ones is. Without `IBV_QP_STATE` in `mask`, `next` must equal `current`.
///
/// # Errors
/// `EINVAL`, the reason naming the unknown bit, the refused transition, or the first (lowest)
/// missing or disallowed attribute.
pub fn check_transition(
    qp_type: QpType,
    current: QpState,
    next: QpState,
    mask: AttrMask,
) -> Result<()> {
    if !AttrMask::KNOWN.contains(mask) {
        return Err(Error::InvalidArgument(UNKNOWN));
    }
    if !mask.contains(AttrMask::STATE) && next != current {
        return Err(Error::InvalidArgument(
            "modify QP: required attribute missing: IBV_QP_STATE (the state changes)",
        ));
    }
    if mask.contains(AttrMask::CUR_STATE)
        && !matches!(
            current,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return Err(Error::InvalidArgument(
            "modify QP: IBV_QP_CUR_STATE is only allowed when the QP is in RTR, RTS, SQD or SQE",
        ));
    }
    let Some(masks) = transition_masks(qp_type, current, next) else {
        return Err(Error::InvalidArgument(refused(current, next)));
    };
    if let Some(b) = masks.required.difference(mask).iter().next() {
        return Err(Error::InvalidArgument(missing(b)));
    }
    if let Some(b) = mask
        .difference(masks.required | masks.optional)
        .iter()
        .next()
    {
        return Err(Error::InvalidArgument(not_allowed(b)));
    }
    Ok(())
}

/// [`check_transition`] from the raw `ibv_modify_qp` arguments: `actual` is the QP's state,
/// `cur_qp_state` and `qp_state` the fields of `ibv_qp_attr` (read only when their mask bit is
/// set). Returns the state the QP is in after the modify.
///
/// # Errors
/// `EINVAL` as [`check_transition`], and if `IBV_QP_CUR_STATE` is set but `cur_qp_state` is
/// not `actual` (see the module doc for why softrnic, unlike the kernel, refuses this).
pub fn check_modify(
    qp_type: QpType,
    actual: QpState,
    mask: AttrMask,
    cur_qp_state: QpState,
    qp_state: QpState,
) -> Result<QpState> {
    if mask.contains(AttrMask::CUR_STATE) && cur_qp_state != actual {
        return Err(Error::InvalidArgument(
            "modify QP: IBV_QP_CUR_STATE does not match the QP's current state",
        ));
    }
    let next = if mask.contains(AttrMask::STATE) {
        qp_state
    } else {
        actual
    };
    check_transition(qp_type, actual, next, mask)?;
    Ok(next)
}

macro_rules! refused_row {
    ($from:literal) => {
        [
            concat!(
                "modify QP: state transition ",
                $from,
                " -> RESET is not allowed"
            ),
            concat!(
                "modify QP: state transition ",
                $from,
                " -> INIT is not allowed"
            ),
            concat!(
                "modify QP: state transition ",
                $from,
                " -> RTR is not allowed"
            ),
            concat!(
                "modify QP: state transition ",
                $from,
                " -> RTS is not allowed"
            ),
            concat!(
                "modify QP: state transition ",
                $from,
                " -> SQD is not allowed"
            ),
            concat!(
                "modify QP: state transition ",
                $from,
                " -> SQE is not allowed"
            ),
            concat!(
                "modify QP: state transition ",
                $from,
                " -> ERR is not allowed"
            ),
        ]
    };
}

/// "modify QP: state transition RTS -> INIT is not allowed", for every pair.
const REFUSED: [[&str; 7]; 7] = [
    refused_row!("RESET"),
    refused_row!("INIT"),
    refused_row!("RTR"),
    refused_row!("RTS"),
    refused_row!("SQD"),
    refused_row!("SQE"),
    refused_row!("ERR"),
];

fn refused(current: QpState, next: QpState) -> &'static str {
    REFUSED[current as usize][next as usize]
}
