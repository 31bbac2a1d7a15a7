//! How a device's QPs share its transmit (`nic/turns.rs`): in turns of up to `QUANTUM`
//! packets, so that each QP's packets leave in runs the transport can segment as one
//! (UDP GSO), and within one send window for the whole device, each sending QP getting an
//! equal share of it.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use common::wrs::send_wr;
use common::*;
use softrnic_provider::mr::{Access, MrTable};
use softrnic_provider::nic::{Nic, QUANTUM};
use softrnic_provider::qp::TxQueue;
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::rc::{DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS};
use softrnic_provider::wr::{RemoteAddr, SendFlags, SendOpcode, Sge};
use softrnic_wire::aeth::{AethRepr, CreditCode, Syndrome};
use softrnic_wire::bth::BthRepr;
use softrnic_wire::roce::{RocePacket, RoceRepr};
use softrnic_wire::{Opcode, Psn};

/// A NIC with `n` RC QPs to peer QPs 0x100.. on B_ADDR (which never answers), each with
/// `messages` unsignaled 64 KiB RDMA WRITEs posted (PMTU 4096: 16 packets each), and the
/// buffer they read from.
fn writers(n: usize, messages: usize) -> (Nic, Vec<u32>, Vec<u8>, Arc<MrTable>) {
    let mrs = Arc::new(MrTable::new(16, 5).unwrap());
    let buf = vec![7u8; 1 << 16];
    // SAFETY: the NIC only reads `buf`, which the caller keeps alive beside it (and drops
    // after it).
    let keys = unsafe {
        mrs.register(
            PD,
            buf.as_ptr().cast_mut(),
            buf.len(),
            buf.as_ptr() as u64,
            Access::LOCAL_WRITE,
        )
        .unwrap()
    };
    let mut nic = Nic::new(A_ADDR, mrs.clone(), 2048);
    let cq = nic.create_cq(4096);
    let c = Connect {
        mtu: Mtu::Mtu4096,
        ..Connect::default()
    };
    let mut qpns = Vec::new();
    for i in 0..n {
        let qpn = nic
            .create_qp(PD, cq, cq, None, caps(), false, 4096)
            .unwrap();
        connect(
            nic.qp(qpn).unwrap(),
            0x100 + i as u32,
            B_ADDR,
            c,
            c.a_psn,
            c.b_psn,
        );
        for m in 0..messages {
            let mut wr = send_wr(
                m as u64,
                SendOpcode::RdmaWrite,
                vec![Sge {
                    addr: buf.as_ptr() as u64,
                    length: 1 << 16,
                    lkey: keys.lkey,
                }],
                RemoteAddr {
                    addr: 0x1000,
                    rkey: 0x55,
                },
            );
            wr.flags = SendFlags::empty();
            let (qp, mrs) = nic.qp_and_mrs(qpn).unwrap();
            qp.post_send(&wr, mrs).unwrap();
        }
        qpns.push(qpn);
    }
    (nic, qpns, buf, mrs)
}

/// Full transmit passes of batches of 32 until the QPs have nothing more (no ACK comes):
/// the destination QPN of every packet, in order.
fn drain(nic: &mut Nic) -> Vec<u32> {
    drain_asking(nic).into_iter().map(|(q, _)| q).collect()
}

/// As [`drain`], each packet's destination QPN with its AckReq bit.
fn drain_asking(nic: &mut Nic) -> Vec<(u32, bool)> {
    let (now, mut out, mut all) = (Instant::now(), TxQueue::new(), Vec::new());
    loop {
        out.clear();
        nic.poll_transmit(now, &mut out, 32);
        all.extend(
            out.as_slice()
                .iter()
                .map(|t| (t.roce.bth.dest_qp, t.roce.bth.ack_req)),
        );
        if out.len() < 32 {
            return all;
        }
    }
}

/// Consecutive packets to the same QP, as (QPN, count).
fn runs(dests: &[u32]) -> Vec<(u32, usize)> {
    let mut runs: Vec<(u32, usize)> = Vec::new();
    for &q in dests {
        match runs.last_mut() {
            Some((p, n)) if *p == q => *n += 1,
            _ => runs.push((q, 1)),
        }
    }
    runs
}

/// Packets per destination QP.
fn per_qp(dests: &[u32]) -> HashMap<u32, usize> {
    let mut n = HashMap::new();
    for &q in dests {
        *n.entry(q).or_default() += 1;
    }
    n
}

#[test]
fn one_qp_alone_has_its_whole_window() {
    let (mut nic, _, _buf, _mrs) = writers(1, 64);
    assert_eq!(drain(&mut nic).len(), WINDOW_PSNS as usize);
}

#[test]
fn four_qps_send_in_quanta_and_share_the_device_window() {
    let (mut nic, _, _buf, _mrs) = writers(4, 64);
    let dests = drain(&mut nic);
    let share = DEVICE_WINDOW_PSNS as usize / 4;
    assert_eq!(dests.len(), DEVICE_WINDOW_PSNS as usize);
    for (q, n) in runs(&dests) {
        // A turn's quantum, or two turns in a row when the others have nothing left.
        assert!(n % QUANTUM == 0, "a run of {n} packets to QP {q:#x}");
    }
    assert!(per_qp(&dests).values().all(|&n| n == share), "{dests:?}");
}

#[test]
fn many_qps_together_stay_within_the_device_window() {
    let (mut nic, _, _buf, _mrs) = writers(1024, 1);
    let dests = drain(&mut nic);
    assert_eq!(
        dests.len(),
        DEVICE_WINDOW_PSNS as usize,
        "not a packet per QP"
    );
    // A run each, for as many QPs as the window holds; the others wait their turn.
    let n = per_qp(&dests);
    assert_eq!(n.len(), (DEVICE_WINDOW_PSNS / MIN_SHARE_PSNS) as usize);
    assert!(n.values().all(|&k| k == MIN_SHARE_PSNS as usize), "{n:?}");
}

#[test]
fn the_last_packet_a_qp_may_send_before_an_ack_asks_for_it() {
    // Three QPs: shares of 170 PSNs, an AckReq every 42 packets at most, messages of 16
    // unsignaled packets. Each stops where its share is full, in the middle of a message and
    // of an ACK interval, and only an ACK it asked for would move it on.
    let (mut nic, _, _buf, _mrs) = writers(3, 64);
    let pkts = drain_asking(&mut nic);
    assert_eq!(pkts.len(), DEVICE_WINDOW_PSNS as usize / 3 * 3);
    for peer in 0x100..0x103 {
        let last = pkts.iter().rev().find(|(q, _)| *q == peer);
        assert_eq!(last, Some(&(peer, true)), "QP to {peer:#x}");
    }
}

#[test]
fn a_qp_that_goes_back_after_a_timeout_lets_the_others_send() {
    let (mut nic, qpns, _buf, _mrs) = writers(4, 64);
    // The first QP starts alone, from a post's round before any full pass, and fills the
    // whole window; the others, counted as they come, find it full.
    let now = Instant::now();
    let mut sent = Vec::new();
    for &q in &qpns {
        let mut out = TxQueue::new();
        nic.poll_transmit_qp(q, now, &mut out, 4096);
        sent.push(out.len());
    }
    assert_eq!(sent, [WINDOW_PSNS as usize, 0, 0, 0]);
    assert!(drain(&mut nic).is_empty(), "nothing is acknowledged");
    // No ACK comes (the peer is dead): at its retransmit timeout the first QP goes back to
    // resend from its oldest PSN, one packet (the probe whose ACK says how far the peer
    // got), and the others take their shares of the window.
    let later = now + std::time::Duration::from_secs(1);
    nic.handle_timeout(later);
    let (mut out, mut dests) = (TxQueue::new(), Vec::new());
    loop {
        out.clear();
        nic.poll_transmit(later, &mut out, 32);
        dests.extend(out.as_slice().iter().map(|t| t.roce.bth.dest_qp));
        if out.len() < 32 {
            break;
        }
    }
    let share = DEVICE_WINDOW_PSNS as usize / 4;
    let n = per_qp(&dests);
    assert_eq!(n.len(), 4, "every QP sends: {n:?}");
    let first = 0x100; // the peer of the first QP
    assert_eq!(n[&first], 1, "the first QP's probe: {n:?}");
    assert!(
        n.iter()
            .filter(|(q, _)| **q != first)
            .all(|(_, &k)| k == share),
        "{n:?}"
    );
}

/// What the peer of each QP has received: the last PSN and the messages ended, by the peer's
/// QPN (0x100 + the QP's index).
#[derive(Default)]
struct Peers(HashMap<u32, (Psn, u32)>);

impl Peers {
    /// Takes note of the packets in `out`; returns their peers' QPNs, in order.
    fn receive(&mut self, out: &TxQueue) -> Vec<u32> {
        let mut dests = Vec::new();
        for t in out.as_slice() {
            let b = t.roce.bth;
            let (psn, msn) = self.0.entry(b.dest_qp).or_insert((b.psn, 0));
            *psn = b.psn;
            *msn += u32::from(b.opcode == Opcode::RC_RDMA_WRITE_LAST);
            dests.push(b.dest_qp);
        }
        dests
    }

    /// Hands QP `qpns[i]` the ACK of everything its peer has received.
    fn ack(&self, nic: &mut Nic, qpns: &[u32], i: usize, now: Instant) {
        let (psn, msn) = self.0[&(0x100 + i as u32)];
        let mut repr = RoceRepr::new(BthRepr {
            opcode: Opcode::RC_ACKNOWLEDGE,
            solicited: false,
            mig_req: false,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: qpns[i],
            ack_req: false,
            psn,
        });
        repr.aeth = Some(AethRepr {
            syndrome: Syndrome::Ack(CreditCode::UNLIMITED),
            msn,
        });
        let ack = RocePacket {
            repr,
            payload: &[],
            icrc: 0,
        };
        nic.handle_packet_from(now, &ack, true, B_ADDR);
    }
}

#[test]
fn waiting_qps_get_the_room_acks_make_in_the_order_they_began_to_wait() {
    // 40 QPs of two messages each: 32 messages fill the device's window, and the last 8
    // QPs wait for room.
    let (mut nic, qpns, _buf, _mrs) = writers(40, 2);
    let (now, mut out, mut peers) = (Instant::now(), TxQueue::new(), Peers::default());
    nic.poll_transmit(now, &mut out, 4096);
    let first = peers.receive(&out);
    assert_eq!(first.len(), DEVICE_WINDOW_PSNS as usize);
    assert_eq!(per_qp(&first).len(), 32);
    // QP 0's message is acknowledged, and a post to the last QP is the first to be looked
    // at (as a post's round does): it waited longest but one, and does not take the room;
    // the first waiting QP does. In its own round, QP 0 waits behind the others for its
    // second message.
    peers.ack(&mut nic, &qpns, 0, now);
    out.clear();
    nic.poll_transmit_qp(qpns[39], now, &mut out, 4096);
    assert_eq!(runs(&peers.receive(&out)), [(0x100 + 32, 16)]);
    out.clear();
    nic.poll_transmit_qp(qpns[0], now, &mut out, 4096);
    assert!(out.is_empty());
    // ACKs of one message at a time, each followed by its QP's round: every QP that waited
    // sends before any other sends its second message.
    let mut order = Vec::new();
    for i in (1..32).chain(32..40).chain(0..40) {
        peers.ack(&mut nic, &qpns, i, now);
        out.clear();
        nic.poll_transmit_qp(qpns[i], now, &mut out, 4096);
        order.extend(runs(&peers.receive(&out)).into_iter().map(|(q, n)| {
            assert_eq!(n, 16, "a message at a time");
            q - 0x100
        }));
    }
    let expected: Vec<u32> = (33..40).chain(0..40).collect();
    assert_eq!(order[..expected.len()], expected[..]);
    assert!(peers.0.values().all(|&(_, msn)| msn == 2));
}

#[test]
fn each_qp_counts_its_packets_and_the_nic_keeps_a_destroyed_qps_counts() {
    let (mut nic, qpns, _buf, _mrs) = writers(2, 4);
    let dests = drain(&mut nic);
    let sent = per_qp(&dests);
    let reports = nic.qp_reports();
    for r in &reports {
        let to = 0x100 + qpns.iter().position(|&q| q == r.qpn).unwrap() as u32;
        assert_eq!(r.counters.sent_pkts, sent[&to] as u64, "QP {:#x}", r.qpn);
        assert_eq!(r.counters.rcvd_pkts, 0);
    }
    let total = dests.len() as u64;
    assert_eq!(nic.qp_counters().sent_pkts, total);
    nic.destroy_qp(qpns[0]).unwrap();
    assert_eq!(nic.qp_reports().len(), 1);
    assert_eq!(
        nic.qp_counters().sent_pkts,
        total,
        "a device's counts outlive its QPs"
    );
}
