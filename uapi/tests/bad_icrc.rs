//! A packet whose ICRC fails is never executed (IBTA A17.4.2; rxe's `rxe_icrc_check`), on
//! either receive path of the UDP transport: the socket (no packet ring: `SOFTRNIC_RING=0`,
//! or no `CAP_NET_RAW`), where the IPv4 ID is not seen and the ICRC must match for some ID,
//! and the packet ring, where the header is seen — also for the segments of a UDP GSO run,
//! a short one the ring cuts and a long one the socket gives whole (`UDP_GRO`). Dropped
//! packets are counted (`RxStats::icrc_errors`); the good packet after them is executed.
//!
//! The victim's RC QP is connected to a socket of the test on 127.0.93.x, which sends the
//! packets from the QP's peer address. Addresses 127.0.93.11 to .18.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

mod common;

use common::hostile::{nothing_at, packet, set_int, socket, victim, Ext, MEM_LEN};
use common::Node;
use softrnic_provider::transport::UdpTransport;
use softrnic_uapi::{Mtu, QpState, WcStatus};
use softrnic_wire::icrc::with_ipv4_ident;
use softrnic_wire::reth::RethRepr;
use softrnic_wire::{Opcode, ROCE_V2_UDP_PORT};

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 93, last))
}

/// The victim's transport at `addr`: the socket path, or the packet ring (`None`, the test
/// `test` skipping, where it cannot be had).
fn transport(test: &str, addr: IpAddr, ring: bool) -> Option<UdpTransport> {
    let t = UdpTransport::bind(addr).unwrap().without_ring();
    if !ring {
        return Some(t);
    }
    match t.with_ring() {
        Ok(t) => Some(t),
        Err((_, e)) => {
            softrnic_testkit::skip(test, &format!("no packet ring on {addr} ({e})"));
            None
        }
    }
}

/// `b` with its ICRC one bit off.
fn wrong(mut b: Vec<u8>) -> Vec<u8> {
    *b.last_mut().unwrap() ^= 0x10;
    b
}

/// `b` without its ICRC.
fn cut(mut b: Vec<u8>) -> Vec<u8> {
    b.truncate(b.len() - 4);
    b
}

/// A WRITE of `data` at offset `at` of the victim's region.
fn write_at(node: &Node, at: u64) -> Ext {
    Ext {
        reth: Some(RethRepr {
            va: node.mem.addr() + at,
            rkey: node.mem.rkey(),
            dma_len: 0, // set by the caller's payload
        }),
        ..Ext::default()
    }
}

fn with_len(mut e: Ext, len: usize) -> Ext {
    if let Some(r) = &mut e.reth {
        r.dma_len = len as u32;
    }
    e
}

/// Wrong and missing ICRCs on a SEND and a WRITE: none executed, each counted; then the
/// same SEND with its ICRC is. The test is `test`.
fn bad_icrcs_are_dropped(test: &str, ring: bool, v: IpAddr, p: IpAddr) {
    let Some(t) = transport(test, v, ring) else {
        return;
    };
    let (node, peer) = victim(t, p, Mtu::Mtu1024);
    let qpn = node.qp.qp_num();
    node.post_recv_of(1, 64);
    let before = node.bytes();
    let from = SocketAddr::new(p, ROCE_V2_UDP_PORT);
    let send = packet(
        from,
        v,
        (Opcode::RC_SEND_ONLY, qpn, 0),
        Ext::default(),
        b"hello, world",
    );
    let w = with_len(write_at(&node, 0), 12);
    let write = packet(
        from,
        v,
        (Opcode::RC_RDMA_WRITE_ONLY, qpn, 0),
        w,
        b"hello, world",
    );
    let bad = [
        wrong(send.clone()),
        cut(send.clone()),
        wrong(write.clone()),
        cut(write),
    ];
    for b in &bad {
        peer.send_to(b, (v, ROCE_V2_UDP_PORT)).unwrap();
    }
    node.received(bad.len() as u64);
    node.no_completion("after the bad ICRCs");
    assert_eq!(node.bytes(), before, "a WRITE with a bad ICRC wrote");
    assert_eq!(
        nothing_at(&peer),
        None,
        "a packet with a bad ICRC was answered"
    );
    assert_eq!(node.rx().icrc_errors, bad.len() as u64, "{:?}", node.rx());

    peer.send_to(&send, (v, ROCE_V2_UDP_PORT)).unwrap();
    let wc = node.one();
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (1, WcStatus::Success, 12)
    );
    assert_eq!(&node.bytes()[..12], b"hello, world");
    assert_eq!(node.qp.state(), QpState::Rts);
}

#[test]
fn bad_icrcs_are_dropped_on_the_socket_path() {
    bad_icrcs_are_dropped(
        "bad_icrcs_are_dropped_on_the_socket_path",
        false,
        ip(11),
        ip(12),
    );
}

#[test]
fn bad_icrcs_are_dropped_on_the_ring_path() {
    bad_icrcs_are_dropped(
        "bad_icrcs_are_dropped_on_the_ring_path",
        true,
        ip(13),
        ip(14),
    );
}

/// `UDP_SEGMENT` (linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;

/// Sends `segs` (all of one length) from `sock` to `(to, 4791)` as one UDP GSO run: the kernel
/// numbers their IPv4 IDs 0, 1, 2 ... (an unconnected socket's DF datagrams), so segment
/// `k`'s ICRC is moved to ID `k`. `None`, the test `test` skipping, where the kernel cannot
/// segment.
fn send_run(test: &str, sock: &UdpSocket, to: IpAddr, segs: &[Vec<u8>]) -> Option<()> {
    if let Err(e) = set_int(
        sock,
        libc::SOL_UDP,
        UDP_SEGMENT,
        segs[0].len() as libc::c_int,
    ) {
        softrnic_testkit::skip(test, &format!("no UDP_SEGMENT: {e}"));
        return None;
    }
    let mut run = Vec::new();
    for (k, s) in segs.iter().enumerate() {
        let mut s = s.clone();
        let at = s.len() - 4;
        let icrc = u32::from_le_bytes(s[at..].try_into().unwrap());
        let moved = with_ipv4_ident(icrc, 0, k as u16, s.len());
        s[at..].copy_from_slice(&moved.to_le_bytes());
        run.extend_from_slice(&s);
    }
    sock.send_to(&run, (to, ROCE_V2_UDP_PORT)).unwrap();
    Some(())
}

/// Runs of three WRITEs to three places, the middle one's ICRC wrong: the first (PSN n) is
/// executed, the second (n+1) dropped and counted, the third not executed. The third's PSN
/// is n+100, further ahead than a responder holds a request behind a gap
/// (`rc/responder/reorder.rs`), so that it is dropped at once: one held would be executed in
/// its turn, long after the run. A short run (three 1 KiB WRITEs: cut by the ring, or by the kernel for the
/// socket) and a long one (three 4 KiB WRITEs: longer than a ring slot, read whole from the
/// socket with `UDP_GRO` on the ring path). The test is `test`.
fn runs_with_a_bad_segment(test: &str, ring: bool, v: IpAddr, p: IpAddr) {
    let Some(t) = transport(test, v, ring) else {
        return;
    };
    let (node, _peer) = victim(t, p, Mtu::Mtu4096);
    let qpn = node.qp.qp_num();
    let sender = socket(p, 0);
    let from = sender.local_addr().unwrap();
    let mut received = 0;
    // Each run starts where the victim waits: one past the first WRITE of the one before.
    for (psn, (len, fill)) in (0u32..).zip([(1024usize, 0x11u8), (4096, 0x22)]) {
        let at = |k: usize| (k * len) as u64;
        let segs: Vec<Vec<u8>> = (0..3)
            .map(|k| {
                let e = with_len(write_at(&node, at(k)), len);
                let ahead = [0, 1, 100][k];
                let op = (Opcode::RC_RDMA_WRITE_ONLY, qpn, psn + ahead);
                packet(from, v, op, e, &vec![fill + k as u8; len])
            })
            .collect();
        let segs = [segs[0].clone(), wrong(segs[1].clone()), segs[2].clone()];
        let errors = node.rx().icrc_errors;
        if send_run(test, &sender, v, &segs).is_none() {
            return;
        }
        received += 3;
        node.received(received);
        let mem = node.bytes();
        assert!(
            mem[..len].iter().all(|&b| b == fill),
            "{len}: the first WRITE"
        );
        assert!(
            mem[len..3 * len].iter().all(|&b| b == 0),
            "{len}: a WRITE after the bad ICRC wrote"
        );
        assert_eq!(node.rx().icrc_errors, errors + 1, "{len}: {:?}", node.rx());
        node.mem.write(0, &vec![0; MEM_LEN]).unwrap();
    }
}

#[test]
fn a_run_with_a_bad_segment_on_the_socket_path() {
    runs_with_a_bad_segment(
        "a_run_with_a_bad_segment_on_the_socket_path",
        false,
        ip(15),
        ip(16),
    );
}

#[test]
fn a_run_with_a_bad_segment_on_the_ring_path() {
    runs_with_a_bad_segment(
        "a_run_with_a_bad_segment_on_the_ring_path",
        true,
        ip(17),
        ip(18),
    );
}
