//! Multicast over loopback: two transports join a group, a third sends to it. Linux delivers
//! IPv4 multicast on `lo` without any setting; where it cannot (joining fails), the test
//! skips (`softrnic_testkit::skip`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use softrnic_wire::ROCE_V2_UDP_PORT;

use crate::transport::test_util::send_only;
use crate::transport::{Bytes, IcrcStatus, OutPacket, RecvBatch, Transport, UdpTransport};

const GROUP: IpAddr = IpAddr::V4(Ipv4Addr::new(239, 1, 32, 2));

fn addr(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 32, last))
}

/// Sends one RC SEND_ONLY (PSN `psn`) from `t` to the group.
fn send_to_group(t: &mut UdpTransport, psn: u32) {
    let (hdr, trailer) = send_only((t.local_addr(), 0xc001), GROUP, 0xff_ffff, psn, b"hello");
    let pieces: [&[u8]; 3] = [&hdr, b"hello", &trailer];
    let pieces = pieces.map(Bytes::from);
    let pkt = OutPacket {
        dst: SocketAddr::new(GROUP, ROCE_V2_UDP_PORT),
        src_port: 0xc001,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(t.send_batch(&[pkt]).unwrap(), 1);
    assert_eq!(t.stats().tx_errors, 0, "errno {}", t.stats().last_errno);
}

/// The PSNs received until there is one or `wait` passed, checking that each came from `src`
/// to the group.
fn received(t: &mut UdpTransport, src: IpAddr, wait: Duration) -> Vec<u32> {
    let mut batch = RecvBatch::new(8, 2048);
    let mut psns = Vec::new();
    let deadline = Instant::now() + wait;
    while psns.is_empty() && Instant::now() < deadline {
        t.poll(Some(Duration::from_millis(20))).unwrap();
        t.recv_batch(&mut batch).unwrap();
        for p in batch.iter() {
            assert_eq!((p.meta.src.ip(), p.meta.dst), (src, GROUP));
            assert_ne!(p.icrc_status(), IcrcStatus::Bad);
            psns.push(u32::from_be_bytes([
                0,
                p.payload[9],
                p.payload[10],
                p.payload[11],
            ]));
        }
    }
    psns
}

#[test]
fn both_members_receive_a_datagram_to_the_group_until_one_leaves() {
    let mut a = UdpTransport::bind(addr(1)).unwrap();
    let mut b = UdpTransport::bind(addr(2)).unwrap();
    let mut c = UdpTransport::bind(addr(3)).unwrap();
    if let Err(e) = b.join_multicast(GROUP) {
        let reason = format!("cannot join {GROUP} on loopback: {e}");
        softrnic_testkit::skip(
            "both_members_receive_a_datagram_to_the_group_until_one_leaves",
            &reason,
        );
        return;
    }
    c.join_multicast(GROUP).unwrap();
    assert!(c.join_multicast(GROUP).is_err(), "joined twice");
    assert!(
        a.join_multicast(addr(9)).is_err(),
        "not a multicast address"
    );

    send_to_group(&mut a, 1);
    let wait = Duration::from_secs(5);
    assert_eq!(received(&mut b, addr(1), wait), [1]);
    assert_eq!(received(&mut c, addr(1), wait), [1]);

    c.leave_multicast(GROUP).unwrap();
    assert!(c.leave_multicast(GROUP).is_err(), "left twice");
    send_to_group(&mut a, 2);
    assert_eq!(received(&mut b, addr(1), wait), [2]);
    assert!(received(&mut c, addr(1), Duration::from_millis(200)).is_empty());
}
