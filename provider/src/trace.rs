//! The engine's events, for whoever watches: QP state changes, retransmissions (after a local
//! ACK timeout, a sequence NAK or an RNR NAK: IBTA 9.7.5.2, 9.7.6), NAKs sent and received
//! with their AETH syndrome (9.7.5.2.x, table 45), RNR waits, retry budgets running out, and
//! the responder's ACK coalescing.
//!
//! They go through the `tracing` crate, under targets `softrnic::qp` (state changes) and
//! `softrnic::rc` (the reliable transport): at `debug` what a person debugging a connection
//! wants, at `trace` what happens on every ACK. A program chooses what it sees with a
//! subscriber; softrnic's drop-in libraries and CLI install one reading `SOFTRNIC_LOG`
//! (`softrnic_uapi::log`), e.g. `SOFTRNIC_LOG=softrnic::rc=debug`.
//!
//! With nobody listening, an event costs the check of one global level, an atomic load.
//! Without the crate's `trace` feature the macros below expand to nothing, which is the
//! baseline `cargo bench -p softrnic-uapi --bench engine_rtt` compares against.

/// A `debug`-level event of the engine (see the module doc).
#[cfg(feature = "trace")]
macro_rules! debug_event {
    ($($arg:tt)*) => { ::tracing::debug!($($arg)*) };
}

/// A `debug`-level event of the engine: compiled out.
#[cfg(not(feature = "trace"))]
macro_rules! debug_event {
    ($($arg:tt)*) => {};
}

/// A `trace`-level event of the engine (see the module doc).
#[cfg(feature = "trace")]
macro_rules! trace_event {
    ($($arg:tt)*) => { ::tracing::trace!($($arg)*) };
}

/// A `trace`-level event of the engine: compiled out.
#[cfg(not(feature = "trace"))]
macro_rules! trace_event {
    ($($arg:tt)*) => {};
}
