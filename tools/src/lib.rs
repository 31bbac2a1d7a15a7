//! The softrnic command line's library: each subcommand's logic, kept out of `main.rs` so that
//! tests and fuzz targets can call it.

#![deny(missing_docs)]

pub mod decode;
pub mod demo;
pub mod peer;
pub mod perf;
pub mod pingpong;
pub mod rig;
pub mod run;
pub mod stat;
pub mod status;
