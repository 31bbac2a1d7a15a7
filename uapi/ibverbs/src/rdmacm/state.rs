//! The memory behind librdmacm's C objects, and how they mirror softrnic's rdma_cm
//! (`softrnic_uapi::cm`): each C struct comes first (programs read its fields), softrnic's
//! object after it.
//!
//! * [`SoftChannel`]: `struct rdma_event_channel` and its [`EventChannel`] (`fd` is the
//!   channel's eventfd).
//! * [`SoftId`]: `struct rdma_cm_id` and its [`CmId`]. The C fields librdmacm keeps current
//!   (`verbs`, `pd`, `port_num`, the route's addresses and GIDs) are written from the id by
//!   [`SoftId::refresh`] after each call and event. The id's user word holds the `SoftId`'s
//!   address, so an event's id finds its C struct; a connection request's new id gets one
//!   when its event is handed out.
//! * [`SoftEvent`]: `struct rdma_cm_event`, its [`CmEvent`] (dropped at `rdma_ack_cm_event`,
//!   which acknowledges it) and the private data its `param` points to.

use std::net::{IpAddr, SocketAddr};
use std::ptr::null_mut;

use libc::{c_int, c_void, sockaddr, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6};
use softrnic_uapi::cm::{CmEvent, CmId, ConnParam, EventChannel, EventParam, PortSpace, UdParam};
use softrnic_uapi::{Gid, QpType};

use super::abi::*;
use super::source;
use crate::abi::attr::ibv_gid;
use crate::abi::qp_attr::ibv_qp_init_attr;
use crate::abi::qp_attr::{ibv_ah_attr, ibv_global_route};
use crate::live::Live;

/// `struct rdma_event_channel`, then softrnic's channel.
#[repr(C)]
pub(crate) struct SoftChannel {
    pub c: rdma_event_channel,
    pub ch: EventChannel,
}

/// The live channels.
pub(crate) static CHANNELS: Live = Live::new();

impl SoftChannel {
    /// A new C channel for `ch`, registered as live.
    pub fn publish(ch: EventChannel) -> *mut rdma_event_channel {
        let p = Box::into_raw(Box::new(SoftChannel {
            c: rdma_event_channel { fd: ch.fd() },
            ch,
        }));
        CHANNELS.insert(p);
        p.cast()
    }

    /// The channel behind `p`, if it is a live one.
    pub fn of<'a>(p: *const rdma_event_channel) -> Option<&'a SoftChannel> {
        // SAFETY: live channels are SoftChannels, which start with the C struct.
        CHANNELS
            .contains(p)
            .then(|| unsafe { &*p.cast::<SoftChannel>() })
    }

    /// Frees a channel `publish` made.
    ///
    /// # Safety
    /// `p` is live and no one uses it any more.
    pub unsafe fn free(p: *mut rdma_event_channel) {
        if CHANNELS.remove(p) {
            // SAFETY: made by `publish` from a Box.
            drop(unsafe { Box::from_raw(p.cast::<SoftChannel>()) });
        }
    }
}

/// `struct rdma_cm_id`, then softrnic's state.
#[repr(C)]
pub(crate) struct SoftId {
    pub c: rdma_cm_id,
    pub id: CmId,
    /// A synchronous id's own channel (its `c.channel`).
    pub own_channel: bool,
    /// The event a synchronous call left in `c.event`.
    pub event: Option<Box<SoftEvent>>,
    /// What `c.route.path_rec` points to.
    pub path: ibv_sa_path_rec,
    /// An endpoint listener's QP attributes, for the ids `rdma_get_request` hands out.
    pub ep_qp_attr: Option<ibv_qp_init_attr>,
    /// The CQs (and their channels) `rdma_create_qp` made, destroyed with the QP.
    pub own_cqs: bool,
}

/// The live ids.
pub(crate) static IDS: Live = Live::new();

/// One at a time: creating the C id of a connection request, and writing ids' C fields.
static C_SIDE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl SoftId {
    /// A new C id for `id`, reporting to `channel` (a synchronous id's own channel when
    /// NULL), with the application's `context`.
    pub fn publish(
        id: CmId,
        channel: *mut rdma_event_channel,
        context: *mut c_void,
    ) -> *mut rdma_cm_id {
        let (channel, own_channel) = if channel.is_null() {
            (SoftChannel::publish(id.channel()), true)
        } else {
            (channel, false)
        };
        // SAFETY: all-zero is a valid rdma_cm_id (NULL pointers, zero numbers, zeroed
        // unions).
        let mut c: rdma_cm_id = unsafe { std::mem::zeroed() };
        c.channel = channel;
        c.context = context;
        c.ps = id.port_space().value().into();
        c.qp_type = id.qp_type().ibv();
        let p = Box::into_raw(Box::new(SoftId {
            c,
            id,
            own_channel,
            event: None,
            path: ibv_sa_path_rec::default(),
            ep_qp_attr: None,
            own_cqs: false,
        }));
        // SAFETY: just made.
        let soft = unsafe { &mut *p };
        soft.c.route.path_rec = &mut soft.path;
        soft.id.set_user_word(p as usize);
        IDS.insert(p);
        soft.refresh();
        p.cast()
    }

    /// The id behind `p`, if it is a live one.
    #[allow(clippy::mut_from_ref)]
    pub fn of<'a>(p: *const rdma_cm_id) -> Option<&'a mut SoftId> {
        // SAFETY: live ids are SoftIds, which start with the C struct; librdmacm's callers
        // do not use one id from two threads at once, nor do they here.
        IDS.contains(p)
            .then(|| unsafe { &mut *p.cast_mut().cast::<SoftId>() })
    }

    /// The C id of `id`, made now for a connection request's new id (inheriting the
    /// listener's `context`, and its channel unless it is synchronous).
    pub fn of_event(id: &CmId, listen: Option<&CmId>) -> *mut rdma_cm_id {
        let _one = C_SIDE.lock().unwrap_or_else(|p| p.into_inner());
        let w = id.user_word();
        if w != 0 {
            return w as *mut rdma_cm_id;
        }
        let listener = listen.and_then(|l| SoftId::of(l.user_word() as *const rdma_cm_id));
        let (channel, context) = match listener {
            Some(l) if !id.is_sync() => (l.c.channel, l.c.context),
            Some(l) => (null_mut(), l.c.context),
            None => (null_mut(), null_mut()),
        };
        Self::publish(id.clone(), channel, context)
    }

    /// Writes the C fields librdmacm keeps current from the id: the device (`verbs`,
    /// `port_num`, `pd`), the addresses and GIDs, and the path once the route is resolved.
    pub fn refresh(&mut self) {
        let ctx = self.id.context().map(|c| c.local_addr());
        if let Some(ctx) = ctx.and_then(|a| source::context_for(a).ok()) {
            self.c.verbs = ctx;
            self.c.port_num = 1;
            if self.c.pd.is_null() {
                self.c.pd = source::pd_for(ctx);
            }
        }
        let (src, dst) = (self.id.src_addr(), self.id.dst_addr());
        let addr = &mut self.c.route.addr;
        if let Some(s) = src {
            addr.src_addr = to_sockaddr(s);
            addr.addr.ibaddr.sgid = gid(s.ip());
        }
        if let Some(d) = dst {
            addr.dst_addr = to_sockaddr(d);
            addr.addr.ibaddr.dgid = gid(d.ip());
        }
        addr.addr.ibaddr.pkey = 0xffff_u16.to_be();
        if self.id.route_resolved() && self.c.route.num_paths == 0 {
            let ib = self.c.route.addr.addr.ibaddr;
            self.path = ibv_sa_path_rec {
                dgid: ib.dgid,
                sgid: ib.sgid,
                dlid: 0xffff_u16.to_be(),
                slid: 0xffff_u16.to_be(),
                raw_traffic: 0,
                hop_limit: 64,
                reversible: 1,
                numb_path: 1,
                pkey: 0xffff_u16.to_be(),
                mtu_selector: 2,
                mtu: self
                    .id
                    .context()
                    .map_or(3, |c| c.query_port().active_mtu.ibv() as u8),
                rate_selector: 2,
                packet_life_time_selector: 2,
                packet_life_time: 16,
                ..ibv_sa_path_rec::default()
            };
            self.c.route.path_rec = &mut self.path;
            self.c.route.num_paths = 1;
        }
    }

    /// Keeps `event` as the synchronous id's `c.event` (acknowledging the one before).
    pub fn keep_event(&mut self, event: Option<CmEvent>) {
        self.c.event = null_mut();
        self.event = event.map(SoftEvent::new);
        if let Some(e) = self.event.as_mut() {
            self.c.event = &mut e.c;
        }
    }

    /// Keeps the C event `e` as `c.event` (a connection request's, for `rdma_get_request`).
    pub fn keep_soft_event(&mut self, e: Box<SoftEvent>) {
        self.event = Some(e);
        if let Some(e) = self.event.as_mut() {
            self.c.event = &mut e.c;
        }
    }

    /// Frees an id `publish` made (its own channel too).
    ///
    /// # Safety
    /// `p` is live, and no one uses it any more.
    pub unsafe fn free(p: *mut rdma_cm_id) {
        if !IDS.remove(p) {
            return;
        }
        // SAFETY: made by `publish` from a Box.
        let soft = unsafe { Box::from_raw(p.cast::<SoftId>()) };
        if soft.own_channel {
            // SAFETY: the channel was the id's own.
            unsafe { SoftChannel::free(soft.c.channel) };
        }
    }
}

/// `struct rdma_cm_event`, then the event and the private data `param` points to.
#[repr(C)]
pub(crate) struct SoftEvent {
    pub c: rdma_cm_event,
    ev: CmEvent,
    private_data: Vec<u8>,
}

/// The live events.
pub(crate) static EVENTS: Live = Live::new();

impl SoftEvent {
    /// The C event of `ev` (its id's C struct made now for a connection request).
    pub fn new(ev: CmEvent) -> Box<SoftEvent> {
        let id = SoftId::of_event(&ev.id, ev.listen_id.as_ref());
        let listen_id = ev
            .listen_id
            .as_ref()
            .map_or(null_mut(), |l| l.user_word() as *mut rdma_cm_id);
        if let Some(soft) = SoftId::of(id) {
            let _one = C_SIDE.lock().unwrap_or_else(|p| p.into_inner());
            soft.refresh();
        }
        let private_data = match &ev.param {
            EventParam::Conn(p) => p.private_data.clone(),
            EventParam::Ud(p) => p.private_data.clone(),
            EventParam::Multicast { .. } | EventParam::None => Vec::new(),
        };
        // SAFETY: all-zero is a valid rdma_cm_event.
        let mut c: rdma_cm_event = unsafe { std::mem::zeroed() };
        c.id = id;
        c.listen_id = listen_id;
        c.event = ev.event.value();
        c.status = ev.status;
        let mut e = Box::new(SoftEvent {
            c,
            ev,
            private_data,
        });
        let data = if e.private_data.is_empty() {
            std::ptr::null()
        } else {
            e.private_data.as_ptr().cast::<c_void>()
        };
        let len = e.private_data.len().min(255) as u8;
        let ud = |p: &UdParam, data, len| rdma_cm_event_param {
            ud: rdma_ud_param {
                private_data: data,
                private_data_len: len,
                ah_attr: ah_attr_to(p.dest),
                qp_num: p.qp_num,
                qkey: p.qkey,
            },
        };
        e.c.param = match &e.ev.param {
            EventParam::Ud(p) => ud(p, data, len),
            // librdmacm hands the join's context back as the private data.
            EventParam::Multicast { ud: p, context } => ud(p, *context as *const c_void, 0),
            EventParam::Conn(p) => rdma_cm_event_param {
                conn: conn_param(p, data, len),
            },
            EventParam::None => rdma_cm_event_param {
                conn: conn_param(&ConnParam::default(), data, len),
            },
        };
        e
    }

    /// Hands `e` to the application, registered as live.
    pub fn publish(e: Box<SoftEvent>) -> *mut rdma_cm_event {
        let p = Box::into_raw(e);
        EVENTS.insert(p);
        p.cast()
    }

    /// Takes back an event `publish` handed out.
    pub fn take(p: *mut rdma_cm_event) -> Option<Box<SoftEvent>> {
        // SAFETY: live events were made by `publish` from a Box.
        EVENTS
            .remove(p)
            .then(|| unsafe { Box::from_raw(p.cast::<SoftEvent>()) })
    }
}

fn conn_param(p: &ConnParam, data: *const c_void, len: u8) -> rdma_conn_param {
    rdma_conn_param {
        private_data: data,
        private_data_len: len,
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        flow_control: p.flow_control,
        retry_count: p.retry_count,
        rnr_retry_count: p.rnr_retry_count,
        srq: p.srq,
        qp_num: p.qp_num,
    }
}

/// The address vector of a UD peer at `dest`: RoCEv2, the GID is the address; source GID
/// index 1 holds the device's own address.
fn ah_attr_to(dest: IpAddr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: gid(dest),
            flow_label: 0,
            sgid_index: 1,
            hop_limit: 64,
            traffic_class: 0,
        },
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: 1,
    }
}

/// The GID of an address on RoCEv2, as the C struct.
fn gid(ip: IpAddr) -> ibv_gid {
    ibv_gid {
        raw: Gid::from_ip(ip).to_raw(),
    }
}

/// A `struct sockaddr` of the program as an address.
///
/// # Errors
/// `EINVAL` for NULL; `EAFNOSUPPORT` for a family other than `AF_INET` and `AF_INET6`.
pub(crate) fn from_sockaddr(p: *const sockaddr) -> Result<SocketAddr, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the program passes a readable sockaddr; its family says how long it is.
    unsafe {
        match c_int::from((*p).sa_family) {
            AF_INET => {
                let s = &*p.cast::<sockaddr_in>();
                let ip = std::net::Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
                Ok(SocketAddr::new(ip.into(), u16::from_be(s.sin_port)))
            }
            AF_INET6 => {
                let s = &*p.cast::<sockaddr_in6>();
                let ip = std::net::Ipv6Addr::from(s.sin6_addr.s6_addr);
                Ok(SocketAddr::new(ip.into(), u16::from_be(s.sin6_port)))
            }
            _ => Err(libc::EAFNOSUPPORT),
        }
    }
}

/// An address as librdmacm's `struct sockaddr_storage` union.
pub(crate) fn to_sockaddr(a: SocketAddr) -> rdma_sockaddr {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut u: rdma_sockaddr = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: writing the sin member of a zeroed union.
            let sin = unsafe { &mut u.sin };
            sin.sin_family = AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
        }
        SocketAddr::V6(v6) => {
            // SAFETY: writing the sin6 member of a zeroed union.
            let sin6 = unsafe { &mut u.sin6 };
            sin6.sin6_family = AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
        }
    }
    u
}

/// The port space of `ps`.
///
/// # Errors
/// `EINVAL` for a value that is none.
pub(crate) fn port_space(ps: rdma_port_space) -> Result<PortSpace, c_int> {
    u16::try_from(ps)
        .ok()
        .and_then(PortSpace::from_value)
        .ok_or(libc::EINVAL)
}

/// The QP type of `ibv_qp_type` value `t`, for ids.
///
/// # Errors
/// `EINVAL` for a type ids do not take.
pub(crate) fn qp_type(t: c_int) -> Result<QpType, c_int> {
    match t {
        IBV_QPT_RC => Ok(QpType::Rc),
        IBV_QPT_UC => Ok(QpType::Uc),
        IBV_QPT_UD => Ok(QpType::Ud),
        _ => Err(libc::EINVAL),
    }
}
