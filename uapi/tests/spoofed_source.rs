//! A connected QP obeys only its peer (as rxe's `check_addr`): packets to it whose IP source
//! is not the address of its address vector are dropped before the QP sees them, whatever
//! they carry — the right QPN, the expected PSN, a valid R_Key, a correct ICRC. A spoofed
//! request is neither executed nor answered and leaves the connection as it was; a spoofed
//! ACK or NAK does nothing to the requester. Each is counted (`RxStats::addr_mismatch`).
//!
//! The victim is a device over real kernel UDP (the socket path: the check is the NIC's,
//! whatever the transport) whose RC QP is connected to a socket of the test (its peer);
//! the spoofer is a UDP socket on another address. Addresses 127.0.93.1 to .6.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

mod common;

use common::hostile::{nothing_at, packet, socket, victim, Ext, PEER_QPN};
use softrnic_provider::transport::UdpTransport;
use softrnic_uapi::{Mtu, QpState, WcStatus};
use softrnic_wire::aeth::{AethRepr, CreditCode, NakCode, Syndrome};
use softrnic_wire::reth::RethRepr;
use softrnic_wire::roce::RoceRepr;
use softrnic_wire::{Opcode, ROCE_V2_UDP_PORT};

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 93, last))
}

fn on_socket(addr: IpAddr) -> UdpTransport {
    UdpTransport::bind(addr).unwrap().without_ring()
}

#[test]
fn spoofed_requests_are_neither_executed_nor_answered() {
    let (v, p, s) = (ip(1), ip(2), ip(3));
    let (node, peer) = victim(on_socket(v), p, Mtu::Mtu4096);
    let spoofer = socket(s, ROCE_V2_UDP_PORT);
    let qpn = node.qp.qp_num();
    node.post_recv_of(1, 64);
    let before = node.bytes();
    let reth = |len: u32, rkey| Ext {
        reth: Some(RethRepr {
            va: node.mem.addr(),
            rkey,
            dma_len: len,
        }),
        ..Ext::default()
    };
    let from = SocketAddr::new(s, ROCE_V2_UDP_PORT);
    let rkey = node.mem.rkey();
    // Each at the PSN the victim expects (0), with a correct ICRC.
    let spoofs = [
        packet(
            from,
            v,
            (Opcode::RC_SEND_ONLY, qpn, 0),
            Ext::default(),
            b"spoofed!",
        ),
        packet(
            from,
            v,
            (Opcode::RC_RDMA_WRITE_ONLY, qpn, 0),
            reth(8, rkey),
            b"spoofed!",
        ),
        packet(
            from,
            v,
            (Opcode::RC_RDMA_WRITE_ONLY, qpn, 0),
            reth(8, rkey ^ 0x100),
            b"badrkey!",
        ),
        packet(
            from,
            v,
            (Opcode::RC_RDMA_READ_REQUEST, qpn, 0),
            reth(64 * 1024, rkey),
            b"",
        ),
    ];
    for b in &spoofs {
        spoofer.send_to(b, (v, ROCE_V2_UDP_PORT)).unwrap();
    }
    node.received(spoofs.len() as u64);
    node.no_completion("after the spoofed requests");
    assert_eq!(node.bytes(), before, "the spoofed WRITE wrote");
    assert_eq!(node.qp.state(), QpState::Rts, "the spoofs moved the QP");
    assert_eq!(nothing_at(&peer), None, "the victim answered, to its peer");
    assert_eq!(
        nothing_at(&spoofer),
        None,
        "the victim answered the spoofer"
    );

    // The real peer, at the same PSNs: executed and acknowledged.
    let from = SocketAddr::new(p, ROCE_V2_UDP_PORT);
    let real = [
        packet(
            from,
            v,
            (Opcode::RC_SEND_ONLY, qpn, 0),
            Ext::default(),
            b"genuine!",
        ),
        packet(
            from,
            v,
            (Opcode::RC_RDMA_WRITE_ONLY, qpn, 1),
            reth(4, rkey),
            b"real",
        ),
    ];
    for b in &real {
        peer.send_to(b, (v, ROCE_V2_UDP_PORT)).unwrap();
    }
    let wc = node.one();
    assert_eq!(
        (wc.status, wc.byte_len, wc.wr_id),
        (WcStatus::Success, 8, 1)
    );
    let ack = common::hostile::next_at(&peer);
    let ack = RoceRepr::parse(&ack).unwrap();
    assert_eq!(ack.repr.bth.dest_qp, PEER_QPN);
    node.received((spoofs.len() + real.len()) as u64);
    // The SEND landed at offset 0 and the WRITE over its first 4 bytes.
    assert_eq!(&node.bytes()[..8], b"realine!");
    let rx = node.rx();
    assert_eq!((rx.addr_mismatch, rx.delivered), (4, 2), "{rx:?}");
}

#[test]
fn spoofed_acks_and_naks_do_nothing_to_the_requester() {
    let (v, p, s) = (ip(4), ip(5), ip(6));
    let (node, peer) = victim(on_socket(v), p, Mtu::Mtu1024);
    let spoofer = socket(s, ROCE_V2_UDP_PORT);
    let qpn = node.qp.qp_num();
    node.mem.write(0, b"question").unwrap();
    let wr = common::signaled_send(7, node.mem.sge(0, 8));
    node.qp.post_send(&[wr]).unwrap();
    let sent = common::hostile::next_at(&peer);
    let sent = RoceRepr::parse(&sent).unwrap();
    assert_eq!(sent.repr.bth.psn.value(), 0);
    let aeth = |syndrome| Ext {
        aeth: Some(AethRepr { syndrome, msn: 1 }),
        ..Ext::default()
    };
    let nak = aeth(Syndrome::Nak(NakCode::InvalidRequest));
    let ack = aeth(Syndrome::Ack(CreditCode::UNLIMITED));
    let from = SocketAddr::new(s, ROCE_V2_UDP_PORT);
    for ext in [nak, ack] {
        let b = packet(from, v, (Opcode::RC_ACKNOWLEDGE, qpn, 0), ext, b"");
        spoofer.send_to(&b, (v, ROCE_V2_UDP_PORT)).unwrap();
    }
    node.received(2);
    node.no_completion("after a spoofed NAK and ACK");
    assert_eq!(node.qp.state(), QpState::Rts);

    // The peer's ACK completes the SEND.
    let from = SocketAddr::new(p, ROCE_V2_UDP_PORT);
    let b = packet(from, v, (Opcode::RC_ACKNOWLEDGE, qpn, 0), ack, b"");
    peer.send_to(&b, (v, ROCE_V2_UDP_PORT)).unwrap();
    let wc = node.one();
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::Success));
    assert_eq!(node.rx().addr_mismatch, 2);
}
