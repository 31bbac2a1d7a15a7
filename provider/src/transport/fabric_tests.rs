//! Tests of the in-memory fabric.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use super::*;
use crate::transport::test_util::send_only;
use crate::transport::{Bytes, IcrcStatus, IpHeaderOrigin, RecvBatch};

const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

/// The payload of packet `seq`: its number, then filler.
fn payload(seq: u32) -> Vec<u8> {
    let mut p = seq.to_be_bytes().to_vec();
    p.extend((0..60).map(|i| (seq as u8).wrapping_add(i)));
    p
}

/// Sends `count` RC SEND_ONLY packets from `a` to `b` (PSN = sequence number), in batches of
/// 16, advancing virtual time by 100 ns per batch, then lets everything arrive.
fn send_many(fabric: &Fabric, a: &mut FabricEndpoint, b: IpAddr, count: u32) {
    let src_port = 0xc000;
    for start in (0..count).step_by(16) {
        let built: Vec<_> = (start..(start + 16).min(count))
            .map(|seq| {
                let data = payload(seq);
                let (hdr, icrc) = send_only((a.local_addr(), src_port), b, 0x11, seq, &data);
                (hdr, data, icrc)
            })
            .collect();
        let pieces: Vec<[&[u8]; 3]> = built
            .iter()
            .map(|(h, d, i)| [h.as_slice(), d.as_slice(), i.as_slice()])
            .collect();
        let pieces: Vec<[Bytes<'_>; 3]> = pieces.iter().map(|p| p.map(Bytes::from)).collect();
        let pkts: Vec<OutPacket<'_>> = pieces
            .iter()
            .map(|p| OutPacket {
                dst: SocketAddr::new(b, ROCE_V2_UDP_PORT),
                src_port,
                pieces: p,
                segment: 0,
                ident: 0,
            })
            .collect();
        assert_eq!(a.send_batch(&pkts).unwrap(), pkts.len());
        fabric.advance_to(fabric.now() + 100);
    }
    while let Some(t) = fabric.next_arrival() {
        fabric.advance_to(t);
    }
}

/// What arrived at `b`: (PSN from the BTH, ICRC status, payload intact).
fn drain(b: &mut FabricEndpoint) -> Vec<(u32, IcrcStatus, bool)> {
    let mut batch = RecvBatch::new(32, 2048);
    let mut got = Vec::new();
    while b.recv_batch(&mut batch).unwrap() > 0 {
        for p in batch.iter() {
            assert_eq!(p.meta.origin, IpHeaderOrigin::Received);
            let psn = u32::from_be_bytes([0, p.payload[9], p.payload[10], p.payload[11]]);
            let data = &p.payload[12..p.payload.len() - 4];
            got.push((psn, p.icrc_status(), data == payload(psn).as_slice()));
        }
    }
    got
}

#[test]
fn perfect_fabric_delivers_everything_in_order_intact() {
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let mut a = fabric.attach(A).unwrap();
    let mut b = fabric.attach(B).unwrap();
    assert_eq!((a.index(), b.index()), (0, 1));
    send_many(&fabric, &mut a, B, 200);
    let got = drain(&mut b);
    assert_eq!(got.len(), 200);
    for (i, (psn, icrc, intact)) in got.into_iter().enumerate() {
        assert_eq!((psn, icrc, intact), (i as u32, IcrcStatus::Ok, true));
    }
    assert_eq!(fabric.stats().delivered, 200);
    assert_eq!(a.stats().tx_packets, 200);
    assert_eq!(b.stats().rx_packets, 200);
}

#[test]
fn source_address_and_port_arrive_ipv6() {
    let (x, y) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let mut a = fabric.attach(IpAddr::V6(x)).unwrap();
    let mut b = fabric.attach(IpAddr::V6(y)).unwrap();
    let (hdr, icrc) = send_only((a.local_addr(), 0xc123), b.local_addr(), 7, 0, b"hello");
    let pieces: [&[u8]; 3] = [&hdr, b"hello", &icrc];
    let pieces = pieces.map(Bytes::from);
    let pkt = OutPacket {
        dst: SocketAddr::new(IpAddr::V6(y), 4791),
        src_port: 0xc123,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(a.send_batch(&[pkt]).unwrap(), 1);
    assert!(b.poll(None).unwrap().recv);
    let mut batch = RecvBatch::new(4, 256);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
    let p = batch.get(0).unwrap();
    assert_eq!(p.meta.src, SocketAddr::new(IpAddr::V6(x), 0xc123));
    assert_eq!(p.meta.dst, IpAddr::V6(y));
    assert_eq!(p.meta.ip_header().len(), 40);
    assert_eq!(p.icrc_status(), IcrcStatus::Ok);
    assert!(!b.poll(None).unwrap().recv);
    let _: Ipv6Addr = x;
}

#[test]
fn unroutable_and_attach_errors() {
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let mut a = fabric.attach(A).unwrap();
    assert!(fabric.attach(A).is_err());
    let pieces: [&[u8]; 1] = [&[0u8; 16]];
    let pieces = pieces.map(Bytes::from);
    let to = |ip, port| OutPacket {
        dst: SocketAddr::new(ip, port),
        src_port: 0xc000,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(a.send_batch(&[to(B, 4791), to(A, 9)]).unwrap(), 2);
    assert_eq!(fabric.stats().unroutable, 2);
    let v6: IpAddr = "fd00::1".parse().unwrap();
    assert!(a.send_batch(&[to(v6, 4791)]).is_err());
}

#[test]
fn delay_is_virtual_time() {
    let config = FabricConfig {
        delay_ns: 1_000,
        ..FabricConfig::default()
    };
    let fabric = Fabric::new(config, 1);
    let mut a = fabric.attach(A).unwrap();
    let mut b = fabric.attach(B).unwrap();
    fabric.advance_to(500);
    let pieces: [&[u8]; 1] = [&[1u8; 20]];
    let pieces = pieces.map(Bytes::from);
    let pkt = OutPacket {
        dst: SocketAddr::new(B, 4791),
        src_port: 0xc000,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    a.send_batch(&[pkt]).unwrap();
    assert_eq!(fabric.next_arrival(), Some(1_500));
    assert_eq!(fabric.in_flight(), 1);
    fabric.advance_to(1_499);
    assert!(!b.poll(None).unwrap().recv);
    fabric.advance_to(1_500);
    assert!(b.poll(None).unwrap().recv);
    assert_eq!(fabric.next_arrival(), None);
}

#[test]
fn jitter_spreads_arrivals_and_lets_a_later_packet_overtake() {
    let config = FabricConfig {
        delay_ns: 1_000,
        jitter_ns: 4_000,
        ..FabricConfig::default()
    };
    let fabric = Fabric::new(config, 7);
    let mut a = fabric.attach(A).unwrap();
    let mut b = fabric.attach(B).unwrap();
    send_many(&fabric, &mut a, B, 200);
    let psns: Vec<u32> = drain(&mut b).iter().map(|&(psn, _, _)| psn).collect();
    assert_eq!(psns.len(), 200, "jitter loses nothing");
    assert!(
        psns.windows(2).any(|w| w[1] < w[0]),
        "a packet drawing a shorter delay arrives before one sent earlier"
    );
}

/// Runs 10k packets through a lossy fabric; returns what arrived and the counters.
fn lossy_run(seed: u64) -> (Vec<(u32, IcrcStatus, bool)>, FabricStats) {
    let config = FabricConfig {
        loss: 0.05,
        duplicate: 0.03,
        reorder: 0.04,
        reorder_by: 5,
        corrupt: 0.02,
        delay_ns: 2_000,
        ..FabricConfig::default()
    };
    let fabric = Fabric::new(config, seed);
    let mut a = fabric.attach(A).unwrap();
    let mut b = fabric.attach(B).unwrap();
    send_many(&fabric, &mut a, B, 10_000);
    (drain(&mut b), fabric.stats())
}

#[test]
fn faults_happen_at_the_configured_rates() {
    let (got, stats) = lossy_run(0x5eed);
    eprintln!("fabric seed 0x5eed: {stats:?}");
    let near = |count: u64, rate: f64, n: f64| {
        let want = rate * n;
        (count as f64) > want * 0.7 && (count as f64) < want * 1.3
    };
    assert_eq!(stats.sent, 10_000);
    assert!(near(stats.lost, 0.05, 10_000.0), "{stats:?}");
    let kept = (stats.sent - stats.lost) as f64;
    assert!(near(stats.corrupted, 0.02, kept), "{stats:?}");
    assert!(near(stats.duplicated, 0.03, kept), "{stats:?}");
    assert!(near(stats.reordered, 0.04, kept), "{stats:?}");
    assert_eq!(got.len() as u64, stats.delivered);
    assert_eq!(stats.delivered, stats.sent - stats.lost + stats.duplicated);

    // The ICRC tells corrupt from intact packets exactly.
    let mut bad = 0;
    for &(psn, icrc, intact) in &got {
        match icrc {
            IcrcStatus::Ok => assert!(intact, "PSN {psn} passed the ICRC but is damaged"),
            IcrcStatus::Bad => bad += 1,
            IcrcStatus::OkForIdent(_) => panic!("the fabric carries IP headers"),
        }
    }
    // A corrupted packet may also have been duplicated: both copies are bad.
    assert!(
        bad >= stats.corrupted && bad <= 2 * stats.corrupted,
        "{bad} {stats:?}"
    );

    // Seen by the receiver: duplicates, and packets arriving after later ones.
    let good: Vec<u32> = got
        .iter()
        .filter(|g| g.1 == IcrcStatus::Ok)
        .map(|g| g.0)
        .collect();
    let mut seen = std::collections::HashSet::new();
    let dups = good.iter().filter(|&&p| !seen.insert(p)).count();
    let late = good.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(dups > 0 && late > 0, "dups {dups}, late {late}");
}

#[test]
fn same_seed_same_run() {
    let (got1, stats1) = lossy_run(42);
    let (got2, stats2) = lossy_run(42);
    assert_eq!(stats1, stats2);
    assert_eq!(got1, got2);
    let (got3, _) = lossy_run(43);
    assert_ne!(got1, got3);
}

#[test]
fn held_packet_is_released_by_count_or_deadline() {
    let config = FabricConfig {
        reorder: 1.0,
        reorder_by: 1,
        reorder_hold_ns: 10_000,
        ..FabricConfig::default()
    };
    let fabric = Fabric::new(config, 7);
    let mut a = fabric.attach(A).unwrap();
    let mut b = fabric.attach(B).unwrap();
    let pieces: [&[u8]; 1] = [&[1u8; 20]];
    let pieces = pieces.map(Bytes::from);
    let pkt = OutPacket {
        dst: SocketAddr::new(B, 4791),
        src_port: 0xc000,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    a.send_batch(&[pkt]).unwrap();
    // Every packet is held, and none follows: the deadline releases it.
    assert!(!b.poll(None).unwrap().recv);
    assert_eq!(fabric.next_arrival(), Some(10_000));
    fabric.advance_to(10_000);
    assert!(b.poll(None).unwrap().recv);
}

#[test]
fn a_multicast_datagram_reaches_every_endpoint_that_joined_the_group() {
    let group = IpAddr::V4(std::net::Ipv4Addr::new(239, 1, 32, 1));
    let c_addr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3));
    let fabric = Fabric::new(FabricConfig::default(), 9);
    let mut a = fabric.attach(A).unwrap();
    let mut b = fabric.attach(B).unwrap();
    let mut c = fabric.attach(c_addr).unwrap();
    let not_multicast = b.join_multicast(A).unwrap_err();
    assert_eq!(not_multicast.kind(), io::ErrorKind::InvalidInput);
    b.join_multicast(group).unwrap();
    c.join_multicast(group).unwrap();
    assert!(c.join_multicast(group).is_err(), "joined twice");
    send_many(&fabric, &mut a, group, 3);
    for ep in [&mut b, &mut c] {
        let mut batch = RecvBatch::new(8, 2048);
        assert_eq!(ep.recv_batch(&mut batch).unwrap(), 3);
        for p in batch.iter() {
            assert_eq!(p.meta.dst, group, "delivered to the group's address");
            assert_eq!(p.meta.src.ip(), A);
            assert_eq!(p.icrc_status(), IcrcStatus::Ok, "the ICRC covers the group");
        }
    }
    assert!(drain(&mut a).is_empty(), "the sender did not join");
    assert_eq!(fabric.stats().delivered, 6);

    // C leaves: only B gets the next one; with nobody left it is unroutable.
    c.leave_multicast(group).unwrap();
    assert!(c.leave_multicast(group).is_err(), "left twice");
    send_many(&fabric, &mut a, group, 1);
    assert_eq!(drain(&mut b).len(), 1);
    assert!(drain(&mut c).is_empty());
    b.leave_multicast(group).unwrap();
    send_many(&fabric, &mut a, group, 1);
    assert_eq!(fabric.stats().unroutable, 1);
}
