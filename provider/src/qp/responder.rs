//! The part of a QP that differs most between the transports, its responder (IBTA 9.7.4 and
//! 9.7.5 for RC, their UC rules, 9.8.3 for UD): which one a QP has, and what the QP asks of
//! each whatever its transport (reset, `rq_psn`, flush). The responders themselves are
//! [`crate::rc`]'s, [`crate::uc`]'s and [`crate::ud`]'s.

use softrnic_wire::Psn;

use super::context::{Events, QpContext};
use crate::qp_state::QpType;
use crate::rc::ack_coalesce::AckCoalescer;
use crate::rc::responder::Responder as RcResponder;
use crate::uc::responder::UcResponder;

/// What differs most between the transports: the responder.
#[derive(Debug)]
pub(super) enum Responder {
    /// RC and XRC (IBTA 9.7.4, 9.7.5): requests answered with ACKs and NAKs, a plain ACK
    /// perhaps held to cover more (`rc/ack_coalesce.rs`). (An XRC INI QP's never runs: it
    /// drops requests.)
    Rc {
        resp: RcResponder,
        acks: AckCoalescer,
    },
    /// UC ([`crate::uc::responder`]): no answers.
    Uc(UcResponder),
    /// UD ([`crate::ud::responder`]): each datagram on its own, no state.
    Ud,
}

impl Responder {
    pub(super) fn new(qp_type: QpType) -> Responder {
        match qp_type {
            QpType::Rc | QpType::XrcSend | QpType::XrcRecv => Responder::Rc {
                resp: RcResponder::new(),
                acks: AckCoalescer::default(),
            },
            QpType::Uc => Responder::Uc(UcResponder::default()),
            QpType::Ud => Responder::Ud,
        }
    }

    /// Forgets everything (RESET).
    pub(super) fn reset(&mut self) {
        match self {
            Responder::Rc { resp, acks } => {
                resp.reset();
                *acks = AckCoalescer::default();
            }
            Responder::Uc(uc) => uc.reset(),
            Responder::Ud => {}
        }
    }

    /// Sets the expected PSN (`rq_psn`).
    pub(super) fn set_epsn(&mut self, psn: Psn) {
        match self {
            Responder::Rc { resp, .. } => resp.epsn = psn,
            Responder::Uc(uc) => uc.epsn = psn,
            Responder::Ud => {}
        }
    }

    /// Completes the receive WQE of a message in progress with `IBV_WC_WR_FLUSH_ERR`, and
    /// drops what is queued but ACKs and NAKs.
    pub(super) fn flush(&mut self, ctx: &QpContext, ev: &mut Events) {
        match self {
            Responder::Rc { resp, .. } => resp.flush(ctx, ev),
            Responder::Uc(uc) => uc.flush(ctx, ev),
            Responder::Ud => {}
        }
    }
}
