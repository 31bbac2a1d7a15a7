//! What softrnic puts on the wire when the kernel cuts its segmentation runs (UDP GSO): the
//! whole demo (every opcode, 64 KiB WRITEs cut into MTU-sized packets, a SEND ping-pong whose
//! answers leave with an ACK behind them) runs in a private network namespace, whose loopback
//! device has segmentation offload turned off, so that a packet socket sees the segments the
//! kernel cut rather than the runs. Every ICRC must verify: the ICRC covers the IPv4
//! Identification, which a QP's connected socket numbers from a random start, one number per
//! datagram handed to the kernel, and segment `k` of a run carries the run's number plus `k`;
//! the transport must have learnt the counter and moved every ICRC to its packet's ID.
//!
//! Needs root (a network namespace and an AF_PACKET socket) and the `ip` and `ethtool`
//! commands; skips otherwise (`softrnic_testkit::skip`).

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use softrnic_uapi::Progress;
use softrnic_wire::frame::{Frame, IpHeader};
use softrnic_wire::Error as WireError;

mod netns;
use netns::{enter, have, run, Netns};

/// A packet socket seeing every frame on `lo`, with a large buffer.
fn capture_lo() -> OwnedFd {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(proto));
        assert!(fd >= 0, "AF_PACKET: {}", std::io::Error::last_os_error());
        let fd = OwnedFd::from_raw_fd(fd);
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = libc::if_nametoindex(c"lo".as_ptr()) as i32;
        let r = libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast(),
            size_of::<libc::sockaddr_ll>() as u32,
        );
        assert_eq!(r, 0, "bind lo: {}", std::io::Error::last_os_error());
        let size: libc::c_int = 64 << 20;
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&raw const size).cast(),
            size_of::<libc::c_int>() as u32,
        );
        fd
    }
}

/// Every frame waiting on `fd`, once: a packet socket on `lo` sees each frame leave and
/// arrive, and only the arrivals are kept.
fn drain(fd: &OwnedFd) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 70_000];
    loop {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` and `from` are valid for writes of the lengths passed.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&raw mut from).cast(),
                &mut len,
            )
        };
        if n <= 0 {
            return frames;
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        frames.push(buf[..n as usize].to_vec());
    }
}

#[test]
fn every_segment_the_kernel_cuts_from_a_run_has_a_valid_icrc() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !have("ip", "-V") || !have("ethtool", "--version") {
        softrnic_testkit::skip(
            "every_segment_the_kernel_cuts_from_a_run_has_a_valid_icrc",
            "needs root and the ip and ethtool commands (apt-get install iproute2 ethtool)",
        );
        return;
    }
    let ns = Netns::new("gso");
    run(&[
        "ip",
        "netns",
        "exec",
        &ns.0,
        "ethtool",
        "-K",
        "lo",
        "tx-udp-segmentation",
        "off",
    ]);
    let name = ns.0.clone();
    let frames = std::thread::spawn(move || {
        enter(&name);
        let cap = capture_lo();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        // The demo fails on any byte that differs.
        softrnic_tools::demo::run(a, b, Progress::Polling).expect("the demo runs");
        drain(&cap)
    })
    .join()
    .expect("the namespace thread");
    // A flow's IDs go up by one from datagram to datagram, except after a run of `k` segments,
    // which took one number of the counter but carry `k`: the next datagram steps back.
    let mut last_ident = std::collections::HashMap::new();
    let (mut roce, mut segments) = (0, 0);
    for (i, f) in frames.iter().enumerate() {
        match Frame::parse(f) {
            Ok(frame) => {
                let d = frame.datagram;
                assert!(
                    d.icrc_ok,
                    "frame {i}: ICRC {:#010x} does not verify",
                    d.icrc
                );
                roce += 1;
                if let IpHeader::V4(h) = d.repr.ip {
                    let flow = (h.repr.src_addr, d.repr.udp.src_port);
                    if let Some(prev) = last_ident.insert(flow, h.ident) {
                        segments += usize::from(h.ident != prev.wrapping_add(1));
                    }
                }
            }
            Err(WireError::NotRoce(_)) => {}
            Err(e) => panic!("frame {i} is malformed: {e}"),
        }
    }
    assert!(roce > 100, "only {roce} RoCE frames captured");
    assert!(
        segments > 0,
        "no frame stepped back after a run: the runs were not segmented ({roce} RoCE frames)"
    );
    eprintln!("{roce} RoCE frames, {segments} of them after a run: every ICRC verifies");
}
