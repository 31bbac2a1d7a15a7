//! Devices, protection domains and completion queues (`ibv_open_device`, `ibv_alloc_pd`,
//! `ibv_create_cq`, `ibv_resize_cq`, `ibv_poll_cq`).
//!
//! A device is shared: every [`Context`] opened on one address in a process uses one running
//! device (one NIC, key table, transport and progress thread; `shared.rs`), as every
//! `ibv_open_device` of `rxe0` uses the one kernel device. Each context is an owner in the
//! NIC: its PDs get device-unique handles, so its MRs, QPs and SRQs are its own, and its
//! asynchronous events come to it alone. Closing a context (dropping its last handle and
//! object) leaves the others running; the device stops with the last context.

use std::net::IpAddr;
use std::ops::Deref;
use std::sync::Arc;

use softrnic_provider::device::{
    active_mtu_for_netdev_mtu, node_guid_from_mac, DeviceAttr, GidTable, Limits, PortAttr,
};
use softrnic_provider::driver::{Device, Progress};
use softrnic_provider::host::Member;
use softrnic_provider::mr::{MrTable, PdHandle};
use softrnic_provider::nic::{CqId, OwnerId};
use softrnic_provider::qp::QpLimits;
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::transport::{Clock, Transport, UdpTransport};
use softrnic_provider::wc::{WcOpcode, WcStatus, WorkCompletion};
use softrnic_provider::{Error, Result};

/// How to open a device.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// How the device makes progress.
    pub progress: Progress,
    /// Seed of the key table's keys: everything a peer guessing an R_Key lacks
    /// (`softrnic_provider::mr`), so the default draws it from the OS; tests pin it.
    pub key_seed: u64,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            progress: Progress::Thread,
            key_seed: os_seed(),
        }
    }
}

/// 64 bits from the OS (`getrandom(2)`); if that fails, the address-space layout and the
/// clock, which are less secret but not fixed.
fn os_seed() -> u64 {
    let mut seed = 0u64;
    // SAFETY: writes at most 8 bytes into `seed`.
    let n = unsafe { libc::getrandom((&raw mut seed).cast(), 8, 0) };
    if n == 8 {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (&raw const seed as u64).rotate_left(32) ^ u64::from(std::process::id())
}

/// A running device, shared by the contexts opened on it.
pub(crate) struct Shared {
    /// This process's place on the host's shared device (a UDP device's), see
    /// `softrnic_provider::host`.
    pub member: Option<Member>,
    pub device: Device,
    pub gids: Option<GidTable>,
    pub attr: DeviceAttr,
    pub port: PortAttr,
    pub limits: QpLimits,
    /// Device memory lent out (`dm.rs`), in bytes.
    pub dm_in_use: std::sync::atomic::AtomicUsize,
}

/// One context: the shared device, and who this context is in it.
pub(crate) struct ContextInner {
    pub shared: Arc<Shared>,
    pub owner: OwnerId,
}

impl Deref for ContextInner {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // Every object of the context is gone (each holds it): only its events are left.
        self.device.nic().remove_owner(self.owner);
    }
}

/// An open device (`ibv_context`). Cheap to clone; the context closes when the last clone and
/// every object made from it are gone, and the device stops when its last context closes.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl Context {
    /// Opens the device bound to the local address `addr` (`ibv_open_device` of the device
    /// owning it), on kernel UDP sockets. A device already running in this process for
    /// `addr` is shared (`opts` then changes nothing: the first context's options hold).
    ///
    /// # Errors
    /// The address is not local, port 4791 is taken on it, or the interface can't be read.
    pub fn open(addr: IpAddr, opts: OpenOptions) -> std::io::Result<Context> {
        let shared = crate::shared::open(addr, || {
            Context::start_udp(addr, opts, |t| crate::pcap::capture_if_asked(addr, t))
        })?;
        Shared::watch_host(&shared)?;
        Ok(Context::owning(shared))
    }

    /// [`Context::open`], with the kernel UDP transport wrapped by `wrap` before the device
    /// starts on it (a fault injector, in tests over real UDP).
    ///
    /// # Errors
    /// As [`Context::open`]; `EADDRINUSE` if the device already runs in this process (the
    /// wrapper could not apply to it).
    pub fn open_wrapped(
        addr: IpAddr,
        opts: OpenOptions,
        wrap: impl FnOnce(UdpTransport) -> Box<dyn Transport + Send>,
    ) -> std::io::Result<Context> {
        let shared = crate::shared::open_new(addr, || Context::start_udp(addr, opts, wrap))?;
        Shared::watch_host(&shared)?;
        Ok(Context::owning(shared))
    }

    fn start_udp(
        addr: IpAddr,
        opts: OpenOptions,
        wrap: impl FnOnce(UdpTransport) -> Box<dyn Transport + Send>,
    ) -> std::io::Result<Shared> {
        let gids = GidTable::for_address(addr)?;
        let (member, transport) = if shared_by_the_host() {
            let (member, rx) = Member::join(addr)?;
            let transport = UdpTransport::on_steered_socket(addr, rx, member.block())?;
            (Some(member), transport)
        } else {
            (None, UdpTransport::bind(addr)?)
        };
        // Datagrams to the host's other devices through shared memory (`udp/local/`).
        let transport = transport.with_local_path_if_allowed();
        let mtu = active_mtu_for_netdev_mtu(gids.interface().mtu);
        let guid = node_guid_from_mac(gids.interface().mac);
        let mut shared = Shared::start(wrap(transport), Some(gids), mtu, guid, opts, None)?;
        if let Some(m) = &member {
            let block = m.block();
            let start = std::process::id().wrapping_mul(0x9e37_79b9);
            shared
                .device
                .nic()
                .set_qpn_range(block.first(), block.last(), start);
        }
        shared.member = member;
        Ok(shared)
    }

    /// Another context on the same device as this one (`ibv_open_device` again): its own
    /// PDs, MRs, CQs, QPs, SRQs and events.
    pub fn reopen(&self) -> Context {
        Context::owning(self.inner.shared.clone())
    }

    /// A new context on `shared`.
    fn owning(shared: Arc<Shared>) -> Context {
        let owner = shared.device.nic().add_owner();
        Context {
            inner: Arc::new(ContextInner { shared, owner }),
        }
    }

    /// Opens a device on any transport (the in-memory fabric, in tests), path MTU up to
    /// 4096.
    ///
    /// # Errors
    /// Spawning the progress thread failed.
    pub fn open_on(
        transport: Box<dyn Transport + Send>,
        opts: OpenOptions,
    ) -> std::io::Result<Context> {
        Context::open_on_clocked(transport, opts, None)
    }

    /// [`Context::open_on`], the device reading `clock` (if any) instead of the system's
    /// clock: its timers run on the fabric's virtual time, say ([`Device::start_clocked`]). It
    /// must make progress by polling, and makes it only when polled (no idle watchdog), so one
    /// thread that drives it and its peers, moving the fabric's time, makes the same run every
    /// time.
    ///
    /// # Errors
    /// `InvalidInput` for a clock with [`Progress::Thread`]; else as [`Context::open_on`].
    pub fn open_on_clocked(
        transport: Box<dyn Transport + Send>,
        opts: OpenOptions,
        clock: Option<Clock>,
    ) -> std::io::Result<Context> {
        let shared = Shared::start(transport, None, Mtu::Mtu4096, 0, opts, clock)?;
        Ok(Context::owning(Arc::new(shared)))
    }
}

/// Whether UDP devices share their address with other processes (the default), or bind
/// UDP 4791 alone as before (`SOFTRNIC_SHARED=0`, for comparisons).
fn shared_by_the_host() -> bool {
    std::env::var_os("SOFTRNIC_SHARED").is_none_or(|v| v != "0")
}

impl Shared {
    /// Starts watching the host's agent (once): after the group of port 4791 was built
    /// again, the device receives on its new socket.
    fn watch_host(shared: &Arc<Shared>) -> std::io::Result<()> {
        let Some(member) = &shared.member else {
            return Ok(());
        };
        let interface = shared
            .gids
            .as_ref()
            .map_or(String::new(), |g| g.interface().name.clone());
        let (adopting, listing) = (Arc::downgrade(shared), Arc::downgrade(shared));
        member.watch(
            &interface,
            Box::new(move |rx| match adopting.upgrade() {
                Some(s) => s.device.adopt_receive_socket(rx),
                None => Ok(()),
            }),
            Box::new(move || {
                listing
                    .upgrade()
                    .map_or_else(Default::default, |s| s.device.observe())
            }),
        )
    }

    /// Starts a device on `transport`.
    fn start(
        transport: Box<dyn Transport + Send>,
        gids: Option<GidTable>,
        mtu: Mtu,
        guid: u64,
        opts: OpenOptions,
        clock: Option<Clock>,
    ) -> std::io::Result<Shared> {
        crate::log::init_from_env();
        let mrs = Arc::new(
            MrTable::new(Limits::MAX_MR as u32, opts.key_seed).map_err(std::io::Error::other)?,
        );
        let device = Device::start_clocked(
            transport,
            mrs,
            Limits::MAX_QP as usize,
            opts.progress,
            clock,
        )?;
        let attr = DeviceAttr::softrnic(guid);
        let gid_len = gids.as_ref().map_or(0, |g| g.len() as u32);
        let port = PortAttr::softrnic(mtu, gid_len);
        let limits = QpLimits {
            active_mtu: mtu,
            max_rd_atomic: Limits::MAX_QP_INIT_RD_ATOM.min(255) as u8,
            max_dest_rd_atomic: Limits::MAX_QP_RD_ATOM.min(255) as u8,
        };
        Ok(Shared {
            member: None,
            device,
            gids,
            attr,
            port,
            limits,
            dm_in_use: Default::default(),
        })
    }
}

impl Context {
    /// `ibv_query_device`.
    pub fn query_device(&self) -> DeviceAttr {
        self.inner.attr.clone()
    }

    /// `ibv_query_port` (port 1, the only one).
    pub fn query_port(&self) -> PortAttr {
        self.inner.port
    }

    /// `ibv_query_gid` (port 1).
    ///
    /// # Errors
    /// `EINVAL` beyond the table.
    pub fn query_gid(&self, index: u32) -> Result<softrnic_provider::device::Gid> {
        self.inner
            .gids
            .as_ref()
            .and_then(|g| g.get(index))
            .map(|e| e.gid)
            .ok_or(Error::InvalidArgument("GID index beyond the table"))
    }

    /// Where packets to the destination GID `dest` go ([`GidTable::route`]): the device's own
    /// address for its link-local GID, else `dest`.
    pub(crate) fn route(&self, dest: IpAddr) -> IpAddr {
        self.inner.gids.as_ref().map_or(dest, |g| g.route(dest))
    }

    /// The device's own address (what GID index 1 holds).
    pub fn local_addr(&self) -> IpAddr {
        self.inner.device.nic().local()
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Pd {
        let handle = self.inner.device.nic().alloc_pd(self.inner.owner);
        Pd(Arc::new(PdInner {
            ctx: self.clone(),
            handle,
            relaxed: crate::relaxed::Relaxed::new(self.clone(), handle),
        }))
    }

    /// `ibv_create_cq` with room for `cqe` completions.
    ///
    /// # Errors
    /// `EINVAL` for 0 or more than `max_cqe`.
    pub fn create_cq(&self, cqe: usize) -> Result<Cq> {
        if cqe == 0 || cqe > Limits::MAX_CQE as usize {
            return Err(Error::InvalidArgument("cqe must be 1..=max_cqe"));
        }
        let id = self.inner.device.nic().create_cq(cqe);
        Ok(Cq {
            inner: Arc::new(CqInner {
                ctx: self.clone(),
                id,
            }),
        })
    }

    /// One round of progress (what `poll_cq` does in [`Progress::Polling`] mode).
    pub fn progress(&self) -> usize {
        self.inner.device.progress().packets
    }

    /// The device driver (counters, the NIC).
    pub fn device(&self) -> &Device {
        &self.inner.device
    }
}

/// A protection domain (`ibv_pd`).
#[derive(Clone)]
pub struct Pd(Arc<PdInner>);

/// What a [`Pd`] handle shares. One reference count per PD: every region holds its PD, so
/// regions registered from several threads on their own PDs share no counter (a `Context`
/// clone per region bounced one cache line between all of them).
#[doc(hidden)]
pub struct PdInner {
    pub(crate) ctx: Context,
    pub(crate) handle: PdHandle,
    /// The relaxed-region pool, made on first use (`relaxed.rs`).
    pub(crate) relaxed: crate::relaxed::Relaxed,
}

impl std::ops::Deref for Pd {
    type Target = PdInner;
    fn deref(&self) -> &PdInner {
        &self.0
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // The last handle: every region, QP and SRQ of the PD is gone (each holds it).
        self.ctx.inner.device.nic().dealloc_pd(self.handle);
    }
}

impl Pd {
    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The PD's handle in the device (`ibv_pd.handle`).
    pub fn handle(&self) -> u32 {
        self.handle.0
    }
}

/// A completion queue (`ibv_cq`). Dropping it destroys it once no QP uses it any more: each
/// [`crate::QueuePair`] keeps its CQs alive (as `ibv_destroy_cq` fails with `EBUSY` while a QP
/// uses the CQ, so a CQ cannot go before its QPs). See [`Cq::destroy`] to find out whether
/// a QP still uses it.
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

/// The CQ itself, shared by the [`Cq`] handle and the QPs that use it; the last of them to go
/// destroys it in the NIC.
pub(crate) struct CqInner {
    pub(crate) ctx: Context,
    pub(crate) id: CqId,
}

impl Cq {
    /// The CQ's handle in the device (`softrnic_provider::nic::CqId`).
    pub fn handle(&self) -> u32 {
        self.inner.id.0
    }

    /// `ibv_destroy_cq`, reporting failure.
    ///
    /// # Errors
    /// `EBUSY` while a QP uses the CQ: the CQ is given back, unharmed.
    pub fn destroy(self) -> core::result::Result<(), (Cq, Error)> {
        match Arc::try_unwrap(self.inner) {
            // Only this handle holds it: no QP uses it, so the NIC lets it go (in `Drop`).
            Ok(inner) => {
                drop(inner);
                Ok(())
            }
            Err(inner) => Err((Cq { inner }, Error::Busy("a QP still uses the CQ"))),
        }
    }

    /// Sets what the CQ calls when armed and a completion arrives: the completion channel
    /// (`ibv_create_cq`'s `channel`). `f` runs on the device's thread or a polling one, with
    /// the device locked: it must only signal (write an eventfd, wake a thread).
    pub fn set_notifier(&self, f: impl Fn() + Send + Sync + 'static) {
        let n = softrnic_provider::cq::Notifier(Arc::new(f));
        let r = self
            .inner
            .ctx
            .inner
            .device
            .nic()
            .set_cq_notifier(self.inner.id, Some(n));
        debug_assert!(r.is_ok(), "a Cq handle's CQ exists: {r:?}");
    }

    /// `ibv_req_notify_cq`: the next completion calls the notifier once (see
    /// [`Cq::set_notifier`]). "Solicited only" is treated as "next", a superset of its events.
    pub fn req_notify(&self) {
        let r = self.inner.ctx.inner.device.arm_cq(self.inner.id);
        debug_assert!(r.is_ok(), "a Cq handle's CQ exists: {r:?}");
    }

    /// `ibv_resize_cq`: makes the CQ hold at least `cqe` completions, keeping those in it, in
    /// order; returns the new capacity, which `ibv_resize_cq(3)` allows to be more than `cqe`
    /// (softrnic's is exactly `cqe`). The new ring is allocated here, so completing still
    /// never allocates. An overflowed CQ can be resized and stays in error.
    ///
    /// # Errors
    /// `EINVAL` for 0, more than `max_cqe`, or fewer than the completions in the CQ; the CQ
    /// is then unchanged.
    pub fn resize(&self, cqe: usize) -> Result<usize> {
        self.inner
            .ctx
            .inner
            .device
            .nic()
            .resize_cq(self.inner.id, cqe)
    }

    /// `ibv_poll_cq`: moves up to `out.len()` completions into `out`, oldest first. If the CQ
    /// holds none, it makes one round of progress (unless another thread is making one) and
    /// looks again if the round touched the NIC, so that completions already there are
    /// returned at once, and the round's packets can leave with the application's next post.
    /// With a progress thread too: an application that polls then sees its packets without
    /// waiting for the thread to wake. A thread whose polls have found nothing for
    /// [`crate::DEFAULT_SPIN`] yields its core after each further empty poll (`spin.rs`).
    ///
    /// # Errors
    /// The CQ overflowed (`EOVERFLOW`).
    pub fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        let dev = &self.inner.ctx.inner.device;
        let n = dev.poll_cq(self.inner.id, out)?;
        let n = if n > 0 || !dev.progress().looked {
            n
        } else {
            dev.poll_cq(self.inner.id, out)?
        };
        crate::spin::after_poll(n);
        Ok(n)
    }

    /// Polls until `n` completions have arrived or `timeout` passes (a convenience of the
    /// Rust API, not a verb).
    ///
    /// # Errors
    /// As [`Cq::poll`]; `ETIMEDOUT` as `Io` if `timeout` passes.
    pub fn wait(&self, n: usize, timeout: std::time::Duration) -> Result<Vec<WorkCompletion>> {
        self.wait_with(n, timeout, || {})
    }

    /// [`Cq::wait`], calling `idle` whenever a poll finds nothing (to drive another device's
    /// progress from the same thread, say).
    ///
    /// # Errors
    /// As [`Cq::wait`].
    pub fn wait_with(
        &self,
        n: usize,
        timeout: std::time::Duration,
        mut idle: impl FnMut(),
    ) -> Result<Vec<WorkCompletion>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut got = Vec::with_capacity(n);
        let mut buf = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
        // Empty polls since the clock was last read: reading it on every one costs a busy
        // poller a tenth of its time.
        let mut empty = 0u32;
        while got.len() < n {
            let k = self.poll(&mut buf[..(n - got.len()).min(16)])?;
            got.extend_from_slice(&buf[..k]);
            if k == 0 {
                empty += 1;
                if empty % 64 == 0 && std::time::Instant::now() > deadline {
                    return Err(Error::Io(ETIMEDOUT));
                }
                idle();
                std::hint::spin_loop();
            }
        }
        Ok(got)
    }
}

/// `ETIMEDOUT` on Linux.
pub const ETIMEDOUT: i32 = 110;

impl Drop for CqInner {
    fn drop(&mut self) {
        // The last holder: every QP that used the CQ is destroyed, so the NIC lets it go.
        let r = self.ctx.inner.device.nic().destroy_cq(self.id);
        debug_assert!(r.is_ok(), "no QP can use a CQ no QueuePair holds: {r:?}");
    }
}
