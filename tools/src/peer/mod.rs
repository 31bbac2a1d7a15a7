//! The two-process scenario harness: the scenarios of the RC engine's in-memory tests, run
//! between two processes over kernel UDP. The test process owns one [`node::Node`] (device,
//! QP, regions, fault injector); a peer process (`softrnic scenario-peer`) owns the other and
//! obeys the [`protocol`] commands the test sends through a [`client::Peer`].

pub mod client;
pub mod node;
pub mod protocol;
pub mod server;
