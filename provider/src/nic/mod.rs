//! The software NIC of one device, sans-IO: its QPs and CQs, the demultiplexing of received
//! packets to QPs by destination QPN (IBTA 9.6.1.1 "BTH: DestQP"), and the routing of each QP's
//! completions to its send or receive CQ, its shared receive queues (IBTA 10.2.9) and its
//! asynchronous event queue (IBTA 11.6.3), and of multicast packets to the UD QPs attached to
//! their group (IBTA 10.5, [`mcast`]). The driver ([`crate::driver::device`]) feeds it
//! packets and time under a lock and sends what it emits.

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use softrnic_wire::roce::RocePacket;

mod deadlines;
pub mod mcast;
mod owners;
mod reset;
mod turns;
mod xrc;

use crate::counters::QpCounters;
use crate::cq::{Cq, Notifier};
use crate::device::Gid;
use crate::device::Limits;
use crate::error::{Error, Result};
use crate::event::{AsyncEvent, Element, EventType};
use crate::host::status::QpReport;
use crate::mr::{MrTable, PdHandle};
use crate::qp::{Completion, CqSide, Qp, QpCaps, TxQueue};
use crate::qp_state::QpType;
use crate::srq::{Srq, SrqAttr, SrqAttrMask, SrqId, SrqLimits, SrqTable};
use crate::wc::WorkCompletion;
use crate::wr::RecvWr;
use deadlines::Deadlines;
use mcast::{is_multicast_gid, McastTable, Membership, MULTICAST_QPN};
use owners::Owners;
pub use owners::{OwnerId, DEFAULT_OWNER, EVENT_QUEUE_LEN};
pub use turns::QUANTUM;
use turns::{After, Senders, Turn, Turns};

/// The first QPN handed out (0 and 1 are the special QPs of IBTA 9.6.1.1; rxe starts at 17).
pub const FIRST_QPN: u32 = 17;

/// The device's SRQ limits (`max_srq_wr`, `max_srq_sge`).
pub const SRQ_LIMITS: SrqLimits = SrqLimits {
    max_wr: Limits::MAX_SRQ_WR as u32,
    max_sge: Limits::MAX_SRQ_SGE as u32,
};

/// The first UDP source port of QPs (A17.2.3; rxe uses 0xC000 and up).
pub const FIRST_SRC_PORT: u16 = 0xc000;

/// The UDP source port QP `qpn`'s packets are meant to leave from: one of the 0x3FFF ports
/// from [`FIRST_SRC_PORT`], so that a path that balances flows by their UDP ports (ECMP,
/// A17.2.3) spreads the QPs. The transport may send from another when another socket of the
/// host holds it (`Transport::source_port`).
pub fn src_port_of(qpn: u32) -> u16 {
    FIRST_SRC_PORT + (qpn % 0x3fff) as u16
}

/// A CQ handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqId(pub u32);

/// Counters of received packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Packets handed to a QP.
    pub delivered: u64,
    /// Of those, IPv4 packets whose ICRC was checked for an IP Identification solved for, not
    /// seen (through a UDP socket; see [`crate::transport`]).
    pub ident_solved: u64,
    /// Packets for a QPN that does not exist.
    pub no_qp: u64,
    /// Packets dropped because their ICRC does not match (or they have no room for one).
    pub icrc_errors: u64,
    /// Packets to a connected QP (RC, UC, XRC) dropped because their IP source and
    /// destination are not the QP's peer's and its own address (see [`Nic::handle_packet_to`]).
    pub addr_mismatch: u64,
    /// Packets dropped as malformed.
    pub malformed: u64,
    /// Packets dropped because their BTH P_Key does not match the port's (IBTA 10.9.3;
    /// `ibv_port_attr.bad_pkey_cntr`).
    pub bad_pkey: u64,
    /// Multicast packets (DestQP 0xFFFFFF) to a group no QP is attached to.
    pub no_group: u64,
}

/// Why the NIC dropped a received, well-formed packet before any QP saw it (each is counted in
/// [`RxStats`]; a capture writes the reason beside the packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxDrop {
    /// Its DestQP names no QP of this device ([`RxStats::no_qp`]).
    NoQp,
    /// A multicast packet to a group no QP is attached to ([`RxStats::no_group`]).
    NoGroup,
    /// It came to a connected QP from another address than its peer's
    /// ([`RxStats::addr_mismatch`]).
    AddrMismatch,
    /// Its P_Key does not match the port's ([`RxStats::bad_pkey`]).
    BadPkey,
}

impl RxDrop {
    /// The reason, in words (as a capture's comment says it).
    pub fn describe(self) -> &'static str {
        match self {
            RxDrop::NoQp => "dropped: no QP has its DestQP",
            RxDrop::NoGroup => "dropped: no QP is attached to its multicast group",
            RxDrop::AddrMismatch => "dropped: not from its QP's peer address",
            RxDrop::BadPkey => "dropped: its P_Key does not match the port's",
        }
    }
}

/// The port's one P_Key: the default partition, full member (kernel rxe's and RoCE's).
pub const DEFAULT_PKEY: u16 = 0xffff;

/// IBTA 10.9.3 P_Key matching: the low 15 bits (the partition) are equal, and at least one of
/// the two keys is a full member (bit 15); a partition of 0 matches nothing.
pub fn pkey_matches(a: u16, b: u16) -> bool {
    let part = |k: u16| k & 0x7fff;
    part(a) == part(b) && part(a) != 0 && (a | b) & 0x8000 != 0
}

struct QpEntry {
    qp: Qp,
    send_cq: CqId,
    recv_cq: CqId,
    /// Counted among the QPs sharing the device's send window ([`turns`]).
    sending: bool,
}

impl QpEntry {
    fn pd(&self) -> PdHandle {
        self.qp.context().pd
    }
}

/// Moves QP `e`'s completions to its CQs; returns how many.
fn route(e: &mut QpEntry, cqs: &mut HashMap<u32, Cq>) -> usize {
    let mut n = 0;
    while let Some(Completion { side, wc }) = e.qp.poll_completion() {
        n += 1;
        let cq = match side {
            CqSide::Send => e.send_cq,
            CqSide::Recv => e.recv_cq,
            CqSide::Xrc(cq) => cq,
        };
        if let Some(c) = cqs.get_mut(&cq.0) {
            // An overflow marks the CQ in error (reported by poll_cq).
            let _ = c.push(wc);
        }
    }
    n
}

/// Where `qp` stands after a turn in which it gave `whole` quantum or less.
fn after_turn(qp: &Qp, whole: bool) -> After {
    if qp.waits_for_room() {
        After::WaitsForRoom {
            first: qp.resumes(),
        }
    } else if whole && qp.wants_transmit() {
        After::More
    } else {
        // It has nothing more, or waits for an event of its own: an ACK of the packets it
        // has out (which make room), a READ response, a timer.
        After::Done
    }
}

/// Whether a unicast packet from `src` to `dst` may reach `qp` on the device at `local`: a
/// connected QP's must come from its peer's address (its address vector's) to the device's.
fn from_peer(qp: &Qp, src: IpAddr, dst: IpAddr, local: IpAddr) -> bool {
    qp.qp_type() == QpType::Ud
        || (src.to_canonical() == qp.context().dst.to_canonical()
            && dst.to_canonical() == local.to_canonical())
}

/// The earlier of two deadlines.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The sans-IO NIC of one device.
pub struct Nic {
    local: IpAddr,
    mrs: Arc<MrTable>,
    /// Boxed, so that the table holds a pointer per QP: an entry is ~900 bytes, and 1024 of
    /// them inline made a table of ~1.8 MiB in which every lookup (several per WRITE) first
    /// missed the cache on the key. The lookup now stays in the cache and only the QP's own
    /// state is a miss.
    qps: HashMap<u32, Box<QpEntry>>,
    /// The order in which the QPs take turns at the transmit, and the window they share
    /// ([`turns`]).
    turns: Turns,
    senders: Senders,
    /// The QPs' timers ([`deadlines`]).
    deadlines: Deadlines,
    cqs: HashMap<u32, Cq>,
    srqs: SrqTable,
    /// The open XRC domains ([`crate::xrc`]).
    xrcds: rustc_hash::FxHashSet<u32>,
    next_xrcd: u32,
    mcast: McastTable,
    /// The contexts sharing the device: their PDs and asynchronous events.
    owners: Owners,
    next_qpn: u32,
    /// The QPNs this NIC hands out: `qpns.0 ..= qpns.1` (its process's block on a shared
    /// device, `host/block.rs`).
    qpns: (u32, u32),
    next_cq: u32,
    max_qp: usize,
    /// Receive counters.
    pub rx: RxStats,
    /// The counters of the QPs destroyed, summed: a device's counts outlive its QPs.
    retired: QpCounters,
}

impl Nic {
    /// A NIC for the device at `local`, its memory regions in `mrs`.
    pub fn new(local: IpAddr, mrs: Arc<MrTable>, max_qp: usize) -> Nic {
        Nic {
            local,
            mrs,
            qps: HashMap::default(),
            turns: Turns::default(),
            senders: Senders::default(),
            deadlines: Deadlines::default(),
            cqs: HashMap::default(),
            srqs: SrqTable::new(),
            xrcds: Default::default(),
            next_xrcd: 0,
            mcast: McastTable::default(),
            owners: Owners::default(),
            next_qpn: FIRST_QPN,
            qpns: (FIRST_QPN, 0x00ff_fffe),
            next_cq: 1,
            max_qp,
            rx: RxStats::default(),
            retired: QpCounters::default(),
        }
    }

    /// Hands out QPNs from `first ..= last` only (a process's block of a shared device),
    /// starting at `first + start % (the range's size)`: a process that takes the block of
    /// one that died does not give its first QPs the numbers the dead one's peers may still
    /// be sending to. Call before the first QP.
    pub fn set_qpn_range(&mut self, first: u32, last: u32, start: u32) {
        let (first, last) = (first.max(FIRST_QPN), last.min(0x00ff_fffe));
        self.qpns = (first, last.max(first));
        self.next_qpn = first + start % (self.qpns.1 - first + 1);
    }

    /// The device's address.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// The key table.
    pub fn mrs(&self) -> &Arc<MrTable> {
        &self.mrs
    }

    /// `ibv_create_cq`.
    pub fn create_cq(&mut self, cqe: usize) -> CqId {
        let id = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(id, Cq::new(cqe));
        CqId(id)
    }

    /// Sets what `cq` notifies when armed (the completion channel).
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ.
    pub fn set_cq_notifier(&mut self, cq: CqId, notifier: Option<Notifier>) -> Result<()> {
        self.cqs
            .get_mut(&cq.0)
            .ok_or(Error::InvalidArgument("no such CQ"))?
            .set_notifier(notifier);
        Ok(())
    }

    /// `ibv_req_notify_cq`: the next completion of `cq` calls its notifier.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ.
    pub fn arm_cq(&mut self, cq: CqId) -> Result<()> {
        self.cqs
            .get_mut(&cq.0)
            .ok_or(Error::InvalidArgument("no such CQ"))?
            .arm();
        Ok(())
    }

    /// `ibv_resize_cq`: makes `cq` hold `cqe` completions, keeping those in it (moving the
    /// QPs' fresh completions in first, as [`Nic::poll_cq`] does, so they count); returns the
    /// new capacity. See [`Cq::resize`].
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ, `cqe` of 0 or above the device's `max_cqe`, or fewer than
    /// the completions in the CQ (rxe's `rxe_cq_chk_attr`); the CQ is then unchanged.
    pub fn resize_cq(&mut self, cq: CqId, cqe: usize) -> Result<usize> {
        if cqe > Limits::MAX_CQE as usize {
            return Err(Error::InvalidArgument("cqe is above max_cqe"));
        }
        self.route_completions();
        self.cqs
            .get_mut(&cq.0)
            .ok_or(Error::InvalidArgument("no such CQ"))?
            .resize(cqe)
    }

    /// `ibv_destroy_cq`.
    ///
    /// # Errors
    /// `EBUSY` while a QP uses it; `EINVAL` for an unknown CQ.
    pub fn destroy_cq(&mut self, cq: CqId) -> Result<()> {
        if self
            .qps
            .values()
            .any(|e| e.send_cq == cq || e.recv_cq == cq)
        {
            return Err(Error::Busy("a QP still uses the CQ"));
        }
        if self.srqs.any(|s| s.xrc().is_some_and(|x| x.cq == cq)) {
            return Err(Error::Busy("an XRC SRQ still uses the CQ"));
        }
        self.cqs
            .remove(&cq.0)
            .map(drop)
            .ok_or(Error::InvalidArgument("no such CQ"))
    }

    /// `ibv_create_srq` in `pd`.
    ///
    /// # Errors
    /// `EINVAL` for attributes beyond the device's (see [`Srq::new`]); `ENOMEM` beyond
    /// `max_srq`.
    pub fn create_srq(&mut self, pd: PdHandle, attr: &SrqAttr) -> Result<SrqId> {
        let srq = Srq::new(pd, attr, &SRQ_LIMITS)?;
        self.srqs.insert(srq, Limits::MAX_SRQ as usize)
    }

    /// `ibv_destroy_srq`. Its WQEs go with it, without completions.
    ///
    /// # Errors
    /// `EBUSY` while a QP uses it; `EINVAL` for an unknown SRQ.
    pub fn destroy_srq(&mut self, srq: SrqId) -> Result<()> {
        if self.qps.values().any(|e| e.qp.srq() == Some(srq)) {
            return Err(Error::Busy("a QP still uses the SRQ"));
        }
        self.srqs.remove(srq).map(drop)
    }

    /// `ibv_modify_srq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ or as [`Srq::modify`].
    pub fn modify_srq(&mut self, srq: SrqId, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        self.srqs.srq(srq)?.modify(attr, mask, &SRQ_LIMITS)
    }

    /// `ibv_query_srq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ.
    pub fn query_srq(&mut self, srq: SrqId) -> Result<SrqAttr> {
        Ok(self.srqs.srq(srq)?.query())
    }

    /// `ibv_post_srq_recv` of one WR.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ or as [`Srq::post_recv`]; `ENOMEM` when it is full.
    pub fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr) -> Result<()> {
        self.srqs.srq(srq)?.post_recv(wr)
    }

    /// The SRQ table.
    pub fn srqs(&mut self) -> &mut SrqTable {
        &mut self.srqs
    }

    /// A new context on the device: the owner of the PDs [`Nic::alloc_pd`] gives it, and of
    /// their QPs' and SRQs' asynchronous events.
    pub fn add_owner(&mut self) -> OwnerId {
        self.owners.add()
    }

    /// Forgets `owner` (its context is closed) and its undelivered events.
    pub fn remove_owner(&mut self, owner: OwnerId) {
        self.owners.remove(owner);
    }

    /// `ibv_alloc_pd` for `owner`: a PD handle unique across the device.
    pub fn alloc_pd(&mut self, owner: OwnerId) -> PdHandle {
        self.owners.alloc_pd(owner)
    }

    /// `ibv_dealloc_pd`.
    pub fn dealloc_pd(&mut self, pd: PdHandle) {
        self.owners.dealloc_pd(pd);
    }

    /// `ibv_get_async_event` of [`DEFAULT_OWNER`], without blocking.
    pub fn poll_async_event(&mut self) -> Option<AsyncEvent> {
        self.poll_async_event_of(DEFAULT_OWNER)
    }

    /// `ibv_get_async_event` of `owner`, without blocking: its oldest event, after collecting
    /// the QPs' and SRQs' new ones. Events of different QPs and SRQs are in collection order,
    /// not necessarily in the order they happened.
    pub fn poll_async_event_of(&mut self, owner: OwnerId) -> Option<AsyncEvent> {
        self.collect_events();
        self.owners.pop(owner)
    }

    /// Moves the QPs' and SRQs' new events to their owners' queues.
    fn collect_events(&mut self) {
        let mut qpns: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, e)| e.qp.has_event())
            .map(|(n, _)| *n)
            .collect();
        qpns.sort_unstable();
        for qpn in qpns {
            let Some(e) = self.qps.get_mut(&qpn) else {
                continue;
            };
            let pd = e.pd();
            while let Some(event_type) = e.qp.poll_event() {
                let element = Element::Qp(qpn);
                self.owners.push(
                    pd,
                    AsyncEvent {
                        event_type,
                        element,
                    },
                );
            }
        }
        for id in self.srqs.poll_limit_reached() {
            let pd = self.srqs.get_mut(id).map_or(PdHandle(0), |s| s.pd());
            let event_type = EventType::SrqLimitReached;
            let element = Element::Srq(id.0);
            self.owners.push(
                pd,
                AsyncEvent {
                    event_type,
                    element,
                },
            );
        }
    }

    /// The device failed (its progress panicked): every QP enters ERR, its outstanding WRs
    /// complete with `IBV_WC_WR_FLUSH_ERR` on their CQs, and every context gets
    /// `IBV_EVENT_DEVICE_FATAL` (element: port 1).
    pub fn device_failed(&mut self) {
        for e in self.qps.values_mut() {
            e.qp.device_failed();
        }
        self.route_completions();
        self.collect_events();
        self.owners.push_to_all(AsyncEvent {
            event_type: EventType::DeviceFatal,
            element: Element::Port(1),
        });
        self.owners.signal();
    }

    /// `ibv_create_qp` for RC; with `srq`, the QP takes its receive WQEs from that SRQ.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ or SRQ or bad capacities; `ENOMEM` beyond `max_qp`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_qp(
        &mut self,
        pd: PdHandle,
        send_cq: CqId,
        recv_cq: CqId,
        srq: Option<SrqId>,
        caps: QpCaps,
        sq_sig_all: bool,
        max_wr: u32,
    ) -> Result<u32> {
        let t = QpType::Rc;
        self.create_qp_of(t, pd, send_cq, recv_cq, srq, caps, sq_sig_all, max_wr)
    }

    /// `ibv_create_qp` for a QP of `qp_type` (RC, UC or UD).
    ///
    /// # Errors
    /// As [`Nic::create_qp`].
    #[allow(clippy::too_many_arguments)]
    pub fn create_qp_of(
        &mut self,
        qp_type: QpType,
        pd: PdHandle,
        send_cq: CqId,
        recv_cq: CqId,
        srq: Option<SrqId>,
        caps: QpCaps,
        sq_sig_all: bool,
        max_wr: u32,
    ) -> Result<u32> {
        if !self.cqs.contains_key(&send_cq.0) || !self.cqs.contains_key(&recv_cq.0) {
            return Err(Error::InvalidArgument("no such CQ"));
        }
        if let Some(id) = srq {
            self.srqs.srq(id)?;
        }
        if qp_type == QpType::XrcRecv {
            return Err(Error::InvalidArgument(
                "an XRC TGT QP belongs to an XRC domain (create_xrc_recv_qp)",
            ));
        }
        // An XRC INI QP has no receive queue: its receive capacities are ignored.
        let caps = match qp_type {
            QpType::XrcSend => QpCaps {
                max_recv_wr: 0,
                max_recv_sge: 0,
                ..caps
            },
            _ => caps,
        };
        caps.check(max_wr, srq.is_some())?;
        let qpn = self.alloc_qpn()?;
        let port = src_port_of(qpn);
        let mut qp = Qp::new_of(qp_type, qpn, pd, caps, port, sq_sig_all);
        if let Some(id) = srq {
            qp = qp.with_srq(id);
        }
        self.insert_qp(
            qpn,
            QpEntry {
                qp,
                send_cq,
                recv_cq,
                sending: false,
            },
        );
        Ok(qpn)
    }

    /// Adds a new QP (its QPN from [`Nic::alloc_qpn`]).
    fn insert_qp(&mut self, qpn: u32, mut entry: QpEntry) {
        entry.qp.share_window(self.senders.window().clone());
        self.qps.insert(qpn, Box::new(entry));
        self.turns.add(qpn);
        self.deadlines.add(qpn);
    }

    /// A free QP number, if `max_qp` allows one more QP.
    fn alloc_qpn(&mut self) -> Result<u32> {
        if self.qps.len() >= self.max_qp {
            return Err(Error::NoMemory("max_qp reached"));
        }
        let (first, last) = self.qpns;
        Ok(loop {
            let n = self.next_qpn;
            self.next_qpn = if n >= last { first } else { n + 1 };
            if !self.qps.contains_key(&n) {
                break n;
            }
        })
    }

    /// `ibv_destroy_qp`. Its events not yet collected go with it, and it is detached from
    /// its multicast groups (use [`crate::driver::Device::destroy_qp`] so that the device also
    /// leaves the groups this empties).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<()> {
        self.destroy_qp_leaving(qpn, &mut Vec::new())
    }

    /// [`Nic::destroy_qp`], appending to `left` the IP addresses of the multicast groups it
    /// leaves without QPs (for the transport to leave).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn destroy_qp_leaving(&mut self, qpn: u32, left: &mut Vec<IpAddr>) -> Result<()> {
        let mut e = self
            .qps
            .remove(&qpn)
            .ok_or(Error::InvalidArgument("no such QP"))?;
        self.retired.add(e.qp.counters());
        self.turns.remove(qpn);
        self.deadlines.remove(qpn);
        self.senders.update(&mut e.sending, false);
        self.mcast.detach_all(qpn, left);
        Ok(())
    }

    /// `ibv_attach_mcast` (IBTA 11.3): attaches UD QP `qpn` to the multicast group `mgid`;
    /// says whether the device must now join the group on the network.
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP, a QP that is not UD, or a GID that is not multicast.
    pub fn attach_mcast(&mut self, qpn: u32, mgid: &Gid) -> Result<Membership> {
        self.check_mcast(qpn, mgid)?;
        Ok(self.mcast.attach(qpn, mgid))
    }

    /// `ibv_detach_mcast`: detaches QP `qpn` from `mgid`; says whether the device must now
    /// leave the group on the network.
    ///
    /// # Errors
    /// `EINVAL` as [`Nic::attach_mcast`], or if the QP is not attached to `mgid`.
    pub fn detach_mcast(&mut self, qpn: u32, mgid: &Gid) -> Result<Membership> {
        self.check_mcast(qpn, mgid)?;
        self.mcast.detach(qpn, mgid)
    }

    /// Whether QP `qpn` is attached to `mgid`.
    pub fn is_attached(&self, qpn: u32, mgid: &Gid) -> bool {
        self.mcast.is_attached(qpn, mgid)
    }

    fn check_mcast(&self, qpn: u32, mgid: &Gid) -> Result<()> {
        let e = self
            .qps
            .get(&qpn)
            .ok_or(Error::InvalidArgument("no such QP"))?;
        if e.qp.qp_type() != QpType::Ud {
            return Err(Error::InvalidArgument(
                "only a UD QP joins a multicast group",
            ));
        }
        if !is_multicast_gid(mgid) {
            return Err(Error::InvalidArgument("not a multicast GID"));
        }
        Ok(())
    }

    /// Every QP, as `softrnic status` reports it: number, type, state, the connected QP's
    /// address and number once it has one (RC and UC), and its counters.
    pub fn qp_reports(&self) -> Vec<QpReport> {
        self.qps
            .values()
            .map(|e| {
                let ctx = e.qp.context();
                let connected = e.qp.qp_type() != QpType::Ud && !ctx.dst.is_unspecified();
                QpReport {
                    qpn: e.qp.qpn(),
                    qp_type: e.qp.qp_type(),
                    state: e.qp.state(),
                    peer: connected.then_some((ctx.dst, ctx.dest_qpn)),
                    counters: *e.qp.counters(),
                }
            })
            .collect()
    }

    /// The counters of every QP the NIC has had, summed ([`crate::counters`]).
    pub fn qp_counters(&self) -> QpCounters {
        let mut sum = self.retired;
        for e in self.qps.values() {
            sum.add(e.qp.counters());
        }
        sum
    }

    /// The QP `qpn`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn qp(&mut self, qpn: u32) -> Result<&mut Qp> {
        Ok(self.qp_and_mrs(qpn)?.0)
    }

    /// QP `qpn` and the key table, borrowed together (a post needs both). The QP's timers
    /// are read again before the device next looks for due ones (`nic/deadlines.rs`).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn qp_and_mrs(&mut self, qpn: u32) -> Result<(&mut Qp, &MrTable)> {
        let Nic {
            qps,
            mrs,
            deadlines,
            ..
        } = self;
        let qp = qps
            .get_mut(&qpn)
            .map(|e| &mut e.qp)
            .ok_or(Error::InvalidArgument("no such QP"))?;
        deadlines.lend(qpn);
        Ok((qp, mrs))
    }

    /// `ibv_poll_cq`: moves completions into `out`; moves the QPs' fresh completions in first.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ; `Io(EOVERFLOW)` once the CQ has overflowed and is drained.
    pub fn poll_cq(&mut self, cq: CqId, out: &mut [WorkCompletion]) -> Result<usize> {
        self.route_completions();
        self.take_completions(cq, out)
    }

    /// [`Nic::poll_cq`] of what the CQ holds, without first moving the QPs' completions to
    /// their CQs (for a driver that knows nothing happened since it last did).
    ///
    /// # Errors
    /// As [`Nic::poll_cq`].
    pub fn take_completions(&mut self, cq: CqId, out: &mut [WorkCompletion]) -> Result<usize> {
        let c = self
            .cqs
            .get_mut(&cq.0)
            .ok_or(Error::InvalidArgument("no such CQ"))?;
        if c.overflowed() && c.is_empty() {
            return Err(Error::Io(libc::EOVERFLOW));
        }
        Ok(c.poll(out))
    }

    /// Moves every QP's completions to its CQs; returns how many.
    pub fn route_completions(&mut self) -> usize {
        let mut n = 0;
        let mut events = false;
        for e in self.qps.values_mut() {
            events |= e.qp.has_event();
            n += route(e, &mut self.cqs);
        }
        self.signal_events(events);
        n
    }

    /// [`Nic::route_completions`] of QP `qpn` alone (after a post to it, which changes no
    /// other QP); returns how many.
    pub fn route_qp_completions(&mut self, qpn: u32) -> usize {
        let Some(e) = self.qps.get_mut(&qpn) else {
            return 0;
        };
        let events = e.qp.has_event();
        let n = route(e, &mut self.cqs);
        self.signal_events(events);
        n
    }

    /// Calls the notifier of each owner with events pending (`events`: some QP has affiliated
    /// events) that was not signalled since it last drained them.
    fn signal_events(&mut self, events: bool) {
        if events || self.srqs.any_limit_reached() {
            self.collect_events();
        }
        if self.owners.any_queued() {
            self.owners.signal();
        }
    }

    /// Sets what is called (with the NIC locked: it must only signal) when asynchronous
    /// events of [`DEFAULT_OWNER`] become pending; see [`Nic::set_event_notifier_of`].
    pub fn set_event_notifier(&mut self, n: crate::cq::Notifier) {
        self.set_event_notifier_of(DEFAULT_OWNER, n);
    }

    /// Sets what is called (with the NIC locked: it must only signal) when asynchronous
    /// events of `owner` become pending: once, until [`Nic::poll_async_event_of`] has been
    /// drained to `None`. Events raised by a packet or a timer are signalled in the same
    /// round; those raised by an API call (a modify to ERR) in the next round of progress.
    pub fn set_event_notifier_of(&mut self, owner: OwnerId, n: crate::cq::Notifier) {
        self.owners.set_notifier(owner, n);
    }

    /// Hands a received, checked packet from IP address `src` to the device's address to its
    /// QP (see [`Nic::handle_packet_to`]). `verified`: its ICRC was checked over the IP header
    /// as received (see [`RxStats::ident_solved`]).
    pub fn handle_packet_from(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        verified: bool,
        src: IpAddr,
    ) -> Option<RxDrop> {
        let local = self.local;
        self.handle_packet_to(now, pkt, verified, src, local)
    }

    /// Hands a received, checked packet from IP address `src` to `dst` to its QP (or QPs):
    /// `dst` is the device's address, or a multicast group's (a UD QP's receive GRH names
    /// both). A packet with DestQP 0xFFFFFF to a group goes to
    /// every QP attached to the group, each checking it (its Q_Key) as a unicast datagram
    /// and completing its own receive WQE (IBTA 10.5; rxe's `rxe_rcv_mcast_pkt`).
    ///
    /// A connected QP (all but UD) takes packets only from its peer to itself: `src` must be
    /// the address of its address vector and `dst` the device's (as rxe's `check_addr` does
    /// for RC and UC). Anything else is dropped before the QP sees it and counted in
    /// [`RxStats::addr_mismatch`]: a spoofed request is neither executed nor answered (no
    /// NAK, no change of PSN or state), a spoofed ACK, NAK or response changes nothing.
    ///
    /// Returns why the packet was dropped, if it was ([`RxDrop`]).
    pub fn handle_packet_to(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        verified: bool,
        src: IpAddr,
        dst: IpAddr,
    ) -> Option<RxDrop> {
        let dest_qp = pkt.repr.bth.dest_qp;
        // Whom it is for: every member of a group, or the one QP it names.
        let to_group = dest_qp == MULTICAST_QPN && dst.is_multicast();
        let targets: &[u32] = if to_group {
            self.mcast.members(dst)
        } else {
            std::slice::from_ref(&dest_qp)
        };
        if to_group && targets.is_empty() {
            self.rx.no_group += 1;
            return Some(RxDrop::NoGroup);
        }
        if !to_group {
            let Some(e) = self.qps.get(&dest_qp) else {
                self.rx.no_qp += 1;
                return Some(RxDrop::NoQp);
            };
            if !from_peer(&e.qp, src, dst, self.local) {
                self.rx.addr_mismatch += 1;
                return Some(RxDrop::AddrMismatch);
            }
        }
        if !pkey_matches(pkt.repr.bth.pkey, DEFAULT_PKEY) {
            // Silently dropped and counted, as IBTA 9.6.1.1 and rxe's check_keys do.
            self.rx.bad_pkey += 1;
            return Some(RxDrop::BadPkey);
        }
        self.rx.delivered += 1;
        self.rx.ident_solved += u64::from(!verified);
        for &qpn in targets {
            if let Some(e) = self.qps.get_mut(&qpn) {
                e.qp.handle_packet_from(now, pkt, src, dst, &self.mrs, &mut self.srqs);
                self.deadlines.note(qpn, e.qp.poll_timeout());
            }
        }
        None
    }

    /// Runs the QPs' due timers, looking only at the QPs that have one (`nic/deadlines.rs`). A
    /// QP whose timer fired may have something to send (a retransmission, a held ACK): it is
    /// scheduled a turn; its completions (an error's) move to their CQs.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.note_lent();
        let due = self.deadlines.expire(now);
        let mut events = false;
        for &qpn in &due {
            let Some(e) = self.qps.get_mut(&qpn) else {
                continue;
            };
            if e.qp.poll_timeout().is_some_and(|t| t <= now) {
                e.qp.handle_timeout(now);
                self.turns.schedule(qpn);
                events |= e.qp.has_event();
                route(e, &mut self.cqs);
            }
            self.deadlines.note(qpn, e.qp.poll_timeout());
        }
        self.deadlines.give_back(due);
        self.signal_events(events);
    }

    /// Notes the deadlines of the QPs lent out since ([`deadlines`]).
    fn note_lent(&mut self) {
        let Nic { qps, deadlines, .. } = self;
        deadlines.note_lent(|qpn| qps.get(&qpn).and_then(|e| e.qp.poll_timeout()));
    }

    /// Lets every QP's held ACK leave with the next transmit (see `rc/ack_coalesce.rs`).
    pub fn release_acks(&mut self) {
        for e in self.qps.values_mut() {
            e.qp.release_acks();
        }
    }

    /// No later than the earliest deadline of all QPs: at it, [`Nic::handle_timeout`] runs
    /// their due timers, or finds a QP whose timer stopped or moved later (`nic/deadlines.rs`).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let qps = &self.qps;
        self.deadlines
            .next(|qpn| qps.get(&qpn).and_then(|e| e.qp.poll_timeout()))
    }

    /// Appends packets to send to `out` until it holds `max` or no QP has more, the QPs
    /// taking turns of up to [`QUANTUM`] packets each, with their shares of the device's
    /// send window (`nic/turns.rs`). A full pass: every QP is counted, and every one that has
    /// something to send is offered a turn.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut TxQueue, max: usize) {
        let mut sending = 0;
        self.note_lent();
        let Nic {
            qps,
            turns,
            deadlines,
            ..
        } = self;
        turns.schedule_each(|qpn| {
            qps.get_mut(&qpn).is_some_and(|e| {
                e.sending = e.qp.is_sending();
                sending += usize::from(e.sending);
                deadlines.note(qpn, e.qp.poll_timeout());
                e.qp.wants_transmit()
            })
        });
        self.senders.recount(sending);
        self.poll_transmit_scheduled(now, out, max);
    }

    /// [`Nic::poll_transmit`] of the QPs scheduled since the last pass (by a timer, or a
    /// turn cut short) and those waiting for room in the send window (`nic/turns.rs`) only;
    /// returns the earliest deadline of the QPs it looked at (the only ones whose deadlines
    /// it can have moved). A QP a packet went to, or a post to, is not scheduled: it is for
    /// [`Nic::poll_transmit_qp`].
    pub fn poll_transmit_scheduled(
        &mut self,
        now: Instant,
        out: &mut TxQueue,
        max: usize,
    ) -> Option<Instant> {
        let Nic {
            mrs,
            qps,
            turns,
            senders,
            deadlines,
            ..
        } = self;
        let mut due = None;
        let full = senders.window().is_full();
        turns.pass(full, |qpn, quantum, waited| {
            let mut gave = 0;
            let Some(e) = qps.get_mut(&qpn) else {
                return Turn {
                    gave,
                    room: out.len() < max,
                    after: After::Done,
                };
            };
            if waited {
                e.qp.offer_room();
            }
            while gave < quantum
                && out.len() < max
                && out.push_with(|t| e.qp.poll_transmit_into(now, mrs, t))
            {
                gave += 1;
            }
            senders.update(&mut e.sending, e.qp.is_sending());
            deadlines.note(qpn, e.qp.poll_timeout());
            due = earliest(due, e.qp.poll_timeout());
            Turn {
                gave,
                room: out.len() < max,
                after: after_turn(&e.qp, gave == quantum),
            }
        });
        due
    }

    /// [`Nic::poll_transmit`] of QP `qpn` alone (after a post to it, or a packet for it);
    /// then the QPs scheduled meanwhile and those waiting for room in the send window, which
    /// this one's ACKs may have made, take their turns (`nic/turns.rs`). Returns the earliest
    /// deadline of the QPs it looked at, the only ones whose deadlines it can have moved.
    pub fn poll_transmit_qp(
        &mut self,
        qpn: u32,
        now: Instant,
        out: &mut TxQueue,
        max: usize,
    ) -> Option<Instant> {
        let mrs = &self.mrs;
        let e = self.qps.get_mut(&qpn)?;
        self.senders.update(&mut e.sending, e.qp.is_sending());
        while out.len() < max && out.push_with(|t| e.qp.poll_transmit_into(now, mrs, t)) {}
        self.senders.update(&mut e.sending, e.qp.is_sending());
        let due = e.qp.poll_timeout();
        self.deadlines.note(qpn, due);
        if e.qp.waits_for_room() {
            self.turns.wait(qpn, e.qp.resumes());
        }
        if self.turns.is_idle() {
            return due;
        }
        earliest(due, self.poll_transmit_scheduled(now, out, max))
    }

    /// Whether some QP may have packets to send.
    pub fn wants_transmit(&self) -> bool {
        self.qps.values().any(|e| e.qp.wants_transmit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic() -> Nic {
        let mrs = Arc::new(MrTable::new(4, 1).unwrap());
        Nic::new(IpAddr::from([127, 0, 31, 1]), mrs, 4)
    }

    #[test]
    fn resize_cq_checks_the_size_against_max_cqe_and_one() {
        let mut nic = nic();
        let cq = nic.create_cq(4);
        let max = Limits::MAX_CQE as usize;
        for cqe in [0, max + 1] {
            let e = nic.resize_cq(cq, cqe).unwrap_err();
            assert_eq!(e.errno(), libc::EINVAL, "cqe {cqe}");
        }
        assert_eq!(nic.resize_cq(cq, max), Ok(max));
        assert_eq!(nic.resize_cq(cq, 1), Ok(1));
        let unknown = CqId(cq.0 + 1);
        assert_eq!(nic.resize_cq(unknown, 4).unwrap_err().errno(), libc::EINVAL);
    }

    #[test]
    fn pkey_matching_follows_ibta_10_9_3() {
        assert!(pkey_matches(0xffff, 0xffff), "full and full");
        assert!(pkey_matches(0x7fff, 0xffff), "limited and full");
        assert!(!pkey_matches(0x7fff, 0x7fff), "two limited members");
        assert!(!pkey_matches(0x1234, 0xffff), "another partition");
        assert!(!pkey_matches(0x8000, 0x8000), "the invalid partition 0");
    }
}
