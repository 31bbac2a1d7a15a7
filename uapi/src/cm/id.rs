//! rdma_cm ids (`struct rdma_cm_id`): what each call does and which event follows, as
//! rdma-core 44's librdmacm and the kernel's `cma.c` give them.
//!
//! | call | then |
//! |------|------|
//! | [`CmId::resolve_addr`] | `ADDR_RESOLVED` (or `ADDR_ERROR`) |
//! | [`CmId::resolve_route`] | `ROUTE_RESOLVED` |
//! | [`CmId::connect`] | REQ; at the REP, the QP to RTR and RTS, RTU, `ESTABLISHED` (`CONNECT_RESPONSE` without a QP); or `REJECTED` / `UNREACHABLE` |
//! | [`CmId::listen`] | at each REQ, `CONNECT_REQUEST` with a new id |
//! | [`CmId::accept`] | the QP to RTR and RTS, REP; at the RTU, `ESTABLISHED` |
//! | [`CmId::disconnect`] | the QP to ERROR, DREQ (or the DREP of the peer's); `DISCONNECTED` |
//!
//! UD ids connect with SIDR instead: `ESTABLISHED` carries the peer's QPN and Q_Key. An id
//! without an event channel is synchronous: each call waits for its event and fails with
//! the event's status.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use softrnic_provider::cm::ConnId;
use softrnic_provider::qp::QpAttr;
use softrnic_provider::qp_state::{AttrMask, Mtu, QpState, QpType};
use softrnic_wire::cm::rej::{REASON_CONSUMER_DEFINED, REASON_INVALID_SERVICE_ID};
use softrnic_wire::cm::sidr_rep::{STATUS_OK, STATUS_REJECTED};
use softrnic_wire::cm::{self as wcm, IpHeader, PortSpace, RejRepr, RepRepr, ReqRepr};
use softrnic_wire::cm::{SidrRepRepr, SidrReqRepr};

use super::channel::EventChannel;
use super::device::{DeviceCm, MAX_BACKLOG};
use super::exchange::{self as x, Exchange, ReqInput};
use super::{route, CmEvent, ConnParam, EventParam, EventType, UdParam};
use crate::context::{Context, Pd};
use crate::qp::{QpHandle, QpInitAttr, QpObserver, QueuePair};

mod multicast;

pub use multicast::{JoinKind, MULTICAST_QPN};

/// `rdma_set_option`'s options (level `RDMA_OPTION_ID` and `RDMA_OPTION_IB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmOption {
    /// `RDMA_OPTION_ID_TOS`: the traffic class of the connection's path.
    Tos(u8),
    /// `RDMA_OPTION_ID_REUSEADDR`.
    ReuseAddr(bool),
    /// `RDMA_OPTION_ID_AFONLY`: an IPv6 wildcard does not cover IPv4.
    AfOnly(bool),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's ACK timeout (exponent).
    AckTimeout(u8),
}

/// An rdma_cm id. Cheap to clone: the clones are the same id, which lives until
/// [`CmId::destroy`].
#[derive(Clone)]
pub struct CmId {
    pub(crate) inner: Arc<IdInner>,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.st();
        write!(f, "CmId({:?} -> {:?})", st.src, st.dst)
    }
}

pub(crate) struct IdInner {
    ps: PortSpace,
    qp_type: QpType,
    /// A synchronous id: its channel is its own, and each call waits for its event.
    sync: Mutex<bool>,
    channel: Mutex<EventChannel>,
    st: Mutex<IdState>,
    /// Events handed out about this id (or, for a listener, its connection requests) and
    /// not acknowledged yet.
    unacked: Mutex<usize>,
    acked: Condvar,
    /// A word the id's owner keeps with it (softrnic's librdmacm: the address of its
    /// `struct rdma_cm_id`).
    user: AtomicUsize,
}

#[derive(Default)]
struct IdState {
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
    device: Option<Arc<DeviceCm>>,
    addr_resolved: bool,
    route_resolved: bool,
    /// The Service IDs listened on, per device.
    listening: Vec<(Arc<DeviceCm>, u64)>,
    /// The connection (or SIDR request) on `device`.
    conn: Option<ConnId>,
    /// The REQ a passive id answers.
    req: Option<ReqRepr>,
    /// The offer this side made (active side).
    offer: Option<ConnParam>,
    /// This side's starting PSN.
    own_psn: u32,
    /// What the REQ and REP agreed.
    exchange: Option<Exchange>,
    qp: Option<QpHandle>,
    tos: u8,
    ack_timeout: Option<u8>,
    reuseaddr: bool,
    afonly: bool,
    /// `DISCONNECTED` was reported (it is reported once).
    disconnected: bool,
    destroyed: bool,
    /// A synchronous id's last event (librdmacm's `id->event`), until the next call.
    event: Option<CmEvent>,
    /// The multicast groups joined.
    groups: Vec<multicast::Membership>,
}

/// An event not acknowledged yet: dropping it acknowledges it.
pub(crate) struct Unacked(Arc<IdInner>);

impl std::fmt::Debug for Unacked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Unacked")
    }
}

impl Drop for Unacked {
    fn drop(&mut self) {
        let mut n = lock(&self.0.unacked);
        *n = n.saturating_sub(1);
        self.0.acked.notify_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn einval() -> io::Error {
    errno(libc::EINVAL)
}

/// The errno of a provider error.
fn os(e: softrnic_provider::Error) -> io::Error {
    errno(e.errno())
}

impl CmId {
    /// `rdma_create_id`: an id of port space `ps` (RC for TCP and IB, UD for UDP and IPoIB),
    /// reporting to `channel`, or synchronous without one.
    ///
    /// # Errors
    /// Making a synchronous id's own channel.
    pub fn new(channel: Option<&EventChannel>, ps: PortSpace) -> io::Result<CmId> {
        let qp_type = match ps {
            PortSpace::Udp | PortSpace::Ipoib => QpType::Ud,
            PortSpace::Tcp | PortSpace::Ib => QpType::Rc,
        };
        CmId::with_qp_type(channel, ps, qp_type)
    }

    /// `rdma_create_id2`-like: an id with its QP type given.
    ///
    /// # Errors
    /// Making a synchronous id's own channel.
    pub fn with_qp_type(
        channel: Option<&EventChannel>,
        ps: PortSpace,
        qp_type: QpType,
    ) -> io::Result<CmId> {
        let (channel, sync) = match channel {
            Some(c) => (c.clone(), false),
            None => (EventChannel::new()?, true),
        };
        Ok(CmId {
            inner: Arc::new(IdInner::new(ps, qp_type, channel, sync, IdState::default())),
        })
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        self.inner.ps
    }

    /// The QP type.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }

    /// The event channel (a synchronous id's own).
    pub fn channel(&self) -> EventChannel {
        lock(&self.inner.channel).clone()
    }

    /// Whether the id is synchronous.
    pub fn is_sync(&self) -> bool {
        *lock(&self.inner.sync)
    }

    /// The source address (`rdma_get_local_addr`), once bound or resolved.
    pub fn src_addr(&self) -> Option<SocketAddr> {
        self.inner.st().src
    }

    /// The destination address (`rdma_get_peer_addr`), once resolved or connected.
    pub fn dst_addr(&self) -> Option<SocketAddr> {
        self.inner.st().dst
    }

    /// The device (`id->verbs`), once the id is bound to one.
    pub fn context(&self) -> Option<Context> {
        self.inner.st().device.as_ref().map(|d| d.ctx.clone())
    }

    /// The QP number of the id's QP.
    pub fn qp_num(&self) -> Option<u32> {
        self.inner.st().qp.as_ref().map(QpHandle::qp_num)
    }

    /// The word the id's owner keeps with it (0 until set).
    pub fn user_word(&self) -> usize {
        self.inner.user.load(Ordering::Acquire)
    }

    /// Sets the word the id's owner keeps with it.
    pub fn set_user_word(&self, word: usize) {
        self.inner.user.store(word, Ordering::Release);
    }

    /// Whether the id's address and route are resolved (a connection request's id is born
    /// so).
    pub fn route_resolved(&self) -> bool {
        self.inner.st().route_resolved
    }

    /// Whether `self` and `other` are the same id.
    pub fn same(&self, other: &CmId) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A synchronous id's last event (librdmacm's `id->event`): what the last call waited
    /// for, with the peer's private data. Taking it acknowledges it when dropped.
    pub fn take_event(&self) -> Option<CmEvent> {
        self.inner.st().event.take()
    }

    /// `rdma_bind_addr`: the local address (a wildcard one binds to no device yet), and port
    /// (0: an ephemeral one).
    ///
    /// # Errors
    /// `EINVAL` if bound already; the device's errors for an address that is not local.
    pub fn bind_addr(&self, addr: SocketAddr) -> io::Result<()> {
        let device = if addr.ip().is_unspecified() {
            None
        } else {
            Some(DeviceCm::get(addr.ip())?)
        };
        let mut st = self.inner.st();
        if st.src.is_some() {
            return Err(einval());
        }
        let port = match addr.port() {
            0 => route::ephemeral_port(),
            p => p,
        };
        st.src = Some(route::with_port(addr, port));
        if device.is_some() {
            st.device = device;
        }
        Ok(())
    }

    /// `rdma_resolve_addr`: binds to `src` if given, else (if not bound to a device) to the
    /// address a route lookup for `dst` picks; then `ADDR_RESOLVED`, or `ADDR_ERROR` with
    /// the lookup's error. `timeout` is unused: resolution is local.
    ///
    /// # Errors
    /// `EINVAL` if resolved already; for a synchronous id, the event's error.
    pub fn resolve_addr(
        &self,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout: Duration,
    ) -> io::Result<()> {
        let _ = timeout;
        if self.inner.st().addr_resolved {
            return Err(einval());
        }
        if let Some(s) = src {
            if self.inner.st().src.is_none() {
                self.bind_addr(s)?;
            }
        }
        let status = match self.resolve_source(dst) {
            Ok(()) => 0,
            Err(e) => -e.raw_os_error().unwrap_or(libc::EADDRNOTAVAIL),
        };
        let event = if status == 0 {
            let mut st = self.inner.st();
            st.dst = Some(dst);
            st.addr_resolved = true;
            EventType::AddrResolved
        } else {
            EventType::AddrError
        };
        self.inner.post(event, status, EventParam::None, None);
        self.complete()
    }

    fn resolve_source(&self, dst: SocketAddr) -> io::Result<()> {
        if self.inner.st().device.is_some() {
            return Ok(());
        }
        let routed = route::source_for(dst.ip())?;
        let ip = super::source()
            .device_for(routed)
            .ok_or_else(|| errno(libc::EADDRNOTAVAIL))?;
        let device = DeviceCm::get(ip)?;
        let mut st = self.inner.st();
        let port = st
            .src
            .map(|s| s.port())
            .unwrap_or_else(route::ephemeral_port);
        st.src = Some(SocketAddr::new(ip, port));
        st.device = Some(device);
        Ok(())
    }

    /// `rdma_resolve_route`: on RoCE the path is the device's own, so `ROUTE_RESOLVED` at
    /// once.
    ///
    /// # Errors
    /// `EINVAL` before the address is resolved; for a synchronous id, the event's error.
    pub fn resolve_route(&self, timeout: Duration) -> io::Result<()> {
        let _ = timeout;
        {
            let mut st = self.inner.st();
            if !st.addr_resolved {
                return Err(einval());
            }
            st.route_resolved = true;
        }
        self.inner
            .post(EventType::RouteResolved, 0, EventParam::None, None);
        self.complete()
    }

    /// `rdma_set_option`.
    ///
    /// # Errors
    /// `EINVAL`: REUSEADDR or AFONLY after binding.
    pub fn set_option(&self, opt: CmOption) -> io::Result<()> {
        let mut st = self.inner.st();
        match opt {
            CmOption::Tos(t) => st.tos = t,
            CmOption::AckTimeout(t) => st.ack_timeout = Some(t.min(31)),
            CmOption::ReuseAddr(_) | CmOption::AfOnly(_) if st.src.is_some() => {
                return Err(einval())
            }
            CmOption::ReuseAddr(r) => st.reuseaddr = r,
            CmOption::AfOnly(a) => st.afonly = a,
        }
        Ok(())
    }

    /// `rdma_listen`: listens on the bound address (binding to an IPv4 wildcard and an
    /// ephemeral port first if not bound), on every device a wildcard covers. `backlog` 0 or
    /// less means the most.
    ///
    /// # Errors
    /// `EADDRINUSE` if another id, here or in another process, listens on the address's
    /// port; `EINVAL` if connected; the device's errors.
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        if self.inner.st().src.is_none() {
            self.bind_addr(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0))?;
        }
        let (src, afonly) = {
            let st = self.inner.st();
            if st.conn.is_some() || !st.listening.is_empty() {
                return Err(einval());
            }
            (st.src.ok_or_else(einval)?, st.afonly)
        };
        let backlog = match usize::try_from(backlog) {
            Ok(b) if (1..=MAX_BACKLOG).contains(&b) => b,
            _ => MAX_BACKLOG,
        };
        let addrs: Vec<IpAddr> = if src.ip().is_unspecified() {
            super::source()
                .addresses()
                .into_iter()
                .filter(|a| a.is_ipv4() == src.is_ipv4() || (src.is_ipv6() && !afonly))
                .collect()
        } else {
            vec![src.ip()]
        };
        let service = self.inner.ps.service_id(src.port());
        let mut listening: Vec<(Arc<DeviceCm>, u64)> = Vec::new();
        for a in addrs {
            let d = DeviceCm::get(a)?;
            if let Err(e) = d.listen(service, backlog, &self.inner) {
                for (d, s) in &listening {
                    d.unlisten(*s);
                }
                return Err(e);
            }
            listening.push((d, service));
        }
        self.inner.st().listening = listening;
        Ok(())
    }

    /// `rdma_get_request`: the next connection request of a synchronous listener.
    ///
    /// # Errors
    /// `EINVAL` for an id that is not a synchronous listener.
    pub fn get_request(&self) -> io::Result<CmEvent> {
        if !self.is_sync() || self.inner.st().listening.is_empty() {
            return Err(einval());
        }
        loop {
            let e = self.channel().get_event()?;
            if e.event == EventType::ConnectRequest {
                return Ok(e);
            }
        }
    }

    /// `rdma_create_qp`: a QP of `init` on `pd` (of the id's device) for this id, moved to
    /// INIT (UD QPs on to RTS: they need no peer).
    ///
    /// # Errors
    /// `EINVAL` before the id has a device, or for a PD of another device; `ibv_create_qp`'s.
    pub fn create_qp(&self, pd: &Pd, init: &QpInitAttr<'_>) -> io::Result<QueuePair> {
        let same = self
            .context()
            .is_some_and(|c| Arc::ptr_eq(&c.inner.shared, &pd.context().inner.shared));
        if !same {
            return Err(einval());
        }
        let qp = pd.create_qp(init).map_err(os)?;
        self.attach_qp(&qp)?;
        Ok(qp)
    }

    /// Makes `qp` the id's QP (`id->qp`), moved to INIT (UD: to RTS), as
    /// [`CmId::create_qp`] does for the QPs it makes.
    ///
    /// # Errors
    /// `EINVAL` if the id has a QP already or the QP's type is not the id's; the
    /// transitions'.
    pub fn attach_qp(&self, qp: &QueuePair) -> io::Result<()> {
        self.attach_qp_observed(qp, None)
    }

    /// [`CmId::attach_qp`], with `observer` told of each change the id makes to the QP.
    ///
    /// # Errors
    /// As [`CmId::attach_qp`].
    pub fn attach_qp_observed(
        &self,
        qp: &QueuePair,
        observer: Option<QpObserver>,
    ) -> io::Result<()> {
        let h = qp.handle().observed(observer);
        let mut st = self.inner.st();
        if st.qp.is_some() || h.qp_type() != self.inner.qp_type {
            return Err(einval());
        }
        let steps: &[QpState] = if self.inner.qp_type == QpType::Ud {
            &[QpState::Init, QpState::Rtr, QpState::Rts]
        } else {
            &[QpState::Init]
        };
        for s in steps {
            let (a, m) = self.inner.qp_attr_locked(&st, *s)?;
            h.modify(&a, m).map_err(os)?;
        }
        st.qp = Some(h);
        Ok(())
    }

    /// Forgets the id's QP (`rdma_destroy_qp`; the QP's owner destroys it).
    pub fn detach_qp(&self) {
        self.inner.st().qp = None;
    }

    /// `rdma_init_qp_attr`: the attributes that move a QP to `state` for this id.
    ///
    /// # Errors
    /// `EINVAL` for RTR or RTS before the connection's parameters are known.
    pub fn init_qp_attr(&self, state: QpState) -> io::Result<(QpAttr, AttrMask)> {
        let st = self.inner.st();
        self.inner.qp_attr_locked(&st, state)
    }

    /// `rdma_connect`: REQ (SIDR_REQ for UD) to the resolved destination, with at most 56
    /// (UD: 180) bytes of private data.
    ///
    /// # Errors
    /// `EINVAL` before the route is resolved, when connected already, or for too much
    /// private data; for a synchronous id, `ECONNREFUSED` if rejected, `ETIMEDOUT` if
    /// unreachable.
    pub fn connect(&self, param: &ConnParam) -> io::Result<()> {
        let mut st = self.inner.st();
        let (Some(device), Some(src), Some(dst)) = (st.device.clone(), st.src, st.dst) else {
            return Err(einval());
        };
        if !st.route_resolved || st.conn.is_some() {
            return Err(einval());
        }
        if self.inner.qp_type == QpType::Ud {
            let mut req = SidrReqRepr::zeroed();
            req.service_id = self.inner.ps.service_id(dst.port());
            req.partition_key = 0xffff;
            req.private_data = x::with_header(src, dst, &param.private_data).map_err(errno)?;
            let every = softrnic_provider::cm::cm_timeout(x::CM_RESPONSE_TIMEOUT);
            let conn = device
                .start_conn(&self.inner, |cm, now| {
                    cm.sidr_request(now, dst.ip(), req, every, x::MAX_CM_RETRIES)
                })
                .map_err(|e| errno(e.errno()))?;
            st.conn = Some(conn);
            drop(st);
            return self.complete();
        }
        let (max_resp, max_init) = device.max_resources();
        let offer = ConnParam {
            responder_resources: x::clamp_resources(param.responder_resources, max_resp),
            initiator_depth: x::clamp_resources(param.initiator_depth, max_init),
            ..param.clone()
        };
        let qpn = st.qp.as_ref().map_or(param.qp_num, QpHandle::qp_num);
        let psn = x::random_psn();
        let req = x::build_req(&ReqInput {
            src,
            dst,
            ps: self.inner.ps,
            qpn,
            psn,
            mtu: device.ctx.query_port().active_mtu,
            param: &offer,
            uc: self.inner.qp_type == QpType::Uc,
            tos: st.tos,
            ack_timeout: st.ack_timeout.unwrap_or(x::DEFAULT_ACK_TIMEOUT),
        })
        .map_err(errno)?;
        let conn = device
            .start_conn(&self.inner, |cm, now| cm.connect(now, dst.ip(), req))
            .map_err(|e| errno(e.errno()))?;
        st.conn = Some(conn);
        st.own_psn = psn;
        st.offer = Some(offer);
        drop(st);
        self.complete()
    }

    /// `rdma_accept`: answers the connection request this id was made for. RC: the QP to
    /// RTR and RTS, then the REP with at most 196 bytes of private data; UD: the SIDR_REP.
    /// `None` offers librdmacm's defaults.
    ///
    /// # Errors
    /// `EINVAL` for an id with no request to answer, or too much private data; the QP's
    /// transitions'; for a synchronous RC id, the error of the `ESTABLISHED` wait.
    pub fn accept(&self, param: Option<&ConnParam>) -> io::Result<()> {
        let none = ConnParam::none();
        let param = param.unwrap_or(&none);
        let mut st = self.inner.st();
        let (Some(device), Some(conn)) = (st.device.clone(), st.conn) else {
            return Err(einval());
        };
        if self.inner.qp_type == QpType::Ud {
            let mut rep = SidrRepRepr::zeroed();
            rep.status = STATUS_OK;
            rep.qpn = st.qp.as_ref().map_or(param.qp_num, QpHandle::qp_num);
            rep.service_id = self.inner.ps.service_id(st.src.map_or(0, |s| s.port()));
            rep.q_key = x::UDP_QKEY;
            rep.private_data = x::field(&param.private_data).map_err(errno)?;
            return device
                .with(|cm, now| cm.sidr_reply(now, conn, rep))
                .map_err(|e| errno(e.errno()));
        }
        let Some(req) = st.req else {
            return Err(einval());
        };
        let (max_resp, max_init) = device.max_resources();
        let ours = ConnParam {
            responder_resources: x::clamp_resources(
                param.responder_resources,
                max_resp.min(req.initiator_depth),
            ),
            initiator_depth: x::clamp_resources(
                param.initiator_depth,
                max_init.min(req.responder_resources),
            ),
            ..param.clone()
        };
        let psn = x::random_psn();
        let port_mtu = device.ctx.query_port().active_mtu;
        let req_mtu = Mtu::from_ibv(u32::from(req.path_mtu)).unwrap_or(Mtu::Mtu1024);
        let exchange = Exchange {
            peer: st.dst.map_or(device.addr, |d| d.ip()),
            remote_qpn: req.local_qpn,
            rq_psn: psn,
            sq_psn: req.starting_psn.value(),
            path_mtu: req_mtu.min(port_mtu),
            responder_resources: ours.responder_resources,
            initiator_depth: ours.initiator_depth,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            ack_timeout: st
                .ack_timeout
                .unwrap_or(match req.primary_path.local_ack_timeout {
                    0 => x::DEFAULT_ACK_TIMEOUT,
                    t => t,
                }),
        };
        let qpn = st.qp.as_ref().map_or(param.qp_num, QpHandle::qp_num);
        let ack_delay = device.ctx.query_device().local_ca_ack_delay;
        let rep = x::build_rep(qpn, psn, &ours, ack_delay).map_err(errno)?;
        st.own_psn = psn;
        st.exchange = Some(exchange);
        if let Some(qp) = st.qp.clone() {
            self.inner.ready_qp(&st, &qp)?;
        }
        device
            .with(|cm, now| cm.accept(now, conn, rep))
            .map_err(|e| errno(e.errno()))?;
        drop(st);
        self.complete()
    }

    /// `rdma_reject`: rejects the connection request this id was made for (REJ reason 28,
    /// consumer defined, with at most 148 bytes of private data; UD: SIDR_REP status 2).
    ///
    /// # Errors
    /// `EINVAL` for an id with no request to answer, or too much private data.
    pub fn reject(&self, private_data: &[u8]) -> io::Result<()> {
        let st = self.inner.st();
        let (Some(device), Some(conn)) = (st.device.clone(), st.conn) else {
            return Err(einval());
        };
        drop(st);
        if self.inner.qp_type == QpType::Ud {
            let mut rep = SidrRepRepr::zeroed();
            rep.status = STATUS_REJECTED;
            rep.private_data = x::field(private_data).map_err(errno)?;
            return device
                .with(|cm, now| cm.sidr_reply(now, conn, rep))
                .map_err(|e| errno(e.errno()));
        }
        device
            .with(|cm, _| cm.reject(conn, REASON_CONSUMER_DEFINED, &[], private_data))
            .map_err(|e| errno(e.errno()))
    }

    /// `rdma_establish`: after `CONNECT_RESPONSE` (an id that had no QP at the REP), the QP
    /// to RTR and RTS if it has one now, and the RTU.
    ///
    /// # Errors
    /// `EINVAL` if no REP is waiting for this; the transitions'.
    pub fn establish(&self) -> io::Result<()> {
        let st = self.inner.st();
        let (Some(device), Some(conn)) = (st.device.clone(), st.conn) else {
            return Err(einval());
        };
        if let Some(qp) = st.qp.clone() {
            self.inner.ready_qp(&st, &qp)?;
        }
        drop(st);
        device
            .with(|cm, _| cm.ready_to_use(conn, &[]))
            .map_err(|e| errno(e.errno()))
    }

    /// `rdma_disconnect`: the QP to ERROR (its work requests flush), then the DREQ, or the
    /// DREP if the peer's DREQ came first. A synchronous id then waits for its next event,
    /// as librdmacm's does: `DISCONNECTED` at the DREP (or when the DREQ was never
    /// answered), or at once when the peer's DREQ came first and the program left its
    /// `DISCONNECTED` queued.
    ///
    /// # Errors
    /// `EINVAL` if the id is not connected (or disconnected already).
    pub fn disconnect(&self) -> io::Result<()> {
        let st = self.inner.st();
        let (Some(device), Some(conn)) = (st.device.clone(), st.conn) else {
            return Err(einval());
        };
        if let Some(qp) = &st.qp {
            let err = QpAttr {
                qp_state: QpState::Err,
                ..QpAttr::default()
            };
            let _ = qp.modify(&err, AttrMask::STATE);
        }
        drop(st);
        device
            .with(|cm, now| cm.disconnect(now, conn, &[]))
            .map_err(|e| errno(e.errno()))?;
        self.complete()
    }

    /// `rdma_notify`: nothing to do (the QP reports its own first packet).
    pub fn notify(&self) {}

    /// `rdma_migrate_id`: reports to `channel` from now on (`None`: synchronous), taking its
    /// queued events along.
    ///
    /// # Errors
    /// Making a synchronous id's own channel.
    pub fn migrate(&self, channel: Option<&EventChannel>) -> io::Result<()> {
        let (new, sync) = match channel {
            Some(c) => (c.clone(), false),
            None => (EventChannel::new()?, true),
        };
        let mut ch = lock(&self.inner.channel);
        let moved = ch.inner.withdraw(&self.inner);
        for e in moved {
            new.inner.push(e);
        }
        *ch = new;
        *lock(&self.inner.sync) = sync;
        Ok(())
    }

    /// `rdma_destroy_id`: stops listening, ends the connection as the peer expects (REJ,
    /// DREQ or DREP), drops the id's queued events and waits until every event handed out
    /// about it was acknowledged.
    pub fn destroy(self) {
        let inner = self.inner;
        let (listening, conn, event) = {
            let mut st = inner.st();
            st.destroyed = true;
            st.qp = None;
            let conn = st.conn.take().zip(st.device.clone());
            (std::mem::take(&mut st.listening), conn, st.event.take())
        };
        drop(event);
        for (d, s) in &listening {
            d.unlisten(*s);
        }
        if let Some((conn, d)) = conn {
            d.unroute(conn);
            let _ = d.with(|cm, now| cm.destroy(now, conn));
        }
        let ch = lock(&inner.channel).clone();
        let withdrawn = ch.inner.withdraw(&inner);
        for e in withdrawn {
            // A request nobody took: its new id goes too.
            if e.listen_id
                .as_ref()
                .is_some_and(|l| Arc::ptr_eq(&l.inner, &inner))
            {
                let child = e.id.clone();
                drop(e);
                child.destroy();
            }
        }
        let mut n = lock(&inner.unacked);
        while *n > 0 {
            n = inner.acked.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A synchronous id waits for its event and fails with its status; others return.
    fn complete(&self) -> io::Result<()> {
        if !self.is_sync() {
            return Ok(());
        }
        drop(self.inner.st().event.take());
        let e = self.channel().get_event()?;
        let (kind, status) = (e.event, e.status);
        self.inner.st().event = Some(e);
        match (kind, status) {
            (_, 0) => Ok(()),
            (EventType::Rejected, _) => Err(errno(libc::ECONNREFUSED)),
            (_, s) if s < 0 => Err(errno(-s)),
            (_, s) => Err(errno(s)),
        }
    }
}

impl IdInner {
    /// An id's state and channel, with no event handed out yet.
    fn new(
        ps: PortSpace,
        qp_type: QpType,
        channel: EventChannel,
        sync: bool,
        st: IdState,
    ) -> IdInner {
        IdInner {
            ps,
            qp_type,
            sync: Mutex::new(sync),
            channel: Mutex::new(channel),
            st: Mutex::new(st),
            unacked: Mutex::new(0),
            acked: Condvar::new(),
            user: AtomicUsize::new(0),
        }
    }

    fn st(&self) -> MutexGuard<'_, IdState> {
        lock(&self.st)
    }

    /// Queues an event about this id on its channel (a connection request's on the
    /// listener's), unless the id is being destroyed.
    fn post(
        self: &Arc<Self>,
        event: EventType,
        status: i32,
        param: EventParam,
        listener: Option<&Arc<IdInner>>,
    ) {
        let owner = listener.unwrap_or(self);
        if owner.st().destroyed {
            return;
        }
        *lock(&owner.unacked) += 1;
        let e = CmEvent {
            id: CmId {
                inner: self.clone(),
            },
            listen_id: listener.map(|l| CmId { inner: l.clone() }),
            event,
            status,
            param,
            _ack: Unacked(owner.clone()),
        };
        let ch = lock(&owner.channel).clone();
        ch.inner.push(e);
    }

    fn qp_attr_locked(&self, st: &IdState, state: QpState) -> io::Result<(QpAttr, AttrMask)> {
        let qkey = (self.qp_type == QpType::Ud).then_some(x::UDP_QKEY);
        x::qp_attr(state, st.exchange.as_ref(), qkey).map_err(errno)
    }

    /// The QP to RTR and RTS from the exchange (INIT again first, for its access flags).
    fn ready_qp(&self, st: &IdState, qp: &QpHandle) -> io::Result<()> {
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            if s == QpState::Init && qp.state() != QpState::Init {
                continue;
            }
            let (a, m) = self.qp_attr_locked(st, s)?;
            qp.modify(&a, m).map_err(os)?;
        }
        Ok(())
    }

    /// A REQ for `listener`: a new id for the connection, reported to the listener.
    pub(crate) fn on_request(
        listener: &Arc<IdInner>,
        device: &Arc<DeviceCm>,
        conn: ConnId,
        from: IpAddr,
        req: ReqRepr,
    ) {
        let bound = listener.st().src;
        let header = IpHeader::parse(&req.private_data).ok();
        let transport_ok = match listener.qp_type {
            QpType::Uc => req.transport_service_type == wcm::TRANSPORT_UC,
            _ => req.transport_service_type == wcm::TRANSPORT_RC,
        };
        let for_us =
            |h: &IpHeader| bound.is_some_and(|b| b.ip().is_unspecified() || b.ip() == h.dst);
        let (Some(h), true) = (header, transport_ok) else {
            let _ = device.with(|cm, _| cm.reject(conn, REASON_CONSUMER_DEFINED, &[], &[]));
            return;
        };
        if !for_us(&h) {
            let _ = device.with(|cm, _| cm.reject(conn, REASON_INVALID_SERVICE_ID, &[], &[]));
            return;
        }
        let Ok(child) = IdInner::child(listener, device, conn, from, &h) else {
            let _ = device.with(|cm, now| cm.destroy(now, conn));
            return;
        };
        child.st().req = Some(req);
        let offer = x::offer_of_req(&req);
        child.post(
            EventType::ConnectRequest,
            0,
            EventParam::Conn(offer),
            Some(listener),
        );
    }

    /// A SIDR_REQ for `listener`: a new UD id, reported to the listener.
    pub(crate) fn on_sidr_request(
        listener: &Arc<IdInner>,
        device: &Arc<DeviceCm>,
        conn: ConnId,
        from: IpAddr,
        req: SidrReqRepr,
    ) {
        let reply = |status| {
            let mut rep = SidrRepRepr::zeroed();
            rep.status = status;
            let _ = device.with(|cm, now| cm.sidr_reply(now, conn, rep));
        };
        let Ok(h) = IpHeader::parse(&req.private_data) else {
            return reply(STATUS_REJECTED);
        };
        let Ok(child) = IdInner::child(listener, device, conn, from, &h) else {
            return reply(STATUS_REJECTED);
        };
        let param = UdParam {
            private_data: req.private_data[wcm::ip_service::HEADER_LEN..].to_vec(),
            dest: from,
            qp_num: 0,
            qkey: 0,
        };
        child.post(
            EventType::ConnectRequest,
            0,
            EventParam::Ud(param),
            Some(listener),
        );
    }

    /// The id of a request to `listener` on `device`, from `from` with the IP header `h`,
    /// routed the events of `conn`: it reports to the listener's channel, or (for a
    /// synchronous listener) a channel of its own, and takes the listener's options.
    fn child(
        listener: &Arc<IdInner>,
        device: &Arc<DeviceCm>,
        conn: ConnId,
        from: IpAddr,
        h: &IpHeader,
    ) -> io::Result<Arc<IdInner>> {
        let sync = *lock(&listener.sync);
        let channel = if sync {
            EventChannel::new()?
        } else {
            lock(&listener.channel).clone()
        };
        let st = {
            let l = listener.st();
            IdState {
                src: Some(SocketAddr::new(h.dst, l.src.map_or(0, |b| b.port()))),
                dst: Some(SocketAddr::new(from, h.src_port)),
                device: Some(device.clone()),
                addr_resolved: true,
                route_resolved: true,
                conn: Some(conn),
                tos: l.tos,
                ack_timeout: l.ack_timeout,
                ..IdState::default()
            }
        };
        let child = Arc::new(IdInner::new(
            listener.ps,
            listener.qp_type,
            channel,
            sync,
            st,
        ));
        device.route(conn, &child);
        Ok(child)
    }

    /// The REP of our REQ: with a QP, RTR and RTS, the RTU and `ESTABLISHED`; without,
    /// `CONNECT_RESPONSE`.
    pub(crate) fn on_reply(self: &Arc<Self>, device: &Arc<DeviceCm>, conn: ConnId, rep: RepRepr) {
        let mut st = self.st();
        let Some(offer) = st.offer.clone() else {
            return;
        };
        let mtu = device.ctx.query_port().active_mtu;
        st.exchange = Some(Exchange {
            peer: st.dst.map_or(device.addr, |d| d.ip()),
            remote_qpn: rep.local_qpn,
            rq_psn: st.own_psn,
            sq_psn: rep.starting_psn.value(),
            path_mtu: mtu,
            responder_resources: rep.initiator_depth.min(offer.responder_resources),
            initiator_depth: rep.responder_resources.min(offer.initiator_depth),
            retry_count: offer.retry_count.min(7),
            rnr_retry_count: rep.rnr_retry_count,
            // The peer's Target ACK Delay, as the kernel's active side takes it (12.7.34).
            ack_timeout: st
                .ack_timeout
                .unwrap_or_else(|| x::ack_timeout(rep.target_ack_delay, x::PACKET_LIFE_TIME)),
        });
        let param = EventParam::Conn(x::offer_of_rep(&rep));
        let Some(qp) = st.qp.clone() else {
            drop(st);
            return self.post(EventType::ConnectResponse, 0, param, None);
        };
        let ready = self.ready_qp(&st, &qp);
        drop(st);
        match ready {
            Ok(()) => {
                let _ = device.with(|cm, _| cm.ready_to_use(conn, &[]));
                self.post(EventType::Established, 0, param, None);
            }
            Err(e) => {
                let _ = device.with(|cm, _| cm.reject(conn, REASON_CONSUMER_DEFINED, &[], &[]));
                let status = -e.raw_os_error().unwrap_or(libc::EINVAL);
                self.post(EventType::ConnectError, status, EventParam::None, None);
            }
        }
    }

    /// The RTU came: the passive side's connection is established.
    pub(crate) fn on_established(self: &Arc<Self>) {
        self.post(
            EventType::Established,
            0,
            EventParam::Conn(ConnParam::default()),
            None,
        );
    }

    /// The peer rejected us: `REJECTED` with the reason as status.
    pub(crate) fn on_rejected(self: &Arc<Self>, rej: &RejRepr) {
        self.st().conn = None;
        let param = EventParam::Conn(ConnParam {
            private_data: rej.private_data.to_vec(),
            ..ConnParam::default()
        });
        self.post(EventType::Rejected, i32::from(rej.reason), param, None);
    }

    /// The peer never answered.
    pub(crate) fn on_unreachable(self: &Arc<Self>, status: i32) {
        self.st().conn = None;
        self.post(EventType::Unreachable, status, EventParam::None, None);
    }

    /// The SIDR_REP: `ESTABLISHED` with the peer's QP, or `UNREACHABLE` with its status.
    pub(crate) fn on_sidr_reply(self: &Arc<Self>, rep: &SidrRepRepr) {
        let dest = {
            let mut st = self.st();
            st.conn = None;
            st.dst.map(|d| d.ip())
        };
        let Some(dest) = dest else { return };
        let param = EventParam::Ud(UdParam {
            private_data: rep.private_data.to_vec(),
            dest,
            qp_num: rep.qpn,
            qkey: rep.q_key,
        });
        if rep.status == STATUS_OK {
            self.post(EventType::Established, 0, param, None);
        } else {
            self.post(EventType::Unreachable, i32::from(rep.status), param, None);
        }
    }

    /// A DREQ came, or ours was answered: `DISCONNECTED`, once.
    pub(crate) fn on_disconnected(self: &Arc<Self>) {
        let first = !std::mem::replace(&mut self.st().disconnected, true);
        if first {
            self.post(EventType::Disconnected, 0, EventParam::None, None);
        }
    }

    /// TimeWait is over.
    pub(crate) fn on_timewait_exit(self: &Arc<Self>) {
        self.st().conn = None;
        self.post(EventType::TimewaitExit, 0, EventParam::None, None);
    }
}
