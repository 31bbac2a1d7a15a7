//! What softrnic's engine costs a round trip, with no kernel in the way: an RC SEND 64-byte
//! ping-pong between two devices on the in-memory fabric, one thread driving both
//! (`Progress::Polling`), against the fabric alone bouncing datagrams of the same sizes (an
//! 80-byte SEND and a 20-byte ACK a hop) in the same run. The ratio is what the protocol
//! engine (posting, building, ICRC, the responder, completions) adds to moving the bytes.
//!
//! Unlike `softrnic perf` over loopback UDP, nothing here waits on another thread or a system
//! call, so the figures are steady from run to run: the bench to measure engine changes with.
//!
//! A second ping-pong runs with [`IDLE_QPS`] more QPs on each device, created and never used:
//! its ratio to the first is what the device's other QPs cost a round trip, which a design
//! whose work per packet does not grow with the number of QPs keeps near 1.
//!
//! A third runs with every 100th SEND signaled, as programs that signal selectively do: the
//! others ask their peer for no ACK, and its ratio to the first is what ACKs cost.
//!
//! `cargo bench -p softrnic-uapi --bench engine_rtt` (about 5 s). Without `--bench` (as
//! `cargo test --all-targets` runs it) it does a few round trips and prints nothing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use softrnic_provider::transport::{
    Bytes, Fabric, FabricConfig, FabricEndpoint, OutPacket, RecvBatch, Transport,
};
use softrnic_uapi::{
    Access, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, Progress, QpCaps, QpInitAttr,
    QueuePair, RecvWr, SendFlags, SendOpcode, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 19, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 19, 2));

/// The idle QPs each device has in the second ping-pong.
const IDLE_QPS: usize = 64;

/// Round trips per second of `round_trip` over `time` (checked every 1024), or 1024 of them.
fn ns_per(time: Option<Duration>, mut round_trip: impl FnMut(u64)) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..1024 {
            round_trip(n);
            n += 1;
        }
        match time {
            Some(t) if start.elapsed() < t => {}
            _ => break,
        }
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    let time = timed.then_some(Duration::from_millis(1000));
    let fabric_ns = fabric_alone(time);
    let rc_ns = rc_pingpong(time, 0, 1);
    let crowded_ns = rc_pingpong(time, IDLE_QPS, 1);
    let selective_ns = rc_pingpong(time, 0, 100);
    if timed {
        println!("fabric alone, 80 B + 20 B a hop:   {fabric_ns:>7.0} ns per round trip");
        println!(
            "RC SEND 64 B ping-pong, 1 thread:  {rc_ns:>7.0} ns per round trip   = {:.2}x the fabric alone",
            rc_ns / fabric_ns
        );
        println!(
            "  the same, {IDLE_QPS} idle QPs a device: {crowded_ns:>7.0} ns per round trip   = {:.2}x without them",
            crowded_ns / rc_ns
        );
        println!(
            "  the same, every 100th send signaled: {selective_ns:>5.0} ns per round trip   = {:.2}x all signaled",
            selective_ns / rc_ns
        );
    }
}

/// The fabric's own cost: each side sends an 80-byte and a 20-byte datagram and the other
/// receives them, as an RC ping-pong's packets go.
fn fabric_alone(time: Option<Duration>) -> f64 {
    let fabric = Fabric::new(FabricConfig::default(), 7);
    let mut ends = [
        fabric.attach(A).expect("attach"),
        fabric.attach(B).expect("attach"),
    ];
    let mut batch = RecvBatch::new(16, 4096);
    let answer = [0x5au8; 80];
    let ack = [0xa5u8; 20];
    let mut hop = |from: usize, to: IpAddr, ends: &mut [FabricEndpoint; 2]| {
        let dst = SocketAddr::new(to, 4791);
        let (p1, p2) = ([Bytes::from(&answer)], [Bytes::from(&ack)]);
        let pkts = [
            OutPacket {
                dst,
                src_port: 0xc000,
                pieces: &p1,
                segment: 0,
                ident: 0,
            },
            OutPacket {
                dst,
                src_port: 0xc000,
                pieces: &p2,
                segment: 0,
                ident: 0,
            },
        ];
        assert_eq!(ends[from].send_batch(&pkts).expect("send"), 2);
        let mut got = 0;
        while got < 2 {
            got += ends[1 - from].recv_batch(&mut batch).expect("recv");
        }
    };
    ns_per(time, |_| {
        hop(0, B, &mut ends);
        hop(1, A, &mut ends);
    })
}

struct Side {
    _ctx: Context,
    cq: Cq,
    qp: QueuePair,
    /// QPs that are only there (see [`IDLE_QPS`]).
    _idle: Vec<QueuePair>,
    mr: MemoryRegion,
    wcs: [WorkCompletion; 16],
}

impl Side {
    fn open(fabric: &Fabric, addr: IpAddr, seed: u64, idle: usize) -> Side {
        let opts = OpenOptions {
            progress: Progress::Polling,
            key_seed: seed,
        };
        let ctx =
            Context::open_on(Box::new(fabric.attach(addr).expect("attach")), opts).expect("open");
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(64).expect("cq");
        let caps = QpCaps {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 64,
        };
        let qp = pd.create_qp(&QpInitAttr::rc(&cq, caps)).expect("qp");
        let idle = (0..idle)
            .map(|_| pd.create_qp(&QpInitAttr::rc(&cq, caps)).expect("idle qp"))
            .collect();
        let mr = pd.reg_mr(8192, Access::LOCAL_WRITE).expect("mr");
        let wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
        Side {
            _ctx: ctx,
            cq,
            qp,
            _idle: idle,
            mr,
            wcs,
        }
    }

    fn post_recv(&self, id: u64) {
        let wr = RecvWr {
            wr_id: id,
            sg_list: vec![self.mr.sge(4096, 64)],
        };
        self.qp
            .post_recv(&[wr])
            .map_err(|(_, e)| e)
            .expect("post_recv");
    }

    fn send(&self, id: u64, signaled: bool) {
        let flags = if signaled {
            SendFlags::SIGNALED | SendFlags::INLINE
        } else {
            SendFlags::INLINE
        };
        let wr = SendWr {
            flags,
            ..SendWr::new(id, SendOpcode::Send, vec![self.mr.sge(0, 64)])
        };
        self.qp
            .post_send(&[wr])
            .map_err(|(_, e)| e)
            .expect("post_send");
    }

    /// Polls until a receive completes (send completions pass by), then re-posts it.
    fn receive(&mut self, id: u64) {
        loop {
            let k = self.cq.poll(&mut self.wcs).expect("poll");
            let wcs = &self.wcs[..k];
            assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
            if wcs.iter().any(|w| w.opcode == WcOpcode::Recv) {
                break;
            }
        }
        self.post_recv(id);
    }
}

/// An RC SEND ping-pong, inline 64 bytes, one thread driving both devices, each of which has
/// `idle` more QPs that do nothing.
/// Every `signal_every`-th SEND is signaled.
fn rc_pingpong(time: Option<Duration>, idle: usize, signal_every: u64) -> f64 {
    let fabric = Fabric::new(FabricConfig::default(), 8);
    let mut a = Side::open(&fabric, A, 1, idle);
    let mut b = Side::open(&fabric, B, 2, idle);
    for (s, dest, peer) in [(&a, B, &b), (&b, A, &a)] {
        let attr = ConnectAttr {
            dest,
            dest_qp_num: peer.qp.qp_num(),
            ..ConnectAttr::default()
        };
        s.qp.connect(&attr).expect("connect");
    }
    for i in 0..4 {
        a.post_recv(i);
        b.post_recv(i);
    }
    ns_per(time, |i| {
        a.send(i, (i + 1) % signal_every == 0);
        b.receive(i);
        b.send(i, (i + 1) % signal_every == 0);
        a.receive(i);
    })
}
