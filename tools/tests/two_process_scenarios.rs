//! The RC engine's scenario tests (`provider/tests/rc_scenarios.rs`) between two processes
//! over kernel UDP: every opcode byte-exact, zero-length messages, and the PSN wrap at 2^24.
//! The test process is the requester; the responder is a `softrnic scenario-peer` process.

mod common;

use common::*;
use softrnic_provider::transport::faults::Direction;
use softrnic_uapi::{Mtu, QpState, RemoteAddr, SendOpcode, WcOpcode, WcStatus};
use softrnic_wire::Opcode;

#[test]
fn every_opcode_moves_the_right_bytes() {
    let Two { mut a, mut b } = two(1, attr(), A_PSN);
    let a_mem = a.reg_mr(1 << 16, ALL, 0).unwrap();
    let b_mem = b.reg_mr(1 << 16, ALL, 0).unwrap();
    let data = pattern(5000, 7);
    a.fill(a_mem.id, 0, &data).unwrap();
    b.fill(b_mem.id, 40000, &pattern(3000, 99)).unwrap();
    b.fill(b_mem.id, 60000, &42u64.to_ne_bytes()).unwrap();
    b.post_recv(500, &[(b_mem.id, 0, 1000), (b_mem.id, 2000, 8000)])
        .unwrap();
    b.post_recv(501, &[]).unwrap();
    let sge = |off: usize, len: u32| a.sge(a_mem.id, off, len).unwrap();
    let mut wrs = vec![
        wr(1, SendOpcode::Send, vec![sge(0, 5000)], remote(&b_mem, 0)),
        wr(
            2,
            SendOpcode::RdmaWrite,
            vec![sge(0, 3000)],
            remote(&b_mem, 20000),
        ),
        wr(
            3,
            SendOpcode::RdmaWriteWithImm,
            vec![sge(100, 10)],
            remote(&b_mem, 30000),
        ),
        wr(
            4,
            SendOpcode::RdmaRead,
            vec![sge(10000, 1000), sge(12000, 2000)],
            remote(&b_mem, 40000),
        ),
        wr(
            5,
            SendOpcode::AtomicCmpAndSwp,
            vec![sge(20000, 8)],
            remote(&b_mem, 60000),
        ),
        wr(
            6,
            SendOpcode::AtomicFetchAndAdd,
            vec![sge(20008, 8)],
            remote(&b_mem, 60000),
        ),
    ];
    wrs[2].imm_data_or_inv_rkey = 0xdead_beef;
    (wrs[4].compare_add, wrs[4].swap) = (42, 7);
    wrs[5].compare_add = 10;
    for w in &wrs {
        a.post_send(w).unwrap();
    }
    let got = a.poll(6, LONG);
    let ids: Vec<_> = got.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
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
    assert_eq!(got[3].byte_len, 3000);
    // SEND: 1000 bytes into the first SGE, 4000 into the second, nothing beyond.
    assert_eq!(b.read(b_mem.id, 0, 1000).unwrap(), data[..1000]);
    assert_eq!(b.read(b_mem.id, 2000, 4000).unwrap(), data[1000..]);
    assert_eq!(b.read(b_mem.id, 6000, 100).unwrap(), vec![0; 100]);
    let r = b.poll(2, LONG).unwrap();
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].opcode, r[0].byte_len),
        (500, WcStatus::Success, WcOpcode::Recv, 5000)
    );
    assert_eq!(
        (r[1].wr_id, r[1].opcode, r[1].byte_len, r[1].imm),
        (501, WcOpcode::RecvRdmaWithImm, 10, 0xdead_beef)
    );
    // WRITEs, and nothing around them.
    assert_eq!(b.read(b_mem.id, 20000, 3000).unwrap(), data[..3000]);
    assert_eq!(b.read(b_mem.id, 23000, 16).unwrap(), vec![0; 16]);
    assert_eq!(b.read(b_mem.id, 30000, 10).unwrap(), data[100..110]);
    // READ, scattered.
    let src = pattern(3000, 99);
    assert_eq!(a.read(a_mem.id, 10000, 1000).unwrap(), src[..1000]);
    assert_eq!(a.read(a_mem.id, 12000, 2000).unwrap(), src[1000..]);
    assert_eq!(a.read(a_mem.id, 11000, 1000).unwrap(), vec![0; 1000]);
    // CAS 42 -> 7 returns 42; FAA +10 returns 7; the word ends at 17.
    assert_eq!(a.read(a_mem.id, 20000, 8).unwrap(), 42u64.to_ne_bytes());
    assert_eq!(a.read(a_mem.id, 20008, 8).unwrap(), 7u64.to_ne_bytes());
    assert_eq!(b.read(b_mem.id, 60000, 8).unwrap(), 17u64.to_ne_bytes());
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(b.state().unwrap(), QpState::Rts);
    // It all went over the wire: the peer's transport saw each request kind.
    for op in [
        Opcode::RC_RDMA_READ_REQUEST,
        Opcode::RC_COMPARE_SWAP,
        Opcode::RC_FETCH_ADD,
    ] {
        assert_eq!(b.count(Direction::Rx, op).unwrap(), 1, "{op}");
    }
}

#[test]
fn zero_length_messages_complete() {
    let Two { a, mut b } = two(2, attr(), A_PSN);
    let b_mem = b.reg_mr(PAGE, ALL, 0).unwrap();
    let before = pattern(PAGE, 3);
    b.fill(b_mem.id, 0, &before).unwrap();
    b.post_recv(9, &[]).unwrap();
    let nowhere = RemoteAddr { addr: 0, rkey: 0 }; // C9-88: no R_Key needed for zero length
    for (id, op) in [
        (1, SendOpcode::Send),
        (2, SendOpcode::RdmaWrite),
        (3, SendOpcode::RdmaRead),
    ] {
        a.post_send(&wr(id, op, vec![], nowhere)).unwrap();
    }
    let st: Vec<_> = a
        .poll(3, LONG)
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
    let r = b.poll(1, LONG).unwrap();
    assert_eq!(peer_statuses(&r), vec![(9, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, 0);
    assert_eq!(b.read(b_mem.id, 0, PAGE).unwrap(), before);
}

#[test]
fn psn_wraps_at_2_pow_24() {
    let c = softrnic_uapi::ConnectAttr {
        path_mtu: Mtu::Mtu256,
        ..attr()
    };
    // 40 packets each way from PSN 0xfffff0: both the WRITE and the READ cross the wrap.
    let Two { mut a, mut b } = two(3, c, 0xff_fff0);
    let a_mem = a.reg_mr(1 << 16, ALL, 0).unwrap();
    let b_mem = b.reg_mr(1 << 16, ALL, 0).unwrap();
    let data = pattern(40 * 256, 3);
    a.fill(a_mem.id, 0, &data).unwrap();
    let len = data.len() as u32;
    let sge = a.sge(a_mem.id, 0, len).unwrap();
    a.post_send(&wr(1, SendOpcode::RdmaWrite, vec![sge], remote(&b_mem, 0)))
        .unwrap();
    let sink = a.sge(a_mem.id, 20000, len).unwrap();
    a.post_send(&wr(2, SendOpcode::RdmaRead, vec![sink], remote(&b_mem, 0)))
        .unwrap();
    assert_eq!(
        statuses(&a.poll(2, LONG)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(b.read(b_mem.id, 0, data.len()).unwrap(), data);
    assert_eq!(a.read(a_mem.id, 20000, data.len()).unwrap(), data);
    assert_eq!(
        b.count(Direction::Rx, Opcode::RC_RDMA_WRITE_MIDDLE)
            .unwrap(),
        38,
        "the WRITE went as 40 packets"
    );
}
