//! When the RC requester asks for an ACK (BTH AckReq, IBTA 9.7.2.1.1 and 9.7.5.1): on the last
//! packet of a signaled SEND or RDMA WRITE, on a resend, when half the send queue would be
//! unacknowledged, and every `ACK_REQ_INTERVAL` packets; never on the first transmission of an
//! unsignaled WR's last packet otherwise. The responder (softrnic's, like rxe's) ACKs only what
//! asks, so every WR still completes: through a later ACK, or after the ACK timer resends.

mod common;

use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp::{Qp, QpCaps};
use softrnic_provider::rc::{ACK_REQ_INTERVAL, INITIAL_RTO};
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::{RecvWr, SendFlags, SendOpcode, SendWr, Sge};
use softrnic_wire::Opcode;

fn send(wr_id: u64, sge: Sge, signaled: bool) -> SendWr {
    let flags = if signaled {
        SendFlags::SIGNALED
    } else {
        SendFlags::empty()
    };
    SendWr {
        flags,
        ..SendWr::new(wr_id, SendOpcode::Send, vec![sge])
    }
}

/// Posts `n` receives of 64 bytes on B and returns A's 64-byte source.
fn setup(p: &mut Pair, n: u64) -> Sge {
    let a_mem = p.a.region(4096, Access::LOCAL_WRITE);
    let b_mem = p.b.region(4096, Access::LOCAL_WRITE);
    for i in 0..n {
        let sge = Sge {
            addr: b_mem.addr(),
            length: 64,
            lkey: b_mem.keys.lkey,
        };
        p.b.qp
            .post_recv(&RecvWr {
                wr_id: i,
                sg_list: vec![sge],
            })
            .unwrap();
    }
    Sge {
        addr: a_mem.addr(),
        length: 64,
        lkey: a_mem.keys.lkey,
    }
}

/// B's SEND packets as (PSN offset from A's first, AckReq).
fn sends_seen(p: &Pair) -> Vec<(u32, bool)> {
    let first = Connect::default().a_psn;
    p.b.seen_of(Opcode::RC_SEND_ONLY)
        .map(|s| (s.psn.value().wrapping_sub(first), s.ack_req))
        .collect()
}

/// A pair whose A QP has a send queue of 8 WRs.
fn pair_with_8_send_slots_on_a(seed: u64) -> Pair {
    let mut p = Pair::new(FabricConfig::default(), seed, Connect::default());
    let c = Connect::default();
    let small = QpCaps {
        max_send_wr: 8,
        ..caps()
    };
    p.a.qp = Qp::new(0x11, PD, small, 0xc011, false);
    connect(&mut p.a.qp, 0x22, B_ADDR, c, c.a_psn, c.b_psn);
    p
}

#[test]
fn unsignaled_sends_ask_for_no_ack_and_the_signaled_one_after_them_acks_all() {
    let mut p = Pair::new(FabricConfig::default(), 41, Connect::default());
    let sge = setup(&mut p, 4);
    for i in 0..4 {
        let mrs = &p.a.mrs;
        p.a.qp.post_send(&send(i, sge, i == 3), mrs).unwrap();
    }
    p.run_to_quiescence(1000);
    assert_eq!(
        sends_seen(&p),
        [(0, false), (1, false), (2, false), (3, true)]
    );
    // One ACK, for the signaled WR's PSN, completes all four; only it makes a completion.
    let acks: Vec<_> = p.a.seen_of(Opcode::RC_ACKNOWLEDGE).map(|s| s.psn).collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    let done: Vec<_> = p.a.send_wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(done, [(3, WcStatus::Success)]);
    assert_eq!(p.a.qp.send_queue_len(), 0);
    assert_eq!(p.b.recv_wcs.len(), 4);
    // Well before the ACK timer (timeout 14: 67 ms) could have fired.
    assert!(p.elapsed().as_millis() < 60, "{:?}", p.elapsed());
}

#[test]
fn an_unsignaled_tail_is_acknowledged_once_the_ack_timer_resends_it() {
    let mut p = Pair::new(FabricConfig::default(), 42, Connect::default());
    let sge = setup(&mut p, 2);
    for i in 0..2 {
        let mrs = &p.a.mrs;
        p.a.qp.post_send(&send(i, sge, false), mrs).unwrap();
    }
    p.run_to_quiescence(1000);
    // Both went out asking for nothing; the timer resent the first unacknowledged PSN alone
    // (a probe), asking this time, and the duplicate was ACKed with the latest PSN the
    // responder had, which acknowledged both: nothing delivered again, nothing more resent.
    // No round trip was measured yet: the timer's first, early interval.
    assert_eq!(sends_seen(&p), [(0, false), (1, false), (0, true)]);
    assert!(p.elapsed() >= INITIAL_RTO, "{:?}", p.elapsed());
    assert!(p.elapsed().as_millis() < 67, "{:?}", p.elapsed());
    assert_eq!(p.a.qp.send_queue_len(), 0);
    assert!(p.a.send_wcs.is_empty(), "{:?}", p.a.send_wcs);
    assert_eq!(p.b.recv_wcs.len(), 2);
}

#[test]
fn half_a_send_queue_unacknowledged_asks_for_an_ack() {
    let mut p = pair_with_8_send_slots_on_a(43);
    let sge = setup(&mut p, 8);
    for i in 0..8 {
        let mrs = &p.a.mrs;
        p.a.qp.post_send(&send(i, sge, false), mrs).unwrap();
    }
    p.run_until(1000, |p| p.b.recv_wcs.len() == 8);
    // The 4th WR makes half of 8 sent and unacknowledged: it asks, and so does the 8th.
    let asked: Vec<u32> = sends_seen(&p)
        .into_iter()
        .filter(|&(_, ask)| ask)
        .map(|(psn, _)| psn)
        .collect();
    assert_eq!(asked, [3, 7]);
    p.run_to_quiescence(1000);
    assert_eq!(p.a.qp.send_queue_len(), 0);
    assert!(p.elapsed().as_millis() < 60, "{:?}", p.elapsed());
}

#[test]
fn a_long_run_of_unsignaled_sends_asks_every_ack_req_interval_packets() {
    let mut p = Pair::new(FabricConfig::default(), 44, Connect::default());
    let n = u64::from(ACK_REQ_INTERVAL) * 2 + 10;
    let sge = setup(&mut p, n);
    for i in 0..n {
        let mrs = &p.a.mrs;
        p.a.qp.post_send(&send(i, sge, i == n - 1), mrs).unwrap();
    }
    p.run_to_quiescence(100_000);
    let asked: Vec<u32> = sends_seen(&p)
        .into_iter()
        .filter(|&(_, ask)| ask)
        .map(|(psn, _)| psn)
        .collect();
    let k = ACK_REQ_INTERVAL;
    assert_eq!(asked, [k - 1, 2 * k - 1, n as u32 - 1]);
    assert_eq!(p.a.qp.send_queue_len(), 0);
    assert_eq!(p.b.recv_wcs.len(), n as usize);
}

#[test]
fn unsignaled_messages_of_several_packets_count_as_messages_against_the_send_queue() {
    let mut p = pair_with_8_send_slots_on_a(45);
    let c = Connect::default();
    let a_mem = p.a.region(4096, Access::LOCAL_WRITE);
    let b_mem = p.b.region(4096, Access::LOCAL_WRITE);
    let sge = |m: &Region| Sge {
        addr: m.addr(),
        length: 4096, // 4 packets at the pair's PMTU of 1024
        lkey: m.keys.lkey,
    };
    for i in 0..4 {
        p.b.qp
            .post_recv(&RecvWr {
                wr_id: i,
                sg_list: vec![sge(&b_mem)],
            })
            .unwrap();
        let mrs = &p.a.mrs;
        p.a.qp
            .post_send(&send(i, sge(&a_mem), i == 3), mrs)
            .unwrap();
    }
    p.run_to_quiescence(1000);
    // Each message is as many packets as half the send queue has slots (4), but three
    // unasked messages do not fill it: only the signaled message's last packet asks.
    let asked: Vec<_> =
        p.b.seen
            .iter()
            .filter(|s| s.ack_req)
            .map(|s| (s.opcode, s.psn.value() - c.a_psn))
            .collect();
    assert_eq!(asked, [(Opcode::RC_SEND_LAST, 15)]);
    assert_eq!(p.a.qp.send_queue_len(), 0);
    assert_eq!(p.b.recv_wcs.len(), 4);
    assert!(p.elapsed().as_millis() < 60, "{:?}", p.elapsed());
}
