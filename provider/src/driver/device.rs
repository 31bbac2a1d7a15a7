//! A running device: the sans-IO [`Nic`] behind a lock, its transport, and the two ways of
//! making progress the issue asks for:
//!
//! * [`Progress::Thread`] — a background thread per device receives, runs timers and sends,
//!   sleeping in `ppoll(2)` on the transport's descriptor until the next deadline (at most
//!   1 ms, so that deadlines set by other threads are met). RDMA WRITEs land while the
//!   application does nothing, as programs that spin on memory expect. While the
//!   application busy-polls, its polls make the progress and the thread keeps out of their
//!   way (see `run`, the thread): which of the two makes progress is decided as the program
//!   runs, not by the user.
//! * [`Progress::Polling`] — progress happens inside the caller's `poll_cq` (and right after
//!   each post), which on a 2-core machine avoids a spinning thread competing with the
//!   application's own. A program may stop polling at any time, though (wait for its peer on
//!   a TCP socket, say) while the peer still needs this device: an ACK, a READ response, a
//!   retransmission. So an idle watchdog thread makes a round of progress whenever nobody has
//!   made one for [`IDLE_ROUND`]. While the application polls, the watchdog looks every
//!   [`WATCH_WHILE_POLLED`] at first, then less and less often, down to every
//!   [`WATCH_WHILE_POLLED_MAX`], so what the peer needs waits at most about that long once
//!   the application stops (half the 67 ms ACK timeout ibv_rc_pingpong and perftest use);
//!   while nobody polls, it runs a round every [`IDLE_ROUND`]. It costs a few wake-ups per
//!   second, not a core.
//!
//! In both modes a post transmits at once, after the round another thread may be making
//! with the transport: when `ibv_post_send` returns, its packets have left and a UD send's
//! completion is in its CQ, as programs (and rdma-core's tests) expect of a NIC. The NIC lock
//! is never held across a system call.
//!
//! What one round of progress does is in `round.rs`.

use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::emit::Emitter;
pub use super::round::Moved;
use super::round::{after_post, progress, transmit_qp, Io, Round};
use super::thread::run;
use crate::counters::DeviceCounters;
use crate::device::Gid;
use crate::error::{Error, Result};
use crate::host::status::QpReport;
use crate::mr::MrTable;
use crate::nic::mcast::Membership;
use crate::nic::{CqId, Nic};
use crate::transport::{Clock, SleepGate, Transport};
use crate::wc::WorkCompletion;

/// How a device makes progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A background thread per device.
    Thread,
    /// Inside the caller's `poll_cq` and posts.
    Polling,
}

/// Packets per batch (sendmmsg/recvmmsg).
pub const BATCH: usize = 32;

/// In polling mode, the longest the device goes without a round of progress.
pub const IDLE_ROUND: Duration = Duration::from_millis(1);

/// How long the idle watchdog sleeps after first finding the application polling: it only
/// has to notice when the application stops. Waking every millisecond instead preempted a
/// busy-polling thread on a 2-core machine often enough to triple the ping-pong's p99.
pub const WATCH_WHILE_POLLED: Duration = Duration::from_millis(8);

/// The longest the idle watchdog sleeps: each time it finds the application still polling,
/// it sleeps twice as long, up to this. On a 2-core machine every wake-up preempts a busy
/// poller, which costs that round trip some 45 µs here: at 8 ms, two devices' watchdogs
/// added about 0.1 µs to the mean ping-pong round trip.
pub const WATCH_WHILE_POLLED_MAX: Duration = Duration::from_millis(32);

pub(super) struct Inner {
    pub(super) nic: Mutex<Nic>,
    pub(super) io: Mutex<Io>,
    pub(super) mrs: Arc<MrTable>,
    pub(super) stop: AtomicBool,
    /// The NIC may have changed since a round of progress last looked at it (see the module
    /// comment).
    pub(super) dirty: AtomicBool,
    /// Rounds of progress that received, counted (the idle watchdog looks for a change).
    pub(super) rounds: AtomicU64,
    /// The application's polls (`poll_cq` finding its CQ empty), counted.
    pub(super) polls: AtomicU64,
    /// Packets received that no sender watches until they are read (all but the host-local
    /// path's, see [`crate::transport::RecvBatch::watched`]), counted: the progress thread
    /// looks often for those while the application polls (`watch.rs`).
    pub(super) unwatched_rx: AtomicU64,
    /// When the application last polled (written every [`STAMP_EVERY`]-th poll) or posted a
    /// send, in nanoseconds since `epoch`: the progress thread leaves the packets to an
    /// application that polls (see [`run`]). A busy poller that posts a burst of sends goes
    /// as long without a poll (each post copies its message out: a few microseconds for
    /// 64 KiB), and is no less busy.
    last_poll: AtomicU64,
    epoch: Instant,
    /// The clock read instead of the system's ([`Device::start_clocked`]): `epoch` plus its
    /// time.
    clock: Option<Clock>,
    /// Rounds the progress thread made, counted.
    pub(super) thread_rounds: AtomicU64,
    /// Packets handed to the transport, readable without the `io` lock (see
    /// [`Device::packets_sent`]).
    pub(super) packets_sent: AtomicU64,
    /// Packets the transport failed to send, or that were given up on a full socket.
    pub(super) send_errors: AtomicU64,
    /// A round of progress panicked: the device failed ([`guarded`]).
    pub(super) failed: AtomicBool,
    /// The progress thread stays away while the application polls ([`run`]).
    pub(super) away: AtomicBool,
    /// CQs armed for an event (`ibv_req_notify_cq`), counted: the application is about to
    /// stop polling ([`Device::arm_cq`]).
    pub(super) arms: AtomicU64,
    /// How long the thread stays away each time while the packets come watched, in
    /// nanoseconds, if a test fixed it ([`Device::stay_away_for`]; 0: not fixed).
    pub(super) watched_for: AtomicU64,
    /// The next round panics ([`Device::inject_panic`]).
    pub(super) inject_panic: AtomicBool,
}

/// The NIC, locked by [`Device::nic`]; dropping it marks the device dirty (before unlocking,
/// so that a round which finds the mark clear also finds the change).
pub struct NicGuard<'a> {
    dirty: &'a AtomicBool,
    nic: MutexGuard<'a, Nic>,
}

impl Deref for NicGuard<'_> {
    type Target = Nic;
    fn deref(&self) -> &Nic {
        &self.nic
    }
}

impl DerefMut for NicGuard<'_> {
    fn deref_mut(&mut self) -> &mut Nic {
        &mut self.nic
    }
}

impl Drop for NicGuard<'_> {
    fn drop(&mut self) {
        self.dirty.store(true, Ordering::Release);
    }
}

/// A device with its transport and progress.
pub struct Device {
    inner: Arc<Inner>,
    mode: Progress,
    /// The progress thread, or in polling mode the idle watchdog.
    thread: Option<JoinHandle<()>>,
    /// The doorbell the thread waits on, if the transport has one (the host-local path's).
    bell: Option<Arc<SleepGate>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`lock`], unless another thread holds `m`: then `None` at once.
pub(super) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

impl Device {
    /// Starts a device on `transport`, with memory regions in `mrs` and at most `max_qp` QPs.
    ///
    /// # Errors
    /// Spawning the progress thread failed.
    pub fn start(
        transport: Box<dyn Transport + Send>,
        mrs: Arc<MrTable>,
        max_qp: usize,
        mode: Progress,
    ) -> io::Result<Device> {
        Device::start_clocked(transport, mrs, max_qp, mode, None)
    }

    /// [`Device::start`], reading `clock` (if any) wherever the engine wants the time: its
    /// timers (retransmission, ACK coalescing, RNR) then run on that clock, the fabric's
    /// virtual time say. Such a device makes progress only when polled (polling mode, and no
    /// idle watchdog): one thread driving it and its peers makes the same run every time.
    ///
    /// # Errors
    /// Spawning the progress thread failed; `InvalidInput` for a clock with
    /// [`Progress::Thread`] (the thread sleeps on the system's clock).
    pub fn start_clocked(
        transport: Box<dyn Transport + Send>,
        mrs: Arc<MrTable>,
        max_qp: usize,
        mode: Progress,
        clock: Option<Clock>,
    ) -> io::Result<Device> {
        if clock.is_some() && mode == Progress::Thread {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a device on its own clock makes progress only when polled",
            ));
        }
        let local = transport.local_addr();
        let wait = (transport.wait_fd(), transport.sleep_gate());
        let inner = Arc::new(Inner {
            nic: Mutex::new(Nic::new(local, mrs.clone(), max_qp)),
            io: Mutex::new(Io::new(transport, Emitter::new(local, BATCH))),
            mrs,
            stop: AtomicBool::new(false),
            dirty: AtomicBool::new(true),
            rounds: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            unwatched_rx: AtomicU64::new(0),
            last_poll: AtomicU64::new(0),
            epoch: Instant::now(),
            clock: clock.clone(),
            thread_rounds: AtomicU64::new(0),
            packets_sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            inject_panic: AtomicBool::new(false),
            away: AtomicBool::new(false),
            arms: AtomicU64::new(0),
            watched_for: AtomicU64::new(0),
        });
        let bell = wait.1.clone();
        let thread = if clock.is_some() {
            None
        } else {
            let inner = inner.clone();
            let b = std::thread::Builder::new();
            Some(match mode {
                Progress::Polling => b
                    .name(format!("softrnic idle {local}"))
                    .spawn(move || watchdog(&inner))?,
                Progress::Thread => b
                    .name(format!("softrnic {local}"))
                    .spawn(move || run(&inner, wait))?,
            })
        };
        Ok(Device {
            inner,
            mode,
            thread,
            bell,
        })
    }

    /// The progress mode.
    pub fn mode(&self) -> Progress {
        self.mode
    }

    /// The NIC, locked. Do not hold it across a call that may block. Marks the device dirty
    /// (see the module comment): whatever the caller does is picked up by the next round.
    pub fn nic(&self) -> NicGuard<'_> {
        NicGuard {
            dirty: &self.inner.dirty,
            nic: lock(&self.inner.nic),
        }
    }

    /// `ibv_req_notify_cq`: arms CQ `cq` ([`Nic::arm_cq`]). An application arms a CQ
    /// before it waits for the event instead of polling: if it busy-polled until now, the
    /// progress thread, which stays away from a busy poller and looks only now and then
    /// (`watch.rs`), is woken to look at once. Its polls may have left a transmit for the
    /// next post (`round.rs`) which no post will now make, and timers that no poll will run.
    ///
    /// # Errors
    /// As [`Nic::arm_cq`].
    pub fn arm_cq(&self, cq: CqId) -> Result<()> {
        self.nic().arm_cq(cq)?;
        // Against the thread's going away (see `run`): either it sees the count move, or
        // this sees it away.
        self.inner.arms.fetch_add(1, Ordering::SeqCst);
        if self.inner.away.load(Ordering::SeqCst) {
            self.wake_thread();
        }
        Ok(())
    }

    /// Wakes the progress thread (or the idle watchdog) from its sleep or its staying away:
    /// it waits on the doorbell if there is one, parked otherwise.
    fn wake_thread(&self) {
        if let Some(bell) = &self.bell {
            bell.ring();
        }
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    /// `ibv_poll_cq` without progress: up to `out.len()` completions of CQ `cq`. Unlike
    /// [`Device::nic`] it leaves the device clean, and it moves the QPs' completions to their
    /// CQs only if the device is dirty (else every round of progress since the last change
    /// has moved them).
    ///
    /// # Errors
    /// As [`Nic::poll_cq`].
    pub fn poll_cq(&self, cq: CqId, out: &mut [WorkCompletion]) -> Result<usize> {
        let mut nic = lock(&self.inner.nic);
        if self.inner.dirty.load(Ordering::Acquire) {
            nic.route_completions();
        }
        nic.take_completions(cq, out)
    }

    /// The key table.
    pub fn mrs(&self) -> &Arc<MrTable> {
        &self.inner.mrs
    }

    /// One round of progress if no other thread is making it: receive, timers, transmit (the
    /// NIC left alone if nothing came, nothing is due and the device is clean). Called from
    /// `poll_cq` (polling mode).
    pub fn progress(&self) -> Moved {
        // Counted without a locked read-modify-write: two threads polling at once may count
        // one poll, and a change is all the progress thread looks for.
        let inner = &*self.inner;
        let polls = inner.polls.load(Ordering::Relaxed).wrapping_add(1);
        inner.polls.store(polls, Ordering::Relaxed);
        if polls % STAMP_EVERY == 0 {
            inner.stamp_activity(inner.now());
        }
        self.round(Round::Poll)
    }

    /// `ibv_post_send`: runs `post` (which posts work requests to QP `qpn`) on the NIC, then
    /// sends what that QP has, waiting for the transport if another thread is making a round
    /// with it (both modes). Leaving the send to that thread's next round instead let a post
    /// return with its packets unsent: a burst of UD sends right after the first packet to a
    /// new peer (whose round admits it to the host-local path, `udp/local/`) found their
    /// completions missing from the CQ. Measured with `ib_write_bw` (`-q 1`, `-q 4`): no
    /// slower than leaving it.
    ///
    /// That send touches QP `qpn` alone (its packets, completions and deadline): a post
    /// changes no other QP, and the device's dirty mark, which may stand for another thread's
    /// change to another QP, is left as it is. A burst of posts with no round between makes
    /// one now and then (`round::after_post`), so that the peer's ACKs are taken in.
    pub fn post_send<R>(&self, qpn: u32, post: impl FnOnce(&mut Nic) -> R) -> R {
        let inner = &*self.inner;
        let r = post(&mut lock(&inner.nic));
        if inner.failed.load(Ordering::Acquire) {
            // The QP is in ERR: the WR completed with a flush error, for its CQ now.
            lock(&inner.nic).route_qp_completions(qpn);
            return r;
        }
        let mut io = lock(&inner.io);
        let now = inner.now();
        inner.stamp_activity(now);
        guarded(inner, || transmit_qp(inner, &mut io, qpn, now));
        guarded(inner, || after_post(inner, &mut io));
        r
    }

    /// `ibv_post_recv`: runs `post` (which posts receive work requests to QP `qpn`) on the
    /// NIC, then moves that QP's completions to its CQ (in ERR it flushes them at once). A
    /// receive WR gives no QP anything to send, so the device stays clean, and a busy
    /// poller's empty rounds stay short.
    pub fn post_recv<R>(&self, qpn: u32, post: impl FnOnce(&mut Nic) -> R) -> R {
        let mut nic = lock(&self.inner.nic);
        let r = post(&mut nic);
        nic.route_qp_completions(qpn);
        r
    }

    /// Sends everything the QPs have queued now (ACKs owed included), waiting for a round
    /// another thread is making to finish first. Called before a QP is destroyed, so that the
    /// ACK of a message whose completion the application has already seen still leaves (else
    /// the peer retries against a QP that is gone and fails with RETRY_EXC_ERR).
    pub fn flush(&self) -> usize {
        let inner = &*self.inner;
        guarded(inner, || {
            progress(inner, &mut lock(&inner.io), Round::Flush)
        })
        .packets
    }

    fn round(&self, round: Round) -> Moved {
        let inner = &*self.inner;
        match inner.io.try_lock() {
            Ok(mut io) => guarded(inner, || progress(inner, &mut io, round)),
            Err(TryLockError::Poisoned(p)) => {
                let mut io = p.into_inner();
                guarded(inner, || progress(inner, &mut io, round))
            }
            // The other thread's round may change the CQs.
            Err(TryLockError::WouldBlock) => Moved {
                packets: 0,
                looked: true,
            },
        }
    }

    /// `ibv_attach_mcast` (IBTA 10.5, 11.3): attaches UD QP `qpn` to the multicast group
    /// `mgid`; the group's first QP makes the transport join the group's IP address.
    ///
    /// # Errors
    /// `EINVAL` as [`Nic::attach_mcast`]; the transport's error (`EOPNOTSUPP` for one without
    /// multicast), the QP then not attached.
    pub fn attach_mcast(&self, qpn: u32, mgid: &Gid) -> Result<()> {
        // The transport lock first, as the rounds of progress take it: the NIC's membership
        // and the transport's change together.
        let mut io = lock(&self.inner.io);
        let mut nic = lock(&self.inner.nic);
        if let Membership::Join(group) = nic.attach_mcast(qpn, mgid)? {
            if let Err(e) = io.transport.join_multicast(group) {
                let _ = nic.detach_mcast(qpn, mgid);
                return Err(transport_error(&e));
            }
        }
        Ok(())
    }

    /// `ibv_detach_mcast`: detaches QP `qpn` from `mgid`; the group's last QP makes the
    /// transport leave it.
    ///
    /// # Errors
    /// `EINVAL` as [`Nic::detach_mcast`] (the QP is not attached, ...).
    pub fn detach_mcast(&self, qpn: u32, mgid: &Gid) -> Result<()> {
        let mut io = lock(&self.inner.io);
        let membership = lock(&self.inner.nic).detach_mcast(qpn, mgid)?;
        if let Membership::Leave(group) = membership {
            // Detached in any case: a transport that fails to leave only receives more.
            let _ = io.transport.leave_multicast(group);
        }
        Ok(())
    }

    /// `ibv_destroy_qp`: destroys QP `qpn`, detaching it from its multicast groups (and the
    /// transport leaves those it was the last QP of).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn destroy_qp(&self, qpn: u32) -> Result<()> {
        let mut io = lock(&self.inner.io);
        let mut left = Vec::new();
        lock(&self.inner.nic).destroy_qp_leaving(qpn, &mut left)?;
        for group in left {
            let _ = io.transport.leave_multicast(group);
        }
        Ok(())
    }

    /// Makes the transport receive on `rx` instead of its receive socket (see
    /// [`Transport::adopt_receive_socket`]).
    ///
    /// # Errors
    /// The transport's.
    pub fn adopt_receive_socket(&self, rx: std::net::UdpSocket) -> io::Result<()> {
        lock(&self.inner.io).transport.adopt_receive_socket(rx)
    }

    /// The transport's counters.
    pub fn transport_stats(&self) -> crate::transport::TransportStats {
        lock(&self.inner.io).transport.stats()
    }

    /// The rounds of progress the progress thread has made (none in polling mode, whose idle
    /// watchdog's rounds are not counted): how often it did work the application's polls
    /// did not.
    pub fn thread_rounds(&self) -> u64 {
        self.inner.thread_rounds.load(Ordering::Relaxed)
    }

    /// Packets handed to the transport so far. Unlike [`Device::emit_stats`] it takes no
    /// lock, so it can be read while the device is busy sending (a round holds the `io` lock
    /// for up to `ROUND_BUDGET` packets, and takes it again at once).
    pub fn packets_sent(&self) -> u64 {
        self.inner.packets_sent.load(Ordering::Relaxed)
    }

    /// The device's counters ([`crate::counters`]) and its QPs as `softrnic status` and
    /// `softrnic stat` report them, read under one NIC lock.
    pub fn observe(&self) -> (DeviceCounters, Vec<QpReport>) {
        // Before the NIC's lock: a round holds the transport's while it takes the NIC's.
        let transport = self.transport_stats();
        let nic = lock(&self.inner.nic);
        let mut counters = DeviceCounters::of(
            self.inner.packets_sent.load(Ordering::Relaxed),
            self.inner.send_errors.load(Ordering::Relaxed),
            &nic.rx,
            &nic.qp_counters(),
        );
        counters.local_sent = transport.tx_local;
        counters.local_rcvd = transport.rx_local;
        counters.local_dropped = transport.tx_local_dropped;
        counters.local_rung = transport.tx_local_rung;
        counters.ring_dropped = transport.rx_ring_dropped;
        (counters, nic.qp_reports())
    }

    /// Makes the progress thread stay away from a busy poller whose packets all come watched
    /// for `d` each time, instead of from `WATCH_POLLING` to `WATCH_WATCHED_MAX` (`watch.rs`):
    /// for tests of what else wakes it (a very long `d` leaves only that).
    #[doc(hidden)]
    pub fn stay_away_for(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.inner.watched_for.store(nanos, Ordering::Relaxed);
    }

    /// Makes the next round of progress panic, as a bug in the engine would: for tests of
    /// what a failed device does ([`guarded`]).
    #[doc(hidden)]
    pub fn inject_panic(&self) {
        self.inner.inject_panic.store(true, Ordering::Release);
    }

    /// Whether the device failed (a round of progress panicked).
    pub fn has_failed(&self) -> bool {
        self.inner.failed.load(Ordering::Acquire)
    }

    /// The emitter's counters.
    pub fn emit_stats(&self) -> super::EmitStats {
        lock(&self.inner.io).emitter.stats()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        self.wake_thread();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A transport's error as the verbs return it: its errno, `EIO` if it has none.
fn transport_error(e: &io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => Error::NotSupported("the transport has no multicast"),
        Some(errno) => Error::Io(errno),
        None => Error::Io(libc::EIO),
    }
}

/// Polling mode's idle watchdog: a round of progress whenever nobody has made one since it
/// last looked (at least [`IDLE_ROUND`] before).
fn watchdog(inner: &Inner) {
    let mut seen = u64::MAX;
    let mut watch = WATCH_WHILE_POLLED;
    while !inner.stop.load(Ordering::Acquire) {
        let rounds = inner.rounds.load(Ordering::Relaxed);
        let idle = rounds == seen;
        seen = rounds;
        if idle {
            // A thread polling right now holds the transport; then nothing is due.
            if let Ok(mut io) = inner.io.try_lock() {
                guarded(inner, || progress(inner, &mut io, Round::Thread));
            }
            watch = WATCH_WHILE_POLLED;
            std::thread::park_timeout(IDLE_ROUND);
        } else {
            std::thread::park_timeout(watch);
            watch = (watch * 2).min(WATCH_WHILE_POLLED_MAX);
        }
    }
}

impl Inner {
    /// The time now: by the device's clock if it has one, else the system's.
    pub(super) fn now(&self) -> Instant {
        match &self.clock {
            Some(c) => self.epoch + c.now(),
            None => Instant::now(),
        }
    }

    /// `t` in nanoseconds since the device started.
    fn since_epoch(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// The application polled (or posted a send) at `now`.
    fn stamp_activity(&self, now: Instant) {
        self.last_poll
            .store(self.since_epoch(now), Ordering::Relaxed);
    }

    /// Whether the application polled (or posted a send) within `recent` before `now`.
    pub(super) fn polled_within(&self, recent: Duration, now: Instant) -> bool {
        let last = self.last_poll.load(Ordering::Relaxed);
        last != 0 && self.since_epoch(now).saturating_sub(last) < recent.as_nanos() as u64
    }
}

/// The application's polls stamp the time every this-many: a busy poller's empty `poll_cq`
/// takes a few hundred nanoseconds here, and a clock read costs a tenth of that.
const STAMP_EVERY: u64 = 4;

/// Runs a round of progress, `round`. A panic in it is a bug in the engine, and the state it
/// left cannot be trusted: the device *fails* instead of going on, or of losing its progress
/// thread without a word. Every QP enters ERR, its outstanding WRs complete with
/// `IBV_WC_WR_FLUSH_ERR`, every context gets `IBV_EVENT_DEVICE_FATAL` (`Nic::device_failed`),
/// and no round runs again: polls find the flushed completions, posts complete with flush
/// errors. (The panic's message goes to standard error, by the default hook.)
pub(super) fn guarded<R: Default>(inner: &Inner, round: impl FnOnce() -> R) -> R {
    if inner.failed.load(Ordering::Acquire) {
        return R::default();
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(round)) {
        Ok(moved) => moved,
        Err(_) => {
            inner.failed.store(true, Ordering::Release);
            // The NIC's lock may be poisoned, its state half-changed: each QP is still
            // told to flush, and a second panic there leaves the device failed all the same.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                lock(&inner.nic).device_failed();
            }));
            R::default()
        }
    }
}
