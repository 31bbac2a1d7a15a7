//! The RC (reliable connected) transport (IBTA Vol. 1 chapter 9, "Transport layer", its RC
//! rules, 9.7): what RC adds to the queue pair of [`crate::qp`].
//!
//! * `requester` — what RC adds to the requester every transport shares
//!   (`qp/requester.rs`, 9.7.2): AckReq, go-back-N, the retransmit timer, the send window
//!   (9.7.6), FLUSH and ATOMIC WRITE;
//! * `completer` — ACK/NAK/READ response/atomic ACK processing and the timers (9.7.5.1.4);
//! * `responder` — request validation and execution, ACK/NAK generation (9.7.4, 9.7.5);
//! * `ack_coalesce` — when plain ACKs leave: at once, or held to cover several requests;
//! * [`sequence`] — PSN classification at the responder (9.7.5.1.1).

pub(crate) mod ack_coalesce;
mod completer;
pub(crate) mod requester;
pub(crate) mod responder;
pub mod sequence;

pub use requester::rto::{INITIAL_RTO, MIN_RTO};
pub use requester::{
    DeviceWindow, ACK_REQ_INTERVAL, DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS,
};
