//! No allocation per packet on the data path: a counting global allocator (this test binary's
//! own) watches a 1 MiB RDMA WRITE and a 1 MiB RDMA READ — 512 data packets plus their ACKs —
//! through the whole engine, emitter (payload pinned in registered memory) and fabric, after
//! a warm-up run has grown every queue to its working size.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::{RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_megabyte_each_way_allocates_a_constant_few_times_not_per_packet() {
    const LEN: u32 = 1 << 20;
    let c = Connect {
        mtu: Mtu::Mtu4096,
        ..Connect::default()
    };
    let mut p = Pair::new(FabricConfig::default(), 9, c);
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let a = p.a.region(2 * LEN as usize, all);
    let b = p.b.region(LEN as usize, all);
    let wrs = [
        (SendOpcode::RdmaWrite, 0),
        (SendOpcode::RdmaRead, u64::from(LEN)),
    ]
    .map(|(opcode, off)| SendWr {
        wr_id: off,
        opcode,
        flags: SendFlags::SIGNALED,
        sg_list: vec![Sge {
            addr: a.addr() + off,
            length: LEN,
            lkey: a.keys.lkey,
        }],
        imm_data_or_inv_rkey: 0,
        remote: RemoteAddr {
            addr: b.addr(),
            rkey: b.keys.rkey,
        },
        compare_add: 0,
        swap: 0,
        bind_mw: None,
        ud: None,
    });
    let round = |p: &mut Pair| {
        for w in &wrs {
            p.a.qp.post_send(w, &p.a.mrs).unwrap();
        }
        p.run_to_quiescence(100_000);
    };
    round(&mut p); // warm-up: queues and scratch space reach their working size
    let packets_before = p.fabric.stats().delivered;
    let before = ALLOCS.load(Ordering::Relaxed);
    round(&mut p);
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let packets = p.fabric.stats().delivered - packets_before;
    assert!(p.a.send_wcs.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(p.a.send_wcs.len(), 4);
    assert!(packets >= 512, "{packets} packets");
    // Per work request: the SGE list is copied into the WQE (1 allocation each).
    assert!(
        allocs <= 8,
        "{allocs} allocations for {packets} packets: something allocates per packet"
    );
}
