//! Scenario tests of UD QPs over the in-memory fabric (virtual time): SEND ONLY datagrams
//! with a DETH, the Q_Key check, and receive buffers that start with a 40-byte GRH.

mod common;

use common::wrs::{bytes, recv_wr, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::QpType;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcFlags, WcStatus};
use softrnic_provider::wr::{RemoteAddr, SendOpcode, SendWr, UdDest};
use softrnic_wire::opcode::Transport;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const QKEY: u32 = 0x1111_1111;

fn ud_pair(seed: u64) -> Pair {
    Pair::new_of(
        QpType::Ud,
        FabricConfig::default(),
        seed,
        Connect::default(),
    )
}

/// A signaled UD SEND of `len` bytes at `a_mem` to B's QP with `qkey`.
fn datagram(wr_id: u64, a_mem: &Region, len: u32, qkey: u32) -> SendWr {
    SendWr {
        ud: Some(UdDest {
            dest: B_ADDR,
            remote_qpn: 0x22,
            remote_qkey: qkey,
        }),
        ..send_wr(
            wr_id,
            SendOpcode::Send,
            vec![sge_of(a_mem, 0, len)],
            RemoteAddr::default(),
        )
    }
}

#[test]
fn a_datagram_arrives_after_a_grh_with_its_source_qp() {
    let mut p = ud_pair(1);
    let a_mem = p.a.region(8192, RW);
    let b_mem = p.b.region(8192, RW);
    let data = bytes(2000, 3);
    p.a.fill(&a_mem, 0, &data);
    p.b.qp
        .post_recv(&recv_wr(9, vec![sge_of(&b_mem, 0, 4096)]))
        .unwrap();
    let mut wr = datagram(1, &a_mem, 2000, QKEY);
    wr.opcode = SendOpcode::SendWithImm;
    wr.imm_data_or_inv_rkey = 0xabcd;
    p.a.qp.post_send(&wr, &p.a.mrs).unwrap();
    p.run_to_quiescence(10_000);

    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    let wc = p.b.recv_wcs[0];
    assert_eq!((wc.wr_id, wc.status), (9, WcStatus::Success));
    assert_eq!(wc.byte_len, 40 + 2000);
    assert_eq!(wc.src_qp, 0x11);
    assert!(wc.wc_flags.contains(WcFlags::GRH) && wc.wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!(wc.imm_data_or_inv_rkey, 0xabcd);
    assert_eq!(p.b.read(&b_mem, 40, 2000), data);
    // RoCE v2 over IPv4: the first 20 bytes zero, then the IPv4 header, A to B, UDP.
    let grh = p.b.read(&b_mem, 0, 40);
    assert_eq!(grh[..20], [0; 20]);
    assert_eq!(grh[20] >> 4, 4, "IPv4");
    assert_eq!(grh[29], 17, "UDP");
    assert_eq!(grh[32..36], [127, 0, 0, 1]);
    assert_eq!(grh[36..40], [127, 0, 0, 2]);
    // One UD SEND ONLY with a DETH; nothing comes back.
    assert_eq!(p.b.seen.len(), 1);
    assert_eq!(p.b.seen[0].opcode.info().unwrap().transport, Transport::Ud);
    assert!(p.a.seen.is_empty());
    assert!(p.a.qp.poll_timeout().is_none());
}

#[test]
fn the_q_key_must_match_and_its_high_bit_selects_the_qps() {
    let mut p = ud_pair(2);
    let a_mem = p.a.region(4096, RW);
    let b_mem = p.b.region(4096, RW);
    for i in 0..2 {
        p.b.qp
            .post_recv(&recv_wr(10 + i, vec![sge_of(&b_mem, 0, 1024)]))
            .unwrap();
    }
    // A wrong Q_Key: silently dropped, the WQE stays posted.
    let wr = datagram(1, &a_mem, 100, 0x2222_2222);
    p.a.qp.post_send(&wr, &p.a.mrs).unwrap();
    // The high bit set: A's own Q_Key (the pair's, equal to B's) goes out.
    let wr = datagram(2, &a_mem, 100, 0x8000_0000);
    p.a.qp.post_send(&wr, &p.a.mrs).unwrap();
    p.run_to_quiescence(10_000);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(10, WcStatus::Success)]);
}

#[test]
fn no_wqe_drops_a_short_wqe_is_a_length_error_and_one_mtu_is_the_most() {
    let mut p = ud_pair(3);
    let a_mem = p.a.region(16384, RW);
    let b_mem = p.b.region(4096, RW);
    // No receive WQE: dropped.
    let wr = datagram(1, &a_mem, 64, QKEY);
    p.a.qp.post_send(&wr, &p.a.mrs).unwrap();
    p.run_to_quiescence(10_000);
    assert!(p.b.recv_wcs.is_empty());
    // A WQE with no room for the GRH and the payload.
    p.b.qp
        .post_recv(&recv_wr(20, vec![sge_of(&b_mem, 0, 80)]))
        .unwrap();
    let wr = datagram(2, &a_mem, 64, QKEY);
    p.a.qp.post_send(&wr, &p.a.mrs).unwrap();
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(20, WcStatus::LocLenErr)]);
    // More than the MTU (the port's, 4096 here), RDMA WRITE, or no address: refused.
    let wr = datagram(3, &a_mem, 4097, QKEY);
    assert!(p.a.qp.post_send(&wr, &p.a.mrs).is_err());
    let wr = SendWr {
        opcode: SendOpcode::RdmaWrite,
        ..datagram(4, &a_mem, 8, QKEY)
    };
    assert!(p.a.qp.post_send(&wr, &p.a.mrs).is_err());
    let wr = SendWr {
        ud: None,
        xrc_srqn: 0,
        ..datagram(5, &a_mem, 8, QKEY)
    };
    assert!(p.a.qp.post_send(&wr, &p.a.mrs).is_err());
}
