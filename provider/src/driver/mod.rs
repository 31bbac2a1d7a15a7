//! The thin I/O layer around the sans-IO engine: emitting packets onto a transport and
//! accepting received ones.

pub mod cm;
pub mod device;
pub mod emit;
pub mod ingress;
mod round;
mod runs;
mod spin;
mod thread;
mod watch;

pub use device::{Device, Progress, IDLE_ROUND};
pub use emit::{EmitStats, Emitter};
pub use ingress::{accept, Rejected};
