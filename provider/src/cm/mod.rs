//! The Communication Manager (IBTA vol. 1 chapter 12), sans-IO in the manner of the QP engine:
//! it takes MADs, the application's calls and the time, and gives MADs to send, events and
//! its next deadline. It opens no socket and reads no clock.
//!
//! What it implements:
//!
//! * **Connection establishment** (12.6, 12.9): the active side sends a REQ and retries it;
//!   the passive side reports the REQ of a Service ID it listens on, and the application
//!   accepts (REP) or rejects (REJ); the active side reports the REP, the application moves
//!   its QP to RTS and says so, and the RTU establishes the connection.
//! * **Release** (12.9.7): DREQ, DREP, then TimeWait, during which the connection's IDs are
//!   still known, so that late MADs of it are recognized, not taken for a new connection.
//! * **Duplicates and stale connections** (12.9.8): a repeated REQ is matched to its
//!   connection by the sender's address and Communication ID, and answered with an MRA while
//!   the application thinks (as Linux does); a repeated REP gets the RTU again, a repeated DREQ
//!   the DREP. A REQ from a QP that still has a connection here is stale: REJ reason 10, and
//!   the old connection is released.
//! * **Retries** (12.7.30, 12.7.36): REQ, REP and DREQ are sent again every
//!   2 · packet lifetime + the peer's CM response time, Max CM Retries times; an MRA stretches
//!   the wait by its Service Timeout.
//! * **Service ID resolution** (12.11), SIDR_REQ and SIDR_REP, for UD.
//!
//! What comes in that is not for a known connection or listener gets the answer the spec
//! gives (REJ reason 8 for a REQ nobody listens for, DREP for a DREQ of an unknown connection,
//! REJ reason 6 for a REP of one) or is counted and dropped: [`Stats`].
//!
//! The connection's peers are IP addresses (RoCEv2 GIDs): a duplicate or stale connection is
//! recognized by the peer's address as well as its CA GUID, since on one host every address
//! may share one GUID. Communication IDs carry this process's QPN block (`host::mad_route`).
//! The QPs themselves are the caller's: events carry the messages' fields, from which the
//! caller sets its QP's attributes (rdma_cm does it in librdmacm, and so does softrnic's).

mod active;
mod conn;
mod passive;
mod sidr;
mod teardown;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use softrnic_wire::cm::{self, CmMessage, DreqRepr, RejRepr, RepRepr, ReqRepr};
use softrnic_wire::cm::{SidrRepRepr, SidrReqRepr};
use softrnic_wire::mad::{self, MadRepr, MAD_LEN};

use conn::Conn;
pub use conn::State;
use sidr::{SidrIn, SidrOut};

use crate::host::block::QpnBlock;
use crate::host::mad_route::comm_id;

/// 4.096 µs · 2^`exponent`: the unit of every CM timeout field (12.7.30; capped at 2^31).
pub fn cm_timeout(exponent: u8) -> Duration {
    Duration::from_nanos(4096 << exponent.min(31))
}

/// How a CM instance is set up.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The CA GUID it sends (the device's node GUID).
    pub ca_guid: u64,
    /// Its QPN block: the top bits of every Communication ID it makes.
    pub block: QpnBlock,
    /// Where its Communication IDs start counting (random, so that a restarted process does not
    /// reuse its predecessor's IDs, which the peer may still hold in TimeWait).
    pub first_id: u32,
    /// The path's packet lifetime (as an exponent, see [`cm_timeout`]): two of them are added
    /// to every wait for an answer.
    pub packet_life_time: u8,
    /// The Service Timeout of the MRAs it sends (Linux rdma_cm: 24, about a minute).
    pub mra_service_timeout: u8,
    /// Most connections and SIDR requests it keeps at once; a REQ beyond gets REJ reason 3.
    pub max_connections: usize,
}

impl Config {
    /// Linux's settings for `block`: packet lifetime 16, MRA Service Timeout 24, and room for
    /// 65 536 connections.
    pub fn new(ca_guid: u64, block: QpnBlock, first_id: u32) -> Config {
        Config {
            ca_guid,
            block,
            first_id,
            packet_life_time: 16,
            mra_service_timeout: 24,
            max_connections: 1 << 16,
        }
    }
}

/// A connection (or SIDR request): its Local Communication ID (or Request ID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// A MAD to send to QP1 of `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The peer's address.
    pub to: IpAddr,
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}

/// What the CM tells its application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A REQ for a Service ID listened on: answer with [`Cm::accept`] or [`Cm::reject`].
    Request {
        /// The new connection.
        conn: ConnId,
        /// Who sent it.
        from: IpAddr,
        /// The REQ.
        req: ReqRepr,
    },
    /// The REP to a REQ: move the QP to RTS, then [`Cm::ready_to_use`] (or [`Cm::reject`]).
    Reply {
        /// The connection.
        conn: ConnId,
        /// The REP.
        rep: RepRepr,
    },
    /// The passive side's connection is established (the RTU came).
    Established {
        /// The connection.
        conn: ConnId,
    },
    /// The peer rejected the REQ or the REP.
    Rejected {
        /// The connection (gone now).
        conn: ConnId,
        /// The REJ.
        rej: RejRepr,
    },
    /// The REQ or REP was never answered, after every retry (the connection is gone).
    TimedOut {
        /// The connection.
        conn: ConnId,
    },
    /// The peer asked to disconnect: flush the QP, then [`Cm::disconnect`] sends the DREP.
    DisconnectRequested {
        /// The connection.
        conn: ConnId,
        /// The DREQ's private data.
        private_data: [u8; cm::dreq::PRIVATE_DATA_LEN],
    },
    /// The DREQ this side sent was answered, or never was, after every retry.
    Disconnected {
        /// The connection (in TimeWait now).
        conn: ConnId,
    },
    /// TimeWait is over: the connection is forgotten, and its QP may be reused.
    TimewaitExit {
        /// The connection.
        conn: ConnId,
    },
    /// A SIDR_REQ for a Service ID listened on: answer with [`Cm::sidr_reply`].
    SidrRequest {
        /// The request.
        id: ConnId,
        /// Who sent it.
        from: IpAddr,
        /// The SIDR_REQ.
        req: SidrReqRepr,
    },
    /// The SIDR_REP to a SIDR_REQ.
    SidrReply {
        /// The request.
        id: ConnId,
        /// The SIDR_REP.
        rep: SidrRepRepr,
    },
    /// A SIDR_REQ was never answered, after every retry.
    SidrTimedOut {
        /// The request.
        id: ConnId,
    },
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmError {
    /// No such connection (EINVAL).
    NotFound,
    /// The connection is not in a state where this call means anything (EINVAL).
    State(State),
    /// Another listener has this Service ID (EADDRINUSE).
    InUse,
    /// More private data than the message holds (EINVAL).
    PrivateDataTooLong,
    /// Too many connections (ENOMEM).
    NoResources,
    /// The SIDR request was answered already (EINVAL).
    Answered,
}

impl CmError {
    /// The errno rdma_cm gives for it.
    pub fn errno(self) -> i32 {
        match self {
            CmError::NotFound
            | CmError::State(_)
            | CmError::PrivateDataTooLong
            | CmError::Answered => libc::EINVAL,
            CmError::InUse => libc::EADDRINUSE,
            CmError::NoResources => libc::ENOMEM,
        }
    }
}

/// What the CM dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// MADs received.
    pub received: u64,
    /// Not a CM MAD this CM can read (header, class, version, method, length, attribute).
    pub malformed: u64,
    /// For no connection of this CM (an unknown or forged Communication ID), or from an
    /// address that is not the connection's peer.
    pub unknown: u64,
    /// Duplicates (answered again or dropped).
    pub duplicates: u64,
    /// Valid, but meaningless in the connection's state (dropped).
    pub out_of_state: u64,
    /// REQs rejected for want of room (listener backlog or [`Config::max_connections`]).
    pub refused: u64,
}

/// Listening on one Service ID.
#[derive(Debug, Clone, Copy)]
struct Listener {
    /// Most REQs waiting for the application's answer.
    backlog: usize,
    /// REQs waiting for it now.
    pending: usize,
}

/// One CM instance: the connections of one process on one device.
#[derive(Debug)]
pub struct Cm {
    cfg: Config,
    next_id: u32,
    next_tid: u32,
    conns: HashMap<u32, Conn>,
    /// Connections by (peer, peer's Communication ID): duplicate REQs and REPs.
    by_remote_id: HashMap<(IpAddr, u32), u32>,
    /// Connections by (peer, peer's QPN): stale connections.
    by_remote_qpn: HashMap<(IpAddr, u32), u32>,
    listeners: HashMap<u64, Listener>,
    sidr_out: HashMap<u32, SidrOut>,
    sidr_in: HashMap<u32, SidrIn>,
    out: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl Cm {
    /// A CM with no connections and no listeners.
    pub fn new(cfg: Config) -> Cm {
        Cm {
            cfg,
            next_id: cfg.first_id,
            next_tid: 1,
            conns: HashMap::new(),
            by_remote_id: HashMap::new(),
            by_remote_qpn: HashMap::new(),
            listeners: HashMap::new(),
            sidr_out: HashMap::new(),
            sidr_in: HashMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// The CA GUID it sends.
    pub fn ca_guid(&self) -> u64 {
        self.cfg.ca_guid
    }

    /// What it dropped so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The state of a connection, if it exists.
    pub fn state(&self, conn: ConnId) -> Option<State> {
        self.conns.get(&conn.0).map(|c| c.state)
    }

    /// How many connections it holds (TimeWait included) and SIDR requests.
    pub fn len(&self) -> usize {
        self.conns.len() + self.sidr_in.len() + self.sidr_out.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Listens on `service_id`, with at most `backlog` REQs waiting for an answer (0: 1024).
    ///
    /// # Errors
    /// [`CmError::InUse`] if this CM already listens on it.
    pub fn listen(&mut self, service_id: u64, backlog: usize) -> Result<(), CmError> {
        if self.listeners.contains_key(&service_id) {
            return Err(CmError::InUse);
        }
        let backlog = if backlog == 0 { 1024 } else { backlog };
        self.listeners.insert(
            service_id,
            Listener {
                backlog,
                pending: 0,
            },
        );
        Ok(())
    }

    /// Stops listening on `service_id`; connections made from it stay.
    pub fn unlisten(&mut self, service_id: u64) {
        self.listeners.remove(&service_id);
    }

    /// Takes in a MAD received on QP1 from `from`. Anything at all may come: what is not a
    /// CM MAD for this CM is counted in [`Stats`] and dropped.
    pub fn handle(&mut self, now: Instant, from: IpAddr, mad_bytes: &[u8]) {
        self.stats.received += 1;
        let Some((tid, msg)) = parse(mad_bytes) else {
            self.stats.malformed += 1;
            return;
        };
        match msg {
            CmMessage::Req(req) => self.on_req(now, from, tid, req),
            CmMessage::Mra(mra) => self.on_mra(now, from, mra),
            CmMessage::Rej(rej) => self.on_rej(now, from, rej),
            CmMessage::Rep(rep) => self.on_rep(from, tid, rep),
            CmMessage::Rtu(rtu) => self.on_rtu(from, rtu),
            CmMessage::Dreq(dreq) => self.on_dreq(now, from, tid, dreq),
            CmMessage::Drep(drep) => self.on_drep(now, from, drep),
            CmMessage::SidrReq(req) => self.on_sidr_req(from, tid, req),
            CmMessage::SidrRep(rep) => self.on_sidr_rep(from, rep),
        }
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Cm::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.conns.values().filter_map(|c| c.deadline);
        let sidr_out = self.sidr_out.values().map(|s| s.deadline);
        let sidr_in = self.sidr_in.values().filter_map(|s| s.deadline);
        conns.chain(sidr_out).chain(sidr_in).min()
    }

    /// Runs every timer due at `now`: retries, give-ups, TimeWait exits.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.on_conn_timeout(now, id);
        }
        self.sidr_timeouts(now);
    }

    /// A fresh Communication ID (or Request ID) of this CM's block, used by nothing.
    fn new_id(&mut self) -> u32 {
        loop {
            let id = comm_id(self.cfg.block, self.next_id);
            self.next_id = self.next_id.wrapping_add(1);
            let used = self.conns.contains_key(&id)
                || self.sidr_out.contains_key(&id)
                || self.sidr_in.contains_key(&id);
            if id != 0 && !used {
                return id;
            }
        }
    }

    /// A fresh Transaction ID for a request of connection `id`.
    fn new_tid(&mut self, id: u32) -> u64 {
        self.next_tid = self.next_tid.wrapping_add(1);
        u64::from(self.next_tid) << 32 | u64::from(id)
    }

    /// Whether one more connection or SIDR request fits.
    fn has_room(&self) -> bool {
        self.len() < self.cfg.max_connections
    }

    /// Queues `msg` to `to` in a MAD with Transaction ID `tid`; returns the MAD.
    fn send(&mut self, to: IpAddr, tid: u64, msg: &CmMessage) -> [u8; MAD_LEN] {
        let mad = msg.to_mad(tid);
        self.out.push_back(Transmit { to, mad });
        mad
    }

    /// 2 · packet lifetime + `response` (an exponent): how long to wait for an answer.
    fn wait_for(&self, response: u8) -> Duration {
        2 * cm_timeout(self.cfg.packet_life_time) + cm_timeout(response)
    }
}

/// The Transaction ID and message of a CM MAD, if it is one this CM reads.
fn parse(bytes: &[u8]) -> Option<(u64, CmMessage)> {
    let p = mad::Packet::new_checked(bytes).ok()?;
    let header = MadRepr::parse(&p).ok()?;
    header.check_cm().ok()?;
    let msg = CmMessage::parse(header.attribute_id, p.data()).ok()?;
    Some((header.transaction_id, msg))
}

/// `data` copied into a private data field of `N` bytes, zero-padded.
fn private_data<const N: usize>(data: &[u8]) -> Result<[u8; N], CmError> {
    let mut field = [0u8; N];
    field
        .get_mut(..data.len())
        .ok_or(CmError::PrivateDataTooLong)?
        .copy_from_slice(data);
    Ok(field)
}

/// A REJ answering a message with Local Communication ID `their_id` (ours: `our_id`).
fn rej(our_id: u32, their_id: u32, rejected: u8, reason: u16) -> RejRepr {
    RejRepr {
        local_comm_id: our_id,
        remote_comm_id: their_id,
        message_rejected: rejected,
        reject_info_length: 0,
        reason,
        ari: [0; cm::rej::ARI_LEN],
        private_data: [0; cm::rej::PRIVATE_DATA_LEN],
    }
}

/// A DREQ of connection `c`.
fn dreq(our_id: u32, c: &Conn, private_data: [u8; cm::dreq::PRIVATE_DATA_LEN]) -> DreqRepr {
    DreqRepr {
        local_comm_id: our_id,
        remote_comm_id: c.remote_comm_id,
        remote_qpn_eecn: c.remote_qpn,
        private_data,
    }
}
