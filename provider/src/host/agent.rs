//! The host agent of one address: it builds and keeps the `SO_REUSEPORT` group of
//! `(address, 4791)` ([`super::steer`]) and hands each process the socket of its QPN block.
//!
//! It listens on the abstract Unix name `softrnic/<address>/agent`; whoever binds that name
//! is the agent (the kernel lets one socket have it, and frees it when its process exits).
//! A process sends `J` and its leased block; the agent answers `S` with the block's socket
//! beside it (`SCM_RIGHTS`), or `E` and an errno. The process's connection stays open: its
//! end (the process exited, however) frees the block's socket for the next process to lease
//! that block. The agent keeps every socket it made, so nothing leaves the group and no
//! socket's index ever changes while it runs.
//!
//! Socket 0 is the agent's own. It receives what belongs to no process: QP1's management
//! datagrams, datagrams for blocks no process holds, and datagrams too short for a BTH. A
//! MAD for QP1 goes to the process it is for, as `mad_route.rs` says, over the link of
//! [`super::cm_link`], where processes also register the Service IDs they listen on. A MAD
//! for no process gets the answer of a connection manager that has no listener and no
//! connection ([`crate::cm`]): a REQ is rejected with reason 8 (Invalid Service ID), a
//! SIDR_REQ gets status 1, a DREQ its DREP, so that a peer's rdma_cm hears "refused" soon
//! rather than timing out. A REQ or SIDR_REQ first waits [`super::unclaimed::LISTEN_GRACE`]
//! for a listener that may be registering just then. Everything else is counted and
//! dropped; so is what arrives on the socket of a freed block.
//!
//! An agent whose process closes its device hands the whole group to another member's
//! process ([`super::handover`]), which goes on serving it: no socket leaves the group and no
//! process notices. Only if the agent's process dies without closing its device is a new
//! agent needed: it waits until the old group is gone — every process, seeing its connection
//! end, gives its socket back — and builds a new one. It knows no listeners: each process,
//! having joined it, registers its Service IDs again ([`super::cm_link`]), and until it has,
//! REQs for them are rejected as for nobody's.

use std::io;
use std::net::{IpAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use softrnic_wire::mad::{self, MAD_LEN};
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::block::QpnBlock;
use super::cm_link::{self, MadOutbox, Record};
use super::mad_route::{Listeners, Route};
use super::unclaimed::Unclaimed;
use super::{fdpass, steer};
use crate::cm::{Cm, Config};
use crate::gsi;
use crate::transport::{IcrcStatus, RecvMeta, RecvPacket};

/// How long a new agent waits for the sockets of the group it replaces to be given back.
pub const REBUILD_WAIT: Duration = Duration::from_secs(2);

/// How long a process waits for an agent to answer it: a new agent may first wait
/// [`REBUILD_WAIT`] for the old group to go.
pub const AGENT_WAIT: Duration = REBUILD_WAIT.saturating_add(Duration::from_secs(3));

/// How long the agent sleeps in `poll(2)` before looking whether it must stop.
const TICK: Duration = Duration::from_millis(50);

/// How long the agent waits before handing MADs again to a process whose queue was full.
const OUTBOX_RETRY: Duration = Duration::from_millis(1);

/// The agent's abstract socket name for `addr`.
pub fn agent_name(addr: IpAddr) -> String {
    format!("softrnic/{addr}/agent")
}

/// A request: join, with the block leased.
pub(super) fn join_request(block: QpnBlock) -> [u8; 4] {
    let [lo, hi] = block.0.to_le_bytes();
    [b'J', 0, lo, hi]
}

/// The agent, running on a thread of this process. Dropped, it stops and hands its group to
/// another process ([`super::handover`]).
pub struct Agent {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Option<Group>>>,
}

impl Agent {
    /// Becomes the agent of `addr`, unless a process already is (`None`).
    ///
    /// # Errors
    /// Creating the agent's socket or thread.
    pub fn try_start(addr: IpAddr) -> io::Result<Option<Agent>> {
        let name = SocketAddr::from_abstract_name(agent_name(addr))?;
        let listener = match UnixListener::bind_addr(&name) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Ok(None),
            Err(e) => return Err(e),
        };
        listener.set_nonblocking(true)?;
        let link = UnixDatagram::bind_addr(&cm_link::agent_name(addr)?)?;
        link.set_nonblocking(true)?;
        Agent::spawn(addr, move |stop| match Group::build(addr, listener, link) {
            Ok(group) => Some(serve(group, stop)),
            Err(e) => {
                refuse_everyone(e.listener, stop);
                None
            }
        })
        .map(Some)
    }

    /// Goes on serving `group`, which another process's agent handed over.
    ///
    /// # Errors
    /// Spawning the thread.
    pub(super) fn resume(group: Group) -> io::Result<Agent> {
        Agent::spawn(group.addr, move |stop| Some(serve(group, stop)))
    }

    fn spawn(
        addr: IpAddr,
        f: impl FnOnce(&AtomicBool) -> Option<Group> + Send + 'static,
    ) -> io::Result<Agent> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("softrnic agent {addr}"))
            .spawn(move || f(&s))?;
        Ok(Agent {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            if let Ok(Some(mut group)) = t.join() {
                group.answer_for_nobody(Instant::now());
                super::handover::give(group);
            }
        }
    }
}

/// A process's connection and the block whose socket it holds.
pub(super) struct Member {
    pub(super) conn: UnixStream,
    pub(super) block: QpnBlock,
}

/// The group: its sockets by index (= block), and who holds each; with what the agent
/// listens on.
pub(super) struct Group {
    pub(super) addr: IpAddr,
    /// Where processes connect to join (the agent's name).
    pub(super) listener: UnixListener,
    pub(super) slots: Vec<UdpSocket>,
    pub(super) members: Vec<Member>,
    /// Datagrams the agent dropped (socket 0's and freed blocks').
    dropped: u64,
    /// The connection manager that answers QP1's MADs for nobody: it never has a listener
    /// or a connection, so it keeps nothing.
    cm: Cm,
    /// The link to the processes' connection managers ([`cm_link`]).
    pub(super) link: UnixDatagram,
    /// Who listens on which Service ID.
    pub(super) listeners: Listeners,
    /// The MADs of a burst for the processes, sent when it has been read.
    outbox: MadOutbox,
    /// REQs for no listener, waiting a moment for one.
    unclaimed: Unclaimed,
}

impl Group {
    /// A new group, once no socket of an older one is left (or [`REBUILD_WAIT`] passed).
    ///
    /// # Errors
    /// The port is held outside softrnic: the listener comes back, to refuse everyone.
    fn build(addr: IpAddr, listener: UnixListener, link: UnixDatagram) -> Result<Group, Unbuilt> {
        let deadline = Instant::now() + REBUILD_WAIT;
        while !steer::port_is_free(addr) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let first = match steer::open_slot(addr).and_then(|s| steer::attach(&s, 1).map(|_| s)) {
            Ok(s) => s,
            Err(_) => return Err(Unbuilt { listener }),
        };
        Ok(Group::of(addr, listener, vec![first], link))
    }

    /// A group of `slots`, index 0 first, with no member yet.
    pub(super) fn of(
        addr: IpAddr,
        listener: UnixListener,
        slots: Vec<UdpSocket>,
        link: UnixDatagram,
    ) -> Group {
        Group {
            addr,
            listener,
            slots,
            members: Vec::new(),
            dropped: 0,
            cm: Cm::new(Config::new(0, QpnBlock(0), 0)),
            link,
            listeners: Listeners::default(),
            outbox: MadOutbox::default(),
            unclaimed: Unclaimed::default(),
        }
    }

    fn held(&self, block: QpnBlock) -> bool {
        self.members.iter().any(|m| m.block == block)
    }

    /// Grows the group to hold `block`'s socket: new sockets join at the end, in index
    /// order, before the program counts them.
    fn grow_to(&mut self, block: QpnBlock) -> io::Result<()> {
        let want = usize::from(block.0) + 1;
        if self.slots.len() < want {
            while self.slots.len() < want {
                self.slots.push(steer::open_slot(self.addr)?);
            }
            steer::attach(&self.slots[0], want as u16)?;
        }
        Ok(())
    }

    /// Answers a process's join request on `conn`.
    fn join(&mut self, conn: UnixStream) {
        conn.set_read_timeout(Some(Duration::from_secs(1))).ok();
        let mut req = [0u8; 4];
        let block = match fdpass::recv(&conn, &mut req) {
            Ok(Some(_)) if req[0] == b'J' => QpnBlock(u16::from_le_bytes([req[2], req[3]])),
            _ => return, // not a process of ours, or gone: drop the connection
        };
        let refuse = |errno: i32| {
            let [lo, hi] = (errno as u16).to_le_bytes();
            let _ = fdpass::send(&conn, &[b'E', 0, lo, hi], None);
        };
        if block.0 == 0 || u32::from(block.0) >= super::block::BLOCKS {
            return refuse(libc::EINVAL);
        }
        if self.held(block) {
            return refuse(libc::EADDRINUSE);
        }
        if let Err(e) = self.grow_to(block) {
            return refuse(e.raw_os_error().unwrap_or(libc::EIO));
        }
        let slot = &self.slots[usize::from(block.0)];
        // What a previous holder left: its datagrams and its socket options.
        let left = drain(slot);
        // What the ring set on it (`transport/udp/ring.rs`).
        crate::transport::udp::socket_alone(slot);
        self.dropped += left;
        if fdpass::send(&conn, b"S\0\0\0", Some(slot.as_raw_fd())).is_ok() {
            self.members.push(Member { conn, block });
        }
    }

    /// Serves the processes' requests on the link: listen and unlisten. A listen is answered
    /// `ENOTCONN` while its block has not joined (a process may ask before it has rejoined a
    /// new agent, and asks again); a block listening again on its own Service ID (as each
    /// does after the agent changed hands) changes nothing.
    fn serve_link(&mut self) {
        let mut buf = [0u8; cm_link::RECORD_LEN];
        while let Ok((n, asker)) = self.link.recv_from(&mut buf) {
            match Record::decode(&buf[..n]) {
                Some(Record::Listen {
                    block,
                    service,
                    transaction,
                }) => {
                    let errno = if !self.held(block) {
                        libc::ENOTCONN
                    } else {
                        match self.listeners.listen(service, block) {
                            Ok(()) => 0,
                            Err(_) => libc::EADDRINUSE,
                        }
                    };
                    let answer = Record::Answer { transaction, errno };
                    let _ = cm_link::send(&self.link, &answer, &asker);
                    if errno == 0 {
                        for (from, mad) in self.unclaimed.claim(service) {
                            self.hand_over(block, from, mad);
                        }
                    }
                }
                Some(Record::Unlisten { block, service }) => {
                    self.listeners.unlisten(service, block)
                }
                _ => self.dropped += 1,
            }
        }
    }

    /// The sockets of blocks nobody holds (not the agent's own, socket 0).
    fn unheld(&self) -> impl Iterator<Item = &UdpSocket> {
        self.slots
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(i, _)| !self.held(QpnBlock(*i as u16)))
            .map(|(_, s)| s)
    }

    /// Hands QP1's MADs on socket 0 to the processes they are for (`mad_route.rs`), answers
    /// the others as a CM with no listener would, and drops the rest.
    fn serve_socket0(&mut self) {
        let mut buf = [0u8; 512];
        let now = Instant::now();
        while let Ok((n, from)) = self.slots[0].recv_from(&mut buf) {
            // The ICRC first, as the devices' own receive path checks it (`transport`).
            let meta = RecvMeta::from_socket(from, self.addr, n);
            let pkt = RecvPacket {
                meta: &meta,
                payload: &buf[..n],
            };
            let checked = pkt.icrc_status() != IcrcStatus::Bad;
            let Some(mad) = checked.then(|| gsi::decode(&buf[..n]).ok()).flatten() else {
                self.dropped += 1;
                continue;
            };
            let p = mad::Packet::new_unchecked(&mad[..]);
            match self.listeners.route(p.attribute_id(), p.data()) {
                Ok(Route::Block(b)) if self.held(b) => self.hand_over(b, from.ip(), *mad),
                Ok(Route::NoListener(service)) => {
                    if !self.unclaimed.hold(now, service, from.ip(), mad) {
                        self.cm.handle(now, from.ip(), mad);
                    }
                }
                _ => self.cm.handle(now, from.ip(), mad),
            }
        }
        self.answer_for_nobody(now);
    }

    /// Queues `mad` from `from` for the process of `block`.
    fn hand_over(&mut self, block: QpnBlock, from: IpAddr, mad: [u8; MAD_LEN]) {
        if !self.outbox.push(block, from, &mad) {
            self.dropped += self.outbox.flush(&self.link, self.addr);
            self.dropped += u64::from(!self.outbox.push(block, from, &mad));
        }
    }

    /// Sends what is queued: the processes' MADs, and the agent's own answers, with those
    /// to the REQs whose wait for a listener is over.
    fn answer_for_nobody(&mut self, now: Instant) {
        for (from, mad) in self.unclaimed.expired(now) {
            self.cm.handle(now, from, &mad);
        }
        self.dropped += self.outbox.flush(&self.link, self.addr);
        let src = (self.addr, ROCE_V2_UDP_PORT);
        crate::driver::cm::send_mads(&mut self.cm, &self.slots[0], src);
    }
}

/// Receives and drops everything `s` holds; returns how many.
fn drain(s: &UdpSocket) -> u64 {
    let mut buf = [0u8; 64];
    let mut n = 0;
    while s.recv(&mut buf).is_ok() {
        n += 1;
    }
    n
}

/// A group that could not be built: port 4791 is held outside softrnic (another user,
/// kernel rxe).
struct Unbuilt {
    listener: UnixListener,
}

/// Answers every process `EADDRINUSE`: it gets no socket from this agent, and says so when it
/// opens the device.
fn refuse_everyone(listener: UnixListener, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        while let Ok((conn, _)) = listener.accept() {
            let _ = fdpass::send(&conn, &[b'E', 0, libc::EADDRINUSE as u8, 0], None);
        }
        std::thread::sleep(TICK);
    }
}

/// Serves `group` until `stop`; gives it back.
fn serve(mut group: Group, stop: &AtomicBool) -> Group {
    while !stop.load(Ordering::Acquire) {
        let mut fds = vec![pollin(group.listener.as_raw_fd())];
        fds.extend(group.members.iter().map(|m| pollin(m.conn.as_raw_fd())));
        let first_slot = fds.len();
        fds.push(pollin(group.link.as_raw_fd()));
        fds.push(pollin(group.slots[0].as_raw_fd()));
        fds.extend(group.unheld().map(|s| pollin(s.as_raw_fd())));
        let mut wait = if group.outbox.is_empty() {
            TICK
        } else {
            OUTBOX_RETRY
        };
        if let Some(expiry) = group.unclaimed.next_expiry(Instant::now()) {
            wait = wait.min(expiry);
        }
        // Rounded up: a wait that ends a millisecond early would wake for nothing.
        let ms = wait.as_micros().div_ceil(1000) as libc::c_int;
        // SAFETY: `fds` is a valid array of pollfds of its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as _, ms) };
        if n <= 0 {
            group.answer_for_nobody(Instant::now());
            continue;
        }
        // A member's connection readable: it ended (a member sends nothing after joining).
        let ended: Vec<usize> = (1..first_slot)
            .filter(|i| fds[*i].revents != 0)
            .map(|i| i - 1)
            .collect();
        for i in ended.into_iter().rev() {
            let gone = group.members.swap_remove(i);
            group.listeners.forget(gone.block);
        }
        group.serve_link();
        group.serve_socket0();
        let dropped: u64 = group.unheld().map(drain).sum();
        group.dropped += dropped;
        if fds[0].revents != 0 {
            while let Ok((conn, _)) = group.listener.accept() {
                let _ = conn.set_nonblocking(false);
                group.join(conn);
            }
        }
    }
    group
}

/// A `pollfd` waiting for `fd` to become readable.
pub(crate) fn pollin(fd: std::os::fd::RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::Event;
    use softrnic_wire::cm::{req, ReqRepr, MSG_LEN};
    use softrnic_wire::Psn;
    use std::net::Ipv4Addr;

    /// A peer's rdma_cm connecting to a port nobody listens on hears REJ reason 8 at once
    /// from the agent, and a stray packet to QP1 gets nothing back.
    #[test]
    fn a_req_for_nobody_is_rejected_by_the_agent() {
        let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 6));
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 7));
        // Joining waits until the agent has built the group.
        let (_member, _group_socket) = crate::host::Member::join(addr).unwrap();
        let sock = UdpSocket::bind((peer, ROCE_V2_UDP_PORT)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut cm = Cm::new(Config::new(1, QpnBlock(3), 0));
        let mut r = ReqRepr::parse(&req::Packet::new_unchecked(&[0u8; MSG_LEN][..])).unwrap();
        r.service_id = 0x0106_4e21;
        let conn = cm.connect(Instant::now(), addr, r).unwrap();
        let t = cm.poll_transmit().unwrap();
        let p = gsi::encode((peer, ROCE_V2_UDP_PORT), addr, Psn::new(0), &t.mad).unwrap();
        let mut stray = p;
        stray[12] ^= 0xff; // the Q_Key
        sock.send_to(&stray, (addr, ROCE_V2_UDP_PORT)).unwrap();
        sock.send_to(&p, (addr, ROCE_V2_UDP_PORT)).unwrap();
        let mut buf = [0u8; 512];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(from, std::net::SocketAddr::new(addr, ROCE_V2_UDP_PORT));
        cm.handle(Instant::now(), addr, gsi::decode(&buf[..n]).unwrap());
        let Some(Event::Rejected { conn: c, rej }) = cm.poll_event() else {
            panic!("not a REJ")
        };
        assert_eq!((c, rej.reason), (conn, 8));
    }
}

#[cfg(test)]
mod routing_tests {
    use super::*;
    use crate::host::cm_link::MemberLink;
    use crate::host::Member;
    use softrnic_wire::cm::{req, ReqRepr, MSG_LEN};
    use softrnic_wire::Psn;
    use std::net::Ipv4Addr;

    /// A REQ for a Service ID a process listens on reaches that process, with its source
    /// address; one for another Service ID is rejected by the agent; a second process may
    /// not listen on the first's Service ID.
    #[test]
    fn a_req_goes_to_the_process_listening_on_its_service_id() {
        let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 8));
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 9));
        let (member, _sock) = Member::join(addr).unwrap();
        let link = MemberLink::open(addr, member.block()).unwrap();
        link.listen(0x0106_0001).unwrap();
        link.listen(0x0106_0001).unwrap(); // again: no change
        let (other, _sock2) = Member::join(addr).unwrap();
        let link2 = MemberLink::open(addr, other.block()).unwrap();
        let in_use = link2.listen(0x0106_0001).unwrap_err();
        assert_eq!(in_use.raw_os_error(), Some(libc::EADDRINUSE));
        link2.listen(0x0106_0002).unwrap();

        let sock = UdpSocket::bind((peer, ROCE_V2_UDP_PORT)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut cm = Cm::new(Config::new(1, QpnBlock(3), 0));
        let mut send_req = |service: u64| {
            let mut r = ReqRepr::parse(&req::Packet::new_unchecked(&[0u8; MSG_LEN][..])).unwrap();
            r.service_id = service;
            let conn = cm.connect(Instant::now(), addr, r).unwrap();
            let t = cm.poll_transmit().unwrap();
            let p = gsi::encode((peer, ROCE_V2_UDP_PORT), addr, Psn::new(0), &t.mad).unwrap();
            sock.send_to(&p, (addr, ROCE_V2_UDP_PORT)).unwrap();
            (conn, t.mad)
        };
        let (_, mad) = send_req(0x0106_0001);
        let (_, mad2) = send_req(0x0106_0002);
        let (rejected, _) = send_req(0x0106_0003);
        let mut buf = [0u8; 512];
        let (n, _) = sock.recv_from(&mut buf).unwrap();
        let p = softrnic_wire::mad::Packet::new_checked(gsi::decode(&buf[..n]).unwrap()).unwrap();
        let rej = softrnic_wire::cm::RejRepr::parse(
            &softrnic_wire::cm::rej::Packet::new_checked(p.data()).unwrap(),
        )
        .unwrap();
        assert_eq!((rej.reason, rej.remote_comm_id), (8, rejected.0));
        // The agent reads socket 0 in order: the REJ to the third REQ left after the first
        // two were handed over, so they are queued by now.
        assert_eq!(link.received(), [(peer, mad)]);
        assert_eq!(link2.received(), [(peer, mad2)]);
        assert_eq!(link.received(), []);
    }

    /// A REQ that comes while its listener is registering (the listen a moment after it)
    /// reaches the listener, and its sender hears no REJ (`unclaimed.rs`).
    #[test]
    fn a_req_just_before_its_listen_reaches_the_listener() {
        let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 16));
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 17));
        let (member, _sock) = Member::join(addr).unwrap();
        let link = MemberLink::open(addr, member.block()).unwrap();
        let sock = UdpSocket::bind((peer, ROCE_V2_UDP_PORT)).unwrap();
        let mut cm = Cm::new(Config::new(1, QpnBlock(3), 0));
        let mut r = ReqRepr::parse(&req::Packet::new_unchecked(&[0u8; MSG_LEN][..])).unwrap();
        r.service_id = 0x0106_0004;
        cm.connect(Instant::now(), addr, r).unwrap();
        let t = cm.poll_transmit().unwrap();
        let p = gsi::encode((peer, ROCE_V2_UDP_PORT), addr, Psn::new(0), &t.mad).unwrap();
        sock.send_to(&p, (addr, ROCE_V2_UDP_PORT)).unwrap();
        // The agent reads the REQ before the listen, well within the grace.
        std::thread::sleep(Duration::from_millis(10));
        link.listen(0x0106_0004).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = loop {
            let got = link.received();
            if !got.is_empty() || Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(got, [(peer, t.mad)]);
        sock.set_read_timeout(Some(super::super::unclaimed::LISTEN_GRACE * 4))
            .unwrap();
        let mut buf = [0u8; 512];
        assert!(sock.recv_from(&mut buf).is_err(), "an answer to the REQ");
    }
}
