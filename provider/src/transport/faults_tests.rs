//! Tests of the fault-injecting wrapper, over the in-memory fabric.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use softrnic_wire::ROCE_V2_UDP_PORT;

use super::*;
use crate::transport::test_util::send_only;
use crate::transport::{Fabric, FabricConfig, FabricEndpoint};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2));

/// Sends one packet per entry of `opcodes` from `t` to `B`, PSN = its index (the opcode byte
/// is patched in after building; nobody checks the ICRC here).
fn send(t: &mut impl Transport, opcodes: &[Opcode]) {
    let built: Vec<_> = opcodes
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let (mut hdr, icrc) = send_only((A, 0xc000), B, 0x11, i as u32, &[i as u8; 8]);
            hdr[0] = op.0;
            (hdr, vec![i as u8; 8], icrc)
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
            dst: SocketAddr::new(B, ROCE_V2_UDP_PORT),
            src_port: 0xc000,
            pieces: p,
            segment: 0,
            ident: 0,
        })
        .collect();
    assert_eq!(t.send_batch(&pkts).unwrap(), pkts.len());
}

/// The PSNs `t` receives, in order.
fn psns(t: &mut impl Transport) -> Vec<u32> {
    let mut batch = RecvBatch::new(64, 256);
    let mut got = Vec::new();
    while t.recv_batch(&mut batch).unwrap() > 0 {
        for p in batch.iter() {
            got.push(u32::from_be_bytes([
                0,
                p.payload[9],
                p.payload[10],
                p.payload[11],
            ]));
        }
    }
    got
}

fn pair() -> (Fabric, FabricEndpoint, FabricEndpoint) {
    let f = Fabric::new(FabricConfig::default(), 1);
    let a = f.attach(A).unwrap();
    let b = f.attach(B).unwrap();
    (f, a, b)
}

const S: Opcode = Opcode::RC_SEND_ONLY;
const R: Opcode = Opcode::RC_RDMA_READ_REQUEST;

#[test]
fn without_rules_everything_passes_and_is_counted() {
    let (_f, a, mut b) = pair();
    let (mut a, ctl) = FaultInjector::new(a);
    send(&mut a, &[S, R, S]);
    assert_eq!(psns(&mut b), vec![0, 1, 2]);
    assert_eq!(ctl.seen(Direction::Tx, S), 2);
    assert_eq!(ctl.seen(Direction::Tx, R), 1);
    assert_eq!(ctl.seen(Direction::Rx, S), 0);
    assert_eq!((ctl.dropped(), ctl.duplicated()), (0, 0));
}

#[test]
fn the_nth_packet_of_an_opcode_is_dropped_on_send() {
    let (_f, a, mut b) = pair();
    let (mut a, ctl) = FaultInjector::new(a);
    ctl.add(Rule {
        dir: Direction::Tx,
        opcode: Some(S),
        nth: Some(1),
        action: Action::Drop,
    })
    .unwrap();
    send(&mut a, &[S, R, S, S]);
    assert_eq!(psns(&mut b), vec![0, 1, 3], "the second SEND is lost");
    assert_eq!(ctl.seen(Direction::Tx, S), 3);
    assert_eq!(ctl.dropped(), 1);
    // Counted from here on again: the second SEND after the clear is lost too.
    ctl.clear_counters();
    send(&mut a, &[S, S]);
    assert_eq!(psns(&mut b), vec![0]);
}

#[test]
fn the_nth_packet_is_duplicated_on_send() {
    let (_f, a, mut b) = pair();
    let (mut a, ctl) = FaultInjector::new(a);
    ctl.add(Rule {
        dir: Direction::Tx,
        opcode: Some(R),
        nth: Some(0),
        action: Action::Duplicate,
    })
    .unwrap();
    send(&mut a, &[S, R, S, R]);
    assert_eq!(psns(&mut b), vec![0, 1, 1, 2, 3]);
    assert_eq!(ctl.duplicated(), 1);
    assert_eq!(ctl.seen(Direction::Tx, R), 2, "a duplicate counts once");
}

#[test]
fn every_packet_of_an_opcode_is_dropped_on_receive_and_the_rest_keep_their_order() {
    let (_f, mut a, b) = pair();
    let (mut b, ctl) = FaultInjector::new(b);
    ctl.add(Rule {
        dir: Direction::Rx,
        opcode: Some(S),
        nth: None,
        action: Action::Drop,
    })
    .unwrap();
    send(&mut a, &[S, R, S, R, R, S, R]);
    assert_eq!(psns(&mut b), vec![1, 3, 4, 6]);
    assert_eq!(ctl.seen(Direction::Rx, S), 3);
    assert_eq!(ctl.seen(Direction::Rx, R), 4);
    assert_eq!(ctl.dropped(), 3);
    ctl.clear_rules();
    send(&mut a, &[S]);
    assert_eq!(psns(&mut b), vec![0]);
}

#[test]
fn a_rule_for_any_opcode_drops_everything() {
    let (_f, a, mut b) = pair();
    let (mut a, ctl) = FaultInjector::new(a);
    ctl.add(Rule {
        dir: Direction::Tx,
        opcode: None,
        nth: None,
        action: Action::Drop,
    })
    .unwrap();
    send(&mut a, &[S, R, S]);
    assert!(psns(&mut b).is_empty());
    assert_eq!(ctl.dropped(), 3);
}

#[test]
fn a_duplicate_on_receive_is_refused() {
    let ctl = FaultControl::default();
    let rule = Rule {
        dir: Direction::Rx,
        opcode: None,
        nth: None,
        action: Action::Duplicate,
    };
    assert!(ctl.add(rule).is_err());
}

/// A transport that remembers what it was told of the packets it received.
struct Told<T> {
    inner: T,
    notes: Vec<(usize, &'static str)>,
}

impl<T: Transport> Transport for Told<T> {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        self.inner.send_batch(pkts)
    }
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.notes.clear();
        self.inner.recv_batch(batch)
    }
    fn note_dropped(&mut self, index: usize, why: &'static str) {
        self.notes.push((index, why));
    }
    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready> {
        self.inner.poll(timeout)
    }
    fn local_addr(&self) -> IpAddr {
        self.inner.local_addr()
    }
    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }
}

#[test]
fn drops_are_told_to_the_transport_underneath_with_its_own_indices() {
    let (_f, mut a, b) = pair();
    let (mut b, ctl) = FaultInjector::new(Told {
        inner: b,
        notes: Vec::new(),
    });
    ctl.add(Rule {
        dir: Direction::Rx,
        opcode: Some(S),
        nth: None,
        action: Action::Drop,
    })
    .unwrap();
    send(&mut a, &[S, R, S, R]);
    let mut batch = RecvBatch::new(8, 256);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 2);
    // The driver drops the second packet it got: the fourth underneath.
    b.note_dropped(1, "dropped: no QP has its DestQP");
    let lost = "dropped: lost by the fault injector";
    assert_eq!(
        b.inner.notes,
        vec![(0, lost), (2, lost), (3, "dropped: no QP has its DestQP")]
    );
}
