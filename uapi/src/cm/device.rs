//! The connection manager of one device in this process: the CM thread
//! (`softrnic_provider::driver::cm`) and the ids it serves. Events of the protocol engine
//! come here, on the CM thread, and become rdma_cm events of ids (the id module says how);
//! connections are found by their Communication ID, listeners by their Service ID.
//!
//! A device's CM runs while an id uses it: each bound id holds it, and it stops with the
//! last. Its Communication IDs carry the QPN block the process holds on the device, so the
//! host's agent routes the answers to this process.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Instant;

use softrnic_provider::cm::{Cm, Config, ConnId, Event};
use softrnic_provider::driver::cm::CmDriver;

use super::exchange::random_psn;
use super::id::IdInner;
use crate::context::Context;

/// Most REQs a listener keeps waiting for an answer, when it asks for "any" (Linux's
/// `max_backlog` default).
pub const MAX_BACKLOG: usize = 1024;

/// One device's CM.
pub(crate) struct DeviceCm {
    /// The device's address.
    pub addr: IpAddr,
    /// A context on the device: the device runs while its CM does.
    pub ctx: Context,
    driver: CmDriver,
    routes: Mutex<Routes>,
}

/// Who gets the events of each connection and listener.
#[derive(Default)]
struct Routes {
    conns: HashMap<ConnId, Weak<IdInner>>,
    listeners: HashMap<u64, Weak<IdInner>>,
}

/// The CMs running in this process, by address.
static RUNNING: Mutex<Vec<(IpAddr, Weak<DeviceCm>)>> = Mutex::new(Vec::new());

/// The process that registered [`destroy_all_at_exit`] (0: none yet).
static EXITING_PID: AtomicU32 = AtomicU32::new(0);

/// At the process's exit (atexit(3)), every connection of every CM ends as if its id were
/// destroyed: DREQ, REJ or SIDR_REP, sent once (nothing is left to retry them). Linux does so
/// for a process whose rdma_cm file closes, and programs rely on it: perftest's `-R` never
/// destroys its first connection's id. Without it kernel rxe's DREQ for that connection went
/// unanswered, and rxe kept retrying it for about a minute. A child of `fork` that exits ends
/// nothing: the connections are its parent's.
extern "C" fn destroy_all_at_exit() {
    if EXITING_PID.load(Ordering::Acquire) != std::process::id() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let running: Vec<Arc<DeviceCm>> = lock(&RUNNING)
            .iter()
            .filter_map(|(_, d)| d.upgrade())
            .collect();
        for d in running {
            d.with(|cm, now| cm.destroy_all(now));
        }
    });
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DeviceCm {
    /// The CM of the device of `addr`, started (with the device) if it does not run.
    ///
    /// # Errors
    /// The device's ([`super::DeviceSource::open`]); `ENODEV` if the device is not shared
    /// with the host (`SOFTRNIC_SHARED=0`), whose agent routes the CM's MADs; the CM thread's.
    pub fn get(addr: IpAddr) -> io::Result<Arc<DeviceCm>> {
        let mut running = lock(&RUNNING);
        running.retain(|(_, d)| d.strong_count() > 0);
        if let Some(d) = running
            .iter()
            .find(|(a, _)| *a == addr)
            .and_then(|(_, d)| d.upgrade())
        {
            return Ok(d);
        }
        let d = DeviceCm::start(addr)?;
        running.push((addr, Arc::downgrade(&d)));
        let pid = std::process::id();
        if EXITING_PID.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) == Ok(0) {
            // SAFETY: registers a plain function that stays valid as long as the process.
            unsafe { libc::atexit(destroy_all_at_exit) };
        }
        Ok(d)
    }

    fn start(addr: IpAddr) -> io::Result<Arc<DeviceCm>> {
        let ctx = super::source().open(addr)?;
        let block = ctx
            .inner
            .member
            .as_ref()
            .map(|m| m.block())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the connection manager needs the device shared with the host \
                 (unset SOFTRNIC_SHARED=0)",
                )
            })?;
        let guid = ctx.query_device().node_guid;
        let cfg = Config::new(guid, block, random_psn());
        let me: Arc<OnceLock<Weak<DeviceCm>>> = Arc::new(OnceLock::new());
        let found = me.clone();
        let on_event = Box::new(move |e: Event| {
            if let Some(d) = found.get().and_then(Weak::upgrade) {
                d.dispatch(e);
            }
        });
        let driver = CmDriver::start(addr, cfg, on_event)?;
        // A new agent knows no listeners: register them again when the group is rebuilt.
        if let Some(m) = &ctx.inner.member {
            driver.relisten_on_rejoin(m);
        }
        let d = Arc::new(DeviceCm {
            addr,
            ctx,
            driver,
            routes: Mutex::new(Routes::default()),
        });
        let _ = me.set(Arc::downgrade(&d));
        Ok(d)
    }

    /// The most READ and atomic requests a QP of the device serves and issues at once
    /// (`max_dest_rd_atomic`, `max_rd_atomic`): what an offer of 0xFF becomes.
    pub fn max_resources(&self) -> (u8, u8) {
        let l = self.ctx.inner.limits;
        (l.max_dest_rd_atomic, l.max_rd_atomic)
    }

    /// Calls `f` with the protocol engine (see [`CmDriver::with`]).
    pub fn with<R>(&self, f: impl FnOnce(&mut Cm, Instant) -> R) -> R {
        self.driver.with(f)
    }

    /// Starts a connection with `f`, which returns its Communication ID: `id` gets its events
    /// from the first on (the route is in place before the engine can answer).
    pub fn start_conn<E>(
        &self,
        id: &Arc<IdInner>,
        f: impl FnOnce(&mut Cm, Instant) -> Result<ConnId, E>,
    ) -> Result<ConnId, E> {
        self.driver.with(|cm, now| {
            let conn = f(cm, now)?;
            lock(&self.routes).conns.insert(conn, Arc::downgrade(id));
            Ok(conn)
        })
    }

    /// Routes the events of `conn` to `id`.
    pub fn route(&self, conn: ConnId, id: &Arc<IdInner>) {
        lock(&self.routes).conns.insert(conn, Arc::downgrade(id));
    }

    /// Stops routing the events of `conn`.
    pub fn unroute(&self, conn: ConnId) {
        lock(&self.routes).conns.remove(&conn);
    }

    /// The id of `conn`.
    pub fn id_of(&self, conn: ConnId) -> Option<Arc<IdInner>> {
        lock(&self.routes).conns.get(&conn).and_then(Weak::upgrade)
    }

    /// Listens on `service` for `id`, host-wide.
    ///
    /// # Errors
    /// `EADDRINUSE` if it is listened on already, here or by another process.
    pub fn listen(&self, service: u64, backlog: usize, id: &Arc<IdInner>) -> io::Result<()> {
        // The route first: a REQ may come as soon as the driver listens.
        {
            let mut routes = lock(&self.routes);
            let taken = routes
                .listeners
                .get(&service)
                .is_some_and(|l| l.strong_count() > 0);
            if taken {
                return Err(io::Error::from_raw_os_error(libc::EADDRINUSE));
            }
            routes.listeners.insert(service, Arc::downgrade(id));
        }
        let listened = self.driver.listen(service, backlog);
        if listened.is_err() {
            lock(&self.routes).listeners.remove(&service);
        }
        listened
    }

    /// Stops listening on `service`.
    pub fn unlisten(&self, service: u64) {
        lock(&self.routes).listeners.remove(&service);
        self.driver.unlisten(service);
    }

    fn listener(&self, service: u64) -> Option<Arc<IdInner>> {
        lock(&self.routes)
            .listeners
            .get(&service)
            .and_then(Weak::upgrade)
    }

    /// An event of the engine, on the CM thread, with no lock held.
    fn dispatch(self: &Arc<Self>, e: Event) {
        match e {
            Event::Request { conn, from, req } => match self.listener(req.service_id) {
                Some(l) => IdInner::on_request(&l, self, conn, from, req),
                None => self.orphan(conn),
            },
            Event::SidrRequest { id, from, req } => match self.listener(req.service_id) {
                Some(l) => IdInner::on_sidr_request(&l, self, id, from, req),
                None => self.orphan(id),
            },
            Event::Reply { conn, rep } => self.to_id(conn, |id| id.on_reply(self, conn, rep)),
            Event::Established { conn } => self.to_id(conn, |id| id.on_established()),
            Event::Rejected { conn, rej } => {
                self.to_id(conn, |id| id.on_rejected(&rej));
                self.unroute(conn);
            }
            Event::TimedOut { conn } | Event::SidrTimedOut { id: conn } => {
                self.to_id(conn, |id| id.on_unreachable(-libc::ETIMEDOUT));
                self.unroute(conn);
            }
            Event::SidrReply { id: conn, rep } => {
                self.to_id(conn, |id| id.on_sidr_reply(&rep));
                self.unroute(conn);
            }
            Event::DisconnectRequested { conn, .. } | Event::Disconnected { conn } => {
                self.to_id(conn, |id| id.on_disconnected());
            }
            Event::TimewaitExit { conn } => {
                self.to_id(conn, |id| id.on_timewait_exit());
                self.unroute(conn);
            }
        }
    }

    fn to_id(&self, conn: ConnId, f: impl FnOnce(&Arc<IdInner>)) {
        if let Some(id) = self.id_of(conn) {
            f(&id);
        }
    }

    /// A request whose listener went away: the engine answers it as for an unheard one.
    fn orphan(&self, conn: ConnId) {
        let _ = self.with(|cm, now| cm.destroy(now, conn));
    }
}
