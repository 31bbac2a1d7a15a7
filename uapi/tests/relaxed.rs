//! Relaxed memory regions end to end over the in-memory fabric: error paths, a peer's RDMA
//! WRITE before deregistration, after `dereg_relaxed` (still lands: the documented window of
//! vulnerability), after `flush_relaxed_mr` (REM_ACCESS_ERR, memory untouched), the page
//! rounding of the range, and WRITEs streaming while another thread deregisters and flushes.
//!
//! B's relaxed regions are registered (raw) over the buffer of `eyes`, a normal region that
//! only the test reads through, so memory is checked against a shadow copy after the relaxed
//! keys are dead.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread;
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, Error, MemoryRegion, RemoteAddr, SendFlags, SendOpcode, SendWr, WcStatus, RELAXED_PAGE,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 17, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 17, 2));
const PAGES: usize = 4;
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

/// A and B, connected; B's memory holds `0x31` (the shadow says so), A's `0x77`.
fn pair(seed: u64) -> (Node, Node, Vec<u8>) {
    let fabric = Fabric::new(FabricConfig::default(), seed);
    let setup = Setup {
        seed: 11,
        cqe: 64,
        send_wr: 32,
        ..Setup::default()
    };
    let (a, b) = common::pair_on(&fabric, (A, &setup), (B, &setup));
    let node = |side| Node::new(side, PAGES * RELAXED_PAGE, Access::LOCAL_WRITE);
    let (a, b) = (node(a), node(b));
    let shadow = vec![0x31; PAGES * RELAXED_PAGE];
    b.mem.write(0, &shadow).unwrap();
    a.mem.write(0, &[0x77; PAGES * RELAXED_PAGE]).unwrap();
    (a, b, shadow)
}

/// A relaxed region of B over `len` bytes of its memory from `offset`.
fn relaxed(b: &Node, offset: usize, len: usize) -> MemoryRegion {
    // SAFETY: inside `b.mem`'s buffer; every test flushes before `b.mem` is dropped.
    unsafe {
        b.pd.reg_mr_relaxed_raw(b.mem.sge(offset, 0).addr as *mut u8, len, RW)
    }
    .unwrap()
}

fn write_wr(a: &Node, wr_id: u64, len: u32, addr: u64, rkey: u32) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        remote: RemoteAddr { addr, rkey },
        ..SendWr::new(wr_id, SendOpcode::RdmaWrite, vec![a.mem.sge(0, len)])
    }
}

/// A WRITEs `len` bytes of 0x77 to `addr` through `rkey`; returns the status (and keeps the
/// shadow in step on success).
fn write(a: &Node, shadow: &mut [u8], b: &Node, len: u32, addr: u64, rkey: u32) -> WcStatus {
    a.qp.post_send(&[write_wr(a, 1, len, addr, rkey)])
        .map_err(|(_, e)| e)
        .unwrap();
    let wc = a.cq.wait(1, Duration::from_secs(10)).unwrap();
    if wc[0].status == WcStatus::Success {
        let at = (addr - b.mem.addr()) as usize;
        shadow[at..at + len as usize].fill(0x77);
    }
    wc[0].status
}

fn untouched(b: &Node, shadow: &[u8]) {
    let mut got = vec![0; shadow.len()];
    b.mem.read(0, &mut got).unwrap();
    assert!(got == shadow, "memory differs from the shadow");
}

#[test]
fn error_paths() {
    let (_a, b, _) = pair(1);
    let einval = |r: Result<MemoryRegion, Error>| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err())
    };
    einval(b.pd.reg_mr_relaxed(64, Access::REMOTE_WRITE));
    einval(b.pd.reg_mr_relaxed(64, Access::REMOTE_ATOMIC | Access::REMOTE_READ));
    einval(b.pd.reg_mr_relaxed(0, RW));
    einval(b.pd.reg_mr_relaxed(64, RW | Access::ZERO_BASED));
    // A normal region is not deregistered relaxed: it comes back, still registered.
    let normal = b.pd.reg_mr(64, RW).unwrap();
    let Err((normal, e)) = normal.dereg_relaxed() else {
        panic!("a normal region deregistered relaxed");
    };
    assert!(matches!(e, Error::InvalidArgument(_)));
    normal.write(0, &[1; 64]).unwrap();
    normal.dereg().map_err(|(_, e)| e).unwrap();

    b.pd.init_relaxed_pool(2, 3).unwrap();
    assert!(matches!(b.pd.init_relaxed_pool(2, 3), Err(Error::Busy(_))));
    let m1 = b.pd.reg_mr_relaxed(100, RW).unwrap();
    let m2 = b.pd.reg_mr_relaxed(5000, RW).unwrap();
    assert!(m1.is_relaxed() && m2.is_relaxed());
    assert!(matches!(
        b.pd.reg_mr_relaxed(64, RW),
        Err(Error::NoMemory(_))
    ));
    m1.dereg_relaxed().map_err(|(_, e)| e).unwrap();
    drop(m2); // dropping deregisters relaxed too
    let e = b.pd.reg_mr_relaxed(64, RW).err().unwrap();
    assert!(matches!(e, Error::TryAgain(_)) && e.errno() == 11, "{e:?}");
    assert_eq!(b.pd.flush_relaxed_mr(), 2);
    let m3 = b.pd.reg_mr_relaxed(64, RW).unwrap();
    m3.write(0, &[1; 64]).unwrap();
}

#[test]
fn write_before_dereg_after_dereg_and_after_flush() {
    let (a, b, mut shadow) = pair(2);
    let mr = relaxed(&b, 0, RELAXED_PAGE);
    let (addr, rkey) = (mr.addr(), mr.rkey());
    assert_eq!(write(&a, &mut shadow, &b, 8, addr, rkey), WcStatus::Success);
    mr.dereg_relaxed().map_err(|(_, e)| e).unwrap();
    // The window of vulnerability: the rkey still works until the flush.
    assert_eq!(
        write(&a, &mut shadow, &b, 8, addr + 8, rkey),
        WcStatus::Success
    );
    untouched(&b, &shadow);
    assert_eq!(b.pd.flush_relaxed_mr(), 1);
    assert_eq!(
        write(&a, &mut shadow, &b, 8, addr + 16, rkey),
        WcStatus::RemAccessErr
    );
    untouched(&b, &shadow);
}

#[test]
fn access_is_extended_to_the_page_boundaries() {
    // 100 bytes at offset 10 of the second page: the whole second page is reachable.
    let (a, b, mut shadow) = pair(3);
    let mr = relaxed(&b, RELAXED_PAGE + 10, 100);
    let base = b.mem.addr() + RELAXED_PAGE as u64;
    assert_eq!(mr.addr(), base + 10);
    assert_eq!(mr.len(), 100);
    // Just past the registered length, within the page.
    assert_eq!(
        write(&a, &mut shadow, &b, 8, base + 110, mr.rkey()),
        WcStatus::Success
    );
    // The first and last bytes of the page.
    assert_eq!(
        write(&a, &mut shadow, &b, 1, base, mr.rkey()),
        WcStatus::Success
    );
    assert_eq!(
        write(
            &a,
            &mut shadow,
            &b,
            1,
            base + RELAXED_PAGE as u64 - 1,
            mr.rkey()
        ),
        WcStatus::Success
    );
    untouched(&b, &shadow);
    // One byte past the page: refused, nothing written.
    assert_eq!(
        write(
            &a,
            &mut shadow,
            &b,
            2,
            base + RELAXED_PAGE as u64 - 1,
            mr.rkey()
        ),
        WcStatus::RemAccessErr
    );
    untouched(&b, &shadow);
    mr.dereg_relaxed().map_err(|(_, e)| e).unwrap();
    b.pd.flush_relaxed_mr();
}

/// A thread streams WRITEs through B's relaxed regions (one per page) while this one
/// deregisters and flushes them; after the flush, B's memory gets a sentinel, and it must
/// still be there once the streamer has stopped (its later WRITEs fail).
#[test]
fn nothing_lands_after_flush_while_writes_stream() {
    let (mut landed, mut refused) = (0, 0);
    for round in 0..5u64 {
        let (a, b, _) = pair(10 + round);
        let mrs: Vec<_> = (0..PAGES)
            .map(|i| relaxed(&b, i * RELAXED_PAGE, RELAXED_PAGE))
            .collect();
        let targets: Vec<_> = mrs.iter().map(|m| (m.addr(), m.rkey())).collect();
        let stop = AtomicBool::new(false);
        let statuses = thread::scope(|s| {
            let streamer = s.spawn(|| {
                let mut seen = Vec::new();
                let mut n = 0u64;
                'outer: while !stop.load(SeqCst) {
                    for &(addr, rkey) in &targets {
                        let wr = write_wr(&a, n, RELAXED_PAGE as u32, addr, rkey);
                        n += 1;
                        if a.qp.post_send(&[wr]).is_err() {
                            break 'outer;
                        }
                        let wc = a.cq.wait(1, Duration::from_secs(10)).unwrap();
                        seen.push(wc[0].status);
                        if wc[0].status != WcStatus::Success {
                            break 'outer;
                        }
                    }
                }
                seen
            });
            thread::sleep(Duration::from_millis(5));
            for m in mrs {
                m.dereg_relaxed().map_err(|(_, e)| e).unwrap();
            }
            assert_eq!(b.pd.flush_relaxed_mr(), PAGES);
            b.mem.write(0, &[0xee; PAGES * RELAXED_PAGE]).unwrap();
            thread::sleep(Duration::from_millis(20));
            stop.store(true, SeqCst);
            streamer.join().unwrap()
        });
        let mut got = vec![0; PAGES * RELAXED_PAGE];
        b.mem.read(0, &mut got).unwrap();
        assert!(
            got.iter().all(|&x| x == 0xee),
            "round {round}: written after flush ({} WRITEs, last {:?})",
            statuses.len(),
            statuses.last()
        );
        landed += statuses.iter().filter(|&&s| s == WcStatus::Success).count();
        refused += statuses
            .iter()
            .filter(|&&s| s == WcStatus::RemAccessErr)
            .count();
    }
    // The test raced for real: WRITEs landed before the flushes and were refused after.
    assert!(
        landed > 0 && refused > 0,
        "landed {landed}, refused {refused}"
    );
}
