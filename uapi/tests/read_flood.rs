//! A READ asked for again and again must neither multiply what the responder sends nor keep
//! the device from its other QPs (IBTA 9.7.5.1.2: a duplicate READ is answered from the
//! saved request, and the responder may restart the response in progress from the
//! duplicate's PSN; `driver/round.rs`: a round sends a bounded number of packets before it
//! receives again).
//!
//! On real UDP sockets: a victim device (127.0.61.21) with two RC QPs, one connected to a
//! peer that is a plain `UdpSocket` of this test (127.0.61.23, port 4791, crafting RoCEv2
//! datagrams with their ICRCs) and one to a legitimate device (127.0.61.22). The crafted
//! peer asks for one 512 MiB READ (524 288 packets at MTU 1024) and sends the same request
//! 500 times more; meanwhile the legitimate device's WRITE, READ and SEND to the victim's
//! other QP must complete within a quarter of the flood's response (counted in packets the
//! victim sent, not in time), and the flood must cost about one response, not one per
//! duplicate.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::{connect, hostile, Setup, Side};
use softrnic_uapi::{
    Access, ConnectAttr, Context, OpenOptions, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr,
    WcStatus,
};
use softrnic_wire::reth::RethRepr;
use softrnic_wire::{Opcode, ROCE_V2_UDP_PORT};

const VICTIM: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 61, 21));
const LEGIT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 61, 22));
const FLOODER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 61, 23));

/// The flood's READ: 512 MiB, 524 288 response packets at the path MTU of 1024 (long
/// enough that the other QP's requests come while it goes out, even in a release build).
const READ_LEN: u32 = 512 << 20;
const READ_PACKETS: u64 = (READ_LEN / 1024) as u64;
const DUPLICATES: usize = 500;

/// The bound on every wait for something that must come, never a timing assertion.
const HANG: Duration = Duration::from_secs(60);

/// Packets the device has sent, read without waiting for its busy `io` lock.
fn packets_sent(s: &Side) -> u64 {
    s.ctx.device().packets_sent()
}

#[test]
fn a_flood_of_duplicate_reads_costs_one_response_and_starves_no_other_qp() {
    let opts = OpenOptions::default();
    let victim_ctx = Context::open(VICTIM, opts).unwrap();
    let victim = Setup::default().with(victim_ctx.reopen());
    let flooded = Setup::default().with(victim_ctx);
    let legit = Setup::default().with(Context::open(LEGIT, opts).unwrap());
    connect(&victim, VICTIM, &legit, LEGIT);
    const FLOOD_PSN: u32 = 0x1234;
    flooded
        .qp
        .connect(&ConnectAttr {
            dest: FLOODER,
            dest_qp_num: 0x77,
            rq_psn: FLOOD_PSN,
            ..ConnectAttr::default()
        })
        .unwrap();
    let big = flooded
        .pd
        .reg_mr(READ_LEN as usize, Access::LOCAL_WRITE | Access::REMOTE_READ)
        .unwrap();
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let (vm, lm) = (
        victim.pd.reg_mr(4096, rw).unwrap(),
        legit.pd.reg_mr(4096, rw).unwrap(),
    );

    // The flood: the READ, then the same request again and again, as fast as a socket sends.
    let flooder = hostile::socket(FLOODER, ROCE_V2_UDP_PORT);
    let reth = RethRepr {
        va: big.addr(),
        rkey: big.rkey(),
        dma_len: READ_LEN,
    };
    let request = hostile::packet(
        flooder.local_addr().unwrap(),
        VICTIM,
        (Opcode::RC_RDMA_READ_REQUEST, flooded.qp.qp_num(), FLOOD_PSN),
        hostile::Ext {
            reth: Some(reth),
            aeth: None,
        },
        &[],
    );
    let before = packets_sent(&flooded);
    for _ in 0..=DUPLICATES {
        flooder
            .send_to(&request, (VICTIM, ROCE_V2_UDP_PORT))
            .unwrap();
    }
    // The response has begun: the victim is busy with it from here on.
    let guard = Instant::now() + HANG;
    while packets_sent(&flooded) - before < 1000 {
        assert!(Instant::now() < guard, "the flood's READ is not answered");
        std::thread::sleep(Duration::from_millis(1));
    }

    // The legitimate peer's WRITE, READ and SEND to the victim's other QP.
    victim
        .qp
        .post_recv(&[RecvWr {
            wr_id: 9,
            sg_list: vec![vm.sge(64, 8)],
        }])
        .unwrap();
    let remote = RemoteAddr {
        addr: vm.addr(),
        rkey: vm.rkey(),
    };
    let signaled = |id, op, sge| SendWr {
        flags: SendFlags::SIGNALED,
        remote,
        ..SendWr::new(id, op, vec![sge])
    };
    legit
        .qp
        .post_send(&[
            signaled(1, SendOpcode::RdmaWrite, lm.sge(0, 8)),
            signaled(2, SendOpcode::RdmaRead, lm.sge(8, 8)),
            signaled(3, SendOpcode::Send, lm.sge(16, 8)),
        ])
        .unwrap();
    let (posted, t0) = (packets_sent(&flooded) - before, Instant::now());
    assert!(
        posted < READ_PACKETS / 2,
        "the flood's response was {posted} packets along before the other QP's requests \
         were posted: too far to tell whether they would have waited for it"
    );
    for id in 1..=3 {
        let wc = legit.cq.wait(1, HANG).unwrap()[0];
        assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Success));
    }
    let during = packets_sent(&flooded) - before - posted;
    eprintln!(
        "the other QP's WRITE, READ and SEND completed in {:?}, {during} packets of the \
         flood's response later (for information: a wall-clock figure, not asserted)",
        t0.elapsed()
    );
    assert!(
        during < READ_PACKETS / 4,
        "the other QP was answered only {during} packets of the flood's response later \
         (one response is {READ_PACKETS})"
    );

    // Once the flood's answer is done: about one response in all, not one per duplicate.
    let guard = Instant::now() + HANG;
    let mut last = packets_sent(&flooded);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = packets_sent(&flooded);
        if now == last {
            break;
        }
        assert!(Instant::now() < guard, "the victim never stops answering");
        last = now;
    }
    let total = last - before;
    assert!(
        (READ_PACKETS..2 * READ_PACKETS).contains(&total),
        "the flood cost {total} packets; one response is {READ_PACKETS}"
    );
}
