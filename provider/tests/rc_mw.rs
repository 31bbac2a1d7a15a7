//! Memory windows end to end over the in-memory fabric: remote WRITE, READ and atomics through
//! a memory region, a type 1 and a type 2 window; BIND_MW and LOCAL_INV on the send queue,
//! SEND with Invalidate, deallocation and deregistration; range, rights and QP violations.
//!
//! B owns the memory: a 4 KiB region `mem` (with `MW_BIND`), and `eyes`, a second region over
//! the same bytes that only the test reads through, so that memory can be checked against a
//! shadow copy even after `mem` is deregistered. A failed remote access must leave every byte
//! of the buffer as the shadow says.

mod common;

use common::wrs::{bytes, recv_wr, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::mr::{Access, MwBind, MwType};
use softrnic_provider::qp_state::QpState;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcFlags, WcOpcode, WcStatus};
use softrnic_provider::wr::{RemoteAddr, SendOpcode, SendWr};

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC)
    .union(Access::MW_BIND);
const WIN_ALL: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);
/// The window: bytes `OFF..OFF + LEN` of `mem`.
const OFF: u64 = 0x100;
const LEN: u64 = 0x80;
const B_QPN: u32 = 0x22;
const PAGE: usize = 4096;

struct Setup {
    p: Pair,
    mem: Region,
    eyes: Region,
    shadow: Vec<u8>,
    /// A's local buffer (sources and sinks).
    local: Region,
}

fn setup() -> Setup {
    let mut p = Pair::new(FabricConfig::default(), 5, Connect::default());
    let Target { mem, eyes, shadow } = p.b.target(PAGE, ALL, 0x31);
    let local = p.a.region(PAGE, ALL);
    p.a.fill(&local, 0, &bytes(PAGE, 0x77));
    Setup {
        p,
        mem,
        eyes,
        shadow,
        local,
    }
}

/// A BIND_MW work request.
fn bind_wr(wr_id: u64, bind: MwBind) -> SendWr {
    SendWr {
        bind_mw: Some(bind),
        ud: None,
        xrc_srqn: 0,
        ..send_wr(wr_id, SendOpcode::BindMw, vec![], RemoteAddr::default())
    }
}

fn local_inv_wr(wr_id: u64, rkey: u32) -> SendWr {
    SendWr {
        imm_data_or_inv_rkey: rkey,
        ..send_wr(wr_id, SendOpcode::LocalInv, vec![], RemoteAddr::default())
    }
}

/// The key of the window's range, rights and type over `s.mem`, bound by a BIND_MW on B's QP
/// (what `ibv_bind_mw` does for type 1); `None` gives `mem`'s own rkey.
fn key(s: &mut Setup, kind: Option<MwType>, access: Access) -> u32 {
    let Some(t) = kind else {
        return s.mem.keys.rkey;
    };
    let mw = s.p.b.mrs.alloc_window(PD, t).unwrap();
    let bind = MwBind {
        mw_rkey: mw,
        rkey: mw.wrapping_add(7),
        mr_lkey: s.mem.keys.lkey,
        addr: s.mem.addr() + OFF,
        length: LEN,
        access,
    };
    s.p.b.post_send_on(B_QPN, &bind_wr(900, bind)).unwrap();
    s.p.run_to_quiescence(100);
    let wc = s.p.b.send_wcs.pop().expect("the bind completes");
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (900, WcStatus::Success, WcOpcode::BindMw)
    );
    mw & !0xff | mw.wrapping_add(7) & 0xff
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Write,
    Read,
    FetchAdd,
}

/// A's `op` of 8 bytes at `mem + offset` through `rkey`; returns A's completion status.
fn remote(s: &mut Setup, op: Op, rkey: u32, offset: u64) -> WcStatus {
    let opcode = match op {
        Op::Write => SendOpcode::RdmaWrite,
        Op::Read => SendOpcode::RdmaRead,
        Op::FetchAdd => SendOpcode::AtomicFetchAndAdd,
    };
    let mut wr = send_wr(
        1,
        opcode,
        vec![sge_of(&s.local, 0, 8)],
        RemoteAddr {
            addr: s.mem.addr() + offset,
            rkey,
        },
    );
    wr.compare_add = 5;
    s.p.a.send_wcs.clear();
    s.p.a.qp.post_send(&wr, &s.p.a.mrs).unwrap();
    s.p.run_to_quiescence(1000);
    let wc = s.p.a.send_wcs.pop().expect("a completion");
    if wc.status == WcStatus::Success {
        // Keep the shadow in step with what a successful operation did.
        let at = offset as usize;
        match op {
            Op::Write => s.shadow[at..at + 8].copy_from_slice(&bytes(8, 0x77)),
            Op::Read => assert_eq!(s.p.a.read(&s.local, 0, 8), s.shadow[at..at + 8]),
            Op::FetchAdd => {
                let old = u64::from_ne_bytes(s.shadow[at..at + 8].try_into().unwrap());
                s.shadow[at..at + 8].copy_from_slice(&old.wrapping_add(5).to_ne_bytes());
            }
        }
    }
    wc.status
}

/// Every byte of B's buffer is what the shadow says.
fn untouched(s: &Setup) {
    assert_eq!(
        s.p.b.read(&s.eyes, 0, PAGE),
        s.shadow,
        "memory differs from the shadow"
    );
}

const KINDS: [Option<MwType>; 3] = [None, Some(MwType::Type1), Some(MwType::Type2)];

#[test]
fn write_read_and_atomic_through_a_region_and_both_window_types() {
    for kind in KINDS {
        for op in [Op::Write, Op::Read, Op::FetchAdd] {
            let mut s = setup();
            let k = key(&mut s, kind, WIN_ALL);
            for offset in [OFF, OFF + LEN - 8] {
                assert_eq!(
                    remote(&mut s, op, k, offset),
                    WcStatus::Success,
                    "{kind:?} {op:?}"
                );
            }
            untouched(&s);
        }
    }
}

#[test]
fn outside_the_window_or_without_its_right_is_rem_access_err_and_touches_nothing() {
    let cases = [
        (WIN_ALL, Op::Write, OFF - 4),
        (WIN_ALL, Op::Write, OFF + LEN - 4),
        (WIN_ALL, Op::Read, OFF + LEN),
        (WIN_ALL, Op::FetchAdd, OFF - 8),
        (Access::REMOTE_READ, Op::Write, OFF),
        (Access::REMOTE_READ, Op::FetchAdd, OFF),
        (Access::REMOTE_WRITE, Op::Read, OFF),
    ];
    for kind in [MwType::Type1, MwType::Type2] {
        for (rights, op, offset) in cases {
            let mut s = setup();
            let k = key(&mut s, Some(kind), rights);
            let what = format!("{kind:?} {rights:?} {op:?} at {offset:#x}");
            assert_eq!(
                remote(&mut s, op, k, offset),
                WcStatus::RemAccessErr,
                "{what}"
            );
            assert_eq!(s.p.b.qp.state(), QpState::Err, "{what}");
            untouched(&s);
        }
    }
}

#[test]
fn local_inv_kills_a_type2_key_and_frees_the_region_for_deregistration() {
    let mut s = setup();
    let k = key(&mut s, Some(MwType::Type2), WIN_ALL);
    assert_eq!(
        s.p.b.mrs.deregister(s.mem.keys.lkey).unwrap_err().errno(),
        16
    );
    s.p.b.post_send_on(B_QPN, &local_inv_wr(7, k)).unwrap();
    s.p.run_to_quiescence(100);
    let wc = s.p.b.send_wcs.pop().unwrap();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (7, WcStatus::Success, WcOpcode::LocalInv)
    );
    assert_eq!(remote(&mut s, Op::Write, k, OFF), WcStatus::RemAccessErr);
    untouched(&s);
    s.p.b.mrs.deregister(s.mem.keys.lkey).unwrap();
}

#[test]
fn send_with_inv_invalidates_and_the_receive_says_which_rkey() {
    let mut s = setup();
    let k = key(&mut s, Some(MwType::Type2), WIN_ALL);
    let inbox = s.p.b.region(PAGE, Access::LOCAL_WRITE);
    s.p.b
        .qp
        .post_recv(&recv_wr(3, vec![sge_of(&inbox, 0, 64)]))
        .unwrap();
    let mut wr = send_wr(
        2,
        SendOpcode::SendWithInv,
        vec![sge_of(&s.local, 0, 64)],
        RemoteAddr::default(),
    );
    wr.imm_data_or_inv_rkey = k;
    s.p.a.qp.post_send(&wr, &s.p.a.mrs).unwrap();
    s.p.run_to_quiescence(1000);
    assert_eq!(wc_statuses(&s.p.a.send_wcs), vec![(2, WcStatus::Success)]);
    let rwc = s.p.b.recv_wcs.pop().unwrap();
    assert_eq!(
        (rwc.wr_id, rwc.status, rwc.byte_len),
        (3, WcStatus::Success, 64)
    );
    assert!(rwc.wc_flags.contains(WcFlags::WITH_INV));
    assert_eq!(rwc.imm_data_or_inv_rkey, k);
    assert_eq!(s.p.b.read(&inbox, 0, 64), bytes(64, 0x77));
    assert_eq!(remote(&mut s, Op::Read, k, OFF), WcStatus::RemAccessErr);
    untouched(&s);
}

#[test]
fn send_with_inv_of_a_region_or_type1_key_fails_both_sides() {
    for kind in [None, Some(MwType::Type1)] {
        let mut s = setup();
        let k = key(&mut s, kind, WIN_ALL);
        s.p.b
            .qp
            .post_recv(&recv_wr(3, vec![sge_of(&s.eyes, 0x800, 64)]))
            .unwrap();
        let mut wr = send_wr(
            2,
            SendOpcode::SendWithInv,
            vec![sge_of(&s.local, 0, 8)],
            RemoteAddr::default(),
        );
        wr.imm_data_or_inv_rkey = k;
        s.p.a.qp.post_send(&wr, &s.p.a.mrs).unwrap();
        s.p.run_to_quiescence(1000);
        assert_eq!(
            wc_statuses(&s.p.a.send_wcs),
            vec![(2, WcStatus::RemInvReqErr)],
            "{kind:?}"
        );
        assert_eq!(
            wc_statuses(&s.p.b.recv_wcs),
            vec![(3, WcStatus::RemInvReqErr)],
            "{kind:?}"
        );
        // The key still works for a fresh QP pair (it was not invalidated).
        assert!(s
            .p
            .b
            .mrs
            .with_remote_read(k, PD, B_QPN, s.mem.addr() + OFF, 8, |_| ())
            .is_ok());
    }
}

#[test]
fn a_type2_window_answers_only_the_qp_that_bound_it() {
    let mut s = setup();
    let k = key(&mut s, Some(MwType::Type2), WIN_ALL);
    let c = Connect::default();
    s.p.add_qps(0x33, None, 0x44, None, c);
    let wr = send_wr(
        4,
        SendOpcode::RdmaWrite,
        vec![sge_of(&s.local, 0, 8)],
        RemoteAddr {
            addr: s.mem.addr() + OFF,
            rkey: k,
        },
    );
    s.p.a.post_send_on(0x33, &wr).unwrap();
    s.p.run_to_quiescence(1000);
    assert_eq!(
        wc_statuses(&s.p.a.send_wcs),
        vec![(4, WcStatus::RemAccessErr)]
    );
    untouched(&s);
    // The QP that bound it still may.
    assert_eq!(remote(&mut s, Op::Write, k, OFF), WcStatus::Success);
    untouched(&s);
}

#[test]
fn after_dealloc_the_window_key_is_dead_and_the_region_deregisters() {
    for kind in [MwType::Type1, MwType::Type2] {
        let mut s = setup();
        let k = key(&mut s, Some(kind), WIN_ALL);
        assert_eq!(
            s.p.b.mrs.deregister(s.mem.keys.lkey).unwrap_err().errno(),
            16
        );
        s.p.b.mrs.dealloc_window(PD, k).unwrap();
        assert_eq!(remote(&mut s, Op::Write, k, OFF), WcStatus::RemAccessErr);
        untouched(&s);
        s.p.b.mrs.deregister(s.mem.keys.lkey).unwrap();
    }
}

#[test]
fn after_unbind_and_dereg_no_key_reaches_the_memory() {
    let mut s = setup();
    let k = key(&mut s, Some(MwType::Type1), WIN_ALL);
    // A zero-length bind unbinds a type 1 window (with a new key).
    let unbind = MwBind {
        mw_rkey: k,
        rkey: k.wrapping_add(1),
        ..MwBind::default()
    };
    s.p.b.post_send_on(B_QPN, &bind_wr(8, unbind)).unwrap();
    s.p.run_to_quiescence(100);
    assert_eq!(wc_statuses(&s.p.b.send_wcs), vec![(8, WcStatus::Success)]);
    s.p.b.mrs.deregister(s.mem.keys.lkey).unwrap();
    assert_eq!(remote(&mut s, Op::Write, k, OFF), WcStatus::RemAccessErr);
    untouched(&s);
    let mut s2 = setup();
    let mr_key = s2.mem.keys.rkey;
    s2.p.b.mrs.deregister(s2.mem.keys.lkey).unwrap();
    assert_eq!(
        remote(&mut s2, Op::FetchAdd, mr_key, OFF),
        WcStatus::RemAccessErr
    );
    untouched(&s2);
}

#[test]
fn a_failed_bind_or_local_inv_completes_in_error_and_ends_the_qp() {
    // A region without MW_BIND.
    let mut s = setup();
    let plain = s.p.b.subregion(&s.mem, 0, PAGE, PD, Access::LOCAL_WRITE);
    let mw = s.p.b.mrs.alloc_window(PD, MwType::Type2).unwrap();
    let bind = MwBind {
        mw_rkey: mw,
        rkey: mw,
        mr_lkey: plain.keys.lkey,
        addr: plain.addr(),
        length: 8,
        access: Access::REMOTE_READ,
    };
    s.p.b.post_send_on(B_QPN, &bind_wr(1, bind)).unwrap();
    s.p.b.post_send_on(B_QPN, &local_inv_wr(2, mw)).unwrap();
    s.p.run_to_quiescence(100);
    assert_eq!(
        wc_statuses(&s.p.b.send_wcs),
        vec![(1, WcStatus::MwBindErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(s.p.b.qp.state(), QpState::Err);
    // LOCAL_INV of a region's key (ibv_reg_mr regions cannot be invalidated).
    let mut s = setup();
    s.p.b
        .post_send_on(B_QPN, &local_inv_wr(3, s.mem.keys.rkey))
        .unwrap();
    s.p.run_to_quiescence(100);
    assert_eq!(
        wc_statuses(&s.p.b.send_wcs),
        vec![(3, WcStatus::LocQpOpErr)]
    );
    // The failed LOCAL_INV ended B's QP; the region was not touched.
    assert_eq!(s.p.b.qp.state(), QpState::Err);
    untouched(&s);
}

#[test]
fn local_ops_complete_in_send_queue_order_behind_a_read() {
    let mut s = setup();
    let k = key(&mut s, Some(MwType::Type2), WIN_ALL);
    // On A: a READ, then a BIND_MW and a LOCAL_INV of a window of A's own.
    let a_mem = s.p.a.region(PAGE, ALL);
    let a_mw = s.p.a.mrs.alloc_window(PD, MwType::Type2).unwrap();
    let a_bind = MwBind {
        mw_rkey: a_mw,
        rkey: a_mw,
        mr_lkey: a_mem.keys.lkey,
        addr: a_mem.addr(),
        length: 64,
        access: Access::REMOTE_READ,
    };
    let read = send_wr(
        10,
        SendOpcode::RdmaRead,
        vec![sge_of(&s.local, 0, 8)],
        RemoteAddr {
            addr: s.mem.addr() + OFF,
            rkey: k,
        },
    );
    s.p.a.qp.post_send(&read, &s.p.a.mrs).unwrap();
    s.p.a
        .qp
        .post_send(&bind_wr(11, a_bind), &s.p.a.mrs)
        .unwrap();
    s.p.a
        .qp
        .post_send(&local_inv_wr(12, a_mw), &s.p.a.mrs)
        .unwrap();
    s.p.run_to_quiescence(1000);
    let ops: Vec<_> =
        s.p.a
            .send_wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect();
    assert_eq!(
        ops,
        vec![
            (10, WcStatus::Success, WcOpcode::RdmaRead),
            (11, WcStatus::Success, WcOpcode::BindMw),
            (12, WcStatus::Success, WcOpcode::LocalInv),
        ]
    );
    assert_eq!(
        s.p.a.read(&s.local, 0, 8),
        s.shadow[OFF as usize..OFF as usize + 8]
    );
}
