//! The connection manager's thread: the I/O around the sans-IO [`Cm`] of one process on one
//! device. MADs for this process come from the agent over the link (`host::cm_link`), MADs
//! to peers leave from a UDP socket of the device's address as GSI packets (`gsi`), and the
//! thread sleeps until a MAD comes, the CM's next deadline, or a call that may have armed an
//! earlier one. Events go to the callback given at the start, outside the CM's lock, so the
//! callback may call back in.
//!
//! The agent routes a REQ to the process listening on its Service ID, which the process
//! registers with it. When the agent changes hands, the new one knows no listeners: the
//! driver keeps the Service IDs it listens on and registers them again
//! ([`CmDriver::relisten`]), from the member's thread once the process has joined the new
//! group ([`CmDriver::relisten_on_rejoin`]), never from the CM's thread, which a silent
//! agent must not hold up.

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use softrnic_wire::{Psn, ROCE_V2_UDP_PORT};

use crate::cm::{Cm, Config, Event};
use crate::gsi;
use crate::host::agent::pollin;
use crate::host::cm_link::MemberLink;
use crate::host::Member;
use crate::transport::udp::bound_socket;

/// What gets the CM's events.
pub type OnEvent = Box<dyn FnMut(Event) + Send>;

/// Longest sleep between looks at whether to stop.
const TICK: Duration = Duration::from_millis(100);

/// A running CM of one process on one device; it stops when dropped.
pub struct CmDriver {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    cm: Mutex<Cm>,
    link: MemberLink,
    out: UdpSocket,
    /// `out`'s address and port: the source of the GSI packets.
    src: (IpAddr, u16),
    /// Written to wake the thread; the thread reads the other end.
    wake: UnixDatagram,
    stop: AtomicBool,
    /// The Service IDs this CM listens on, each registered with the agent. Held while one is
    /// registered or withdrawn, so that the agent hears of them in the order they change.
    listening: Mutex<BTreeSet<u64>>,
}

impl CmDriver {
    /// Starts the CM `cfg` of this process's block of `addr` (the process holds the block's
    /// lease), sending its events to `on_event`.
    ///
    /// # Errors
    /// Binding the link or the sending socket; spawning the thread.
    pub fn start(addr: IpAddr, cfg: Config, on_event: OnEvent) -> io::Result<CmDriver> {
        let link = MemberLink::open(addr, cfg.block)?;
        let opts: &[_] = match addr {
            IpAddr::V4(_) => &[(
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
            )],
            IpAddr::V6(_) => &[],
        };
        let out = bound_socket(SocketAddr::new(addr, 0), opts)?;
        let src = (addr, out.local_addr()?.port());
        let (wake, woken) = UnixDatagram::pair()?;
        woken.set_nonblocking(true)?;
        // Never blocks: a full queue (net.unix.max_dgram_qlen wakes) already wakes the
        // thread, and the thread itself wakes itself when an event callback calls `with`,
        // which must not wait for the thread to read.
        wake.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            cm: Mutex::new(Cm::new(cfg)),
            link,
            out,
            src,
            wake,
            stop: AtomicBool::new(false),
            listening: Mutex::new(BTreeSet::new()),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("softrnic cm {addr}"))
            .spawn(move || run(&s, &woken, on_event))?;
        Ok(CmDriver {
            shared,
            thread: Some(thread),
        })
    }

    /// Calls `f` with the CM and the time, then sends what it queued and wakes the thread
    /// for the deadlines it may have armed.
    pub fn with<R>(&self, f: impl FnOnce(&mut Cm, Instant) -> R) -> R {
        let mut cm = lock(&self.shared.cm);
        let r = f(&mut cm, Instant::now());
        self.shared.flush(&mut cm);
        drop(cm);
        let _ = self.shared.wake.send(&[1]);
        r
    }

    /// Listens on `service` on the whole host: the agent routes its REQs here. Blocks until
    /// the agent answers; while the agent is changing hands, waits for the new one
    /// (`host::cm_link`).
    ///
    /// # Errors
    /// `EADDRINUSE` if another process, or this one, listens on it already; the agent's
    /// silence.
    pub fn listen(&self, service: u64, backlog: usize) -> io::Result<()> {
        let mut listening = lock(&self.shared.listening);
        self.with(|cm, _| cm.listen(service, backlog))
            .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
        match self.shared.link.listen(service) {
            Ok(()) => {
                listening.insert(service);
                Ok(())
            }
            Err(e) => {
                self.with(|cm, _| cm.unlisten(service));
                Err(e)
            }
        }
    }

    /// Stops listening on `service`.
    pub fn unlisten(&self, service: u64) {
        let mut listening = lock(&self.shared.listening);
        listening.remove(&service);
        self.shared.link.unlisten(service);
        self.with(|cm, _| cm.unlisten(service));
    }

    /// Registers every Service ID this CM listens on with the agent again: a new agent
    /// (the old one's process exited) knows none. Meant for after the process has joined
    /// the new agent's group; called earlier, it waits for that, up to
    /// [`crate::host::agent::AGENT_WAIT`]. It blocks the caller until the agent answers: call
    /// it from the member's thread ([`CmDriver::relisten_on_rejoin`] does), not from an
    /// event callback, which runs on the CM's thread.
    ///
    /// # Errors
    /// `EADDRINUSE` for a Service ID another process took while no agent routed it to this
    /// one (the CM still listens on it, and gets its REQs again once that process lets it
    /// go and the agent next changes hands), every other Service ID being registered; no
    /// agent ready for this process (`ECONNREFUSED`, `ENOTCONN`, `TimedOut`), after which
    /// nothing more is tried.
    pub fn relisten(&self) -> io::Result<()> {
        self.shared.relisten()
    }

    /// Has `member`'s thread register this CM's Service IDs again ([`CmDriver::relisten`])
    /// each time the member has joined a rebuilt group, until the driver is dropped. Call it
    /// once, with the member of the block this CM was started for, which must be watched
    /// ([`Member::watch`]).
    pub fn relisten_on_rejoin(&self, member: &Member) {
        let driver = Arc::downgrade(&self.shared);
        member.on_rejoin(Box::new(move || match driver.upgrade() {
            Some(shared) if !shared.stop.load(Ordering::Acquire) => {
                // The error has no one to go to: a Service ID lost stays with the other
                // process, and the agent's silence means it is changing hands again (this
                // hook then runs once more).
                let _ = shared.relisten();
                true
            }
            _ => false,
        }));
    }
}

impl Drop for CmDriver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.shared.wake.send(&[0]);
        if let Some(t) = self.thread.take() {
            // The callback may drop the last owner of the driver, on the thread itself: that
            // thread ends by itself once the callback returns, and must not wait for itself.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Shared {
    /// Sends every MAD the CM queued.
    fn flush(&self, cm: &mut Cm) {
        send_mads(cm, &self.out, self.src);
    }

    /// See [`CmDriver::relisten`].
    fn relisten(&self) -> io::Result<()> {
        let listening = lock(&self.listening);
        let mut lost = None;
        for &service in listening.iter() {
            match self.link.listen(service) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => lost = Some(e),
                Err(silent) => return Err(silent),
            }
        }
        lost.map_or(Ok(()), Err)
    }
}

/// Sends every MAD `cm` queued as a GSI packet from `sock`, whose address and port are `src`,
/// to QP1 of its peer.
pub(crate) fn send_mads(cm: &mut Cm, sock: &UdpSocket, src: (IpAddr, u16)) {
    while let Some(t) = cm.poll_transmit() {
        if let Some(p) = gsi::encode(src, t.to, Psn::new(0), &t.mad) {
            let _ = sock.send_to(&p, (t.to, ROCE_V2_UDP_PORT));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(shared: &Shared, woken: &UnixDatagram, mut on_event: OnEvent) {
    let mut events = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        let wait = lock(&shared.cm).poll_timeout().map_or(TICK, |d| {
            d.saturating_duration_since(Instant::now()).min(TICK)
        });
        let mut fds = [pollin(shared.link.fd()), pollin(woken.as_raw_fd())];
        // SAFETY: `fds` is a valid array of two pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait.as_millis().max(1) as i32) };
        let mut byte = [0u8; 1];
        while woken.recv(&mut byte).is_ok() {}
        {
            let mut cm = lock(&shared.cm);
            let now = Instant::now();
            shared.link.recv_each(|from, mad| cm.handle(now, from, mad));
            cm.handle_timeout(now);
            shared.flush(&mut cm);
            events.extend(std::iter::from_fn(|| cm.poll_event()));
        }
        for e in events.drain(..) {
            on_event(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Member;
    use softrnic_wire::cm::{self as wcm, RepRepr, ReqRepr};
    use std::net::Ipv4Addr;
    use std::sync::mpsc;

    fn started(addr: IpAddr, guid: u64) -> (Member, CmDriver, mpsc::Receiver<Event>) {
        let (member, _sock) = Member::join(addr).unwrap();
        let (tx, rx) = mpsc::channel();
        let cfg = Config::new(guid, member.block(), 1);
        let on_event = Box::new(move |e| {
            let _ = tx.send(e);
        });
        (member, CmDriver::start(addr, cfg, on_event).unwrap(), rx)
    }

    /// The bound only keeps a broken CM from hanging the test.
    fn next(rx: &mpsc::Receiver<Event>) -> Event {
        rx.recv_timeout(Duration::from_secs(20)).expect("an event")
    }

    /// Two processes' worth of CM (two addresses) connect and disconnect over real sockets,
    /// through the agents' routing.
    #[test]
    fn connect_and_disconnect_over_loopback() {
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 47, 1));
        let b = IpAddr::V4(Ipv4Addr::new(127, 0, 47, 2));
        let (_ma, da, ea) = started(a, 1);
        let (_mb, db, eb) = started(b, 2);
        let service = wcm::PortSpace::Tcp.service_id(7471);
        db.listen(service, 0).unwrap();
        let in_use = db.listen(service, 0).unwrap_err();
        assert_eq!(in_use.raw_os_error(), Some(libc::EADDRINUSE));

        let mut req = ReqRepr::parse(&wcm::req::Packet::new_unchecked(&[0u8; 232][..])).unwrap();
        req.service_id = service;
        req.local_qpn = 0x1234;
        req.max_cm_retries = 15;
        req.remote_cm_response_timeout = 16;
        req.primary_path.local_ack_timeout = 10;
        let ca = da.with(|cm, now| cm.connect(now, b, req)).unwrap();
        let Event::Request {
            conn: cb,
            from,
            req: got,
        } = next(&eb)
        else {
            panic!("not a request")
        };
        assert_eq!((from, got.local_qpn), (a, 0x1234));
        let mut rep = RepRepr::parse(&wcm::rep::Packet::new_unchecked(&[0u8; 232][..])).unwrap();
        rep.local_qpn = 0x5678;
        db.with(|cm, now| cm.accept(now, cb, rep)).unwrap();
        let Event::Reply { conn, rep: got } = next(&ea) else {
            panic!("not a reply")
        };
        assert_eq!((conn, got.local_qpn), (ca, 0x5678));
        da.with(|cm, _| cm.ready_to_use(ca, &[])).unwrap();
        assert_eq!(next(&eb), Event::Established { conn: cb });

        da.with(|cm, now| cm.disconnect(now, ca, &[])).unwrap();
        assert!(matches!(next(&eb), Event::DisconnectRequested { conn, .. } if conn == cb));
        db.with(|cm, now| cm.disconnect(now, cb, &[])).unwrap();
        assert_eq!(next(&ea), Event::Disconnected { conn: ca });
        assert_eq!(next(&ea), Event::TimewaitExit { conn: ca });
        assert_eq!(next(&eb), Event::TimewaitExit { conn: cb });
    }
}
