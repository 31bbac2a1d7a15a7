//! Shared receive queues (IBTA 10.2.9) over the in-memory fabric, in virtual time: RC QPs on B
//! created with one SRQ take their receive WQEs from it, in posting order, whichever QP the
//! message comes to; an empty SRQ means RNR NAK; the limit event fires once; a QP entering ERR
//! leaves the SRQ's WQEs to the others; and the verbs' refusals (post_recv on an SRQ QP,
//! destroying an SRQ in use, posting beyond max_wr).

mod common;

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use common::wrs::*;
use common::*;
use softrnic_provider::event::{AsyncEvent, Element, EventType};
use softrnic_provider::mr::{Access, MrTable};
use softrnic_provider::nic::{Nic, SRQ_LIMITS};
use softrnic_provider::qp::{Qp, QpAttr};
use softrnic_provider::qp_state::{AttrMask, QpState};
use softrnic_provider::srq::{Srq, SrqAttr, SrqAttrMask, SrqId};
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcOpcode, WcStatus};
use softrnic_provider::wr::SendOpcode;
use softrnic_wire::aeth::Syndrome;
use softrnic_wire::Opcode;

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// Bytes per receive slot on B: slot `i` is `b_mem[i * SLOT..]`.
const SLOT: usize = 256;

/// A's QPs (senders) and B's QPs (on the SRQ).
const A1: u32 = 0x31;
const A2: u32 = 0x32;
const B1: u32 = 0x41;
const B2: u32 = 0x42;

fn srq_attr(max_wr: u32, srq_limit: u32) -> SrqAttr {
    SrqAttr {
        max_wr,
        max_sge: 4,
        srq_limit,
    }
}

/// A pair with two QP connections A1-B1 and A2-B2, both B QPs on one SRQ of `max_wr`.
fn pair_with_srq(seed: u64, max_wr: u32) -> (Pair, SrqId) {
    let c = Connect::default();
    let mut p = Pair::new(FabricConfig::default(), seed, c);
    let srq = Srq::new(PD, &srq_attr(max_wr, 0), &SRQ_LIMITS).unwrap();
    let id = p.b.srqs.insert(srq, 4).unwrap();
    p.add_qps(A1, None, B1, Some(id), c);
    p.add_qps(A2, None, B2, Some(id), c);
    (p, id)
}

/// Posts SRQ WQEs `ids`, WQE `i` receiving into slot `i`.
fn post_srq(p: &mut Pair, srq: SrqId, b_mem: &Region, ids: std::ops::Range<u64>) {
    for i in ids {
        let wr = recv_wr(i, vec![sge_of(b_mem, i * SLOT as u64, SLOT as u32)]);
        p.b.srqs.srq(srq).unwrap().post_recv(&wr).unwrap();
    }
}

/// Sends message `msg` (SEND with immediate `msg`, 100 bytes of `bytes(100, msg)`) on A's QP
/// `qpn`.
fn send_msg(p: &mut Pair, qpn: u32, a_mem: &Region, msg: u8) {
    let off = u64::from(msg) * SLOT as u64;
    p.a.fill(a_mem, off as usize, &bytes(100, msg));
    let mut wr = send_wr(
        u64::from(msg),
        SendOpcode::SendWithImm,
        vec![sge_of(a_mem, off, 100)],
        remote_of(a_mem, 0),
    );
    wr.imm_data_or_inv_rkey = u32::from(msg);
    p.a.post_send_on(qpn, &wr).unwrap();
}

fn to_err(qp: &mut Qp) {
    let attr = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    qp.modify(&attr, AttrMask::STATE, &LIMITS).unwrap();
}

/// Checks every successful receive on B: the slot of its WQE holds the message its immediate
/// names.
fn check_received_data(p: &Pair, b_mem: &Region) {
    for wc in
        p.b.recv_wcs
            .iter()
            .filter(|w| w.status == WcStatus::Success)
    {
        let msg = wc.imm_data_or_inv_rkey as u8;
        assert_eq!(wc.byte_len, 100);
        assert_eq!(
            p.b.read(b_mem, wc.wr_id as usize * SLOT, 100),
            bytes(100, msg),
            "WQE {} holds message {msg}",
            wc.wr_id
        );
    }
}

#[test]
fn two_qps_sharing_one_srq_both_receive_from_it() {
    let (mut p, srq) = pair_with_srq(1, 16);
    let a_mem = p.a.region(16 * SLOT, ALL);
    let b_mem = p.b.region(16 * SLOT, ALL);
    post_srq(&mut p, srq, &b_mem, 1..7);
    for (msg, qpn) in [(1, A1), (2, A2), (3, A1), (4, A2), (5, A1), (6, A2)] {
        send_msg(&mut p, qpn, &a_mem, msg);
    }
    p.run_to_quiescence(10_000);

    assert_eq!(p.a.send_wcs.len(), 6);
    assert!(p.a.send_wcs.iter().all(|w| w.status == WcStatus::Success));
    let wcs = &p.b.recv_wcs;
    assert_eq!(wcs.len(), 6);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    // Each QP received its three messages, each through a different WQE of the SRQ.
    for (qpn, from, msgs) in [(B1, A1, [1, 3, 5]), (B2, A2, [2, 4, 6])] {
        let mine: Vec<_> = wcs.iter().filter(|w| w.qp_num == qpn).collect();
        assert_eq!(mine.len(), 3, "QP {qpn:#x} received three");
        assert!(mine.iter().all(|w| w.src_qp == from));
        let got: BTreeSet<u32> = mine.iter().map(|w| w.imm_data_or_inv_rkey).collect();
        assert_eq!(got, BTreeSet::from(msgs));
    }
    let used: BTreeSet<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(used, (1..7).collect(), "every WQE used once");
    // Taken in posting order: by arrival order, the WQEs are 1, 2, 3, ...
    let in_order: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(in_order, (1..7).collect::<Vec<_>>());
    assert!(p.b.srqs.srq(srq).unwrap().is_empty());
    check_received_data(&p, &b_mem);
}

#[test]
fn an_empty_srq_rnr_naks_then_the_send_succeeds_once_refilled() {
    let (mut p, srq) = pair_with_srq(2, 16);
    let a_mem = p.a.region(16 * SLOT, ALL);
    let b_mem = p.b.region(16 * SLOT, ALL);
    send_msg(&mut p, A1, &a_mem, 7);
    p.run_until(1_000, |p| {
        p.a.seen
            .iter()
            .any(|s| matches!(s.syndrome, Some(Syndrome::RnrNak(_))))
    });
    assert!(p.b.recv_wcs.is_empty(), "nothing received without a WQE");
    assert!(p.a.send_wcs.is_empty(), "the SEND waits, it does not fail");

    post_srq(&mut p, srq, &b_mem, 3..4);
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(7, WcStatus::Success)]);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(3, WcStatus::Success)]);
    assert_eq!(p.b.recv_wcs[0].qp_num, B1);
    check_received_data(&p, &b_mem);
}

#[test]
fn write_with_immediate_takes_its_wqe_from_the_srq() {
    let (mut p, srq) = pair_with_srq(3, 16);
    let a_mem = p.a.region(16 * SLOT, ALL);
    let b_mem = p.b.region(16 * SLOT, ALL);
    post_srq(&mut p, srq, &b_mem, 1..2);
    let data = bytes(64, 9);
    p.a.fill(&a_mem, 0, &data);
    let mut wr = send_wr(
        1,
        SendOpcode::RdmaWriteWithImm,
        vec![sge_of(&a_mem, 0, 64)],
        remote_of(&b_mem, 8 * SLOT as u64),
    );
    wr.imm_data_or_inv_rkey = 0xabcd;
    p.a.post_send_on(A2, &wr).unwrap();
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(1, WcStatus::Success)]);
    let wc = p.b.recv_wcs[0];
    assert_eq!(wc.opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!((wc.qp_num, wc.imm_data_or_inv_rkey), (B2, 0xabcd));
    assert_eq!(p.b.read(&b_mem, 8 * SLOT, 64), data);
    assert!(
        p.b.srqs.srq(srq).unwrap().is_empty(),
        "the WQE was consumed"
    );
}

#[test]
fn the_limit_event_fires_exactly_once() {
    let (mut p, srq) = pair_with_srq(4, 16);
    let a_mem = p.a.region(16 * SLOT, ALL);
    let b_mem = p.b.region(16 * SLOT, ALL);
    post_srq(&mut p, srq, &b_mem, 1..9); // 8 WQEs
    p.b.srqs
        .srq(srq)
        .unwrap()
        .modify(&srq_attr(0, 5), SrqAttrMask::LIMIT, &SRQ_LIMITS)
        .unwrap();
    assert_eq!(p.b.srqs.srq(srq).unwrap().query().srq_limit, 5, "armed");
    let mut fired = Vec::new();

    // Three messages leave 5 WQEs: not below the limit.
    for msg in 1..4 {
        send_msg(&mut p, A1, &a_mem, msg);
    }
    p.run_to_quiescence(10_000);
    assert_eq!(p.b.recv_wcs.len(), 3);
    fired.extend(p.b.srqs.poll_limit_reached());
    assert!(fired.is_empty(), "5 left is not below 5");

    // The fourth leaves 4: one event, and the limit disarms.
    send_msg(&mut p, A2, &a_mem, 4);
    p.run_to_quiescence(10_000);
    fired.extend(p.b.srqs.poll_limit_reached());
    assert_eq!(fired, vec![srq]);
    assert_eq!(p.b.srqs.srq(srq).unwrap().query().srq_limit, 0, "disarmed");

    // Draining the rest raises nothing more.
    for msg in 5..9 {
        send_msg(&mut p, A1, &a_mem, msg);
    }
    p.run_to_quiescence(10_000);
    assert_eq!(p.b.recv_wcs.len(), 8);
    fired.extend(p.b.srqs.poll_limit_reached());
    assert_eq!(fired, vec![srq], "exactly once");
    check_received_data(&p, &b_mem);
}

#[test]
fn err_does_not_flush_the_srq_the_other_qp_still_gets_the_wqes() {
    let (mut p, srq) = pair_with_srq(5, 16);
    let a_mem = p.a.region(16 * SLOT, ALL);
    let b_mem = p.b.region(16 * SLOT, ALL);
    post_srq(&mut p, srq, &b_mem, 1..4);

    to_err(p.b.qp_mut(B1).unwrap());
    p.run_until(100, |_| false); // let anything happen that would
    assert!(p.b.recv_wcs.is_empty(), "no SRQ WQE flushed");
    assert_eq!(p.b.srqs.srq(srq).unwrap().len(), 3);
    let b1 = p.b.qp_mut(B1).unwrap();
    assert_eq!(b1.poll_event(), Some(EventType::QpLastWqeReached));
    assert_eq!(b1.poll_event(), None);

    for msg in 1..4 {
        send_msg(&mut p, A2, &a_mem, msg);
    }
    p.run_to_quiescence(10_000);
    assert_eq!(
        wc_statuses(&p.b.recv_wcs),
        (1..4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    assert!(p.b.recv_wcs.iter().all(|w| w.qp_num == B2));
    check_received_data(&p, &b_mem);
}

#[test]
fn err_flushes_only_the_wqe_taken_for_a_message_in_progress() {
    let (mut p, srq) = pair_with_srq(6, 16);
    let a_mem = p.a.region(4 * 4096, ALL);
    let b_mem = p.b.region(2 * 4096, ALL);
    // WQE 1 is big enough for a three-packet SEND; 2 and 3 stay on the SRQ.
    let wr = recv_wr(1, vec![sge_of(&b_mem, 0, 4096)]);
    p.b.srqs.srq(srq).unwrap().post_recv(&wr).unwrap();
    let small = vec![sge_of(&b_mem, 4096, SLOT as u32)];
    for id in 2..4 {
        let wr = recv_wr(id, small.clone());
        p.b.srqs.srq(srq).unwrap().post_recv(&wr).unwrap();
    }
    // B1 never sees the LAST packet: its message stays in progress.
    p.b.drop_if = Some(Box::new(|pkt| {
        pkt.repr.bth.dest_qp == B1 && pkt.repr.bth.opcode == Opcode::RC_SEND_LAST
    }));
    let wr = send_wr(
        1,
        SendOpcode::Send,
        vec![sge_of(&a_mem, 0, 3000)],
        remote_of(&a_mem, 0),
    );
    p.a.post_send_on(A1, &wr).unwrap();
    p.run_until(1_000, |p| p.b.seen.iter().any(|s| s.dropped));
    assert_eq!(p.b.srqs.srq(srq).unwrap().len(), 2, "B1 took WQE 1");

    to_err(p.b.qp_mut(B1).unwrap());
    p.run_until(100, |p| !p.b.recv_wcs.is_empty());
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(1, WcStatus::WrFlushErr)]);
    assert_eq!(p.b.recv_wcs[0].qp_num, B1);
    assert_eq!(p.b.srqs.srq(srq).unwrap().len(), 2, "2 and 3 stay");
    p.b.recv_wcs.clear();

    send_msg(&mut p, A2, &a_mem, 9);
    p.run_until(10_000, |p| !p.b.recv_wcs.is_empty());
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(2, WcStatus::Success)]);
    assert_eq!(p.b.recv_wcs[0].qp_num, B2);
    assert_eq!(p.b.read(&b_mem, 4096, 100), bytes(100, 9));
}

#[test]
fn post_recv_on_a_qp_with_an_srq_is_einval() {
    let (mut p, srq) = pair_with_srq(7, 2);
    let b_mem = p.b.region(16 * SLOT, ALL);
    let wr = recv_wr(1, vec![sge_of(&b_mem, 0, 64)]);
    let e = p.b.qp_mut(B1).unwrap().post_recv(&wr).unwrap_err();
    assert_eq!(e.errno(), 22);
    // The SRQ takes it, up to max_wr; beyond is ENOMEM as in verbs.
    post_srq(&mut p, srq, &b_mem, 1..3);
    let e = p.b.srqs.srq(srq).unwrap().post_recv(&wr).unwrap_err();
    assert_eq!(e.errno(), 12);
    // More SGEs than max_sge: EINVAL.
    let wide = recv_wr(9, vec![sge_of(&b_mem, 0, 1); 5]);
    let mut big = Srq::new(PD, &srq_attr(8, 0), &SRQ_LIMITS).unwrap();
    assert_eq!(big.post_recv(&wide).unwrap_err().errno(), 22);
}

fn nic() -> Nic {
    let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
    Nic::new(local, Arc::new(MrTable::new(16, 1).unwrap()), 16)
}

#[test]
fn destroying_an_srq_in_use_is_ebusy() {
    let mut n = nic();
    let cq = n.create_cq(16);
    let srq = n.create_srq(PD, &srq_attr(8, 0)).unwrap();
    let qpn = n
        .create_qp(PD, cq, cq, Some(srq), caps(), false, 4096)
        .unwrap();
    assert_eq!(n.destroy_srq(srq).unwrap_err().errno(), 16);
    n.post_srq_recv(srq, &recv_wr(1, vec![])).unwrap();
    assert_eq!(n.query_srq(srq).unwrap().max_wr, 8, "still there");
    n.destroy_qp(qpn).unwrap();
    n.destroy_srq(srq).unwrap();
    assert_eq!(n.destroy_srq(srq).unwrap_err().errno(), 22, "gone");
    // A QP on an SRQ that does not exist.
    let e = n.create_qp(PD, cq, cq, Some(srq), caps(), false, 4096);
    assert_eq!(e.unwrap_err().errno(), 22);
}

#[test]
fn srq_attributes_are_checked_against_the_device() {
    let mut n = nic();
    let too_many = SRQ_LIMITS.max_wr + 1;
    for bad in [
        srq_attr(0, 0),
        srq_attr(too_many, 0),
        srq_attr(4, 5),
        SrqAttr {
            max_wr: 4,
            max_sge: SRQ_LIMITS.max_sge + 1,
            srq_limit: 0,
        },
    ] {
        assert_eq!(n.create_srq(PD, &bad).unwrap_err().errno(), 22, "{bad:?}");
    }
    let srq = n.create_srq(PD, &srq_attr(4, 2)).unwrap();
    let resize = SrqAttrMask::MAX_WR;
    assert_eq!(
        n.modify_srq(srq, &srq_attr(too_many, 0), resize)
            .unwrap_err()
            .errno(),
        22
    );
    n.modify_srq(srq, &srq_attr(64, 0), resize).unwrap();
    assert_eq!(n.query_srq(srq).unwrap(), srq_attr(64, 0));
}

#[test]
fn the_nic_reports_the_events_with_their_elements() {
    let mut n = nic();
    let cq = n.create_cq(16);
    let srq = n.create_srq(PD, &srq_attr(8, 0)).unwrap();
    let qpn = n
        .create_qp(PD, cq, cq, Some(srq), caps(), false, 4096)
        .unwrap();
    assert_eq!(n.poll_async_event(), None);
    let init = QpAttr {
        qp_state: QpState::Init,
        ..QpAttr::default()
    };
    let mask = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
    n.qp(qpn).unwrap().modify(&init, mask, &LIMITS).unwrap();
    to_err(n.qp(qpn).unwrap());
    assert_eq!(
        n.poll_async_event(),
        Some(AsyncEvent {
            event_type: EventType::QpLastWqeReached,
            element: Element::Qp(qpn),
        })
    );
    assert_eq!(n.poll_async_event(), None);
}
