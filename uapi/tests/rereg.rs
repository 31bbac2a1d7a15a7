//! `ibv_rereg_mr` through the Rust API, seen by a peer: after a change of rights the R_Key
//! stays and carries exactly the new rights at once; after a change of translation the old
//! R_Key is dead and the peer reaches the new memory, never the old.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::Side;
use softrnic_uapi::{Access, MemoryRegion, SendFlags, WcStatus};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 4, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 4, 2));
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

fn pair() -> (Side, Side) {
    common::pair(A, B, 12)
}

/// A's 8-byte WRITE from `src` to `addr` with `rkey`: its completion status.
fn write(a: &Side, src: &MemoryRegion, addr: u64, rkey: u32) -> WcStatus {
    a.qp.rdma_post_write(1, src, 0, 8, SendFlags::SIGNALED, addr, rkey)
        .unwrap();
    a.one().status
}

#[test]
fn new_rights_apply_at_once_under_the_same_key() {
    let (a, b) = pair();
    let src = a.pd.rdma_reg_msgs(64).unwrap();
    src.write(0, &[0xAB; 8]).unwrap();
    let mut mr = b.pd.reg_mr(4096, RW).unwrap();
    let old = mr.rkey();
    assert_eq!(write(&a, &src, mr.addr(), old), WcStatus::Success);

    mr.rereg(None, Some(Access::LOCAL_WRITE | Access::REMOTE_READ))
        .unwrap();
    assert_eq!(mr.rkey(), old, "the same key");
    assert_eq!(write(&a, &src, mr.addr() + 8, old), WcStatus::RemAccessErr);
    let mut got = [0u8; 16];
    mr.read(0, &mut got).unwrap();
    assert_eq!(got[..8], [0xAB; 8], "the first WRITE landed");
    assert_eq!(got[8..], [0; 8], "the one without the right did not");
}

#[test]
fn rights_given_work_with_the_key_the_peer_already_holds() {
    let (a, b) = pair();
    let src = a.pd.rdma_reg_msgs(64).unwrap();
    src.write(0, &[0x11; 8]).unwrap();
    let mut mr = b.pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let key = mr.rkey();
    mr.rereg(None, Some(RW)).unwrap();
    assert_eq!(mr.rkey(), key);
    assert_eq!(write(&a, &src, mr.addr() + 16, key), WcStatus::Success);
    let mut got = [0u8; 8];
    mr.read(16, &mut got).unwrap();
    assert_eq!(got, [0x11; 8]);
    // A PD of the same device is accepted; the QP's PD then no longer matches.
    let other = b.pd.context().alloc_pd();
    mr.rereg(Some(&other), None).unwrap();
    assert_eq!(
        write(&a, &src, mr.addr(), mr.rkey()),
        WcStatus::RemAccessErr
    );
}

#[test]
fn an_owned_buffer_keeps_its_translation() {
    let (_a, b) = pair();
    let mut mr = b.pd.reg_mr(4096, RW).unwrap();
    let mut other = vec![0u8; 64];
    // SAFETY: refused before anything is registered.
    let r = unsafe { mr.rereg_translation(other.as_mut_ptr(), other.len(), None, None) };
    assert!(r.is_err());
    assert_eq!(mr.len(), 4096);
}

#[test]
fn a_new_translation_is_reached_and_the_old_memory_never() {
    let (a, b) = pair();
    let src = a.pd.rdma_reg_msgs(64).unwrap();
    src.write(0, &[0x77; 8]).unwrap();
    let mut old_mem = vec![0u8; 4096];
    let mut new_mem = vec![0u8; 4096];
    // SAFETY: both buffers outlive the region (dropped at the end of the test, after it).
    let mut mr = unsafe { b.pd.reg_mr_raw(old_mem.as_mut_ptr(), old_mem.len(), RW) }.unwrap();
    let old_key = mr.rkey();
    // SAFETY: as above, for the new memory.
    unsafe { mr.rereg_translation(new_mem.as_mut_ptr(), new_mem.len(), None, None) }.unwrap();
    let (new_addr, new_key) = (mr.addr(), mr.rkey());
    assert_eq!(new_addr, new_mem.as_ptr() as u64);
    assert_eq!(write(&a, &src, new_addr + 100, new_key), WcStatus::Success);
    drop(mr); // deregistered: the buffers are ours again
    assert_eq!(new_mem[100..108], [0x77; 8]);
    assert!(
        old_mem.iter().all(|&x| x == 0),
        "the old memory is untouched"
    );
    assert_ne!(old_key, new_key);
}
