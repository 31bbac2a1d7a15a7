//! The UC (unreliable connected) transport (IBTA Vol. 1 chapter 9, its UC rules; kernel rxe
//! for the details, `rxe_req.c` and `rxe_resp.c` under `IB_QPT_UC`).
//!
//! A UC QP is connected like an RC QP and segments SENDs and RDMA WRITEs (with immediate)
//! the same way, with the UC opcodes (`001xxxxx`), but nothing is acknowledged: the requester
//! never asks for, waits for or retransmits anything, and the responder never answers. UC has
//! no RDMA READ and no atomics.
//!
//! A UC QP is a [`crate::qp::Qp`] — its state, `ibv_modify_qp`, send and receive queues — and
//! sends with the requester every transport shares (`qp/requester.rs`: segmentation,
//! [`crate::qp::segment`], and the PSN sequence); this module keeps what differs:
//!
//! * [`requester`] — which operations UC has, and completion at hand-out;
//! * [`responder`] — execution at the expected PSN, silent drop of a broken message.

pub mod requester;
pub mod responder;
