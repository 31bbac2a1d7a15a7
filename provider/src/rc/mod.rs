//! The RC (reliable connected) transport engine (IBTA Vol. 1 chapter 9, "Transport layer").
//!
//! * [`connect`] — the RESET→INIT→RTR→RTS recipe every caller uses;
//! * [`qp`] — the queue pair: state, queues, `ibv_modify_qp`, the sans-IO interface (it also
//!   runs UC and UD QPs, whose differences live in `crate::uc` and `crate::ud`);
//! * [`qp_attr`] — capacities and modify attributes as verbs passes them;
//! * `requester` — segmentation, PSNs, AckReq, go-back-N (9.7.2, 9.7.6);
//! * `completer` — ACK/NAK/READ response/atomic ACK processing and the timers (9.7.5.1.4);
//! * `responder` — request validation and execution, ACK/NAK generation (9.7.4, 9.7.5);
//! * `ack_coalesce` — when plain ACKs leave: at once, or held to cover several requests;
//! * [`segment`], [`sequence`] — packet sequences and PSN classification;
//! * [`transmit`] — packets out, with payload by reference to registered memory.

pub(crate) mod ack_coalesce;
mod completer;
pub mod connect;
pub mod context;
pub(crate) mod inbound;
mod local_ops;
pub mod qp;
pub mod qp_attr;
pub(crate) mod requester;
pub(crate) mod responder;
pub mod segment;
pub mod sequence;
pub mod transmit;

pub use connect::ConnectAttr;
pub use context::{Completion, CqSide, QpContext};
pub use qp::{Qp, QpAttr, QpCaps, QpLimits};
pub use requester::rto::MIN_RTO;
pub use requester::{
    DeviceWindow, ACK_REQ_INTERVAL, DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS,
};
pub use transmit::{Chunk, Chunks, Payload, Transmit, TxQueue, MAX_INLINE, MAX_SGE};
