//! Scenario tests of UC QPs over the in-memory fabric (virtual time): UC opcodes, no ACKs, no
//! retransmission, completion at hand-out, and a lost packet dropping its message only.

mod common;

use common::wrs::{bytes, recv_wr, remote_of, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::QpType;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcFlags, WcOpcode, WcStatus};
use softrnic_provider::wr::{SendOpcode, SendWr};
use softrnic_wire::opcode::Transport;
use softrnic_wire::Opcode;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const PMTU: usize = 1024;

fn uc_pair(seed: u64) -> Pair {
    Pair::new_of(
        QpType::Uc,
        FabricConfig::default(),
        seed,
        Connect::default(),
    )
}

fn post(p: &mut Pair, wr: &SendWr) {
    p.a.qp.post_send(wr, &p.a.mrs).unwrap();
}

#[test]
fn send_and_writes_arrive_with_uc_opcodes_and_no_acks() {
    let mut p = uc_pair(1);
    let a_mem = p.a.region(1 << 16, RW);
    let b_mem = p.b.region(1 << 16, RW);
    let data = bytes(3 * PMTU - 100, 7);
    p.a.fill(&a_mem, 0, &data);
    p.b.qp
        .post_recv(&recv_wr(50, vec![sge_of(&b_mem, 0, 4096)]))
        .unwrap();
    p.b.qp.post_recv(&recv_wr(51, vec![])).unwrap();
    let len = data.len() as u32;
    post(
        &mut p,
        &send_wr(
            1,
            SendOpcode::Send,
            vec![sge_of(&a_mem, 0, len)],
            remote_of(&b_mem, 0),
        ),
    );
    post(
        &mut p,
        &send_wr(
            2,
            SendOpcode::RdmaWrite,
            vec![sge_of(&a_mem, 0, len)],
            remote_of(&b_mem, 8192),
        ),
    );
    let mut imm = send_wr(
        3,
        SendOpcode::RdmaWriteWithImm,
        vec![sge_of(&a_mem, 0, 100)],
        remote_of(&b_mem, 16384),
    );
    imm.imm_data_or_inv_rkey = 0x1234_5678;
    post(&mut p, &imm);
    p.run_until(10_000, |p| {
        p.b.recv_wcs.len() == 2 && p.a.send_wcs.len() == 3
    });
    p.run_to_quiescence(10_000);

    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    assert_eq!(p.b.recv_wcs[0].wr_id, 50);
    assert_eq!(p.b.recv_wcs[0].byte_len, len);
    assert_eq!(p.b.recv_wcs[1].wr_id, 51);
    assert_eq!(p.b.recv_wcs[1].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(p.b.recv_wcs[1].imm_data_or_inv_rkey, 0x1234_5678);
    assert!(p.b.recv_wcs[1].wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!(p.b.read(&b_mem, 0, data.len()), data);
    assert_eq!(p.b.read(&b_mem, 8192, data.len()), data);
    assert_eq!(p.b.read(&b_mem, 16384, 100), data[..100]);
    // Every request is UC, none asks for an ACK, and nothing comes back.
    assert_eq!(p.b.seen.len(), 3 + 3 + 1);
    for s in &p.b.seen {
        assert_eq!(s.opcode.info().unwrap().transport, Transport::Uc, "{s:?}");
    }
    assert!(p.a.seen.is_empty(), "a UC requester receives nothing");
    assert!(p.a.qp.poll_timeout().is_none(), "no retransmit timer");
}

#[test]
fn a_lost_middle_packet_drops_that_message_only() {
    lost_packet_drops_its_message_only(Opcode::UC_SEND_MIDDLE);
}

#[test]
fn a_lost_first_or_last_packet_drops_that_message_only() {
    // A lost FIRST: its MIDDLE and LAST arrive out of sequence and are dropped. A lost LAST:
    // the next message's FIRST comes after a PSN gap and starts afresh.
    lost_packet_drops_its_message_only(Opcode::UC_SEND_FIRST);
    lost_packet_drops_its_message_only(Opcode::UC_SEND_LAST);
}

/// Three 3-packet SENDs; the first packet with opcode `lost` (of the first message) is lost.
fn lost_packet_drops_its_message_only(lost: Opcode) {
    let mut p = uc_pair(2);
    let a_mem = p.a.region(1 << 16, RW);
    let b_mem = p.b.region(1 << 16, RW);
    let m = [
        bytes(3 * PMTU, 1),
        bytes(3 * PMTU, 2),
        bytes(2 * PMTU + 5, 3),
    ];
    for (i, d) in m.iter().enumerate() {
        p.a.fill(&a_mem, i * 4 * PMTU, d);
    }
    for i in 0..3u64 {
        p.b.qp
            .post_recv(&recv_wr(
                100 + i,
                vec![sge_of(&b_mem, i * 4 * PMTU as u64, 4 * PMTU as u32)],
            ))
            .unwrap();
    }
    drop_nth(&mut p.b, lost, 0);
    for (i, d) in m.iter().enumerate() {
        let sge = sge_of(&a_mem, (i * 4 * PMTU) as u64, d.len() as u32);
        post(
            &mut p,
            &send_wr(
                i as u64 + 1,
                SendOpcode::Send,
                vec![sge],
                remote_of(&b_mem, 0),
            ),
        );
    }
    p.run_to_quiescence(10_000);

    // The sender cannot know: all three complete.
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    // The first message is dropped and its WQE (100) not consumed: the second message fills
    // it, the third the next one.
    let got: Vec<_> =
        p.b.recv_wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect();
    assert_eq!(
        got,
        vec![
            (100, WcStatus::Success, m[1].len() as u32),
            (101, WcStatus::Success, m[2].len() as u32),
        ],
        "lost {lost:?}"
    );
    assert_eq!(p.b.read(&b_mem, 0, m[1].len()), m[1]);
    assert_eq!(p.b.read(&b_mem, 4 * PMTU, m[2].len()), m[2]);
    assert!(p.a.seen.is_empty());
}

#[test]
fn a_dropped_message_gives_its_srq_wqe_back() {
    use softrnic_provider::qp::Qp;
    use softrnic_provider::srq::{Srq, SrqAttr};
    let c = Connect::default();
    let mut p = uc_pair(6);
    let srq = Srq::new(
        PD,
        &SrqAttr {
            max_wr: 8,
            max_sge: 1,
            srq_limit: 0,
        },
        &softrnic_provider::nic::SRQ_LIMITS,
    )
    .unwrap();
    let id = p.b.srqs.insert(srq, 4).unwrap();
    p.b.qp = Qp::new_of(QpType::Uc, 0x22, PD, caps(), 0xc022, false).with_srq(id);
    connect(&mut p.b.qp, 0x11, A_ADDR, c, c.b_psn, c.a_psn);
    let a_mem = p.a.region(1 << 14, RW);
    let b_mem = p.b.region(1 << 14, RW);
    let m = [bytes(2 * PMTU, 1), bytes(2 * PMTU, 2)];
    for (i, d) in m.iter().enumerate() {
        p.a.fill(&a_mem, i * 4096, d);
    }
    for i in 0..2u64 {
        let wr = recv_wr(30 + i, vec![sge_of(&b_mem, i * 4096, 4096)]);
        p.b.srqs.get_mut(id).unwrap().post_recv(&wr).unwrap();
    }
    // The LAST of the first message is lost: its WQE (30) goes back to the SRQ's head.
    drop_nth(&mut p.b, Opcode::UC_SEND_LAST, 0);
    for (i, d) in m.iter().enumerate() {
        let sge = sge_of(&a_mem, (i * 4096) as u64, d.len() as u32);
        post(
            &mut p,
            &send_wr(
                i as u64 + 1,
                SendOpcode::Send,
                vec![sge],
                remote_of(&b_mem, 0),
            ),
        );
    }
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(30, WcStatus::Success)]);
    assert_eq!(p.b.read(&b_mem, 0, m[1].len()), m[1]);
    assert_eq!(p.b.srqs.get_mut(id).unwrap().len(), 1, "31 is still posted");
}

#[test]
fn a_send_without_a_receive_wqe_is_dropped_and_the_next_one_arrives() {
    let mut p = uc_pair(3);
    let a_mem = p.a.region(1 << 14, RW);
    let b_mem = p.b.region(1 << 14, RW);
    p.a.fill(&a_mem, 0, &bytes(64, 9));
    let wr = send_wr(
        1,
        SendOpcode::Send,
        vec![sge_of(&a_mem, 0, 64)],
        remote_of(&b_mem, 0),
    );
    post(&mut p, &wr);
    p.run_to_quiescence(10_000);
    assert!(p.b.recv_wcs.is_empty(), "no RNR on UC: dropped");
    assert!(p.a.seen.is_empty(), "and no NAK");
    p.b.qp
        .post_recv(&recv_wr(7, vec![sge_of(&b_mem, 0, 64)]))
        .unwrap();
    post(&mut p, &SendWr { wr_id: 2, ..wr });
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(7, WcStatus::Success)]);
    assert_eq!(p.b.read(&b_mem, 0, 64), bytes(64, 9));
}

/// rxe's UC "class D": a SEND longer than its receive WQE completes that WQE with
/// `IBV_WC_LOC_LEN_ERR` and drops the rest of the message; the QP goes on, and the next SEND
/// fills the next WQE. Nothing of the long SEND lands past the WQE's buffer.
#[test]
fn a_send_longer_than_its_receive_wqe_completes_it_with_a_length_error() {
    let mut p = uc_pair(5);
    let a_mem = p.a.region(1 << 14, RW);
    let b_mem = p.b.region(1 << 14, RW);
    p.a.fill(&a_mem, 0, &bytes(3 * PMTU, 4));
    p.b.qp
        .post_recv(&recv_wr(70, vec![sge_of(&b_mem, 0, 100)]))
        .unwrap();
    p.b.qp
        .post_recv(&recv_wr(71, vec![sge_of(&b_mem, 4096, 64)]))
        .unwrap();
    let long = send_wr(
        1,
        SendOpcode::Send,
        vec![sge_of(&a_mem, 0, 3 * PMTU as u32)],
        remote_of(&b_mem, 0),
    );
    post(&mut p, &long);
    post(
        &mut p,
        &send_wr(
            2,
            SendOpcode::Send,
            vec![sge_of(&a_mem, 0, 64)],
            remote_of(&b_mem, 0),
        ),
    );
    p.run_to_quiescence(10_000);
    assert_eq!(
        wc_statuses(&p.b.recv_wcs),
        vec![(70, WcStatus::LocLenErr), (71, WcStatus::Success)]
    );
    assert_eq!(p.b.read(&b_mem, 100, 4096 - 100), vec![0; 4096 - 100]);
    assert_eq!(p.b.read(&b_mem, 4096, 64), bytes(64, 4));
    assert_eq!(
        p.b.qp.state(),
        softrnic_provider::qp_state::QpState::Rts,
        "UC errors are not fatal"
    );
}

#[test]
fn a_write_to_a_bad_rkey_is_dropped_silently() {
    let mut p = uc_pair(4);
    let a_mem = p.a.region(1 << 14, RW);
    let b_mem = p.b.region(1 << 14, RW);
    p.a.fill(&a_mem, 0, &bytes(2048, 5));
    let mut bad = remote_of(&b_mem, 0);
    bad.rkey ^= 0x100;
    post(
        &mut p,
        &send_wr(1, SendOpcode::RdmaWrite, vec![sge_of(&a_mem, 0, 2048)], bad),
    );
    post(
        &mut p,
        &send_wr(
            2,
            SendOpcode::RdmaWrite,
            vec![sge_of(&a_mem, 0, 2048)],
            remote_of(&b_mem, 4096),
        ),
    );
    p.run_to_quiescence(10_000);
    assert_eq!(p.b.read(&b_mem, 0, 2048), vec![0; 2048]);
    assert_eq!(p.b.read(&b_mem, 4096, 2048), bytes(2048, 5));
    assert_eq!(
        p.b.qp.state(),
        softrnic_provider::qp_state::QpState::Rts,
        "UC errors are not fatal"
    );
}

#[test]
fn uc_has_no_read_or_atomics() {
    let mut p = uc_pair(5);
    let a_mem = p.a.region(4096, RW);
    let b_mem = p.b.region(4096, RW);
    for op in [
        SendOpcode::RdmaRead,
        SendOpcode::AtomicCmpAndSwp,
        SendOpcode::AtomicFetchAndAdd,
        SendOpcode::SendWithInv,
    ] {
        let wr = send_wr(1, op, vec![sge_of(&a_mem, 0, 8)], remote_of(&b_mem, 0));
        assert!(p.a.qp.post_send(&wr, &p.a.mrs).is_err(), "{op:?}");
    }
}

/// Drops the `nth` (0-based) packet with `opcode` that reaches the node.
fn drop_nth(n: &mut Node, opcode: Opcode, nth: usize) {
    let mut k = 0;
    n.drop_if = Some(Box::new(move |pkt| {
        if pkt.repr.bth.opcode != opcode {
            return false;
        }
        k += 1;
        k == nth + 1
    }));
}
