//! Tests of the packet ring (`udp/ring.rs`): what comes through it, and how. A packet socket
//! needs `CAP_NET_RAW`; without it each test says so and passes without checking anything.
//! Addresses: 127.0.38.x.

use std::net::UdpSocket;

use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 38, last))
}

/// A transport on `ip` reading from its packet ring, or `None` (said) without `CAP_NET_RAW`.
fn ringed(ip: IpAddr) -> Option<UdpTransport> {
    let t = bind(ip); // the socket path, whatever the environment says
    match t.with_ring() {
        Ok(t) => Some(t),
        Err((_, e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("SKIPPED: a packet ring needs CAP_NET_RAW ({e})");
            None
        }
        Err((_, e)) => panic!("opening the packet ring: {e}"),
    }
}

/// What a test looks at in a received datagram.
#[derive(Debug, PartialEq, Eq)]
struct Got {
    src: SocketAddr,
    payload: Vec<u8>,
    truncated: bool,
    ip_header: Vec<u8>,
}

/// Receives, `cap` datagrams a call at most, until `want` came or a second passed.
fn receive(t: &mut UdpTransport, slot: usize, cap: usize, want: usize) -> Vec<Got> {
    let mut batch = RecvBatch::new(cap, slot);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    while got.len() < want && Instant::now() < deadline {
        let n = t.recv_batch(&mut batch).unwrap();
        assert!(n <= cap);
        got.extend(batch.iter().map(|p| {
            assert_eq!(p.meta.origin, IpHeaderOrigin::Received);
            Got {
                src: p.meta.src,
                payload: p.payload.to_vec(),
                truncated: p.meta.truncated,
                ip_header: p.meta.ip_header().to_vec(),
            }
        }));
    }
    got
}

#[test]
fn datagrams_to_the_device_come_with_their_ip_header_and_nothing_else_does() {
    let Some(mut t) = ringed(ip(1)) else { return };
    assert!(t.receives_from_ring());
    let peer = UdpSocket::bind((Ipv4Addr::new(127, 0, 38, 2), 0)).unwrap();
    let from = peer.local_addr().unwrap();
    // Another port of the device's address, and port 4791 of another address: not its own.
    let other = UdpSocket::bind((Ipv4Addr::new(127, 0, 38, 1), 0)).unwrap();
    let _bystander = bind(ip(3));
    peer.send_to(b"to another port", other.local_addr().unwrap())
        .unwrap();
    peer.send_to(b"to another address", (ip(3), 4791)).unwrap();
    peer.send_to(b"first", (ip(1), 4791)).unwrap();
    peer.send_to(&[], (ip(1), 4791)).unwrap();
    peer.send_to(&[7u8; 1000], (ip(1), 4791)).unwrap();
    let got = receive(&mut t, 2048, 8, 3);
    let payloads: Vec<&[u8]> = got.iter().map(|g| &g.payload[..]).collect();
    assert_eq!(payloads, [&b"first"[..], &[], &[7u8; 1000][..]]);
    for g in &got {
        assert_eq!((g.src, g.truncated), (from, false));
        // The IPv4 header as sent: version 4, 20 bytes, UDP, from and to the right addresses.
        assert_eq!(
            (g.ip_header.len(), g.ip_header[0], g.ip_header[9]),
            (20, 0x45, 17)
        );
        assert_eq!(g.ip_header[12..16], [127, 0, 38, 2]);
        assert_eq!(g.ip_header[16..20], [127, 0, 38, 1]);
    }
    assert!(receive(&mut t, 2048, 8, 1).is_empty(), "nothing else came");
    assert_eq!(t.stats().rx_packets, 3);
    // The socket the ring stands in for kept none of them.
    t = t.without_ring();
    assert!(receive_socket(&mut t).is_empty());
}

/// What the socket path receives in 100 ms.
fn receive_socket(t: &mut UdpTransport) -> Vec<Vec<u8>> {
    let mut batch = RecvBatch::new(8, 2048);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(100);
    while Instant::now() < deadline {
        t.recv_batch(&mut batch).unwrap();
        got.extend(batch.iter().map(|p| p.payload.to_vec()));
    }
    got
}

/// The ring sees the IPv4 header, so the ICRC is checked over the IP ID the sender used: a
/// good one from a connected socket (whose IDs a UDP socket cannot see) is Ok, a wrong one
/// Bad, where the socket path says Unverifiable.
#[test]
fn every_ipv4_icrc_is_checked_exactly() {
    let Some(mut b) = ringed(ip(5)) else { return };
    let mut a = bind(ip(4));
    let data = b"softrnic over a packet ring";
    let (hdr, _) = send_only((ip(4), 0xc007), ip(5), 0x12, 1, data);
    // From a connected socket the transport moves the ICRC to the ID it will carry: computed
    // for segment 0 here, as the emitter does.
    let icrc = icrc_for(&hdr, data, ip(4), ip(5), 0xc007, 0);
    let mut wrong = icrc.clone();
    wrong[0] ^= 1;
    let pkt = |pieces| OutPacket {
        dst: SocketAddr::new(ip(5), 4791),
        src_port: 0xc007,
        pieces,
        segment: 0,
        ident: 0,
    };
    let good: [&[u8]; 3] = [&hdr, data, &icrc];
    let bad: [&[u8]; 3] = [&hdr, data, &wrong];
    assert_eq!(a.send_batch(&[pkt(&good), pkt(&bad)]).unwrap(), 2);
    let mut batch = RecvBatch::new(4, 2048);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    while seen.len() < 2 && Instant::now() < deadline {
        b.recv_batch(&mut batch).unwrap();
        seen.extend(batch.iter().map(|p| p.icrc_status()));
    }
    assert_eq!(seen, [IcrcStatus::Ok, IcrcStatus::Bad]);
}

/// A segmentation run crosses `lo` whole; the ring cuts it as the kernel would, each segment
/// a datagram, the first behind the run's IPv4 header with its own length, the others
/// without one (it is not certain, see `Datagram::segment`). A run with more segments than
/// the batch has room for is taken over several calls.
#[test]
fn a_segmentation_run_arrives_as_its_segments() {
    let Some(mut b) = ringed(ip(7)) else { return };
    let mut a = bind_unconnected(ip(6));
    if a.segment_limits().max_segments < 3 {
        eprintln!("SKIPPED: this kernel cannot segment UDP (no UDP_SEGMENT)");
        return;
    }
    let (s0, s1, s2) = ([1u8; 300], [2u8; 300], [3u8; 120]);
    let pieces: [[&[u8]; 1]; 3] = [[&s0], [&s1], [&s2]];
    let pkts: Vec<OutPacket<'_>> = (0..3)
        .map(|k| OutPacket {
            dst: SocketAddr::new(ip(7), 4791),
            src_port: 0xc009,
            pieces: &pieces[k][..],
            segment: k as u16,
            ident: k as u16,
        })
        .collect();
    assert_eq!(a.send_batch(&pkts).unwrap(), 3);
    assert_eq!(a.stats().tx_segmented, 2, "sent as one run");
    // Two slots a call: the run takes two calls.
    let mut batch = RecvBatch::new(2, 2048);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    while got.len() < 3 && Instant::now() < deadline {
        assert!(b.recv_batch(&mut batch).unwrap() <= 2);
        got.extend(
            batch
                .iter()
                .map(|p| (p.payload.to_vec(), p.meta.ip_header().to_vec())),
        );
    }
    let payloads: Vec<&[u8]> = got.iter().map(|g| &g.0[..]).collect();
    assert_eq!(payloads, [&s0[..], &s1[..], &s2[..]]);
    // The first segment's header: ID 0 (an unconnected socket's run), its own length.
    let first = &got[0].1;
    assert_eq!(first.len(), 20);
    assert_eq!(u16::from_be_bytes([first[4], first[5]]), 0);
    assert_eq!(u16::from_be_bytes([first[2], first[3]]), 20 + 8 + 300);
    assert!(got[1].1.is_empty() && got[2].1.is_empty());
}

/// A lone datagram longer than the batch's slot arrives cut and says so, as from a socket.
#[test]
fn a_datagram_longer_than_the_slot_arrives_truncated() {
    let Some(mut t) = ringed(ip(8)) else { return };
    let peer = UdpSocket::bind((Ipv4Addr::new(127, 0, 38, 9), 0)).unwrap();
    peer.send_to(&[5u8; 3000], (ip(8), 4791)).unwrap();
    let got = receive(&mut t, 1024, 4, 1);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].payload.len(), got[0].truncated), (1024, true));
    assert_eq!(t.stats().rx_truncated, 1);
}

/// A waiting progress thread wakes for the ring: `poll` reports a datagram there.
#[test]
fn poll_reports_a_datagram_in_the_ring() {
    let Some(mut t) = ringed(ip(10)) else { return };
    let r = t.poll(Some(Duration::from_millis(20))).unwrap();
    assert!(!r.recv, "nothing came yet");
    let peer = UdpSocket::bind((Ipv4Addr::new(127, 0, 38, 11), 0)).unwrap();
    peer.send_to(b"wake up", (ip(10), 4791)).unwrap();
    let r = t.poll(Some(Duration::from_secs(1))).unwrap();
    assert!(r.recv);
    assert_eq!(receive(&mut t, 2048, 4, 1).len(), 1);
}

/// Receiving from the ring allocates nothing.
#[test]
fn the_ring_allocates_nothing_per_packet() {
    let Some(mut t) = ringed(ip(12)) else { return };
    let peer = UdpSocket::bind((Ipv4Addr::new(127, 0, 38, 13), 0)).unwrap();
    let mut batch = RecvBatch::new(8, 2048);
    let mut got = 0;
    let before = allocations();
    for _ in 0..100 {
        peer.send_to(b"no allocation", (ip(12), 4791)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut n = 0;
        while n == 0 && Instant::now() < deadline {
            n = t.recv_batch(&mut batch).unwrap();
        }
        got += n;
    }
    assert_eq!(allocations() - before, 0);
    assert_eq!(got, 100);
}

/// Runs longer than a slot come through the socket whole, cut into their segments: a
/// thousand 15-segment runs (64 KiB WRITEs' size), each segment once, in order.
#[test]
fn long_runs_come_through_the_socket_as_their_segments() {
    let Some(mut b) = ringed(ip(15)) else { return };
    let mut a = bind_unconnected(ip(14));
    if a.segment_limits().max_segments < 15 {
        eprintln!("SKIPPED: this kernel cannot segment UDP (no UDP_SEGMENT)");
        return;
    }
    let mut segs = vec![[0u8; 4112]; 15];
    let mut batch = RecvBatch::new(64, 4096 + 512);
    let mut next = 0u32; // the next segment number expected
    for run in 0..1000u32 {
        for (k, s) in segs.iter_mut().enumerate() {
            s[..4].copy_from_slice(&(run * 15 + k as u32).to_be_bytes());
        }
        let pieces: Vec<[&[u8]; 1]> = segs.iter().map(|s| [&s[..]]).collect();
        let pkts: Vec<OutPacket<'_>> = pieces
            .iter()
            .enumerate()
            .map(|(k, p)| OutPacket {
                dst: SocketAddr::new(ip(15), 4791),
                src_port: 0xc00b,
                pieces: &p[..],
                segment: k as u16,
                ident: k as u16,
            })
            .collect();
        let mut sent = 0;
        while sent < pkts.len() {
            sent += a.send_batch(&pkts[sent..]).unwrap();
        }
        // Receive as it goes, as a device does.
        let deadline = Instant::now() + Duration::from_secs(1);
        while next < (run + 1) * 15 && Instant::now() < deadline {
            b.recv_batch(&mut batch).unwrap();
            for p in batch.iter() {
                let n = u32::from_be_bytes(p.payload[..4].try_into().unwrap());
                assert_eq!((n, p.payload.len()), (next, 4112), "segment {next}");
                next += 1;
            }
        }
    }
    assert_eq!(next, 15_000);
}
