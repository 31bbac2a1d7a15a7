//! The SQD state (IBTA 10.3.1 "Send Queue Drain") over the in-memory fabric, in virtual time:
//! RTS -> SQD stops new WQEs from starting while what was sent is acknowledged (retransmitted
//! if need be); `IBV_EVENT_SQ_DRAINED` comes after the last ACK, once, and only if asked for;
//! SQD -> RTS sends what waited; SQD -> SQD takes the attributes the kernel's table allows.

mod common;

use common::wrs::*;
use common::*;
use softrnic_provider::event::EventType;
use softrnic_provider::mr::Access;
use softrnic_provider::qp::{Qp, QpAttr};
use softrnic_provider::qp_state::{AttrMask, QpState};
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::SendOpcode;
use softrnic_wire::aeth::Syndrome;
use softrnic_wire::Opcode;

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

fn to_sqd(qp: &mut Qp, notify: bool) {
    let attr = QpAttr {
        qp_state: QpState::Sqd,
        en_sqd_async_notify: u8::from(notify),
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        AttrMask::STATE | AttrMask::EN_SQD_ASYNC_NOTIFY,
        &LIMITS,
    )
    .unwrap();
}

fn to_rts(qp: &mut Qp) {
    let attr = QpAttr {
        qp_state: QpState::Rts,
        ..QpAttr::default()
    };
    qp.modify(&attr, AttrMask::STATE, &LIMITS).unwrap();
}

/// SEND packets B's QP was handed.
fn sends_seen(p: &Pair) -> usize {
    p.b.seen
        .iter()
        .filter(|s| !s.dropped && s.opcode.info().is_some_and(|i| i.is_request()))
        .count()
}

/// Sets up B with receives and A with 3000 bytes (three packets at MTU 1024) per WR id.
fn setup(seed: u64) -> (Pair, Region, Region) {
    let mut p = Pair::new(FabricConfig::default(), seed, Connect::default());
    let a_mem = p.a.region(4 * 4096, ALL);
    let b_mem = p.b.region(4 * 4096, ALL);
    for id in 0..4u64 {
        p.a.fill(&a_mem, id as usize * 4096, &bytes(3000, id as u8));
        let wr = recv_wr(100 + id, vec![sge_of(&b_mem, id * 4096, 4096)]);
        p.b.qp.post_recv(&wr).unwrap();
    }
    (p, a_mem, b_mem)
}

fn post(p: &mut Pair, a_mem: &Region, id: u64) {
    let wr = send_wr(
        id,
        SendOpcode::Send,
        vec![sge_of(a_mem, id * 4096, 3000)],
        remote_of(a_mem, 0),
    );
    p.a.qp.post_send(&wr, &p.a.mrs).unwrap();
}

#[test]
fn sqd_holds_new_wrs_drains_after_the_last_ack_and_rts_resumes() {
    let (mut p, a_mem, b_mem) = setup(1);
    // B loses WR 0's middle packet once: the drain needs a retransmission in SQD.
    let mut dropped = false;
    p.b.drop_if = Some(Box::new(move |pkt| {
        let drop = !dropped && pkt.repr.bth.opcode == Opcode::RC_SEND_MIDDLE;
        dropped |= drop;
        drop
    }));
    post(&mut p, &a_mem, 0);
    p.run_until(10, |p| !p.b.seen.is_empty()); // WR 0 is on its way
    assert!(p.a.send_wcs.is_empty());

    to_sqd(&mut p.a.qp, true);
    assert_eq!(p.a.qp.state(), QpState::Sqd);
    assert!(p.a.qp.sq_draining(), "WR 0 is not acknowledged");
    assert_eq!(p.a.qp.poll_event(), None);
    post(&mut p, &a_mem, 1); // accepted in SQD, not started

    // Drained exactly when the ACK of WR 0's last packet is handled.
    p.run_until(10_000, |p| !p.a.qp.sq_draining());
    let acks: Vec<_> =
        p.a.seen
            .iter()
            .filter(|s| s.opcode == Opcode::RC_ACKNOWLEDGE)
            .collect();
    let last = acks.last().expect("an ACK came");
    assert!(matches!(last.syndrome, Some(Syndrome::Ack(_))));
    // The last packet, a PSN ahead of the lost one, was held rather than NAKed
    // (`responder/reorder.rs`): the requester's retransmit timer resent the message.
    let middles = p.b.seen_of(Opcode::RC_SEND_MIDDLE).count();
    assert_eq!(
        middles, 2,
        "the lost packet (seen, dropped) was resent while in SQD"
    );
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(0, WcStatus::Success)]);
    assert_eq!(p.a.qp.poll_event(), Some(EventType::SqDrained));
    assert_eq!(p.a.qp.poll_event(), None, "once");

    // WR 1 stays put for as long as the QP stays in SQD.
    let before = sends_seen(&p);
    p.run_until(10_000, |_| false); // to quiescence: no timer, nothing in flight
    assert_eq!(sends_seen(&p), before, "nothing new sent in SQD");
    assert_eq!(p.a.send_wcs.len(), 1);
    assert_eq!(p.a.qp.send_queue_len(), 1);
    assert_eq!(p.a.qp.poll_event(), None);

    // Back to RTS: WR 1 goes out and completes.
    to_rts(&mut p.a.qp);
    p.run_to_quiescence(10_000);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(
        wc_statuses(&p.b.recv_wcs),
        vec![(100, WcStatus::Success), (101, WcStatus::Success)]
    );
    for id in 0..2 {
        assert_eq!(p.b.read(&b_mem, id * 4096, 3000), bytes(3000, id as u8));
    }
    assert_eq!(p.a.qp.poll_event(), None);
}

#[test]
fn an_idle_qp_is_drained_at_once_and_without_notify_no_event() {
    let (mut p, a_mem, _b_mem) = setup(2);
    to_sqd(&mut p.a.qp, true);
    assert!(!p.a.qp.sq_draining());
    assert_eq!(p.a.qp.poll_event(), Some(EventType::SqDrained));

    to_rts(&mut p.a.qp);
    post(&mut p, &a_mem, 0);
    p.run_until(10, |p| !p.b.seen.is_empty());
    to_sqd(&mut p.a.qp, false);
    assert!(p.a.qp.sq_draining());
    p.run_to_quiescence(10_000);
    assert!(!p.a.qp.sq_draining(), "drained");
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(0, WcStatus::Success)]);
    assert_eq!(p.a.qp.poll_event(), None, "not asked for");
}

#[test]
fn sqd_to_sqd_takes_the_attributes_the_table_allows() {
    let (mut p, _a_mem, _b_mem) = setup(3);
    to_sqd(&mut p.a.qp, false);
    let attr = QpAttr {
        qp_state: QpState::Sqd,
        timeout: 18,
        retry_cnt: 3,
        min_rnr_timer: 5,
        ..QpAttr::default()
    };
    let allowed =
        AttrMask::STATE | AttrMask::TIMEOUT | AttrMask::RETRY_CNT | AttrMask::MIN_RNR_TIMER;
    p.a.qp.modify(&attr, allowed, &LIMITS).unwrap();
    assert_eq!(p.a.qp.context().retry_cnt, 3);
    assert_eq!(p.a.qp.context().min_rnr_timer, 5);
    assert_eq!(p.a.qp.state(), QpState::Sqd);
    // The SQ PSN and the path MTU are not modifiable in SQD -> SQD (kernel qp_state_table).
    for refused in [
        AttrMask::SQ_PSN,
        AttrMask::PATH_MTU,
        AttrMask::EN_SQD_ASYNC_NOTIFY,
    ] {
        let e = p.a.qp.modify(&attr, AttrMask::STATE | refused, &LIMITS);
        assert_eq!(e.unwrap_err().errno(), 22, "{refused:?}");
    }
    // SQD -> ERR is allowed, and ends the draining.
    let err = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    p.a.qp.modify(&err, AttrMask::STATE, &LIMITS).unwrap();
    assert!(!p.a.qp.sq_draining());
}

#[test]
fn entering_err_while_draining_flushes_and_raises_no_drained_event() {
    let (mut p, a_mem, _b_mem) = setup(4);
    post(&mut p, &a_mem, 0);
    p.run_until(10, |p| !p.b.seen.is_empty());
    to_sqd(&mut p.a.qp, true);
    post(&mut p, &a_mem, 1);
    let err = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    p.a.qp.modify(&err, AttrMask::STATE, &LIMITS).unwrap();
    p.run_to_quiescence(10_000);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(0, WcStatus::WrFlushErr), (1, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.a.qp.poll_event(), None);
}
