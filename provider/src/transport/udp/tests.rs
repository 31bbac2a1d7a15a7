//! Tests of the UDP transport over loopback. Port 4791 is one per address and tests run in
//! parallel, so each test uses its own loopback addresses (all of 127/8 is loopback on Linux).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use softrnic_testkit::alloc_count::{allocations_in, CountingAlloc};

use super::*;
use crate::transport::test_util::send_only;
use crate::transport::{Bytes, IcrcStatus, IpHeaderOrigin};

/// Why a test of connected sockets skips when the socket stays unconnected.
const UNCONNECTED: &str = "the socket stayed unconnected (no transmit timestamps here)";

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// A transport receiving from its socket: these are the socket path's tests (the packet
/// ring's are in `ring_tests.rs`).
fn bind(ip: IpAddr) -> UdpTransport {
    UdpTransport::bind(ip)
        .unwrap_or_else(|e| panic!("binding {ip}:4791: {e}"))
        .without_ring()
}

/// A transport whose datagrams leave as given: a connected socket's transport takes the last
/// 4 bytes of an IPv4 datagram for an ICRC and changes them (see the module comment), which
/// the tests of arbitrary bytes do not want.
fn bind_unconnected(ip: IpAddr) -> UdpTransport {
    bind(ip).without_connected_sockets()
}

/// Receives until `want` packets arrived or 5 s passed; returns (src, payload) of each.
fn recv_all(t: &mut UdpTransport, want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut batch = RecvBatch::new(8, 2048);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        t.poll(Some(Duration::from_millis(100))).unwrap();
        t.recv_batch(&mut batch).unwrap();
        for p in batch.iter() {
            assert_eq!(p.meta.dst, t.local_addr());
            assert!(!p.meta.truncated);
            got.push((p.meta.src, p.payload.to_vec()));
        }
    }
    got
}

/// Sends `body` as one datagram from `src_port` to `to` through `a`, and receives it at `b`:
/// where it came from and its payload.
fn one_datagram(
    a: &mut UdpTransport,
    b: &mut UdpTransport,
    to: SocketAddr,
    src_port: u16,
    body: &[u8],
) -> (SocketAddr, Vec<u8>) {
    let pieces = [Bytes::from(body)];
    let pkt = OutPacket {
        dst: to,
        src_port,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(a.send_batch(std::slice::from_ref(&pkt)).unwrap(), 1);
    let mut got = recv_all(b, 1);
    assert_eq!(got.len(), 1);
    got.remove(0)
}

#[test]
fn exchange_a_batch_of_pieced_datagrams() {
    let (mut a, mut b) = (bind_unconnected(lo(11)), bind(lo(12)));
    // Three source ports, in runs: three sockets, several sendmmsg calls.
    let ports = [
        0xc000u16, 0xc000, 0xc001, 0xc001, 0xc001, 0xc002, 0xc000, 4791,
    ];
    let bodies: Vec<Vec<u8>> = (0..ports.len())
        .map(|i| (0..100 + i * 37).map(|j| (i * 7 + j) as u8).collect())
        .collect();
    let pieces: Vec<[&[u8]; 3]> = bodies
        .iter()
        .map(|b| [&b[..10], &b[10..b.len() - 4], &b[b.len() - 4..]])
        .collect();
    let pieces: Vec<[Bytes<'_>; 3]> = pieces.iter().map(|p| p.map(Bytes::from)).collect();
    let pkts: Vec<OutPacket<'_>> = ports
        .iter()
        .zip(&pieces)
        .map(|(&src_port, p)| OutPacket {
            dst: SocketAddr::new(lo(12), 4791),
            src_port,
            pieces: p,
            segment: 0,
            ident: 0,
        })
        .collect();
    assert_eq!(a.send_batch(&pkts).unwrap(), pkts.len());
    assert_eq!(a.source_ports_open(), 3); // 4791 goes out of the receive socket
    let got = recv_all(&mut b, pkts.len());
    assert_eq!(got.len(), pkts.len());
    for (i, body) in bodies.iter().enumerate() {
        let (src, _) = got
            .iter()
            .find(|g| &g.1 == body)
            .unwrap_or_else(|| panic!("datagram {i} did not arrive intact"));
        assert_eq!(*src, SocketAddr::new(lo(11), ports[i]));
    }
    let total: u64 = bodies.iter().map(|b| b.len() as u64).sum();
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.tx_packets, sa.tx_bytes, sa.tx_errors), (8, total, 0));
    assert_eq!((sb.rx_packets, sb.rx_bytes), (8, total));
}

#[test]
fn nothing_pending_and_poll_timeout() {
    let mut t = bind(lo(13));
    let mut batch = RecvBatch::new(4, 2048);
    assert_eq!(t.recv_batch(&mut batch).unwrap(), 0);
    assert!(batch.is_empty());
    let ready = t.poll(Some(Duration::from_millis(30))).unwrap();
    assert!(!ready.recv);
    assert!(ready.send);
    assert!(!t.poll(Some(Duration::ZERO)).unwrap().recv);
}

#[test]
fn truncated_datagrams_are_marked() {
    let (mut a, mut b) = (bind(lo(15)), bind(lo(16)));
    let big = [7u8; 300];
    let pieces: [&[u8]; 1] = [&big];
    let pieces = pieces.map(Bytes::from);
    let pkt = OutPacket {
        dst: SocketAddr::new(lo(16), 4791),
        src_port: 0xc000,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    let mut batch = RecvBatch::new(2, 100);
    // The first receive asks for a batch (recvmmsg); after an empty one it asks for a single
    // datagram (recvfrom): both mark truncation and give the source.
    for round in 1..=2 {
        a.send_batch(&[pkt]).unwrap();
        assert!(b.poll(Some(Duration::from_secs(5))).unwrap().recv);
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 1, "round {round}");
        let p = batch.get(0).unwrap();
        assert!(p.meta.truncated, "round {round}");
        assert_eq!(p.payload.len(), 100);
        assert_eq!(p.meta.src, SocketAddr::new(lo(15), 0xc000));
        assert_eq!(p.icrc_status(), IcrcStatus::Bad);
        assert_eq!(b.stats().rx_truncated, round);
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
    }
}

#[test]
fn port_4791_in_use_is_explained() {
    let _first = bind(lo(17));
    let err = UdpTransport::bind(lo(17)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains("4791"), "{err}");
}

#[test]
fn bad_packets_are_refused() {
    let mut a = bind(lo(18));
    let pieces: [&[u8]; 1] = [&[0u8; 16]];
    let pieces = pieces.map(Bytes::from);
    let to = |dst, src_port| OutPacket {
        dst,
        src_port,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 4791);
    let v4 = SocketAddr::new(lo(18), 4791);
    assert!(a.send_batch(&[to(v6, 0xc000)]).is_err());
    assert!(a.send_batch(&[to(v4, 0)]).is_err());
    // A bad packet after good ones: the good ones go, the next call reports it.
    assert_eq!(a.send_batch(&[to(v4, 0xc000), to(v6, 0xc000)]).unwrap(), 1);
}

/// Through a UDP socket an IPv4 ICRC is checked for the IP ID that makes it match: ID 0 from
/// an unconnected socket (DF, IP ID 0 with IP_PMTUDISC_DO), the ID a connected socket counts
/// (which the sender moved the ICRC to); one bit off, it is Bad.
#[test]
fn icrc_over_ipv4_matches_for_the_ident_sent_or_is_bad() {
    use IcrcStatus::{Bad, OkForIdent};
    use IpHeaderOrigin::NotSeen;
    let data = b"softrnic over UDP";
    let mut b = bind(lo(20));
    let mut a = bind_unconnected(lo(19));
    let (hdr, icrc) = send_only((lo(19), 0xc005), lo(20), 0x12, 1, data);
    let seen = good_then_bad_icrc(&mut a, &mut b, 0xc005, [&hdr, data], &icrc);
    assert_eq!(seen, [(NotSeen, OkForIdent(0)), (NotSeen, Bad)]);
    drop(a);
    let mut a = bind(lo(19));
    let (hdr, icrc) = send_only((lo(19), 0xc006), lo(20), 0x12, 1, data);
    let seen = good_then_bad_icrc(&mut a, &mut b, 0xc006, [&hdr, data], &icrc);
    let (_, ident) = a.connection(0xc006).expect("a connected socket");
    let sent = ident.expect("its IP ID known").wrapping_sub(2);
    assert_eq!(seen, [(NotSeen, OkForIdent(sent)), (NotSeen, Bad)]);
}

/// Sends from `a` to `b`'s 4791, from source port `port`, the packet `headers` + `icrc`
/// and the same with the ICRC's first byte wrong; what `b` makes of each: where its IP
/// header came from, and the ICRC check.
fn good_then_bad_icrc(
    a: &mut UdpTransport,
    b: &mut UdpTransport,
    port: u16,
    headers: [&[u8]; 2],
    icrc: &[u8],
) -> Vec<(IpHeaderOrigin, IcrcStatus)> {
    let mut wrong = icrc.to_vec();
    wrong[0] ^= 1;
    let good: [&[u8]; 3] = [headers[0], headers[1], icrc];
    let good = good.map(Bytes::from);
    let bad: [&[u8]; 3] = [headers[0], headers[1], &wrong];
    let bad = bad.map(Bytes::from);
    let pkt = |pieces| OutPacket {
        dst: SocketAddr::new(b.local_addr(), 4791),
        src_port: port,
        pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(a.send_batch(&[pkt(&good), pkt(&bad)]).unwrap(), 2);
    let mut batch = RecvBatch::new(4, 2048);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < 2 && Instant::now() < deadline {
        b.poll(Some(Duration::from_millis(100))).unwrap();
        b.recv_batch(&mut batch).unwrap();
        seen.extend(batch.iter().map(|p| (p.meta.origin, p.icrc_status())));
    }
    seen
}

/// Over IPv6 the header is rebuilt exactly, so a bad ICRC is Bad. Only ::1 is an IPv6
/// loopback address, so the transport sends to itself.
#[test]
fn ipv6_loopback_and_icrc() {
    let ip = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let mut t = match UdpTransport::bind(ip).map(UdpTransport::without_ring) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            softrnic_testkit::skip("ipv6_loopback_and_icrc", &format!("no IPv6 loopback ({e})"));
            return;
        }
        Err(e) => panic!("binding [::1]:4791: {e}"),
    };
    let data = [0x5au8; 64];
    let (hdr, icrc) = send_only((ip, 0xc0de), ip, 0x13, 2, &data);
    let mut wrong = icrc.clone();
    *wrong.last_mut().unwrap() ^= 0x80;
    let good: [&[u8]; 3] = [&hdr, &data, &icrc];
    let good = good.map(Bytes::from);
    let bad: [&[u8]; 3] = [&hdr, &data, &wrong];
    let bad = bad.map(Bytes::from);
    let pkt = |pieces| OutPacket {
        dst: SocketAddr::new(ip, 4791),
        src_port: 0xc0de,
        pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(t.send_batch(&[pkt(&good), pkt(&bad)]).unwrap(), 2);
    let mut batch = RecvBatch::new(4, 2048);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < 2 && Instant::now() < deadline {
        t.poll(Some(Duration::from_millis(100))).unwrap();
        t.recv_batch(&mut batch).unwrap();
        for p in batch.iter() {
            assert_eq!(p.meta.src, SocketAddr::new(ip, 0xc0de));
            seen.push(p.icrc_status());
        }
    }
    assert_eq!(seen, [IcrcStatus::Ok, IcrcStatus::Bad]);
}

#[test]
fn no_allocation_per_packet() {
    let (mut a, mut b) = (bind(lo(21)), bind(lo(22)));
    let body = [9u8; 1000];
    let hdr = [1u8; 40];
    let icrc = [2u8; 4];
    let pieces: [&[u8]; 3] = [&hdr, &body, &icrc];
    let pieces = pieces.map(Bytes::from);
    let pkts: Vec<OutPacket<'_>> = (0..48u16)
        .map(|i| OutPacket {
            dst: SocketAddr::new(lo(22), 4791),
            src_port: 0xc000 + i % 2,
            pieces: &pieces,
            segment: 0,
            ident: 0,
        })
        .collect();
    let mut batch = RecvBatch::new(64, 2048);
    // Warm up: opens the two source-port sockets (an allocation each, once).
    let warm_up = allocations_in(|| {
        assert_eq!(a.send_batch(&pkts).unwrap(), pkts.len());
        assert_eq!(recv_all(&mut b, pkts.len()).len(), pkts.len());
    });
    assert!(warm_up > 0, "the counting allocator counts nothing");

    let (mut got, mut not_ok) = (0, 0);
    let allocs = allocations_in(|| {
        assert_eq!(a.send_batch(&pkts).unwrap(), pkts.len());
        let deadline = Instant::now() + Duration::from_secs(5);
        while got < pkts.len() && Instant::now() < deadline {
            b.poll(Some(Duration::from_millis(100))).unwrap();
            got += b.recv_batch(&mut batch).unwrap();
            // The ICRC check is on the data path too (these are not RoCE packets: Bad).
            not_ok += batch
                .iter()
                .filter(|p| p.icrc_status() != IcrcStatus::Ok)
                .count();
        }
    });
    assert_eq!((got, not_ok), (pkts.len(), pkts.len()));
    assert_eq!(allocs, 0, "the data path allocated");
}

#[test]
fn a_segmentation_run_goes_out_in_one_pass_and_arrives_as_its_packets() {
    let (a, mut b) = (bind_unconnected(lo(23)), bind(lo(24)));
    let limits = a.segment_limits();
    let mut a = a;
    if limits == SegmentLimits::NONE {
        softrnic_testkit::skip(
            "a_segmentation_run_goes_out_in_one_pass_and_arrives_as_its_packets",
            "this kernel has no UDP_SEGMENT (Linux >= 4.18)",
        );
        return;
    }
    assert!(limits.max_segments >= 3);
    // Two equal packets and a shorter last one, then a packet on its own.
    let bodies: Vec<Vec<u8>> = [300usize, 300, 120, 200]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
        .collect();
    let pieces: Vec<[&[u8]; 2]> = bodies.iter().map(|b| [&b[..50], &b[50..]]).collect();
    let pieces: Vec<[Bytes<'_>; 2]> = pieces.iter().map(|p| p.map(Bytes::from)).collect();
    let pkts: Vec<OutPacket<'_>> = pieces
        .iter()
        .zip([0u16, 1, 2, 0])
        .map(|(p, segment)| OutPacket {
            dst: SocketAddr::new(lo(24), 4791),
            src_port: 0xc000,
            pieces: p,
            segment,
            ident: segment,
        })
        .collect();
    assert_eq!(a.send_batch(&pkts).unwrap(), 4);
    let got = recv_all(&mut b, 4);
    let payloads: Vec<&Vec<u8>> = got.iter().map(|g| &g.1).collect();
    assert_eq!(
        payloads,
        bodies.iter().collect::<Vec<_>>(),
        "in order, intact"
    );
    let s = a.stats();
    assert_eq!((s.tx_packets, s.tx_segmented, s.tx_errors), (4, 2, 0));
    // Without segmentation the same packets go out one by one.
    let mut a = bind_unconnected(lo(25)).without_segmentation();
    assert_eq!(a.segment_limits(), SegmentLimits::NONE);
    assert_eq!(a.send_batch(&pkts).unwrap(), 4);
    assert_eq!(recv_all(&mut b, 4).len(), 4);
    assert_eq!(a.stats().tx_segmented, 0);
}

#[test]
fn receive_asks_for_more_than_one_datagram_only_on_evidence_of_a_queue() {
    assert_eq!(next_want(0, 0), 1);
    assert_eq!(next_want(1, 1), 1);
    assert_eq!(next_want(1, 2), 2);
    assert_eq!(next_want(2, 0), 4);
    assert_eq!(next_want(20, 0), 40.min(MAX_MSGS));
    assert_eq!(next_want(MAX_MSGS, 0), MAX_MSGS);
}

/// `n` datagrams from `a` to `b`'s port 4791, queued at `b` before this returns.
fn queue_at(a: &mut UdpTransport, b: IpAddr, n: usize) {
    let payload = [7u8; 16];
    let pieces = [Bytes::from(&payload[..])];
    let pkt = OutPacket {
        dst: SocketAddr::new(b, 4791),
        src_port: 0xc000,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    let mut sent = 0;
    while sent < n {
        sent += a.send_batch(&[pkt; 8][..8.min(n - sent)]).unwrap();
    }
    // Loopback delivers inside the sending call; a moment more for safety.
    std::thread::sleep(Duration::from_millis(20));
}

/// The sizes of `b`'s receives until `total` datagrams came, with `between(b, k)` called
/// after the `k`-th receive that brought some.
fn receive_sizes(
    b: &mut UdpTransport,
    total: usize,
    mut between: impl FnMut(&mut UdpTransport, usize),
) -> Vec<usize> {
    let mut batch = RecvBatch::new(MAX_MSGS, 256);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut sizes = Vec::new();
    while sizes.iter().sum::<usize>() < total && Instant::now() < deadline {
        match b.recv_batch(&mut batch).unwrap() {
            0 => std::thread::sleep(Duration::from_millis(1)),
            n => {
                sizes.push(n);
                between(b, sizes.len());
            }
        }
    }
    sizes
}

#[test]
fn receive_asks_for_one_datagram_when_idle_and_doubles_under_a_flood() {
    let (mut a, mut b) = (bind(lo(26)), bind(lo(27)));
    let mut batch = RecvBatch::new(MAX_MSGS, 256);
    // Idle: an empty receive leaves the next one asking for one.
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
    queue_at(&mut a, lo(27), 40);
    // Two single datagrams in a row with nothing sent: a queue. Then 2, 4, 8, 16, the rest.
    let sizes = receive_sizes(&mut b, 40, |_, _| {});
    assert_eq!(sizes, [1, 1, 2, 4, 8, 16, 8]);
}

#[test]
fn a_send_between_single_datagrams_keeps_the_next_receive_at_one() {
    let (mut a, mut b) = (bind(lo(28)), bind(lo(29)));
    let mut batch = RecvBatch::new(MAX_MSGS, 256);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
    queue_at(&mut a, lo(29), 6);
    // As in a ping-pong, `b` sends after its first datagram: the count starts again, so two
    // more come one by one before a receive asks for two.
    let sizes = receive_sizes(&mut b, 6, |b, k| {
        if k == 1 {
            queue_at(b, lo(28), 1);
        }
    });
    assert_eq!(sizes, [1, 1, 1, 2, 1]);
    // Without the send (after an empty receive, as before): 1, 1, then 2, and the 2 left.
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
    queue_at(&mut a, lo(29), 6);
    assert_eq!(receive_sizes(&mut b, 6, |_, _| {}), [1, 1, 2, 2]);
}

/// A connected socket numbers its datagrams (one number per run, its segments counting on
/// from it), and each packet leaves with its ICRC moved to the IP ID it carries: the receiver,
/// told the numbers, verifies every one. The packets come with ICRCs computed for IP ID =
/// segment number, as the emitter computes them before the socket exists; one computed for
/// the ID `ipv4_ident` announces goes out unchanged.
#[test]
fn a_connected_socket_sends_icrcs_for_the_ip_ids_it_numbers() {
    let ip = |last| IpAddr::V4(Ipv4Addr::new(127, 0, 34, last));
    let (mut a, mut b) = (bind(ip(3)), bind(ip(4)));
    let port = 0xc000;
    // Opens, connects and probes the socket with a first packet.
    let (hdr, icrc) = send_only((ip(3), port), ip(4), 0x11, 0, b"first");
    let first: [&[u8]; 3] = [&hdr, b"first", &icrc];
    let first = first.map(Bytes::from);
    let to_b = SocketAddr::new(ip(4), 4791);
    let pkt = |pieces, segment| OutPacket {
        dst: to_b,
        src_port: port,
        pieces,
        segment,
        ident: segment,
    };
    assert_eq!(a.send_batch(&[pkt(&first, 0)]).unwrap(), 1);
    assert_eq!(recv_all(&mut b, 1).len(), 1);
    let Some((peer, Some(next))) = a.connection(port) else {
        softrnic_testkit::skip(
            "a_connected_socket_sends_icrcs_for_the_ip_ids_it_numbers",
            UNCONNECTED,
        );
        return;
    };
    assert_eq!(peer, to_b);
    assert_eq!(a.stats().ident_probes, 1);
    // A lone packet, then (with segmentation) a run of three equal ones: IDs next, then
    // next + 1 + segment.
    let bodies: Vec<Vec<u8>> = (0..4).map(|i| vec![i as u8; 64]).collect();
    let built: Vec<(Vec<u8>, Vec<u8>)> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| send_only((ip(3), port), ip(4), 0x11, 1 + i as u32, body))
        .collect();
    let runs = a.segment_limits() != SegmentLimits::NONE;
    let segment = |i: usize| if runs && i > 0 { i as u16 - 1 } else { 0 };
    let ident = |i: usize| match (runs, i) {
        (true, 0) => next,
        (true, _) => next.wrapping_add(1 + segment(i)),
        (false, _) => next.wrapping_add(i as u16),
    };
    // The ICRC each was built with: for its segment number.
    let mut trailers: Vec<Vec<u8>> = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let (h, _) = &built[i];
        trailers.push(icrc_for(h, body, ip(3), ip(4), port, segment(i)));
    }
    let pieces: Vec<[&[u8]; 3]> = (0..4)
        .map(|i| [&built[i].0[..], &bodies[i][..], &trailers[i][..]])
        .collect();
    let pieces: Vec<[Bytes<'_>; 3]> = pieces.iter().map(|p| p.map(Bytes::from)).collect();
    let pkts: Vec<OutPacket<'_>> = (0..4).map(|i| pkt(&pieces[i], segment(i))).collect();
    assert_eq!(a.send_batch(&pkts).unwrap(), 4);
    let got = recv_all(&mut b, 4);
    assert_eq!(got.len(), 4);
    for (i, body) in bodies.iter().enumerate() {
        let want = icrc_for(&built[i].0, body, ip(3), ip(4), port, ident(i));
        let sent = &got[i].1;
        assert_eq!(
            &sent[sent.len() - 4..],
            &want[..],
            "packet {i}: ICRC for ID {}",
            ident(i)
        );
        assert_eq!(
            &sent[..sent.len() - 4],
            &[&built[i].0[..], &body[..]].concat()[..]
        );
    }
    let messages = if runs { 2 } else { 4 };
    assert_eq!(
        a.connection(port),
        Some((to_b, Some(next.wrapping_add(messages))))
    );
    // Built for the ID the transport says the next datagram carries, a packet goes as it is.
    let id = a
        .ipv4_ident(port)
        .expect("a connected IPv4 socket's counter");
    assert_eq!(id, next.wrapping_add(messages));
    let (h, _) = send_only((ip(3), port), ip(4), 0x11, 9, &bodies[0]);
    let trailer = icrc_for(&h, &bodies[0], ip(3), ip(4), port, id);
    let pieces: [&[u8]; 3] = [&h, &bodies[0], &trailer];
    let pieces = pieces.map(Bytes::from);
    let own = OutPacket {
        ident: id,
        ..pkt(&pieces, 0)
    };
    assert_eq!(a.send_batch(&[own]).unwrap(), 1);
    let got = recv_all(&mut b, 1);
    assert_eq!(got[0].1, [&h[..], &bodies[0][..], &trailer[..]].concat());
    assert_eq!(a.ipv4_ident(0xc0ff), None, "no socket on that port yet");
}

/// The trailer (no pad: 4-byte multiples) of a SEND_ONLY with headers `bth` and `body` from
/// `src`:`port` to `dst`, whose IPv4 header carries Identification `ident`.
fn icrc_for(bth: &[u8], body: &[u8], src: IpAddr, dst: IpAddr, port: u16, ident: u16) -> Vec<u8> {
    use softrnic_wire::frame::IpHeader;
    let udp_len = 8 + bth.len() + body.len() + 4;
    let ip = IpHeader::udp_socket(src, dst, 64)
        .unwrap()
        .with_ident(ident);
    let mut ip_bytes = vec![0u8; ip.header_len()];
    ip.emit(udp_len, &mut ip_bytes).unwrap();
    let mut udp = Vec::new();
    udp.extend_from_slice(&port.to_be_bytes());
    udp.extend_from_slice(&4791u16.to_be_bytes());
    udp.extend_from_slice(&(udp_len as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(bth);
    udp.extend_from_slice(body);
    softrnic_wire::icrc::compute(&ip_bytes, &udp)
        .unwrap()
        .to_le_bytes()
        .to_vec()
}

/// A datagram the kernel refuses (over the largest UDP payload: `EMSGSIZE`) is dropped and
/// counted, the counter is learnt again (the refused datagram might have used a number), and
/// the packet after it leaves with its ICRC moved to the number the new probe says.
#[test]
fn after_a_refused_datagram_a_connected_socket_learns_its_counter_again() {
    let ip = |last| IpAddr::V4(Ipv4Addr::new(127, 0, 34, last));
    let (mut a, mut b) = (bind(ip(5)), bind(ip(6)));
    let port = 0xc001;
    let to_b = SocketAddr::new(ip(6), 4791);
    let pkt = |pieces| OutPacket {
        dst: to_b,
        src_port: port,
        pieces,
        segment: 0,
        ident: 0,
    };
    let (hdr, icrc) = send_only((ip(5), port), ip(6), 0x12, 0, b"open");
    let open: [&[u8]; 3] = [&hdr, b"open", &icrc];
    let open = open.map(Bytes::from);
    assert_eq!(a.send_batch(&[pkt(&open)]).unwrap(), 1);
    assert_eq!(recv_all(&mut b, 1).len(), 1);
    let Some((_, Some(next))) = a.connection(port) else {
        softrnic_testkit::skip(
            "after_a_refused_datagram_a_connected_socket_learns_its_counter_again",
            UNCONNECTED,
        );
        return;
    };
    // Over the largest UDP payload: only its size matters.
    let huge = vec![0u8; 66_000];
    let (hdr, icrc) = send_only((ip(5), port), ip(6), 0x12, 1, b"after-it");
    let big: [&[u8]; 3] = [&hdr, &huge, &icrc];
    let big = big.map(Bytes::from);
    let after: [&[u8]; 3] = [&hdr, b"after-it", &icrc];
    let after = after.map(Bytes::from);
    assert_eq!(a.send_batch(&[pkt(&big), pkt(&after)]).unwrap(), 2);
    let s = a.stats();
    assert_eq!((s.tx_errors, s.last_errno), (1, libc::EMSGSIZE));
    assert_eq!(s.ident_probes, 2, "learnt at connect and after the error");
    // The new probe's two datagrams took `next` and `next + 1`.
    let got = recv_all(&mut b, 1);
    assert_eq!(got.len(), 1);
    let want = icrc_for(&hdr, b"after-it", ip(5), ip(6), port, next.wrapping_add(2));
    assert_eq!(&got[0].1[got[0].1.len() - 4..], &want[..]);
    assert_eq!(a.connection(port), Some((to_b, Some(next.wrapping_add(3)))));
}

/// A packet of [`MAX_IOVS`] pieces goes out, also from a connected socket, where its ICRC
/// (its last 4 bytes) takes an iovec more; and a packet with no pieces right after it neither
/// indexes past the scratch arrays nor is lost.
#[test]
fn a_packet_of_max_iovs_pieces_and_an_empty_one_after_it_go_out() {
    let ip = |last| IpAddr::V4(Ipv4Addr::new(127, 0, 34, last));
    let (mut a, mut b) = (bind(ip(7)), bind(ip(8)));
    let bytes = [7u8; MAX_IOVS + 3];
    let (ones, last) = bytes.split_at(MAX_IOVS - 1);
    let mut full: Vec<Bytes<'_>> = ones.chunks(1).map(Bytes::from).collect();
    full.push(Bytes::from(last));
    assert_eq!(full.len(), MAX_IOVS);
    let pkt = |pieces| OutPacket {
        dst: SocketAddr::new(ip(8), 4791),
        src_port: 0xc002,
        pieces,
        segment: 0,
        ident: 0,
    };
    let empty: [&[u8]; 0] = [];
    let empty = empty.map(Bytes::from);
    let pkts = [pkt(&full[..]), pkt(&empty)];
    let mut a2 = bind_unconnected(ip(9));
    assert_eq!(a2.send_batch(&pkts).unwrap(), 2);
    assert_eq!(a.send_batch(&pkts).unwrap(), 2);
    let got = recv_all(&mut b, 4);
    let mut lens: Vec<usize> = got.iter().map(|g| g.1.len()).collect();
    lens.sort_unstable();
    assert_eq!(lens, [0, 0, MAX_IOVS + 3, MAX_IOVS + 3]);
    assert!(
        a.connection(0xc002).is_some(),
        "the connected path was taken"
    );
}

#[path = "ring_tests.rs"]
mod ring;

/// Kernel rxe sends RoCEv2 over IPv6 with UDP checksum 0, as over IPv4: RFC 6936 lets a
/// tunnel's receiver take such datagrams, and Linux drops them (Udp6InCsumErrors) unless the
/// socket opts in with `UDP_NO_CHECK6_RX`. Every socket softrnic binds does: here one on
/// [::1] gets a datagram sent with no checksum (`UDP_NO_CHECK6_TX`).
#[test]
fn ipv6_datagrams_without_a_udp_checksum_are_received() {
    let rx = match bound_socket(SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0), &[]) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            softrnic_testkit::skip(
                "ipv6_datagrams_without_a_udp_checksum_are_received",
                &format!("no IPv6 loopback ({e})"),
            );
            return;
        }
        Err(e) => panic!("binding [::1]: {e}"),
    };
    let tx = bound_socket(SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0), &[]).unwrap();
    setsockopt(&tx, libc::SOL_UDP, UDP_NO_CHECK6_TX, 1).unwrap();
    tx.send_to(b"no checksum", rx.local_addr().unwrap())
        .unwrap();
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + Duration::from_secs(2);
    let got = loop {
        match rx.recv(&mut buf) {
            Ok(n) => break Some(n),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    assert_eq!(got.map(|n| &buf[..n]), Some(&b"no checksum"[..]));
}

/// Past `MAX_SOURCE_SOCKETS` source ports a transport opens no more sockets: a QP's port
/// then shares one of the open ones (connected to the same peer), the same every time, and
/// its packets arrive from there. (One socket per QP's port ran 1024 QPs out of file
/// descriptors.)
#[test]
fn past_the_source_sockets_a_port_shares_an_open_one() {
    use super::send::MAX_SOURCE_SOCKETS;
    let (mut a, mut b) = (bind(lo(33)), bind(lo(34)));
    let to = SocketAddr::new(lo(34), ROCE_V2_UDP_PORT);
    let wanted: Vec<u16> = (0..MAX_SOURCE_SOCKETS as u16 + 3)
        .map(|i| 0xc100 + i)
        .collect();
    let got: Vec<u16> = wanted.iter().map(|&p| a.source_port(p, to)).collect();
    assert_eq!(a.source_ports_open(), MAX_SOURCE_SOCKETS);
    let (own, shared) = got.split_at(MAX_SOURCE_SOCKETS);
    for (i, p) in shared.iter().enumerate() {
        assert!(own.contains(p), "port {i} past the sockets: {p}");
    }
    let last = *wanted.last().unwrap();
    assert_eq!(
        a.source_port(last, to),
        got[got.len() - 1],
        "kept for the port"
    );
    assert_eq!(a.stats().tx_ports_shared, 3);
    let body = [0xa5u8; 64];
    let shared = got[got.len() - 1];
    let (from, payload) = one_datagram(&mut a, &mut b, to, shared, &body);
    assert_eq!(from, SocketAddr::new(lo(33), shared));
    // (A connected socket's datagram has its last 4 bytes, taken for an ICRC, moved to the
    // IPv4 ID it was given: see the module comment.)
    assert_eq!(payload[..60], body[..60]);
    assert_eq!(a.source_ports_open(), MAX_SOURCE_SOCKETS);
}

/// A source port another socket of the host holds (bound without `SO_REUSEADDR`, as most
/// programs' sockets are): the packets meant for it leave from a port the kernel picks, the
/// same one every time, and arrive from there; a free port is its own.
#[test]
fn a_source_port_another_socket_holds_is_replaced_by_a_free_one() {
    let (mut a, mut b) = (bind(lo(31)), bind(lo(32)));
    let to = SocketAddr::new(lo(32), ROCE_V2_UDP_PORT);
    let held = UdpSocket::bind((lo(31), 0)).unwrap();
    let taken = held.local_addr().unwrap().port();
    let free = UdpSocket::bind((lo(31), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // (Closed again: free unless another test's socket took it meanwhile, which a loopback
    // address of this test's own makes unlikely.)
    assert_eq!(a.source_port(free, to), free);
    let other = a.source_port(taken, to);
    assert_ne!(other, taken);
    assert_eq!(a.source_port(taken, to), other, "kept for the port");
    assert_eq!(a.stats().tx_ports_moved, 1);
    let (from, _) = one_datagram(&mut a, &mut b, to, other, &[0x5au8; 64]);
    assert_eq!(from, SocketAddr::new(lo(31), other));
    drop(held);
}
