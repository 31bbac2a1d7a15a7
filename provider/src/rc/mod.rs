//! The RC (reliable connected) transport (IBTA Vol. 1 chapter 9, "Transport layer", its RC
//! rules, 9.7): what RC adds to the queue pair of [`crate::qp`].
//!
//! * `requester` — segmentation, PSNs, AckReq, go-back-N (9.7.2, 9.7.6); UC and UD QPs run it
//!   too, with their differences in [`crate::uc`] and [`crate::ud`];
//! * `completer` — ACK/NAK/READ response/atomic ACK processing and the timers (9.7.5.1.4);
//! * `responder` — request validation and execution, ACK/NAK generation (9.7.4, 9.7.5);
//! * `ack_coalesce` — when plain ACKs leave: at once, or held to cover several requests;
//! * [`sequence`] — PSN classification at the responder (9.7.5.1.1).

pub(crate) mod ack_coalesce;
mod completer;
/// RC's parts of the requester (`qp/requester.rs`): the retransmit timer, the send window,
/// FLUSH and ATOMIC WRITE.
pub(crate) mod requester {
    use crate::qp::requester::Requester;

    pub(crate) mod flush_atomic_write;
    pub mod rto;
    pub mod window;

    pub use window::{DeviceWindow, Seat, DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS};
}
pub(crate) mod responder;
pub mod sequence;

pub use crate::qp::requester::ACK_REQ_INTERVAL;
pub use requester::rto::MIN_RTO;
pub use requester::{DeviceWindow, DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS};
