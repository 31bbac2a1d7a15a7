//! Memory windows through the safe API, between two devices over real kernel UDP on loopback
//! (127.0.15.1 and 127.0.15.2, each with its progress thread): a type 1 window bound with
//! `bind_mw`, a type 2 window bound with a BIND_MW work request and invalidated by the peer's
//! SEND with Invalidate, `dereg` refused while a window is bound. Every failed access is
//! checked against a shadow of the whole region.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_uapi::{
    inc_rkey, Access, MemoryRegion, MwType, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr,
    WcFlags, WcOpcode, WcStatus, WorkCompletion,
};

const LEN: usize = 4096;
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC)
    .union(Access::MW_BIND);
const WIN: Access = Access::REMOTE_WRITE.union(Access::REMOTE_READ);

/// A node on `addr`, or `None` (the test `test` skipping) if its device cannot be opened.
fn side(test: &str, addr: IpAddr, seed: u64) -> Option<Node> {
    let ctx = common::udp_context(test, addr, seed)?;
    let setup = Setup {
        cqe: 64,
        send_wr: 16,
        recv_wr: 16,
        ..Setup::default()
    };
    Some(Node::new(setup.with(ctx), LEN, ALL))
}

/// A connected pair for the test `test`; `base` picks the addresses 127.0.15.{base, base + 1}.
fn pair(test: &str, base: u8) -> Option<(Node, Node)> {
    let (ia, ib) = (
        IpAddr::V4(Ipv4Addr::new(127, 0, 15, base)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 15, base + 1)),
    );
    let (a, b) = (side(test, ia, 1)?, side(test, ib, 2)?);
    common::connect(&a.dev, ia, &b.dev, ib);
    Some((a, b))
}

fn wait(s: &Node) -> WorkCompletion {
    let wcs = s.cq.wait(1, Duration::from_secs(5)).unwrap();
    assert_eq!(wcs.len(), 1);
    wcs[0]
}

fn wr(a: &Node, opcode: SendOpcode, len: u32, addr: u64, rkey: u32) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        remote: RemoteAddr { addr, rkey },
        ..SendWr::new(1, opcode, vec![a.mem.sge(0, len)])
    }
}

fn contents(mr: &MemoryRegion) -> Vec<u8> {
    let mut v = vec![0; LEN];
    mr.read(0, &mut v).unwrap();
    v
}

#[test]
fn type1_window_over_udp_and_dereg_is_ebusy_while_bound() {
    let Some((a, b)) = pair("type1_window_over_udp_and_dereg_is_ebusy_while_bound", 1) else {
        return;
    };
    a.mem.write(0, &[0xab; 64]).unwrap();
    let mw = b.pd.alloc_mw(MwType::Type1).unwrap();
    let old = mw.rkey();
    let rkey = b.qp.bind_mw(&mw, &b.mem, 256..512, WIN, 9).unwrap();
    assert_eq!((rkey, mw.rkey()), (inc_rkey(old), inc_rkey(old)));
    let wc = wait(&b);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (9, WcStatus::Success, WcOpcode::BindMw)
    );
    // Inside the window.
    a.qp.post_send(&[wr(&a, SendOpcode::RdmaWrite, 64, b.mem.addr() + 256, rkey)])
        .unwrap();
    assert_eq!(wait(&a).status, WcStatus::Success);
    let mut shadow = vec![0u8; LEN];
    shadow[256..320].fill(0xab);
    assert_eq!(contents(&b.mem), shadow);
    // The region cannot be deregistered while the window is bound.
    let other = b.pd.reg_mr(LEN, ALL).unwrap();
    let mw2 = b.pd.alloc_mw(MwType::Type1).unwrap();
    b.qp.bind_mw(&mw2, &other, 0..8, WIN, 10).unwrap();
    assert_eq!(wait(&b).status, WcStatus::Success);
    let (other, e) = other.dereg().unwrap_err();
    assert_eq!(e.errno(), 16, "EBUSY");
    // Given back and still registered: its keys still reach its memory.
    other.write(0, &[7]).expect("still registered after EBUSY");
    // Across the window's end: REM_ACCESS_ERR, and nothing written.
    a.qp.post_send(&[wr(&a, SendOpcode::RdmaWrite, 64, b.mem.addr() + 480, rkey)])
        .unwrap();
    assert_eq!(wait(&a).status, WcStatus::RemAccessErr);
    assert_eq!(contents(&b.mem), shadow);
}

#[test]
fn type2_window_over_udp_dies_with_send_with_invalidate() {
    let Some((a, b)) = pair("type2_window_over_udp_dies_with_send_with_invalidate", 3) else {
        return;
    };
    let mw = b.pd.alloc_mw(MwType::Type2).unwrap();
    let bind = mw
        .bind_wr(5, inc_rkey(mw.rkey()), &b.mem, 0..1024, WIN)
        .unwrap();
    b.qp.post_send(&[bind]).unwrap();
    let wc = wait(&b);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (5, WcStatus::Success, WcOpcode::BindMw)
    );
    let rkey = mw.rkey();
    b.mem.write(0, &[7; 16]).unwrap();
    a.qp.post_send(&[wr(&a, SendOpcode::RdmaRead, 16, b.mem.addr(), rkey)])
        .unwrap();
    assert_eq!(wait(&a).status, WcStatus::Success);
    let mut got = [0u8; 16];
    a.mem.read(0, &mut got).unwrap();
    assert_eq!(got, [7; 16]);
    // SEND with Invalidate of the window's R_Key.
    b.qp.post_recv(&[RecvWr {
        wr_id: 6,
        sg_list: vec![b.mem.sge(2048, 16)],
    }])
    .unwrap();
    let mut send = wr(&a, SendOpcode::SendWithInv, 16, 0, 0);
    send.imm_data_or_inv_rkey = rkey;
    a.qp.post_send(&[send]).unwrap();
    assert_eq!(wait(&a).status, WcStatus::Success);
    let rwc = wait(&b);
    assert_eq!((rwc.wr_id, rwc.status), (6, WcStatus::Success));
    assert!(rwc.wc_flags.contains(WcFlags::WITH_INV));
    assert_eq!(rwc.imm_data_or_inv_rkey, rkey);
    let shadow = contents(&b.mem);
    a.mem.write(0, &[0xee; 16]).unwrap();
    a.qp.post_send(&[wr(&a, SendOpcode::RdmaWrite, 16, b.mem.addr(), rkey)])
        .unwrap();
    assert_eq!(wait(&a).status, WcStatus::RemAccessErr);
    assert_eq!(contents(&b.mem), shadow);
    mw.dealloc().unwrap();
}
