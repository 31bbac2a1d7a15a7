//! A pair of RC QPs connected through the in-memory fabric, driven in virtual time — the test
//! harness of the engine (after quinn-proto's `tests/util.rs`): each step lets both nodes
//! transmit, the fabric deliver, both nodes receive and run their timers; when nothing moves,
//! time jumps to the next arrival or deadline.
//!
//! Each node has one QP (`qp`), and may have more (`extra`, made by [`Pair::add_qps`]), all on
//! the same fabric endpoint and demultiplexed by destination QPN, and an SRQ table (`srqs`)
//! that its QPs' responders take receive WQEs from when created with an SRQ.

#![allow(dead_code)]

pub mod wrs;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use softrnic_provider::driver::{accept, Emitter};
use softrnic_provider::mr::{Access, MrKeys, MrTable, PdHandle};
use softrnic_provider::qp::{Completion, ConnectAttr, CqSide, Qp, QpCaps, QpLimits, Transmit};
use softrnic_provider::qp_state::{Mtu, QpType};
use softrnic_provider::srq::{SrqId, SrqTable};
use softrnic_provider::transport::{Fabric, FabricConfig, FabricEndpoint, RecvBatch, Transport};
use softrnic_provider::wc::WorkCompletion;
use softrnic_wire::aeth::Syndrome;
use softrnic_wire::roce::RocePacket;
use softrnic_wire::{Opcode, Psn};

pub const PD: PdHandle = PdHandle(1);
pub const LIMITS: QpLimits = QpLimits {
    active_mtu: Mtu::Mtu4096,
    max_rd_atomic: 16,
    max_dest_rd_atomic: 16,
};

/// A memory region over memory owned by the node, reached only through the table.
/// A region the peer's remote operations target, and what a test checks it through.
pub struct Target {
    /// The region, with the rights under test.
    pub mem: Region,
    /// A local-write region over all of `mem`'s bytes: the test reads them through it
    /// whatever rights `mem` has.
    pub eyes: Region,
    /// What `mem` should hold; the test keeps it in step with the operations that succeed.
    pub shadow: Vec<u8>,
}

pub struct Region {
    ptr: *mut u8,
    len: usize,
    pub keys: MrKeys,
    pub pd: PdHandle,
}

impl Region {
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The address one past the last byte.
    pub fn end(&self) -> u64 {
        self.addr() + self.len as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

/// A packet a node's QP was handed (or that the node's filter dropped), as the tests see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Virtual time of arrival, in ns.
    pub at: u64,
    /// The destination QPN (the node's `qp` or one of its `extra`).
    pub qpn: u32,
    pub opcode: Opcode,
    pub psn: Psn,
    pub syndrome: Option<Syndrome>,
    /// The original remote value of an ATOMIC ACKNOWLEDGE.
    pub atomic_orig: Option<u64>,
    pub payload_len: usize,
    /// Its BTH AckReq bit.
    pub ack_req: bool,
    /// The node's `drop_if` dropped it before the QP saw it.
    pub dropped: bool,
}

/// Decides, per packet addressed to the node's QP, whether to drop it (targeted loss).
pub type DropIf = Box<dyn FnMut(&RocePacket<'_>) -> bool>;

pub struct Node {
    pub mrs: MrTable,
    pub qp: Qp,
    /// More QPs on the node (see [`Pair::add_qps`]).
    pub extra: Vec<Qp>,
    /// The node's shared receive queues.
    pub srqs: SrqTable,
    pub ep: FabricEndpoint,
    pub emitter: Emitter,
    pub batch: RecvBatch,
    pub txs: Vec<Transmit>,
    pub send_wcs: Vec<WorkCompletion>,
    pub recv_wcs: Vec<WorkCompletion>,
    pub rejected: u64,
    /// Every packet addressed to the QP, in arrival order.
    pub seen: Vec<Seen>,
    /// Drops the packets it returns true for, before the QP sees them.
    pub drop_if: Option<DropIf>,
    buffers: Vec<(*mut u8, usize)>,
}

impl Drop for Node {
    fn drop(&mut self) {
        for &(p, len) in &self.buffers {
            // SAFETY: allocated by `Node::region` with this layout; the table that could reach
            // it is dropped with the node (`mrs` is dropped after this runs, but nothing uses
            // it any more).
            unsafe {
                std::alloc::dealloc(p, std::alloc::Layout::from_size_align(len, 4096).unwrap())
            };
        }
    }
}

impl Node {
    fn new(fabric: &Fabric, addr: IpAddr, qpn: u32, caps: QpCaps) -> Node {
        Node {
            mrs: MrTable::new(64, u64::from(qpn)).unwrap(),
            qp: Qp::new(qpn, PD, caps, 0xc000 + qpn as u16, false),
            extra: Vec::new(),
            srqs: SrqTable::new(),
            ep: fabric.attach(addr).unwrap(),
            emitter: Emitter::new(addr, 32),
            batch: RecvBatch::new(64, 4096 + 256),
            txs: Vec::with_capacity(32),
            send_wcs: Vec::new(),
            recv_wcs: Vec::new(),
            rejected: 0,
            seen: Vec::new(),
            drop_if: None,
            buffers: Vec::new(),
        }
    }

    /// A zeroed, page-aligned buffer of `len` bytes registered with `access`.
    pub fn region(&mut self, len: usize, access: Access) -> Region {
        self.region_in(PD, len, access)
    }

    /// A zeroed, page-aligned buffer of `len` bytes registered with `access` in `pd`.
    pub fn region_in(&mut self, pd: PdHandle, len: usize, access: Access) -> Region {
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        self.buffers.push((ptr, len));
        // SAFETY: the buffer lives until the node drops, after its last use by the table.
        let keys = unsafe { self.mrs.register(pd, ptr, len, ptr as u64, access) }.unwrap();
        Region { ptr, len, keys, pd }
    }

    /// Another memory region over `len` bytes of `r`'s memory from `offset`, with its own key,
    /// PD and rights (the memory around it stays reachable through `r`, for the test's eyes).
    pub fn subregion(
        &mut self,
        r: &Region,
        offset: usize,
        len: usize,
        pd: PdHandle,
        access: Access,
    ) -> Region {
        assert!(offset + len <= r.len);
        // SAFETY: inside `r`'s buffer, which lives until the node drops.
        let ptr = unsafe { r.ptr.add(offset) };
        // SAFETY: as above.
        let keys = unsafe { self.mrs.register(pd, ptr, len, ptr as u64, access) }.unwrap();
        Region { ptr, len, keys, pd }
    }

    /// A [`Target`] of `len` bytes registered with `access`, holding `wrs::bytes(len, seed)`.
    pub fn target(&mut self, len: usize, access: Access, seed: u8) -> Target {
        let mem = self.region(len, access);
        let eyes = self.subregion(&mem, 0, len, PD, Access::LOCAL_WRITE);
        let shadow = wrs::bytes(len, seed);
        self.fill(&eyes, 0, &shadow);
        Target { mem, eyes, shadow }
    }

    /// Copies `data` into a region at `offset` (through the table, as a local write).
    pub fn fill(&self, r: &Region, offset: usize, data: &[u8]) {
        self.mrs
            .with_local_write(
                r.keys.lkey,
                r.pd,
                r.addr() + offset as u64,
                data.len(),
                |mut d| d.copy_from(data),
            )
            .unwrap();
    }

    /// Reads `len` bytes of a region at `offset`.
    pub fn read(&self, r: &Region, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset + len <= r.len);
        self.mrs
            .with_local_read(r.keys.lkey, r.pd, r.addr() + offset as u64, len, |d| {
                d.to_vec()
            })
            .unwrap()
    }

    /// The packets with `opcode` addressed to the node's QPs, in arrival order (dropped ones
    /// included: see [`Seen::dropped`]).
    pub fn seen_of(&self, opcode: Opcode) -> impl Iterator<Item = &Seen> + '_ {
        self.seen.iter().filter(move |s| s.opcode == opcode)
    }

    /// Every QP of the node: `qp`, then `extra`.
    pub fn qps(&self) -> impl Iterator<Item = &Qp> {
        std::iter::once(&self.qp).chain(self.extra.iter())
    }

    /// The node's QP numbered `qpn`.
    pub fn qp_mut(&mut self, qpn: u32) -> Option<&mut Qp> {
        std::iter::once(&mut self.qp)
            .chain(self.extra.iter_mut())
            .find(|q| q.qpn() == qpn)
    }

    /// `post_send` on the node's QP `qpn` (panics if there is none).
    pub fn post_send_on(
        &mut self,
        qpn: u32,
        wr: &softrnic_provider::wr::SendWr,
    ) -> softrnic_provider::Result<()> {
        let mrs = &self.mrs;
        std::iter::once(&mut self.qp)
            .chain(self.extra.iter_mut())
            .find(|q| q.qpn() == qpn)
            .expect("no such QP on the node")
            .post_send(wr, mrs)
    }

    /// The earliest deadline of the node's QPs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.qps().filter_map(|q| q.poll_timeout()).min()
    }

    fn transmit(&mut self, now: Instant) -> usize {
        let mut sent = 0;
        loop {
            self.txs.clear();
            let mrs = &self.mrs;
            let batch = self.emitter.batch();
            for qp in std::iter::once(&mut self.qp).chain(self.extra.iter_mut()) {
                while self.txs.len() < batch {
                    match qp.poll_transmit(now, mrs) {
                        Some(t) => self.txs.push(t),
                        None => break,
                    }
                }
            }
            if self.txs.is_empty() {
                return sent;
            }
            let n = self
                .emitter
                .send(&self.txs, &self.mrs, &mut self.ep)
                .unwrap();
            assert_eq!(n, self.txs.len(), "the fabric takes every packet");
            sent += n;
        }
    }

    fn receive(&mut self, now: Instant, now_ns: u64) -> usize {
        let mut got = 0;
        loop {
            let n = self.ep.recv_batch(&mut self.batch).unwrap();
            if n == 0 {
                return got;
            }
            got += n;
            for pkt in self.batch.iter() {
                match accept(&pkt) {
                    Ok((p, verified)) => {
                        assert!(verified, "the fabric shows the IP header");
                        let qpn = p.repr.bth.dest_qp;
                        if self.qps().any(|q| q.qpn() == qpn) {
                            let dropped = self.drop_if.as_mut().is_some_and(|f| f(&p));
                            self.seen.push(Seen {
                                at: now_ns,
                                qpn,
                                opcode: p.repr.bth.opcode,
                                psn: p.repr.bth.psn,
                                syndrome: p.repr.aeth.map(|a| a.syndrome),
                                atomic_orig: p.repr.atomic_ack_eth.map(|a| a.orig_rem_dt),
                                payload_len: p.payload.len(),
                                ack_req: p.repr.bth.ack_req,
                                dropped,
                            });
                            if !dropped {
                                let (mrs, srqs) = (&self.mrs, &mut self.srqs);
                                let qp = std::iter::once(&mut self.qp)
                                    .chain(self.extra.iter_mut())
                                    .find(|q| q.qpn() == qpn)
                                    .expect("checked above");
                                let (src, dst) = (pkt.meta.src.ip(), pkt.meta.dst);
                                qp.handle_packet_from(now, &p, src, dst, mrs, srqs);
                            }
                        }
                    }
                    Err(_) => self.rejected += 1,
                }
            }
        }
    }

    /// Moves the completions of every QP of the node to `send_wcs` / `recv_wcs` (a
    /// completion's `qp_num` says whose it is).
    fn drain_completions(&mut self) -> usize {
        let mut n = 0;
        for qp in std::iter::once(&mut self.qp).chain(self.extra.iter_mut()) {
            while let Some(Completion { side, wc }) = qp.poll_completion() {
                match side {
                    CqSide::Send => self.send_wcs.push(wc),
                    CqSide::Recv | CqSide::Xrc(_) => self.recv_wcs.push(wc),
                }
                n += 1;
            }
        }
        n
    }
}

/// QP attributes for the harness's connection.
#[derive(Debug, Clone, Copy)]
pub struct Connect {
    pub mtu: Mtu,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub a_psn: u32,
    pub b_psn: u32,
}

impl Default for Connect {
    fn default() -> Connect {
        Connect {
            mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 4,
            a_psn: 100,
            b_psn: 5000,
        }
    }
}

pub struct Pair {
    pub fabric: Fabric,
    pub a: Node,
    pub b: Node,
    pub base: Instant,
}

pub const A_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
pub const B_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

pub fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 4096,
        max_recv_wr: 4096,
        max_send_sge: 8,
        max_recv_sge: 8,
        max_inline_data: 256,
    }
}

impl Pair {
    pub fn new(config: FabricConfig, seed: u64, c: Connect) -> Pair {
        Pair::new_of(QpType::Rc, config, seed, c)
    }

    /// A pair whose two QPs are of `qp_type` (RC or UC).
    pub fn new_of(qp_type: QpType, config: FabricConfig, seed: u64, c: Connect) -> Pair {
        let fabric = Fabric::new(config, seed);
        let mut a = Node::new(&fabric, A_ADDR, 0x11, caps());
        let mut b = Node::new(&fabric, B_ADDR, 0x22, caps());
        a.qp = Qp::new_of(qp_type, 0x11, PD, caps(), 0xc011, false);
        b.qp = Qp::new_of(qp_type, 0x22, PD, caps(), 0xc022, false);
        connect(&mut a.qp, 0x22, B_ADDR, c, c.a_psn, c.b_psn);
        connect(&mut b.qp, 0x11, A_ADDR, c, c.b_psn, c.a_psn);
        Pair {
            fabric,
            a,
            b,
            base: Instant::now(),
        }
    }

    pub fn now(&self) -> Instant {
        self.base + Duration::from_nanos(self.fabric.now())
    }

    /// Virtual time since the pair was made.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.fabric.now())
    }

    /// One round; returns whether anything happened.
    pub fn step(&mut self) -> bool {
        let now = self.now();
        let mut work = 0;
        for n in [&mut self.a, &mut self.b] {
            for qp in std::iter::once(&mut n.qp).chain(n.extra.iter_mut()) {
                if qp.poll_timeout().is_some_and(|t| t <= now) {
                    qp.handle_timeout(now);
                    work += 1;
                }
            }
            work += n.transmit(now);
        }
        let now_ns = self.fabric.now();
        for n in [&mut self.a, &mut self.b] {
            work += n.receive(now, now_ns);
            work += n.drain_completions();
        }
        work > 0
    }

    /// Runs until `done` or until nothing can happen any more (no packet in flight, no timer);
    /// panics after `max_steps`.
    pub fn run_until(&mut self, max_steps: usize, mut done: impl FnMut(&Pair) -> bool) {
        for _ in 0..max_steps {
            // Completions the test's own calls produced (a modify to ERR, a post in ERR).
            self.a.drain_completions();
            self.b.drain_completions();
            if done(self) {
                return;
            }
            if self.step() {
                continue;
            }
            if !self.advance() {
                return; // quiescent
            }
        }
        panic!("not done after {max_steps} steps");
    }

    /// Moves virtual time to the next packet arrival or timer deadline (at least one
    /// nanosecond on); false, and no move, when there is neither: nothing can happen any more.
    pub fn advance(&mut self) -> bool {
        let next = [
            self.fabric
                .next_arrival()
                .map(|ns| self.base + Duration::from_nanos(ns)),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                let ns = t.duration_since(self.base).as_nanos() as u64;
                self.fabric.advance_to(ns.max(self.fabric.now() + 1));
                true
            }
            None => false,
        }
    }

    /// Runs until every send queue is empty and nothing is in flight.
    pub fn run_to_quiescence(&mut self, max_steps: usize) {
        self.run_until(max_steps, |p| {
            p.a.qps()
                .chain(p.b.qps())
                .all(|q| q.send_queue_len() == 0 && !q.wants_transmit())
                && p.fabric.in_flight() == 0
        });
    }

    /// Adds a connected pair of QPs: `a_qpn` on A (taking receives from `a_srq` if given) to
    /// `b_qpn` on B (likewise `b_srq`), connected with `c`. They go to the nodes' `extra`.
    pub fn add_qps(
        &mut self,
        a_qpn: u32,
        a_srq: Option<SrqId>,
        b_qpn: u32,
        b_srq: Option<SrqId>,
        c: Connect,
    ) {
        let make = |qpn: u32, srq: Option<SrqId>| {
            let qp = Qp::new(qpn, PD, caps(), 0xc000 + qpn as u16, false);
            match srq {
                Some(id) => qp.with_srq(id),
                None => qp,
            }
        };
        let mut qa = make(a_qpn, a_srq);
        let mut qb = make(b_qpn, b_srq);
        connect(&mut qa, b_qpn, B_ADDR, c, c.a_psn, c.b_psn);
        connect(&mut qb, a_qpn, A_ADDR, c, c.b_psn, c.a_psn);
        self.a.extra.push(qa);
        self.b.extra.push(qb);
    }
}

pub fn connect(qp: &mut Qp, dest_qpn: u32, dest: IpAddr, c: Connect, sq_psn: u32, rq_psn: u32) {
    let attr = ConnectAttr {
        path_mtu: c.mtu,
        dest,
        dest_qp_num: dest_qpn,
        rq_psn,
        sq_psn,
        timeout: c.timeout,
        retry_cnt: c.retry_cnt,
        rnr_retry: c.rnr_retry,
        min_rnr_timer: c.min_rnr_timer,
        max_rd_atomic: c.max_rd_atomic,
        max_dest_rd_atomic: c.max_rd_atomic,
        ..ConnectAttr::default()
    };
    for (a, mask) in attr.steps_for(qp.qp_type()) {
        qp.modify(&a, mask, &LIMITS).unwrap();
    }
}
