//! A process's membership of a shared device: its QPN block, its socket of the group from
//! the agent (becoming the agent first if no process is), and a thread that watches the
//! connection to the agent. On it the agent may hand its group over (`handover.rs`): the
//! thread then runs the agent. When that connection ends (the agent's process died), the
//! thread gives the socket back, so that the next agent can build the group anew, and joins
//! again with the same block: the QPs keep their numbers. What else the old agent knew of
//! the process (the Service IDs its connection manager listens on) the process tells the new
//! one: the thread then runs the hooks given to [`Member::on_rejoin`]. The same thread answers
//! the questions of `softrnic status` on the block's lease ([`super::status`]).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{self, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::agent::{agent_name, join_request, pollin, Agent, AGENT_WAIT};
use super::block::{Lease, QpnBlock};
use super::fdpass;
use super::handover::{self, OFFER};
use super::status::{self, ProcessReport, QpReport};
use crate::counters::DeviceCounters;

/// How often the member's thread looks whether the member was dropped.
const STOP_TICK: Duration = Duration::from_millis(100);

/// What gets the socket of a rebuilt group (the device's transport adopts it).
pub type Adopt = Box<dyn Fn(UdpSocket) -> io::Result<()> + Send>;

/// What reads the device's counters and lists its QPs, for a status report.
pub type Observe = Box<dyn Fn() -> (DeviceCounters, Vec<QpReport>) + Send>;

/// What runs after the member joined a rebuilt group, on the member's thread; it returns
/// whether to run again after the next (`false` once what it served is gone).
pub type Rejoined = Box<dyn FnMut() -> bool + Send>;

/// This process on one shared device.
pub struct Member {
    addr: IpAddr,
    lease: Lease,
    shared: Arc<Shared>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

/// What the member and its watcher share.
struct Shared {
    stop: AtomicBool,
    conn: Mutex<UnixStream>,
    /// The agent, when this process runs it.
    agent: Mutex<Option<Agent>>,
    /// What runs after each rejoin, in the order given.
    rejoined: Mutex<Vec<Rejoined>>,
}

impl Member {
    /// Joins the device of `addr`: leases a block, and gets its socket of the group.
    ///
    /// # Errors
    /// No block is free; the agent refused (its errno: `EADDRINUSE` when port 4791 is held
    /// outside softrnic, by another user or kernel rxe); the agent could not be reached or
    /// started.
    pub fn join(addr: IpAddr) -> io::Result<(Member, UdpSocket)> {
        let lease = Lease::take(addr)?;
        let mut agent = None;
        let (conn, sock) = connect(addr, lease.block(), &mut agent)?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            conn: Mutex::new(conn),
            agent: Mutex::new(agent),
            rejoined: Mutex::new(Vec::new()),
        });
        let member = Member {
            addr,
            lease,
            shared,
            watcher: Mutex::new(None),
        };
        Ok((member, sock))
    }

    /// The QPN block.
    pub fn block(&self) -> QpnBlock {
        self.lease.block()
    }

    /// Whether this process runs the agent now.
    pub fn runs_agent(&self) -> bool {
        lock(&self.shared.agent).is_some()
    }

    /// Starts watching the agent (once): when it goes, `adopt` gets a placeholder socket
    /// (giving the group's back), then the socket of the rebuilt group. Meanwhile, status
    /// questions are answered with the counters and QPs `qps` gives, the device's address
    /// being on network interface `interface`.
    ///
    /// # Errors
    /// Spawning the thread; copying the lease's socket for it.
    pub fn watch(&self, interface: &str, adopt: Adopt, qps: Observe) -> io::Result<()> {
        let mut w = lock(&self.watcher);
        if w.is_some() {
            return Ok(());
        }
        let lease = self.lease.listener().try_clone()?;
        lease.set_nonblocking(true)?;
        let watcher = Watcher {
            addr: self.addr,
            block: self.block(),
            interface: interface.to_string(),
            shared: self.shared.clone(),
            lease,
            adopt,
            qps,
        };
        *w = Some(
            std::thread::Builder::new()
                .name(format!("softrnic member {}", self.addr))
                .spawn(move || watcher.run())?,
        );
        Ok(())
    }

    /// Runs `hook` each time the member has joined a rebuilt group (the agent changed
    /// hands), after the device got the new group's socket and before the member goes back
    /// to watching: the agent answers the process by then. Hooks run in the order given, on
    /// the thread [`Member::watch`] starts (none run without it); a hook may block it for a
    /// short while (a request to the agent), never wait for the member to be dropped.
    pub fn on_rejoin(&self, hook: Rejoined) {
        lock(&self.shared.rejoined).push(hook);
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = lock(&self.shared.conn).shutdown(std::net::Shutdown::Both);
        if let Some(t) = lock(&self.watcher).take() {
            // The watcher itself may drop the last reference to the device (through `adopt`
            // or `qps`); it then ends on its own, having seen `stop`.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        drop(lock(&self.shared.agent).take());
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Connects to the agent of `addr` (starting it in this process, into `agent`, if there is
/// none) and gets `block`'s socket.
fn connect(
    addr: IpAddr,
    block: QpnBlock,
    agent: &mut Option<Agent>,
) -> io::Result<(UnixStream, UdpSocket)> {
    let name = net::SocketAddr::from_abstract_name(agent_name(addr))?;
    // A new agent may first wait for an old group to go.
    let deadline = Instant::now() + AGENT_WAIT;
    loop {
        match UnixStream::connect_addr(&name) {
            Ok(conn) => match request(&conn, block) {
                Ok(sock) => return Ok((conn, sock)),
                // The agent's process exited meanwhile (or is exiting: its listener still
                // queued this connection, which the kernel then resets): try again.
                Err(e) if agent_gone(&e) => {}
                Err(e) => return Err(e),
            },
            Err(_) if agent.is_none() => *agent = Agent::try_start(addr)?,
            Err(_) => {}
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no softrnic agent for {addr} answered"),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a request failed because the agent's process went away during it.
fn agent_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

/// Asks the agent on `conn` for `block`'s socket.
fn request(conn: &UnixStream, block: QpnBlock) -> io::Result<UdpSocket> {
    fdpass::send(conn, &join_request(block), None)?;
    let mut answer = [0u8; 4];
    match fdpass::recv(conn, &mut answer)? {
        Some(Some(fd)) if answer[0] == b'S' => Ok(UdpSocket::from(fd)),
        Some(_) if answer[0] == b'E' => Err(io::Error::from_raw_os_error(i32::from(
            u16::from_le_bytes([answer[2], answer[3]]),
        ))),
        _ => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// The member's thread (see [`Member::watch`]).
struct Watcher {
    addr: IpAddr,
    block: QpnBlock,
    interface: String,
    shared: Arc<Shared>,
    lease: net::UnixListener,
    adopt: Adopt,
    qps: Observe,
}

impl Watcher {
    /// Waits for the connection to the agent to end, answering status questions meanwhile,
    /// then joins the rebuilt group; until the member is dropped.
    fn run(&self) {
        let shared = &self.shared;
        loop {
            let conn = match lock(&shared.conn).try_clone() {
                Ok(c) => c,
                Err(_) => return,
            };
            self.answer_until_readable(&conn);
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            // The agent's end closed, or it offers its group (`handover.rs`).
            let mut buf = [0u8; 4];
            let got = fdpass::recv(&conn, &mut buf);
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            if let (Ok(Some(Some(listener))), OFFER) = (got, buf[0]) {
                let slots = u16::from_le_bytes([buf[2], buf[3]]);
                if self.take_over(&conn, slots, listener).is_ok() {
                    continue;
                }
            }
            // Give the group's socket back: a placeholder takes its descriptor.
            if let Ok(placeholder) = UdpSocket::bind(SocketAddr::new(self.addr, 0)) {
                let _ = (self.adopt)(placeholder);
            }
            let mut agent = lock(&shared.agent).take();
            let joined = connect(self.addr, self.block, &mut agent);
            *lock(&shared.agent) = agent;
            match joined {
                Ok((conn, sock)) => {
                    *lock(&shared.conn) = conn;
                    let _ = (self.adopt)(sock);
                    self.run_rejoined();
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Becomes the agent of the group offered on `conn`, the old agent's `slots` sockets
    /// following `listener`.
    fn take_over(&self, conn: &UnixStream, slots: u16, listener: OwnedFd) -> io::Result<()> {
        let group = handover::take(self.addr, conn, slots, listener)?;
        // Holding every descriptor, this process serves the group even if the old agent is
        // gone before it heard so.
        let _ = handover::taken(conn);
        *lock(&self.shared.agent) = Some(Agent::resume(group)?);
        Ok(())
    }

    /// Runs the rejoin hooks, without holding their lock (a hook may add one), and keeps
    /// those that ask to run again.
    fn run_rejoined(&self) {
        let mut hooks = std::mem::take(&mut *lock(&self.shared.rejoined));
        hooks.retain_mut(|hook| hook());
        let mut kept = lock(&self.shared.rejoined);
        hooks.append(&mut kept);
        *kept = hooks;
    }

    /// Sleeps until `conn` is readable (the agent never writes after its answer: this is its
    /// end, or the member's own shutdown) or the member stops, answering every status
    /// question on the lease. The member's drop shuts `conn` down to wake it; the stop flag,
    /// looked at every [`STOP_TICK`], is what guarantees the end (a process exiting while
    /// others use its agent was seen to miss that wake-up).
    fn answer_until_readable(&self, conn: &UnixStream) {
        while !self.shared.stop.load(Ordering::Acquire) {
            let mut fds = [pollin(conn.as_raw_fd()), pollin(self.lease.as_raw_fd())];
            // SAFETY: `fds` is a valid array of two pollfd, alive during the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, STOP_TICK.as_millis() as i32) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if n < 0 || fds[0].revents != 0 {
                return;
            }
            while let Ok((asker, _)) = self.lease.accept() {
                let (counters, qps) = (self.qps)();
                let report = ProcessReport::of_this_process(
                    self.block,
                    lock(&self.shared.agent).is_some(),
                    &self.interface,
                    counters,
                    qps,
                );
                let _ = status::answer(asker, &report);
            }
        }
    }
}
