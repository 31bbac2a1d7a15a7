//! The UC (unreliable connected) transport (IBTA Vol. 1 chapter 9, its UC rules; kernel rxe
//! for the details, `rxe_req.c` and `rxe_resp.c` under `IB_QPT_UC`).
//!
//! A UC QP is connected like an RC QP and segments SENDs and RDMA WRITEs (with immediate)
//! the same way, with the UC opcodes (`001xxxxx`), but nothing is acknowledged: the requester
//! never asks for, waits for or retransmits anything, and the responder never answers. UC has
//! no RDMA READ and no atomics.
//!
//! softrnic runs a UC QP on the RC machinery where the spec is the same — the send queue,
//! segmentation ([`crate::qp::segment`]) and PSN sequence of the requester, the receive queue
//! and the `ibv_modify_qp` checks of [`crate::rc::Qp`] — and keeps here what differs:
//!
//! * [`requester`] — which operations UC has, and completion at hand-out;
//! * [`responder`] — execution at the expected PSN, silent drop of a broken message.

pub mod requester;
pub mod responder;
