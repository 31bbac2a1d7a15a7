//! The RDMA connection manager (rdma_cm): connections set up by IP address and port, as
//! rdma-core's librdmacm offers them (`rdma_cma.h`), over the IB CM of IBTA vol. 1 chapter 12
//! carried on RoCEv2 (the sans-IO [`softrnic_provider::cm::Cm`] does the protocol; annex A11
//! gives the IP addressing: Service IDs per port space and the private-data header).
//!
//! * An [`EventChannel`] queues the events of its ids behind a pollable file descriptor
//!   (`rdma_create_event_channel`, `rdma_get_cm_event`); an id created without one is
//!   synchronous: each call waits for its own outcome, as librdmacm's do.
//! * A [`CmId`] is bound to an address ([`CmId::bind_addr`]) or resolves a destination
//!   ([`CmId::resolve_addr`]: a route lookup picks the source address and so the device),
//!   then listens ([`CmId::listen`]) or connects ([`CmId::connect`]). A connection request
//!   arrives as a new id ([`EventType::ConnectRequest`]), which [`CmId::accept`]s or
//!   [`CmId::reject`]s it.
//! * The QP of an id ([`CmId::create_qp`], or [`CmId::attach_qp`] for one made elsewhere) is
//!   moved through INIT, RTR and RTS by the library, from what the REQ and REP exchanged
//!   (the module `exchange`), exactly when librdmacm moves it: INIT at creation, RTR and RTS
//!   before the REP is sent or the RTU is, ERROR at disconnect.
//! * UD ids (port space UDP or IPoIB) resolve the peer's QP with SIDR (12.11), or join
//!   multicast groups ([`CmId::join_multicast`]).
//!
//! Each device's CM runs one thread for the process (`device::DeviceCm`); the host's agent
//! routes the QP1 MADs of its address to the process they are for.

mod channel;
mod device;
mod exchange;
mod id;
mod route;

use std::net::IpAddr;

pub use channel::EventChannel;
pub use id::{CmId, CmOption, JoinKind, MULTICAST_QPN};
pub use softrnic_wire::cm::PortSpace;

use crate::context::Context;

/// `enum rdma_cm_event_type`, with librdmacm's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventType {
    /// `rdma_resolve_addr` found the source address and device.
    AddrResolved = 0,
    /// `rdma_resolve_addr` failed (`status` says why).
    AddrError = 1,
    /// `rdma_resolve_route` is done.
    RouteResolved = 2,
    /// `rdma_resolve_route` failed.
    RouteError = 3,
    /// A REQ (or SIDR_REQ) for a listener: the event's id is the new connection's.
    ConnectRequest = 4,
    /// The REP came for an id without a QP: `rdma_establish` next.
    ConnectResponse = 5,
    /// Setting up the connection failed locally.
    ConnectError = 6,
    /// The peer never answered (`status` -ETIMEDOUT), or SIDR failed (its status).
    Unreachable = 7,
    /// The peer rejected the connection (`status` is the REJ reason).
    Rejected = 8,
    /// The connection is established.
    Established = 9,
    /// The connection was released (DREQ received, or the DREQ sent was answered).
    Disconnected = 10,
    /// The device went away.
    DeviceRemoval = 11,
    /// A multicast join completed.
    MulticastJoin = 12,
    /// A multicast join failed.
    MulticastError = 13,
    /// The address changed.
    AddrChange = 14,
    /// The connection left TimeWait: its QP may be reused.
    TimewaitExit = 15,
}

impl EventType {
    /// The value of `enum rdma_cm_event_type`.
    pub fn value(self) -> u32 {
        self as u32
    }
}

/// `struct rdma_conn_param`: what a side offers when it connects or accepts, and what an
/// event reports of the peer's offer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data (events report the message's whole field, zero-padded).
    pub private_data: Vec<u8>,
    /// RDMA READ / atomic requests this side accepts at once (0xFF: the device's maximum).
    pub responder_resources: u8,
    /// RDMA READ / atomic requests this side issues at once (0xFF: the device's maximum).
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits; 7 = infinite).
    pub rnr_retry_count: u8,
    /// The QP uses an SRQ.
    pub srq: u8,
    /// The QP's number, for an id without a QP of its own.
    pub qp_num: u32,
}

impl ConnParam {
    /// librdmacm's settings when `rdma_connect` or `rdma_accept` get no parameters: as many
    /// READ and atomic resources as the device (and, accepting, the peer) allows, and 7
    /// retries of each kind.
    pub fn none() -> ConnParam {
        ConnParam {
            responder_resources: 0xff,
            initiator_depth: 0xff,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnParam::default()
        }
    }
}

/// `struct rdma_ud_param`: the peer of a UD id, as SIDR found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdParam {
    /// Private data of the SIDR message.
    pub private_data: Vec<u8>,
    /// The peer's address (the address vector's GID).
    pub dest: IpAddr,
    /// The peer's QP number (0 in a request).
    pub qp_num: u32,
    /// The peer's Q_Key.
    pub qkey: u32,
}

/// What an event says beyond its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventParam {
    /// Nothing more.
    None,
    /// A connected id's.
    Conn(ConnParam),
    /// A UD id's.
    Ud(UdParam),
    /// A multicast join's: the group's address vector, QPN and Q_Key, and the context the
    /// join was given.
    Multicast {
        /// The group as a UD peer.
        ud: UdParam,
        /// The join's context.
        context: usize,
    },
}

/// `struct rdma_cm_event`. Dropping it acknowledges it (`rdma_ack_cm_event`): destroying an
/// id waits until each of its events is acknowledged.
#[derive(Debug)]
pub struct CmEvent {
    /// The id the event is about (for a connection request, the new one).
    pub id: CmId,
    /// For a connection request, the listening id.
    pub listen_id: Option<CmId>,
    /// What happened.
    pub event: EventType,
    /// 0, a negative errno, or (for [`EventType::Rejected`]) the REJ reason.
    pub status: i32,
    /// The peer's offer, for connection events.
    pub param: EventParam,
    /// Acknowledges the event when dropped.
    _ack: id::Unacked,
}

/// Where ids find devices: by address, and which devices a wildcard address covers.
/// softrnic's `librdmacm.so.1` sets its own (its contexts, `SOFTRNIC_ADDR`).
pub trait DeviceSource: Send + Sync {
    /// Opens (or shares) the device of local address `addr`.
    ///
    /// # Errors
    /// The address is not local, or the device cannot start.
    fn open(&self, addr: IpAddr) -> std::io::Result<Context>;
    /// The address of the device a route lookup's source address `routed` leaves from (the
    /// device on `routed`'s interface), or `None` if no device is there.
    fn device_for(&self, routed: IpAddr) -> Option<IpAddr>;
    /// The devices a wildcard bind covers.
    fn addresses(&self) -> Vec<IpAddr>;
}

/// The default: a device on every address of every interface.
struct EveryAddress;

impl DeviceSource for EveryAddress {
    fn open(&self, addr: IpAddr) -> std::io::Result<Context> {
        Context::open(addr, crate::OpenOptions::default())
    }
    fn device_for(&self, routed: IpAddr) -> Option<IpAddr> {
        Some(routed)
    }
    fn addresses(&self) -> Vec<IpAddr> {
        route::local_addresses()
    }
}

static SOURCE: std::sync::OnceLock<Box<dyn DeviceSource>> = std::sync::OnceLock::new();

/// Makes `source` the process's device source, unless one was set or used already (then
/// `false`).
pub fn set_device_source(source: Box<dyn DeviceSource>) -> bool {
    SOURCE.set(source).is_ok()
}

/// The process's device source.
fn source() -> &'static dyn DeviceSource {
    SOURCE.get_or_init(|| Box::new(EveryAddress)).as_ref()
}

#[cfg(test)]
mod tests;
