//! The modify-QP transition table: which `(current, next)` pairs are allowed and, per QP
//! type, which attributes each requires and which it accepts.
//!
//! Transcribed (as data, in softrnic's own layout) from the Linux kernel's `qp_state_table` in
//! `drivers/infiniband/core/verbs.c` (torvalds/linux at f4d8f354d753), the table behind
//! `ib_modify_qp_is_ok()` that kernel rxe and the hardware drivers use; it encodes IBTA 1.4
//! vol. 1 §11.2.5.2 "Modify Queue Pair" and the state diagram of §10.3.1. The RC, UC and UD
//! columns are kept; the XRC_INI and XRC_TGT ones are the RC column without the attributes of
//! the half the QP lacks (annex A14.4: an initiator has no responder, so no
//! `MAX_DEST_RD_ATOMIC` / `MIN_RNR_TIMER`; a target no requester, so no `RETRY_CNT` /
//! `RNR_RETRY` / `MAX_QP_RD_ATOMIC`), which is what the kernel's columns say. The SMI/GSI columns
//! (QP0/QP1 are not modified through this path) and RAW_PACKET (whose only entries are
//! `IB_QP_PORT` for RESET->INIT and `IB_QP_RATE_LIMIT` for RTR->RTS and RTS->RTS) are left out.
//!
//! `IBV_QP_STATE` does not appear here: [`super::transition_masks`] adds it.

use super::{AttrMask as A, QpState, QpType};

/// Required and optional attributes of one transition, for one QP type (without `STATE`).
#[derive(Clone, Copy)]
pub(super) struct Cell {
    pub req: A,
    pub opt: A,
}

/// One allowed transition: a [`Cell`] per QP type.
pub(super) struct Row {
    pub rc: Cell,
    pub uc: Cell,
    pub ud: Cell,
}

impl Row {
    pub(super) fn cell(&self, qp_type: QpType) -> Cell {
        match qp_type {
            QpType::Rc => self.rc,
            QpType::Uc => self.uc,
            QpType::Ud => self.ud,
            QpType::XrcSend => self
                .rc
                .without(A::MAX_DEST_RD_ATOMIC.union(A::MIN_RNR_TIMER)),
            QpType::XrcRecv => self
                .rc
                .without(A::RETRY_CNT.union(A::RNR_RETRY).union(A::MAX_QP_RD_ATOMIC)),
        }
    }
}

impl Cell {
    /// The cell with the attributes `a` neither required nor accepted.
    fn without(self, a: A) -> Cell {
        Cell {
            req: self.req.difference(a),
            opt: self.opt.difference(a),
        }
    }
}

const NONE: A = A::EMPTY;

const fn cell(req: A, opt: A) -> Cell {
    Cell { req, opt }
}

/// The same cell for all three QP types.
const fn same(req: A, opt: A) -> Row {
    Row {
        rc: cell(req, opt),
        uc: cell(req, opt),
        ud: cell(req, opt),
    }
}

/// `PKEY_INDEX | PORT | ACCESS_FLAGS`: what RESET->INIT needs (RC, UC) and INIT->INIT accepts.
const INIT_RC_UC: A = A::PKEY_INDEX.union(A::PORT).union(A::ACCESS_FLAGS);
/// `PKEY_INDEX | PORT | QKEY`: the UD counterpart.
const INIT_UD: A = A::PKEY_INDEX.union(A::PORT).union(A::QKEY);
/// INIT->RTR, required by UC (RC needs two more).
const RTR_UC: A = A::AV.union(A::PATH_MTU).union(A::DEST_QPN).union(A::RQ_PSN);
/// INIT->RTR, optional for RC and UC.
const RTR_OPT_RC_UC: A = A::ALT_PATH.union(A::ACCESS_FLAGS).union(A::PKEY_INDEX);
/// What a UC QP may change on the way to, or in, RTS.
const RTS_OPT_UC: A = A::CUR_STATE
    .union(A::ALT_PATH)
    .union(A::ACCESS_FLAGS)
    .union(A::PATH_MIG_STATE);
/// What an RC QP may change on the way to, or in, RTS.
const RTS_OPT_RC: A = RTS_OPT_UC.union(A::MIN_RNR_TIMER);
/// What a UD QP may change on the way to, or in, RTS.
const RTS_OPT_UD: A = A::CUR_STATE.union(A::QKEY);

/// The table entry for `current -> next`, or `None` if that transition is not allowed.
pub(super) fn row(current: QpState, next: QpState) -> Option<Row> {
    use QpState::*;
    let row = match (current, next) {
        // Any state but RESET may go to RESET or ERR; RESET may go to RESET (but not ERR).
        (_, Reset) => same(NONE, NONE),
        (Reset, Err) => return None,
        (_, Err) => same(NONE, NONE),

        (Reset, Init) => Row {
            rc: cell(INIT_RC_UC, NONE),
            uc: cell(INIT_RC_UC, NONE),
            ud: cell(INIT_UD, NONE),
        },
        (Init, Init) => Row {
            rc: cell(NONE, INIT_RC_UC),
            uc: cell(NONE, INIT_RC_UC),
            ud: cell(NONE, INIT_UD),
        },
        (Init, Rtr) => Row {
            rc: cell(
                RTR_UC.union(A::MAX_DEST_RD_ATOMIC).union(A::MIN_RNR_TIMER),
                RTR_OPT_RC_UC,
            ),
            uc: cell(RTR_UC, RTR_OPT_RC_UC),
            ud: cell(NONE, A::PKEY_INDEX.union(A::QKEY)),
        },
        (Rtr, Rts) => Row {
            rc: cell(
                A::TIMEOUT
                    .union(A::RETRY_CNT)
                    .union(A::RNR_RETRY)
                    .union(A::SQ_PSN)
                    .union(A::MAX_QP_RD_ATOMIC),
                RTS_OPT_RC,
            ),
            uc: cell(A::SQ_PSN, RTS_OPT_UC),
            ud: cell(A::SQ_PSN, RTS_OPT_UD),
        },
        (Rts, Rts) | (Sqd, Rts) => Row {
            rc: cell(NONE, RTS_OPT_RC),
            uc: cell(NONE, RTS_OPT_UC),
            ud: cell(NONE, RTS_OPT_UD),
        },
        (Rts, Sqd) => same(NONE, A::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => Row {
            rc: cell(
                NONE,
                A::PORT
                    .union(A::AV)
                    .union(A::TIMEOUT)
                    .union(A::RETRY_CNT)
                    .union(A::RNR_RETRY)
                    .union(A::MAX_QP_RD_ATOMIC)
                    .union(A::MAX_DEST_RD_ATOMIC)
                    .union(A::ALT_PATH)
                    .union(A::ACCESS_FLAGS)
                    .union(A::PKEY_INDEX)
                    .union(A::MIN_RNR_TIMER)
                    .union(A::PATH_MIG_STATE),
            ),
            uc: cell(
                NONE,
                A::AV
                    .union(A::ALT_PATH)
                    .union(A::ACCESS_FLAGS)
                    .union(A::PKEY_INDEX)
                    .union(A::PATH_MIG_STATE),
            ),
            ud: cell(NONE, A::PKEY_INDEX.union(A::QKEY)),
        },
        // The kernel keeps an (empty) RC entry although an RC QP never enters SQE.
        (Sqe, Rts) => Row {
            rc: cell(NONE, NONE),
            uc: cell(NONE, A::CUR_STATE.union(A::ACCESS_FLAGS)),
            ud: cell(NONE, RTS_OPT_UD),
        },
        _ => return None,
    };
    Some(row)
}
