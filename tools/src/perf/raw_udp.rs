//! The raw UDP baseline: what the kernel's own UDP does over loopback on this machine, measured
//! in the same run as the RC figures it is compared with.
//!
//! softrnic carries RoCEv2 through kernel UDP sockets, so plain UDP with no RDMA on top is the
//! ceiling its RC transport is judged against:
//!
//! - [`udp_bandwidth`]: one thread on 127.0.0.1 floods 4096-byte datagrams with `sendmmsg` to a
//!   thread on 127.0.0.2 that reads them with `recvmmsg`; the figure is the payload the receiver
//!   got per second, and what the sender handed the kernel that never arrived (loss). RC RDMA
//!   WRITE throughput of the same message size is compared with it.
//! - [`udp_gso_bandwidth`]: the same flood as the kernel can carry it fastest, in runs of 15
//!   segments of 4112 bytes (a RoCEv2 WRITE MIDDLE packet at PMTU 4096) that the sender hands
//!   over with UDP GSO (`UDP_SEGMENT`) and the receiver reads whole with UDP GRO (`UDP_GRO`),
//!   as softrnic sends a 64 KiB WRITE. RC RDMA WRITE throughput is compared with this one.
//! - [`udp_pingpong`]: two threads bounce a 64-byte datagram between 127.0.0.1 and 127.0.0.2,
//!   each spinning on a non-blocking `recv`; the figure is the round trip. The RC SEND ping-pong
//!   is compared with it.
//! - [`udp_rc_pattern_pingpong`]: the same bounce with the datagrams softrnic's transport
//!   sends for one RC SEND round trip (an 80-byte answer and a 20-byte ACK a hop, `sendmmsg`
//!   and a busy `recvmmsg`): the kernel's share of the RC ping-pong, protocol left out.
//!
//! All four start their own threads and always end: every blocking call has a timeout
//! after which its thread looks at the clock and at the other side. The measured loops do not
//! allocate: buffers, message headers and the sample vector are made before them.

mod bandwidth;
mod gso;
mod pingpong;
mod rc_pattern;

pub use bandwidth::{udp_bandwidth, BwConfig, BwResult};
pub use gso::{udp_gso_bandwidth, GsoConfig, GsoResult};
pub use pingpong::{udp_pingpong, LatConfig, LatResult};
pub use rc_pattern::{udp_rc_pattern_pingpong, PatternConfig, PatternResult};

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use serde_json::{Map, Value};

/// Largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65_507;

/// Sets the flag when dropped, also when its thread unwinds.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Joins a thread, passing its panic on.
fn join<T>(t: thread::ScopedJoinHandle<'_, T>) -> T {
    t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

fn into_map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("json! of an object literal"),
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}
