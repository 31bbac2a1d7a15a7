//! File-backed regions, FLUSH and ATOMIC WRITE through the safe API: B registers a mapped
//! file, A WRITEs into it and FLUSHes to persistence, and the bytes are in the file; an
//! ATOMIC WRITE stores 8 bytes; a persistence FLUSH of anonymous memory, or any FLUSH of a
//! region without the right, completes with `IBV_WC_REM_ACCESS_ERR`.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::{Setup, Side};
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    atomic_write_wr, flush_wr, Access, MemoryRegion, Placement, RemoteAddr, RemoteMr, Selectivity,
    SendFlags, SendOpcode, SendWr, Usage, WcOpcode, WcStatus,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 5, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 5, 2));
const LEN: usize = 8192;
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

fn pair(seed: u64) -> (Fabric, Side, Side) {
    let fabric = Fabric::new(FabricConfig::default(), seed);
    let setup = Setup {
        seed: 5,
        ..Setup::default()
    };
    let (a, b) = common::pair_on(&fabric, (A, &setup), (B, &setup));
    (fabric, a, b)
}

fn post(a: &Side, wr: SendWr) -> (WcStatus, WcOpcode) {
    a.qp.post_send(&[wr]).map_err(|(_, e)| e).unwrap();
    let wc = a.cq.wait(1, Duration::from_secs(10)).unwrap();
    (wc[0].status, wc[0].opcode)
}

fn remote(mr: &MemoryRegion, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: mr.addr() + offset,
        rkey: mr.rkey(),
    }
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("softrnic-uapi-{name}-{}", std::process::id()))
}

#[test]
fn a_write_then_persistence_flush_of_a_file_backed_region_is_in_the_file() {
    let (_f, a, b) = pair(11);
    let path = temp("persist");
    let _ = std::fs::remove_file(&path);
    let access = RW | Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT;
    let file_mr = b.pd.reg_mr_path(&path, LEN, access).unwrap();
    // The descriptor says a persistence flush may target it.
    let desc = RemoteMr::from_descriptor(Some(&file_mr.descriptor()[..])).unwrap();
    assert!(desc
        .usage
        .contains(Usage::FLUSH_TYPE_PERSISTENT | Usage::FLUSH_TYPE_VISIBILITY));

    let local = a.pd.reg_mr(LEN, Access::LOCAL_WRITE).unwrap();
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8 + 1).collect();
    local.write(0, &data).unwrap();
    let write = SendWr {
        flags: SendFlags::SIGNALED,
        remote: remote(&file_mr, 3000),
        ..SendWr::new(1, SendOpcode::RdmaWrite, vec![local.sge(0, 1000)])
    };
    assert_eq!(post(&a, write).0, WcStatus::Success);
    let flush = flush_wr(
        2,
        remote(&file_mr, 3000),
        1000,
        Placement::PERSISTENCE,
        Selectivity::MemoryRange,
    );
    assert_eq!(post(&a, flush), (WcStatus::Success, WcOpcode::Flush));
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len(), LEN);
    assert_eq!(&on_disk[3000..4000], &data[..]);
    assert!(on_disk[..3000]
        .iter()
        .chain(&on_disk[4000..])
        .all(|&x| x == 0));

    // An ATOMIC WRITE, then a whole-region FLUSH of both placement types.
    local
        .write(16, &0xfeed_f00d_dead_beefu64.to_ne_bytes())
        .unwrap();
    let aw = atomic_write_wr(3, remote(&file_mr, 8), local.sge(16, 8));
    assert_eq!(post(&a, aw), (WcStatus::Success, WcOpcode::AtomicWrite));
    let flush = flush_wr(
        4,
        remote(&file_mr, 0),
        0,
        Placement::BOTH,
        Selectivity::MemoryRegion,
    );
    assert_eq!(post(&a, flush).0, WcStatus::Success);
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(&on_disk[8..16], &0xfeed_f00d_dead_beefu64.to_ne_bytes());
    assert!(on_disk[..8]
        .iter()
        .chain(&on_disk[16..3000])
        .all(|&x| x == 0));

    drop(file_mr);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn anonymous_memory_takes_no_flush_persistent_and_a_persistence_flush_of_it_fails() {
    let (_f, a, b) = pair(12);
    assert!(b.pd.reg_mr(LEN, Access::FLUSH_PERSISTENT).is_err());
    let mr = b.pd.reg_mr(LEN, RW | Access::FLUSH_GLOBAL).unwrap();
    let flush = flush_wr(
        1,
        remote(&mr, 0),
        64,
        Placement::GLOBAL_VISIBILITY,
        Selectivity::MemoryRange,
    );
    assert_eq!(post(&a, flush).0, WcStatus::Success);
    let flush = flush_wr(
        2,
        remote(&mr, 0),
        64,
        Placement::PERSISTENCE,
        Selectivity::MemoryRange,
    );
    assert_eq!(post(&a, flush).0, WcStatus::RemAccessErr);
}

#[test]
fn a_file_shorter_than_the_region_is_refused() {
    let (_f, _a, b) = pair(13);
    let path = temp("short");
    std::fs::write(&path, [0u8; 100]).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    assert!(b.pd.reg_mr_file(&file, 4096, RW).is_err());
    assert!(b.pd.reg_mr_file(&file, 100, RW).is_ok());
    let _ = std::fs::remove_file(&path);
}
