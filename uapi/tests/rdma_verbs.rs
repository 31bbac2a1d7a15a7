//! librdmacm's `rdma_verbs.h` helpers on a connected pair (the in-memory fabric): regions
//! registered with `rdma_reg_read` / `rdma_reg_write` / `rdma_reg_msgs` carry exactly their
//! rights, and every `rdma_post_*` returns its user context as the completion's `wr_id`.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::Side;
use softrnic_uapi::{Access, SendFlags, WcOpcode, WcStatus, WorkCompletion};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 3, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 3, 2));

fn pair() -> (Side, Side) {
    common::pair(A, B, 11)
}

fn one(s: &Side) -> WorkCompletion {
    s.one()
}

#[test]
fn regions_carry_the_rights_librdmacm_gives_them() {
    let (a, _b) = pair();
    let rights = |mr: softrnic_uapi::MemoryRegion| mr.access();
    assert_eq!(rights(a.pd.rdma_reg_msgs(64).unwrap()), Access::LOCAL_WRITE);
    assert_eq!(
        rights(a.pd.rdma_reg_read(64).unwrap()),
        Access::LOCAL_WRITE | Access::REMOTE_READ
    );
    assert_eq!(
        rights(a.pd.rdma_reg_write(64).unwrap()),
        Access::LOCAL_WRITE | Access::REMOTE_WRITE
    );
}

#[test]
fn every_post_returns_its_context_as_the_wr_id() {
    let (a, b) = pair();
    let src = b.pd.rdma_reg_read(4096).unwrap();
    src.write(100, b"read me").unwrap();
    let dst = b.pd.rdma_reg_write(4096).unwrap();
    let msgs_a = a.pd.rdma_reg_msgs(4096).unwrap();
    let msgs_b = b.pd.rdma_reg_msgs(4096).unwrap();

    // rdma_post_read: B's "read me" into A's buffer.
    a.qp.rdma_post_read(
        0xC0FFEE,
        &msgs_a,
        0,
        7,
        SendFlags::SIGNALED,
        src.addr() + 100,
        src.rkey(),
    )
    .unwrap();
    let wc = one(&a);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (0xC0FFEE, WcStatus::Success, WcOpcode::RdmaRead)
    );
    let mut got = [0u8; 7];
    msgs_a.read(0, &mut got).unwrap();
    assert_eq!(&got, b"read me");

    // rdma_post_write: A's bytes into B's write region.
    msgs_a.write(64, b"written").unwrap();
    a.qp.rdma_post_write(
        0xBEEF,
        &msgs_a,
        64,
        7,
        SendFlags::SIGNALED,
        dst.addr() + 8,
        dst.rkey(),
    )
    .unwrap();
    assert_eq!(one(&a).wr_id, 0xBEEF);
    let mut got = [0u8; 7];
    dst.read(8, &mut got).unwrap();
    assert_eq!(&got, b"written");

    // rdma_post_recv / rdma_post_send.
    b.qp.rdma_post_recv(0x5EC, &msgs_b, 0, 64).unwrap();
    a.qp.rdma_post_send(0x5E4D, &msgs_a, 64, 7, SendFlags::SIGNALED)
        .unwrap();
    assert_eq!(one(&a).wr_id, 0x5E4D);
    let wc = one(&b);
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.byte_len),
        (0x5EC, WcOpcode::Recv, 7)
    );

    // A buffer past its region is refused before anything is posted.
    assert!(a
        .qp
        .rdma_post_send(1, &msgs_a, 4090, 7, SendFlags::SIGNALED)
        .is_err());
}

#[test]
fn a_read_of_a_region_registered_only_for_writes_fails_remotely() {
    let (a, b) = pair();
    let dst = b.pd.rdma_reg_write(4096).unwrap();
    let local = a.pd.rdma_reg_msgs(64).unwrap();
    a.qp.rdma_post_read(9, &local, 0, 8, SendFlags::SIGNALED, dst.addr(), dst.rkey())
        .unwrap();
    let wc = one(&a);
    assert_eq!((wc.wr_id, wc.status), (9, WcStatus::RemAccessErr));
}
