//! No allocation per packet on the data path: a counting global allocator (this test binary's
//! own) watches a 1 MiB RDMA WRITE and a 1 MiB RDMA READ — 512 data packets plus their ACKs —
//! through the whole engine, emitter (payload pinned in registered memory) and fabric, and
//! then small SENDs, where a packet is a work request: posting (send and receive, with an SGE
//! or inline) allocates nothing either. Both after a warm-up run has grown every queue to its
//! working size.

mod common;

use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::{RecvWr, SendFlags, SendOpcode, SendWr, Sge};
use softrnic_testkit::alloc_count::{allocations_in, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

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
    .map(|(opcode, off)| {
        wrs::send_wr(
            off,
            opcode,
            vec![wrs::sge_of(&a, off, LEN)],
            wrs::remote_of(&b, 0),
        )
    });
    let round = |p: &mut Pair| {
        for w in &wrs {
            p.a.qp.post_send(w, &p.a.mrs).unwrap();
        }
        p.run_to_quiescence(100_000);
    };
    round(&mut p); // warm-up: queues and scratch space reach their working size
    let packets_before = p.fabric.stats().delivered;
    let allocs = allocations_in(|| round(&mut p));
    let packets = p.fabric.stats().delivered - packets_before;
    assert!(p.a.send_wcs.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(p.a.send_wcs.len(), 4);
    assert!(packets >= 512, "{packets} packets");
    assert!(
        allocs <= 8,
        "{allocs} allocations for {packets} packets: something allocates per packet"
    );
}

#[test]
fn small_sends_allocate_nothing_per_work_request() {
    const N: u64 = 200;
    let mut p = Pair::new(FabricConfig::default(), 10, Connect::default());
    let a = p.a.region(4096, Access::LOCAL_WRITE);
    let b = p.b.region(4096, Access::LOCAL_WRITE);
    let sge = |r: &Region, len| Sge {
        addr: r.addr(),
        length: len,
        lkey: r.keys.lkey,
    };
    // Built once, as a caller that reuses its WRs does: what is counted is the posting.
    let recv = RecvWr {
        wr_id: 0,
        sg_list: vec![sge(&b, 64)],
    };
    let (mut plain, mut inline) = (
        SendWr::new(0, SendOpcode::Send, vec![sge(&a, 64)]),
        SendWr::new(0, SendOpcode::Send, vec![sge(&a, 64)]),
    );
    plain.flags = SendFlags::SIGNALED;
    inline.flags = SendFlags::SIGNALED | SendFlags::INLINE;
    let round = |p: &mut Pair| {
        for i in 0..N {
            p.b.qp.post_recv(&recv).unwrap();
            let w = if i % 2 == 0 { &plain } else { &inline };
            p.a.qp.post_send(w, &p.a.mrs).unwrap();
            p.run_to_quiescence(1000);
        }
    };
    round(&mut p); // warm-up
    let wcs_before = (p.a.send_wcs.len(), p.b.recv_wcs.len());
    let allocs = allocations_in(|| round(&mut p));
    assert_eq!(
        (p.a.send_wcs.len(), p.b.recv_wcs.len()),
        (wcs_before.0 + N as usize, wcs_before.1 + N as usize)
    );
    assert!(p.a.send_wcs.iter().all(|w| w.status == WcStatus::Success));
    assert!(p.b.recv_wcs.iter().all(|w| w.status == WcStatus::Success));
    assert!(
        allocs < 8,
        "{allocs} allocations for {N} SENDs and receives: something allocates per WR"
    );
}
