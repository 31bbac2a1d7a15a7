//! Scenario tests of the RC engine over the in-memory fabric (virtual time).

mod common;

use common::wrs::send_wr;
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::{Mtu, QpState};
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcFlags, WcOpcode, WcStatus};
use softrnic_provider::wr::{RecvWr, RemoteAddr, SendOpcode, Sge};

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn every_opcode_moves_the_right_bytes() {
    let mut p = Pair::new(FabricConfig::default(), 1, Connect::default());
    let a_mem = p.a.region(1 << 16, ALL);
    let b_mem = p.b.region(1 << 16, ALL);
    let data = pattern(5000, 7);
    p.a.fill(&a_mem, 0, &data);
    p.b.fill(&b_mem, 40000, &pattern(3000, 99));
    p.b.fill(&b_mem, 60000, &42u64.to_ne_bytes());
    let sge = |r: &Region, off: u64, len: u32| Sge {
        addr: r.addr() + off,
        length: len,
        lkey: r.keys.lkey,
    };
    let remote = |off: u64| RemoteAddr {
        addr: b_mem.addr() + off,
        rkey: b_mem.keys.rkey,
    };
    // B receives the SEND (two SGEs) and the WRITE_WITH_IMM's immediate.
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 500,
            sg_list: vec![sge(&b_mem, 0, 1000), sge(&b_mem, 2000, 8000)],
        })
        .unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 501,
            sg_list: vec![],
        })
        .unwrap();
    let mrs = &p.a.mrs;
    let qp = &mut p.a.qp;
    qp.post_send(
        &send_wr(1, SendOpcode::Send, vec![sge(&a_mem, 0, 5000)], remote(0)),
        mrs,
    )
    .unwrap();
    qp.post_send(
        &send_wr(
            2,
            SendOpcode::RdmaWrite,
            vec![sge(&a_mem, 0, 3000)],
            remote(20000),
        ),
        mrs,
    )
    .unwrap();
    let mut w = send_wr(
        3,
        SendOpcode::RdmaWriteWithImm,
        vec![sge(&a_mem, 100, 10)],
        remote(30000),
    );
    w.imm_data_or_inv_rkey = 0xdead_beef;
    qp.post_send(&w, mrs).unwrap();
    qp.post_send(
        &send_wr(
            4,
            SendOpcode::RdmaRead,
            vec![sge(&a_mem, 10000, 1000), sge(&a_mem, 12000, 2000)],
            remote(40000),
        ),
        mrs,
    )
    .unwrap();
    let mut w = send_wr(
        5,
        SendOpcode::AtomicCmpAndSwp,
        vec![sge(&a_mem, 20000, 8)],
        remote(60000),
    );
    w.compare_add = 42;
    w.swap = 7;
    qp.post_send(&w, mrs).unwrap();
    let mut w = send_wr(
        6,
        SendOpcode::AtomicFetchAndAdd,
        vec![sge(&a_mem, 20008, 8)],
        remote(60000),
    );
    w.compare_add = 10;
    qp.post_send(&w, mrs).unwrap();
    p.run_to_quiescence(10_000);

    let ids: Vec<_> =
        p.a.send_wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect();
    assert_eq!(
        ids,
        vec![
            (1, WcStatus::Success, WcOpcode::Send),
            (2, WcStatus::Success, WcOpcode::RdmaWrite),
            (3, WcStatus::Success, WcOpcode::RdmaWrite),
            (4, WcStatus::Success, WcOpcode::RdmaRead),
            (5, WcStatus::Success, WcOpcode::CompSwap),
            (6, WcStatus::Success, WcOpcode::FetchAdd),
        ]
    );
    assert_eq!(p.a.send_wcs[3].byte_len, 3000);
    // SEND: 1000 bytes into the first SGE, 4000 into the second.
    assert_eq!(p.b.read(&b_mem, 0, 1000), data[..1000]);
    assert_eq!(p.b.read(&b_mem, 2000, 4000), data[1000..]);
    assert_eq!(
        p.b.read(&b_mem, 6000, 100),
        vec![0; 100],
        "nothing beyond the message"
    );
    let r = &p.b.recv_wcs;
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].opcode, r[0].byte_len),
        (500, WcStatus::Success, WcOpcode::Recv, 5000)
    );
    assert_eq!(
        (r[1].wr_id, r[1].opcode, r[1].byte_len),
        (501, WcOpcode::RecvRdmaWithImm, 10)
    );
    assert_eq!(r[1].imm_data_or_inv_rkey, 0xdead_beef);
    assert!(r[1].wc_flags.contains(WcFlags::WITH_IMM));
    // WRITEs.
    assert_eq!(p.b.read(&b_mem, 20000, 3000), data[..3000]);
    assert_eq!(p.b.read(&b_mem, 30000, 10), data[100..110]);
    // READ, scattered.
    let src = pattern(3000, 99);
    assert_eq!(p.a.read(&a_mem, 10000, 1000), src[..1000]);
    assert_eq!(p.a.read(&a_mem, 12000, 2000), src[1000..]);
    // Atomics: CAS 42 -> 7 returns 42; FAA +10 returns 7; the word ends at 17.
    assert_eq!(p.a.read(&a_mem, 20000, 8), 42u64.to_ne_bytes());
    assert_eq!(p.a.read(&a_mem, 20008, 8), 7u64.to_ne_bytes());
    assert_eq!(p.b.read(&b_mem, 60000, 8), 17u64.to_ne_bytes());
    assert_eq!(p.a.qp.state(), QpState::Rts);
}

#[test]
fn zero_length_messages_complete() {
    let mut p = Pair::new(FabricConfig::default(), 2, Connect::default());
    let b_mem = p.b.region(4096, ALL);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 9,
            sg_list: vec![],
        })
        .unwrap();
    let remote = RemoteAddr { addr: 0, rkey: 0 }; // C9-88: no R_Key needed for zero length
    let mrs = &p.a.mrs;
    for (id, op) in [
        (1, SendOpcode::Send),
        (2, SendOpcode::RdmaWrite),
        (3, SendOpcode::RdmaRead),
    ] {
        p.a.qp
            .post_send(&send_wr(id, op, vec![], remote), mrs)
            .unwrap();
    }
    p.run_to_quiescence(1000);
    let st: Vec<_> =
        p.a.send_wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect();
    assert_eq!(
        st,
        vec![
            (1, WcStatus::Success, 0),
            (2, WcStatus::Success, 0),
            (3, WcStatus::Success, 0)
        ]
    );
    assert_eq!(p.b.recv_wcs.len(), 1);
    assert_eq!(p.b.recv_wcs[0].byte_len, 0);
    let _ = b_mem;
}

#[test]
fn psn_wraps_at_2_pow_24() {
    let c = Connect {
        a_psn: 0xff_fff0,
        mtu: Mtu::Mtu256,
        ..Connect::default()
    };
    let mut p = Pair::new(FabricConfig::default(), 3, c);
    let a_mem = p.a.region(1 << 16, ALL);
    let b_mem = p.b.region(1 << 16, ALL);
    let data = pattern(40 * 256, 3);
    p.a.fill(&a_mem, 0, &data);
    let mrs = &p.a.mrs;
    let sge = Sge {
        addr: a_mem.addr(),
        length: data.len() as u32,
        lkey: a_mem.keys.lkey,
    };
    let remote = RemoteAddr {
        addr: b_mem.addr(),
        rkey: b_mem.keys.rkey,
    };
    p.a.qp
        .post_send(&send_wr(1, SendOpcode::RdmaWrite, vec![sge], remote), mrs)
        .unwrap();
    let sink = Sge {
        addr: a_mem.addr() + 20000,
        length: data.len() as u32,
        lkey: a_mem.keys.lkey,
    };
    p.a.qp
        .post_send(&send_wr(2, SendOpcode::RdmaRead, vec![sink], remote), mrs)
        .unwrap();
    p.run_to_quiescence(10_000);
    assert_eq!(
        p.a.send_wcs.iter().map(|w| w.status).collect::<Vec<_>>(),
        vec![WcStatus::Success; 2]
    );
    assert_eq!(p.b.read(&b_mem, 0, data.len()), data);
    assert_eq!(p.a.read(&a_mem, 20000, data.len()), data);
}
