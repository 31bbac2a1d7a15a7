//! The reliable-connected transport (IBTA 9.7 "Reliable service"): how a message becomes
//! packets, how PSNs are checked, and (to come) the requester, responder and completer that
//! make up the engine.
//!
//! Status: segmentation and PSN classification are done; the requester, responder and
//! completer state machines are not written yet (issue "The RC engine").

pub mod segment;
pub mod sequence;
