//! What an empty `poll_cq` costs a busy poller in polling mode, against the receive call it
//! is built around: a bare non-blocking `recvfrom(2)` on an empty UDP socket, in the same run.
//!
//! A busy poller finds a datagram only on the poll that starts after it arrived, so the time
//! an empty poll takes beyond its receive call is waited, on average half of it, by every
//! answer of a ping-pong. The ratio is that overhead: the CQ, the device's locks, the round's
//! bookkeeping. That is the cost within the spin budget (`uapi/src/spin.rs`), measured with
//! the budget lifted; a third line shows an empty poll once the budget is spent, which
//! yields the core.
//!
//! `cargo bench -p softrnic-uapi --bench empty_poll` (about 2 s). Without `--bench` (as
//! `cargo test --all-targets` runs it) it polls a few times and prints nothing.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use softrnic_uapi::{Context, OpenOptions, Progress, WcOpcode, WcStatus, WorkCompletion};

/// The device's address and the bare socket's (unused elsewhere in the tests).
const DEVICE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 35, 1));
const BARE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 35, 2));

/// Nanoseconds per call of `f`, over `n` calls.
fn ns_per(n: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    let n = if timed { 1_000_000 } else { 100 };
    let opts = OpenOptions {
        progress: Progress::Polling,
        key_seed: 35,
    };
    let ctx = Context::open(DEVICE, opts).expect("open the device");
    let cq = ctx.create_cq(16).expect("create a CQ");
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
    let bare = UdpSocket::bind((BARE, 0)).expect("bind the bare socket");
    bare.set_nonblocking(true).expect("non-blocking");
    let fd = bare.as_raw_fd();
    let mut buf = [0u8; 4096];
    let mut recvfrom = || {
        // SAFETY: `buf` and `addr` are valid for writes of the lengths passed.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let r = unsafe {
            libc::recvfrom(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                (&mut addr as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        };
        black_box(r);
    };
    let mut empty_poll = || {
        let got = cq.poll(&mut wcs).expect("poll an empty CQ");
        assert_eq!(got, 0, "nothing was posted, nothing completes");
    };
    // They take turns, three times each, so that a drift of the machine's speed hits all.
    let (mut poll_ns, mut bare_ns, mut yield_ns) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..3 {
        softrnic_uapi::set_spin(None);
        poll_ns = poll_ns.min(ns_per(n, &mut empty_poll));
        bare_ns = bare_ns.min(ns_per(n, &mut recvfrom));
        // The budget is spent by the polls just made (more than `DEFAULT_SPIN` of them).
        softrnic_uapi::set_spin(Some(std::time::Duration::ZERO));
        yield_ns = yield_ns.min(ns_per(n / 10, &mut empty_poll));
    }
    if timed {
        println!("bare recvfrom on an empty socket:   {bare_ns:>5.0} ns");
        println!(
            "empty poll_cq, polling mode:        {poll_ns:>5.0} ns   = {:.2}x the bare recvfrom",
            poll_ns / bare_ns
        );
        println!(
            "the same once the spin budget is spent (it yields): {yield_ns:>5.0} ns   = {:.2}x",
            yield_ns / bare_ns
        );
    }
}
