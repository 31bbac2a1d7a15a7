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
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use crate::perf::sock::{self, Buffer};

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

/// The two sockets of a throughput baseline: the sender's, connected to the receiver's and
/// back, with the buffer sizes the kernel granted.
struct Flow {
    tx: UdpSocket,
    rx: UdpSocket,
    sndbuf: usize,
    rcvbuf: usize,
}

/// Binds `sender` and `receiver`, connects each to the other, asks for `buffer` bytes of
/// send and receive buffer, and makes every blocking call time out after `poll` (after which
/// its thread looks at the clock and at the other thread).
fn flow(
    sender: SocketAddr,
    receiver: SocketAddr,
    buffer: usize,
    poll: Duration,
) -> io::Result<Flow> {
    let tx = UdpSocket::bind(sender)?;
    let rx = UdpSocket::bind(receiver)?;
    tx.connect(rx.local_addr()?)?;
    rx.connect(tx.local_addr()?)?;
    let sndbuf = sock::grow_buffer(&tx, Buffer::Send, buffer)?;
    let rcvbuf = sock::grow_buffer(&rx, Buffer::Recv, buffer)?;
    tx.set_write_timeout(Some(poll))?;
    rx.set_read_timeout(Some(poll))?;
    Ok(Flow {
        tx,
        rx,
        sndbuf,
        rcvbuf,
    })
}

/// Runs `send` and `receive` on two threads named `names` and returns both results. The
/// flag `receive` is given is set once the sender is done, also when it fails or panics (or
/// never starts), so the receiver always ends.
fn sender_and_receiver<S: Send, R: Send>(
    names: (&str, &str),
    send: impl FnOnce() -> io::Result<S> + Send,
    receive: impl FnOnce(&AtomicBool) -> io::Result<R> + Send,
) -> io::Result<(S, R)> {
    let sender_done = AtomicBool::new(false);
    thread::scope(|s| {
        let receiver = thread::Builder::new()
            .name(names.1.into())
            .spawn_scoped(s, || receive(&sender_done))?;
        let sender = thread::Builder::new()
            .name(names.0.into())
            .spawn_scoped(s, || {
                let _done = SetOnDrop(&sender_done);
                send()
            });
        let sent = match sender {
            Ok(t) => join(t),
            Err(e) => {
                sender_done.store(true, Ordering::Release);
                Err(e)
            }
        };
        let got = join(receiver);
        Ok((sent?, got?))
    })
}

/// `lost / sent`, 0 when nothing was sent.
fn loss_ratio(lost: u64, sent: u64) -> f64 {
    if sent == 0 {
        0.0
    } else {
        lost as f64 / sent as f64
    }
}

/// `bytes` over `elapsed` in 10^9 bits per second, 0 over no time.
fn gbit_per_s(bytes: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e9
    } else {
        0.0
    }
}
