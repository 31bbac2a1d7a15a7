//! softrnic-provider: the software RNIC.
//!
//! What a RoCE NIC does in hardware, in userspace: protection domains, the memory-region key
//! table, completion queues, queue pairs and the RC protocol engine (requester, responder,
//! completer, timers), plus the transports that carry packets.
//!
//! The protocol engine is sans-IO (in the manner of quinn-proto): it takes packets, work
//! requests and the current time, and gives packets, completions and its next deadline. It
//! opens no sockets, starts no threads and reads no clocks; the driver around it does.
//!
//! The modules below, each with the part of the IBTA specification it implements.

#![deny(missing_docs)]

// First: the event macros are visible only to the modules declared after it.
#[macro_use]
mod trace;

pub mod bpf;
pub mod cm;
pub mod counters;
pub mod cq;
pub mod device;
pub mod driver;
pub mod error;
pub mod event;
pub mod gsi;
pub mod host;
pub mod mr;
pub mod nic;
pub mod qp;
pub mod qp_state;
pub mod rc;
pub mod srq;
pub mod timer;
pub mod transport;
pub mod uc;
pub mod ud;
pub mod wc;
pub mod wr;
pub mod xrc;

pub use error::{Error, Result};
