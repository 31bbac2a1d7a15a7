//! RoCEv2 over kernel UDP sockets: unprivileged, IPv4 and IPv6 (IBTA annex A17).
//!
//! A17.2.2: "The UDP destination port number 4791 has been reserved by IANA for RoCEv2";
//! A17.2.3: the UDP source port is flow entropy — kernel rxe uses one port >= 0xC000 per QP.
//!
//! # Socket design
//!
//! * **Receive**: one socket bound to `(local address, 4791)`. One device per address, so no
//!   `SO_REUSEADDR`. Datagrams are read with `recvmmsg` (one syscall per batch) straight into
//!   the caller's [`RecvBatch`] slots, asking for twice as many as the last call got (at least
//!   one, with the cheaper `recvfrom`): a busy poller that finds one datagram or none then
//!   costs the kernel no extra look at an empty queue, and a flood still reaches full batches
//!   within a few calls.
//! * **Receive through a packet ring** where the process may (`CAP_NET_RAW`, an IPv4 device):
//!   the datagrams to `(local address, 4791)` are read from memory the kernel shares
//!   (`udp/ring.rs`), with no system call; the receive socket holds the port and gives only
//!   the runs too long for the ring, whole (`udp/long_runs.rs`). Each call takes as many
//!   datagrams as the socket path would ask for ([`RecvPacing`]): one after a send, so that
//!   a ping-pong's request is handled before the ACK that came behind it. `SOFTRNIC_RING=0`
//!   or [`UdpTransport::without_ring`] keeps to the socket. It saves a system call per
//!   batch: `docs/performance.md` has what it measured.
//! * **Send**: the kernel takes a UDP source port from the socket's bound port, and RoCEv2
//!   needs a chosen source port per QP, so there is one socket per source port in use, bound
//!   to `(local address, port)` and opened lazily on its first packet (kept in a small map;
//!   port 4791 itself goes out of the receive socket). `IP_PKTINFO` can choose the source
//!   address but not the port, and raw sockets need privilege; this is the simplest design
//!   that works unprivileged. Each run of consecutive packets with the same source port goes
//!   out in one `sendmmsg`, every packet as an iovec list over the caller's pieces.
//! * **A source port held elsewhere**: the ports from 0xC000 are in Linux's ephemeral range,
//!   where any socket of the host (the IP-ID probe sink here included) may sit; one bound
//!   without `SO_REUSEADDR` keeps a source-port socket from binding. Such a port's packets
//!   leave from a port the kernel picks instead, kept for it ([`Transport::source_port`],
//!   asked before the emitter builds a packet, whose ICRC covers the port).
//! * **At most 256 source-port sockets** (`send.rs`): a socket is a file descriptor, and a
//!   socket per QP ran 1024 QPs out of the usual limit of 1024. Past them, or when no
//!   descriptor is left, a port shares an open one (connected to the same peer if any is).
//! * **Connected send sockets**: a source port's socket is connected to the destination of its
//!   first packet (an RC or UC QP has one). The kernel then keeps the route instead of looking
//!   it up for every datagram, which is a tenth of a loopback datagram's cost; datagrams to
//!   other destinations still go, with their address. The price is the IPv4 Identification:
//!   a connected socket numbers its DF datagrams from a random start, one number per datagram
//!   handed to the kernel, and the ICRC covers the ID. The transport learns the counter at
//!   connect time (`udp/ident.rs`), counts what it sends, and moves each packet's ICRC from
//!   the ID the emitter computed it for (its segment number, as for an unconnected socket) to
//!   the one it will carry ([`softrnic_wire::icrc::with_ipv4_ident`]: a table lookup and a
//!   carry-less multiplication, the last 4 bytes sent from scratch space). After a send error
//!   (which may or may not have used a number) it learns the counter again. Where the kernel
//!   cannot say (no transmit timestamps), sockets stay unconnected. `SOFTRNIC_CONNECT=0`
//!   keeps them unconnected from the start. A peer's UDP socket cannot see the ID either, so
//!   it checks IPv4 ICRCs from a connected softrnic, like kernel rxe's, for the ID that makes
//!   them match ([`super::IcrcStatus::OkForIdent`]).
//! * **Segmentation (UDP GSO)**: a run of packets the emitter marked (see [`SegmentLimits`])
//!   goes out as one message with a `UDP_SEGMENT` control message, and the kernel (or the
//!   NIC) cuts it into the packets: one pass through the stack for a 64 KiB WRITE instead of
//!   sixteen, and for an answer with its ACK behind it instead of two. Probed at bind; a run
//!   the route refuses (`EIO`, `EINVAL`) is dropped (RC retransmits it) and segmentation is
//!   turned off for the transport. The environment variable `SOFTRNIC_GSO=0` turns it off
//!   from the start.
//! * Every socket has `IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER` = `PMTUDISC_DO`: the kernel
//!   never fragments, IPv4 packets carry DF (as kernel rxe's do) and, from an unconnected
//!   socket, IP ID 0. A datagram over the path MTU fails with `EMSGSIZE` and is dropped
//!   (counted).
//! * All sockets are nonblocking; [`Transport::poll`] is one `ppoll` on the receive socket
//!   and the multicast groups' (the first [`MAX_POLLED_GROUPS`]), and, after a send would
//!   block, on the blocked socket for `POLLOUT`.
//! * **Multicast** (IBTA 10.5, `ibv_attach_mcast`): a socket per joined group, bound to
//!   `(group, 4791)`, read by [`Transport::recv_batch`] after the receive socket; every socket
//!   sends multicast from the device's interface (see `udp/mcast.rs`). [`Transport::wait_fd`] is
//!   the receive socket only, so a progress thread sleeping on it notices a group's datagram
//!   at its next wake-up (at most a millisecond later), not at once.
//! * **The host-local path** ([`UdpTransport::with_local_path`], `udp/local/`): datagrams to
//!   another softrnic device of the same host and network namespace are written into its
//!   inbox, shared memory, instead of sent: no system call on either side while the receiver
//!   polls. Everything else goes over UDP as above.
//! * The send sockets' receive buffers are shrunk to the minimum: peers send to 4791, so
//!   anything reaching a source port is stray and may be dropped.
//!
//! # No allocation per packet
//!
//! The `mmsghdr`, `iovec` and `sockaddr_storage` arrays of a batch are allocated once, with the
//! transport, and only the entries a call uses are written (at most [`MAX_MSGS`] datagrams and
//! [`MAX_IOVS`] pieces per syscall; larger batches take several); the receive buffers are the
//! caller's. The only allocations are the sockets and their map entry, once per source port.
//! The test `no_allocation_per_packet` checks this with a counting global allocator (see
//! `udp/tests.rs`).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use rustc_hash::FxHashMap;
use softrnic_wire::icrc::ICRC_LEN;
use softrnic_wire::ROCE_V2_UDP_PORT;

use crate::host::block::QpnBlock;

use super::{OutPacket, Ready, RecvBatch, SegmentLimits, Transport, TransportStats};

mod ident;
pub mod local;
mod long_runs;
mod mcast;
mod ring;
mod send;
mod sock;
pub use long_runs::{gro_segment_size, UDP_GRO};
use ring::RxRing;
use send::TxSocket;
#[cfg(test)]
use sock::UDP_NO_CHECK6_TX;
pub(crate) use sock::{bound_socket, never_fragment, setsockopt};
use sock::{open_socket, read_sockaddr};

/// Most datagrams per `sendmmsg` / `recvmmsg` call.
pub const MAX_MSGS: usize = 64;
/// Most of the caller's pieces per `sendmmsg` call, all datagrams together; also the most
/// pieces one [`OutPacket`] may have.
pub const MAX_IOVS: usize = 512;

/// The iovecs of one `sendmmsg`: the caller's pieces ([`MAX_IOVS`] at most), and, on a
/// connected IPv4 socket, one more per packet for its moved ICRC (see `udp/send.rs`); a packet
/// whose ICRC moves has a piece of its own, so that is at most twice as many. (It is also
/// the kernel's limit per message, `UIO_MAXIOV` = 1024.)
const SCRATCH_IOVS: usize = 2 * MAX_IOVS;

/// Most multicast group sockets [`Transport::poll`] waits on (the others are still read).
pub const MAX_POLLED_GROUPS: usize = 8;

/// Receive buffer asked for the 4791 socket (the kernel caps it at `net.core.rmem_max`).
pub(crate) const RX_BUFFER: libc::c_int = 4 << 20;

/// A device's transport over kernel UDP sockets.
#[derive(Debug)]
pub struct UdpTransport {
    local: IpAddr,
    rx: UdpSocket,
    tx: FxHashMap<u16, TxSocket>,
    /// Source ports another socket held, and the port each one's packets leave from instead.
    moved_ports: FxHashMap<u16, u16>,
    /// Where the IP ID probes of connected sockets go (opened with the first one).
    sink: Option<UdpSocket>,
    /// Whether new send sockets are connected (see the module comment).
    connect: bool,
    /// The source port whose socket last returned "would block".
    blocked: Option<u16>,
    stats: TransportStats,
    scratch: Box<Scratch>,
    /// Whether runs go out as one datagram with `UDP_SEGMENT` (see [`SegmentLimits`]).
    gso: bool,
    /// The multicast groups joined, each with its socket.
    groups: Vec<mcast::Group>,
    /// How many datagrams the next receive on the receive socket asks for.
    rx_pacing: RecvPacing,
    /// The packet ring the device's datagrams are read from instead of the receive socket,
    /// where one could be opened (see `udp/ring.rs`).
    ring: Option<RxRing>,
    /// The QPN block whose datagrams the kernel steers to `rx`, when the device is shared by
    /// the host's processes (`host/steer.rs`); the ring then takes only that block's too.
    block: Option<QpnBlock>,
    /// The host-local path (`udp/local/`), where it is on: the inbox other devices of the host
    /// write this one's datagrams into, and the lanes of theirs this one writes into.
    inbox: Option<local::Inbox>,
    outbox: Option<local::Outbox>,
}

/// Takes off a receive socket what the packet ring set on it (its filter, `UDP_GRO`): the
/// socket path's socket, or a group's socket the host agent hands to another process.
pub(crate) fn socket_alone(rx: &UdpSocket) {
    let _ = setsockopt(rx, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, 0);
    let _ = setsockopt(rx, libc::SOL_UDP, UDP_GRO, 0);
}

/// Sets the receive socket's options: never fragment, a large buffer, the multicast send
/// options; says whether the kernel can segment (UDP GSO) from it.
fn configure_receive_socket(rx: &UdpSocket, local: IpAddr) -> io::Result<bool> {
    never_fragment(rx, local)?;
    // Best effort: a bigger buffer absorbs bursts between two recv_batch calls.
    let _ = setsockopt(rx, libc::SOL_SOCKET, libc::SO_RCVBUF, RX_BUFFER);
    // A kernel that knows the option (segment size 0: none by default) can segment;
    // SOFTRNIC_GSO=0 turns it off (for comparisons, or a path that mishandles it).
    let wanted = std::env::var_os("SOFTRNIC_GSO").is_none_or(|v| v != "0");
    let gso = wanted && setsockopt(rx, libc::SOL_UDP, UDP_SEGMENT, 0).is_ok();
    mcast::set_send_options(rx, local);
    Ok(gso)
}

impl TransportStats {
    /// Counts the `n` datagrams received into `batch`'s slots from `first` on.
    fn count_received(&mut self, batch: &mut RecvBatch, first: usize, n: usize) {
        for (_, meta) in batch.slots_mut().skip(first).take(n) {
            self.rx_packets += 1;
            self.rx_bytes += meta.len as u64;
            self.rx_truncated += u64::from(meta.truncated);
        }
    }
}

/// How many datagrams a busy poller's next receive asks for (see [`RecvPacing::want`]), from
/// what it has seen: what the last receive brought, and how many receives in a row brought
/// one datagram each with nothing sent in between. The transport's receive socket keeps one, and
/// so does the raw baseline that receives as it does (`softrnic perf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvPacing {
    got: usize,
    singles: u8,
}

impl RecvPacing {
    /// Pacing as if the last receive had brought `got` datagrams.
    pub const fn after(got: usize) -> RecvPacing {
        RecvPacing { got, singles: 0 }
    }

    /// How many datagrams to ask for now.
    ///
    /// One datagram comes by `recvfrom`, more by `recvmmsg`, and on loopback here `recvmmsg`
    /// costs a ping-pong about 0.2 µs a hop more than `recvfrom` when asked for one, and 0.5 µs
    /// when asked for two and given one (the kernel looks at the empty queue once more before
    /// it returns). So the receive that brings the next request or answer must ask for one,
    /// and asks for more only on evidence of a queue:
    /// * a call that brought two or more: the next asks for twice as many (a flood reaches a
    ///   full batch in a few calls);
    /// * a third single datagram in a row with nothing sent in between: a steady stream. An
    ///   RC ping-pong never gets there: each side receives the peer's ACK and then its next
    ///   request, and sends its answer before the next ACK.
    pub fn want(&self) -> usize {
        next_want(self.got, self.singles)
    }

    /// A receive brought `got` datagrams.
    pub fn received(&mut self, got: usize) {
        self.singles = if got == 1 {
            self.singles.saturating_add(1)
        } else {
            0
        };
        self.got = got;
    }

    /// `packets` were sent. A few (an answer, its ACK): single datagrams since are a
    /// conversation, not a stream. More: the device is streaming (a long message, a READ
    /// response of megabytes), and what comes meanwhile queues up: the next receive asks for
    /// a batch. Asking one at a time, a device streaming a READ response took one request of
    /// every other QP per round of sending, and those behind a burst (500 duplicates of the
    /// READ) waited seconds.
    pub fn sent(&mut self, packets: usize) {
        if packets > CONVERSATION_PACKETS {
            self.got = self.got.max(MAX_MSGS / 2);
        } else {
            self.singles = 0;
        }
    }
}

/// The most packets a send of a conversation carries: an answer and the ACK of the request
/// it answers (see [`RecvPacing::sent`]).
const CONVERSATION_PACKETS: usize = 2;

/// The rule of [`RecvPacing::want`]: after a receive that brought `got` datagrams, the
/// `singles`-th in a row that brought exactly one with nothing sent in between.
fn next_want(got: usize, singles: u8) -> usize {
    match got {
        0 => 1,
        1 if singles < 2 => 1,
        _ => (2 * got).min(MAX_MSGS),
    }
}

/// The arrays `sendmmsg` / `recvmmsg` read, kept between calls so that a call writes only the
/// entries it uses (zeroing all of them each time cost more than the rest of a small send).
struct Scratch {
    addrs: [libc::sockaddr_storage; MAX_MSGS],
    iovs: [libc::iovec; SCRATCH_IOVS],
    hdrs: [libc::mmsghdr; MAX_MSGS],
    ctrls: [ControlBuf; MAX_MSGS],
    /// ICRCs moved to the IP ID their packet carries (connected sockets), one per packet.
    icrcs: [[u8; ICRC_LEN]; SCRATCH_IOVS],
    /// Per message of a `sendmmsg`: what it carries (kept here, so that a call writes only the
    /// entries it uses).
    plans: [MessagePlan; MAX_MSGS],
}

/// What one message of a `sendmmsg` carries.
#[derive(Clone, Copy)]
struct MessagePlan {
    /// UDP payload bytes.
    bytes: usize,
    /// Packets (more than one: a segmentation run).
    segs: usize,
    /// Its first iovec.
    first_iov: usize,
}

/// Room for one `UDP_SEGMENT` control message, aligned as `cmsghdr` must be.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct ControlBuf([u8; 32]);

// SAFETY: CMSG_SPACE only computes a length.
const _: () = assert!(unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as usize <= 32);

/// `UDP_SEGMENT` (linux/udp.h): the socket option and control message that give a datagram's
/// segment size, which makes the kernel send it as a segmentation run (UDP GSO, Linux 4.18).
pub const UDP_SEGMENT: libc::c_int = 103;

/// The kernel's most segments in one run (`UDP_MAX_SEGMENTS`, 64 before Linux 6.9).
pub const MAX_SEGMENTS: usize = 64;

// SAFETY: the raw pointers in `iovs` and `hdrs` are meaningful only during one call, which
// writes every entry it passes to the kernel first; between calls they are never followed.
unsafe impl Send for Scratch {}

impl Scratch {
    fn new() -> Box<Scratch> {
        // SAFETY: all-zero is a valid value of these plain C structs (null pointers, zero
        // lengths).
        Box::new(unsafe { zeroed() })
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scratch")
    }
}

impl UdpTransport {
    /// Binds `local`:4791 for receiving. `local` must be an address of this host.
    ///
    /// # Errors
    ///
    /// `AddrInUse` (with a message saying who may hold the port) if 4791 is taken on `local`;
    /// `AddrNotAvailable` if `local` is not an address of this host; other socket errors.
    pub fn bind(local: IpAddr) -> io::Result<UdpTransport> {
        UdpTransport::receiving(local, open_socket(local, ROCE_V2_UDP_PORT)?, None)
    }

    /// A transport receiving on `rx`, a socket of a shared device's group to which the kernel
    /// steers the datagrams of QPN block `block` (`host/steer.rs`).
    ///
    /// # Errors
    /// Setting `rx`'s options.
    pub fn on_steered_socket(
        local: IpAddr,
        rx: UdpSocket,
        block: QpnBlock,
    ) -> io::Result<UdpTransport> {
        UdpTransport::receiving(local, rx, Some(block))
    }

    fn receiving(
        local: IpAddr,
        rx: UdpSocket,
        block: Option<QpnBlock>,
    ) -> io::Result<UdpTransport> {
        let gso = configure_receive_socket(&rx, local)?;
        let connect = std::env::var_os("SOFTRNIC_CONNECT").is_none_or(|v| v != "0");
        Ok(UdpTransport {
            local,
            rx,
            tx: FxHashMap::default(),
            moved_ports: FxHashMap::default(),
            sink: None,
            connect,
            blocked: None,
            stats: TransportStats::default(),
            scratch: Scratch::new(),
            gso,
            groups: Vec::new(),
            rx_pacing: RecvPacing::after(MAX_MSGS / 2),
            ring: None,
            block,
            inbox: None,
            outbox: None,
        }
        .with_ring_if_allowed())
    }

    /// Opens the packet ring (`udp/ring.rs`) unless `SOFTRNIC_RING=0` says not to; where it
    /// cannot be opened (no `CAP_NET_RAW`, an IPv6 device) the socket receives.
    fn with_ring_if_allowed(self) -> UdpTransport {
        let wanted = std::env::var_os("SOFTRNIC_RING").is_none_or(|v| v != "0");
        if wanted {
            self.with_ring().unwrap_or_else(|(t, _)| t)
        } else {
            self
        }
    }

    /// The same transport reading its datagrams from a packet ring (`udp/ring.rs`).
    ///
    /// # Errors
    /// The transport as it was, with the reason: `PermissionDenied` without `CAP_NET_RAW`,
    /// `Unsupported` for an IPv6 device, or the error of a socket call.
    #[allow(clippy::result_large_err)]
    pub fn with_ring(mut self) -> Result<UdpTransport, (UdpTransport, io::Error)> {
        if self.ring.is_some() {
            return Ok(self);
        }
        let IpAddr::V4(local) = self.local else {
            let e = io::Error::new(io::ErrorKind::Unsupported, "the packet ring is IPv4's");
            return Err((self, e));
        };
        if !ring::takes_runs() {
            let e = io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel drops segmentation runs on their way to a packet ring (before Linux \
                 6.2)",
            );
            return Err((self, e));
        }
        let opened = RxRing::open(local, self.block).and_then(|r| {
            // From now on the socket keeps only what the ring cannot hold, whole (see
            // `udp/ring.rs`).
            setsockopt(&self.rx, libc::SOL_UDP, UDP_GRO, 1)?;
            ring::attach_filter(self.rx.as_raw_fd(), &ring::longer_than_the_ring())?;
            Ok(r)
        });
        match opened {
            Ok(r) => {
                self.ring = Some(r);
                Ok(self)
            }
            Err(e) => {
                self.socket_alone(); // whatever of the options above took
                Err((self, e))
            }
        }
    }

    /// The same transport reading its datagrams from the receive socket, as without
    /// `CAP_NET_RAW` (for comparisons, and to test that path where the ring would be used).
    pub fn without_ring(mut self) -> UdpTransport {
        if self.ring.take().is_some() {
            self.socket_alone();
        }
        self
    }

    /// The receive socket as the socket path wants it: no filter, and runs cut by the kernel
    /// (no `UDP_GRO`). Failure would leave the socket filtering, which only a kernel that
    /// refuses to remove a filter it accepted could cause.
    fn socket_alone(&mut self) {
        socket_alone(&self.rx);
    }

    /// The same transport on the host-local path (`udp/local/`): it opens its inbox, and
    /// sends through the inboxes of the host's other devices where they have one.
    ///
    /// # Errors
    /// The transport as it was, with the reason the inbox could not be opened (another
    /// device of this network namespace has its name: two devices on one address).
    #[allow(clippy::result_large_err)]
    pub fn with_local_path(mut self) -> Result<UdpTransport, (UdpTransport, io::Error)> {
        match local::Inbox::open(self.local, self.block) {
            Ok(inbox) => {
                self.inbox = Some(inbox);
                self.outbox = Some(local::Outbox::new(self.local));
                Ok(self)
            }
            Err(e) => Err((self, e)),
        }
    }

    /// [`UdpTransport::with_local_path`] unless `SOFTRNIC_LOCAL=0` says not to, or the inbox
    /// cannot be opened (then UDP alone, as before).
    pub fn with_local_path_if_allowed(self) -> UdpTransport {
        if local::wanted() {
            self.with_local_path().unwrap_or_else(|(t, _)| t)
        } else {
            self
        }
    }

    /// Senders on this host writing into this device's inbox, and destinations this device
    /// writes into the inbox of (see `udp/local/`).
    pub fn local_lanes(&self) -> (usize, usize) {
        (
            self.inbox.as_ref().map_or(0, local::Inbox::senders),
            self.outbox.as_ref().map_or(0, local::Outbox::lanes),
        )
    }

    /// Whether datagrams are read from a packet ring (see `udp/ring.rs`).
    pub fn receives_from_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// The same transport sending every packet as a datagram of its own, without UDP GSO (for
    /// comparisons, and for a path that cannot segment).
    pub fn without_segmentation(mut self) -> UdpTransport {
        self.gso = false;
        self
    }

    /// The same transport with send sockets that stay unconnected (every IPv4 datagram with
    /// IP ID 0), as `SOFTRNIC_CONNECT=0` makes it.
    pub fn without_connected_sockets(mut self) -> UdpTransport {
        self.connect = false;
        self
    }

    /// Number of source-port sockets opened so far.
    pub fn source_ports_open(&self) -> usize {
        self.tx.len()
    }

    /// The destination `port`'s socket is connected to, and (IPv4) the IP ID of its next
    /// datagram; `None` for an unconnected or unopened one.
    pub fn connection(&self, port: u16) -> Option<(SocketAddr, Option<u16>)> {
        let t = self.tx.get(&port)?;
        Some((t.peer?, t.next_ident))
    }

    /// Receives into `batch`'s slots from `first` on (at most `want`, at most [`MAX_MSGS`])
    /// from socket `fd`, whose datagrams are to `dst`; returns how many. One datagram is asked
    /// for with `recvfrom`, a cheaper call than `recvmmsg` (no message headers to copy in and
    /// out), which matters to a busy poller that mostly finds none.
    fn recv_from(
        &mut self,
        fd: RawFd,
        dst: IpAddr,
        batch: &mut RecvBatch,
        first: usize,
        want: usize,
    ) -> io::Result<usize> {
        let cap = batch
            .capacity()
            .saturating_sub(first)
            .min(want.min(MAX_MSGS));
        let got = match cap {
            0 => return Ok(0),
            1 => self.recv_one(fd, batch, first)?,
            _ => self.recv_many(fd, batch, first, cap)?,
        };
        for (_, meta) in batch.slots_mut().skip(first).take(got) {
            meta.dst = dst;
            meta.clear_ip_header();
        }
        self.stats.count_received(batch, first, got);
        Ok(got)
    }

    /// `recvfrom` into slot `first`: 1 if a datagram came (its length, truncation and source
    /// written), 0 if none was queued.
    fn recv_one(&mut self, fd: RawFd, batch: &mut RecvBatch, first: usize) -> io::Result<usize> {
        let local = self.local;
        let addr = &mut self.scratch.addrs[0];
        let Some((buf, meta)) = batch.slots_mut().nth(first) else {
            return Ok(0);
        };
        let got = nonblocking(|| {
            let mut addr_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            // SAFETY: `buf` and `addr` are valid for writes of the lengths passed and are not
            // otherwise accessed during the call. MSG_TRUNC makes it return the datagram's
            // real length, which tells a truncated one.
            unsafe {
                libc::recvfrom(
                    fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    (addr as *mut libc::sockaddr_storage).cast(),
                    &mut addr_len,
                )
            }
        })?;
        let Some(n) = got else {
            return Ok(0);
        };
        meta.truncated = n > buf.len();
        meta.len = n.min(buf.len());
        meta.src = read_sockaddr(addr).unwrap_or(SocketAddr::new(local, 0));
        Ok(1)
    }

    /// `recvmmsg` of at most `cap` datagrams into the slots from `first` on: how many came
    /// (each one's length, truncation and source written).
    fn recv_many(
        &mut self,
        fd: RawFd,
        batch: &mut RecvBatch,
        first: usize,
        cap: usize,
    ) -> io::Result<usize> {
        let Scratch {
            addrs, iovs, hdrs, ..
        } = &mut *self.scratch;
        for (iov, (buf, _)) in iovs.iter_mut().zip(batch.slots_mut().skip(first).take(cap)) {
            iov.iov_base = buf.as_mut_ptr().cast();
            iov.iov_len = buf.len();
        }
        let (addr_base, iov_base) = (addrs.as_mut_ptr(), iovs.as_mut_ptr());
        for (i, h) in hdrs[..cap].iter_mut().enumerate() {
            let h = &mut h.msg_hdr;
            // SAFETY: i < cap <= MAX_MSGS: in bounds.
            unsafe {
                h.msg_name = addr_base.add(i).cast();
                h.msg_iov = iov_base.add(i);
            }
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iovlen = 1;
        }
        let got = nonblocking(|| {
            // SAFETY: hdrs[..cap] point into addrs, iovs and the batch's slots, which outlive
            // the call and are not otherwise accessed during it.
            unsafe {
                libc::recvmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    cap as _,
                    libc::MSG_DONTWAIT as _,
                    std::ptr::null_mut(),
                ) as isize
            }
        })?
        .unwrap_or(0);
        let local = self.local;
        for (i, (_, meta)) in batch.slots_mut().skip(first).take(got).enumerate() {
            let h = &hdrs[i];
            meta.truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            meta.len = (h.msg_len as usize).min(iovs[i].iov_len);
            meta.src = read_sockaddr(&addrs[i]).unwrap_or(SocketAddr::new(local, 0));
        }
        Ok(got)
    }
}

/// Runs a nonblocking receive call until it is not interrupted: its result, `None` if it would
/// block.
fn nonblocking(mut call: impl FnMut() -> isize) -> io::Result<Option<usize>> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(Some(r as usize));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EAGAIN) => return Ok(None),
            _ => return Err(err),
        }
    }
}

impl Transport for UdpTransport {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        self.rx_pacing.sent(pkts.len());
        let mut done = 0;
        let now = self.outbox.as_ref().map(|_| std::time::Instant::now());
        while done < pkts.len() {
            // The packets from `done` on that go over UDP, up to the first for a lane.
            let mut udp = pkts.len() - done;
            if let (Some(outbox), Some(now)) = (&mut self.outbox, now) {
                let route = |o: &mut local::Outbox, p| o.route(p, now);
                if let local::Route::Local(key) = route(outbox, &pkts[done]) {
                    // The packets from `done` on for the same lane go in together (and are
                    // published together, `Outbox::push`): an ACK with the answer it
                    // left with, a message's segments. A segment after the first continues
                    // the run of the packet before it, to the same destination: it needs
                    // no route of its own.
                    let run = 1 + pkts[done + 1..]
                        .iter()
                        .take_while(|q| {
                            q.segment > 0 || route(outbox, q) == local::Route::Local(key)
                        })
                        .count();
                    // What a full lane has no room for is dropped, as a full socket buffer
                    // drops it: the receiver is behind, and RC resends (waiting for room
                    // instead stalled a thread that polls both devices, which alone could
                    // make it).
                    outbox.push(key, &pkts[done..done + run]);
                    done += run;
                    continue;
                }
                udp = 1 + pkts[done + 1..]
                    .iter()
                    .take_while(|q| route(outbox, q) == local::Route::Udp)
                    .count();
            }
            match self.send_run(&pkts[done..done + udp]) {
                Ok((n, blocked)) => {
                    done += n;
                    if blocked || n == 0 {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break, // The next call reports it.
            }
        }
        Ok(done)
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.set_len(0);
        if let Some(outbox) = &mut self.outbox {
            // Whoever receives for this device watches what it wrote into other devices'
            // inboxes, and rings a receiver that stopped reading (`local/unread.rs`).
            outbox.watch();
        }
        let (fd, local) = (self.rx.as_raw_fd(), self.local);
        let mut watched = 0;
        let mut n = match &mut self.ring {
            Some(ring) => {
                let n = ring.recv(fd, batch, 0, self.rx_pacing.want().min(MAX_MSGS))?;
                self.rx_pacing.received(n);
                self.stats.count_received(batch, 0, n);
                n
            }
            None => {
                let n = self.recv_from(fd, local, batch, 0, self.rx_pacing.want())?;
                self.rx_pacing.received(n);
                n
            }
        };
        if let Some(inbox) = &mut self.inbox {
            // After the socket: a datagram sent over UDP before its sender got a lane is
            // there already, and comes first.
            let got = inbox.recv(batch, n);
            self.stats.count_received(batch, n, got);
            self.stats.rx_local += got as u64;
            n += got;
            watched = got;
        }
        for i in 0..self.groups.len() {
            let g = &self.groups[i];
            let (fd, group) = (g.sock.as_raw_fd(), g.ip);
            // A group socket's error (none is expected of an unconnected UDP socket) must not
            // lose what the others received: that socket is skipped this time.
            n += self.recv_from(fd, group, batch, n, MAX_MSGS).unwrap_or(0);
        }
        batch.set_len(n);
        batch.set_watched(watched);
        Ok(n)
    }

    fn release_received(&mut self) {
        if let Some(inbox) = &mut self.inbox {
            inbox.release();
        }
    }

    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready> {
        let unused = libc::pollfd {
            fd: -1, // ignored by ppoll
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [unused; 2 + MAX_POLLED_GROUPS];
        fds[0].fd = self.ring.as_ref().map_or(self.rx.as_raw_fd(), RxRing::fd);
        fds[1].events = libc::POLLOUT;
        if let Some(port) = self.blocked {
            fds[1].fd = match self.tx.get(&port) {
                Some(t) => t.sock.as_raw_fd(),
                None => self.rx.as_raw_fd(), // port 4791
            };
        }
        for (p, g) in fds[2..].iter_mut().zip(&self.groups) {
            p.fd = g.sock.as_raw_fd();
        }
        let nfds = 2 + self.groups.len().min(MAX_POLLED_GROUPS);
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as _,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: fds and ts outlive the call; a null sigmask leaves the mask alone.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), nfds as _, tsp, std::ptr::null()) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                return Ok(Ready {
                    recv: false,
                    send: self.blocked.is_none(),
                });
            }
            return Err(err);
        }
        if fds[1].revents != 0 {
            self.blocked = None;
        }
        let group_ready = fds[2..nfds].iter().any(|p| p.revents != 0);
        Ok(Ready {
            recv: fds[0].revents != 0 || group_ready,
            send: self.blocked.is_none(),
        })
    }

    fn local_addr(&self) -> IpAddr {
        self.local
    }

    /// Opens the group's socket and joins it on the device's interface (see `udp/mcast.rs`).
    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        if self.groups.iter().any(|g| g.ip == group) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "group already joined",
            ));
        }
        self.groups.push(mcast::join(self.local, group)?);
        Ok(())
    }

    /// Closes the group's socket, which leaves the group.
    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let i = self
            .groups
            .iter()
            .position(|g| g.ip == group)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "group not joined"))?;
        self.groups.swap_remove(i);
        Ok(())
    }

    fn source_port(&mut self, src_port: u16, dst: SocketAddr) -> u16 {
        self.resolve_source_port(src_port, dst)
    }

    /// A datagram for a lane needs none: its receiver does not check it. (Between this
    /// answer and `send_batch`, microseconds, a lane may turn out gone only if its
    /// receiver closed it in that moment; the datagram then leaves over UDP with a zero
    /// ICRC, is dropped by whoever now has the address, and RC sends it again.)
    fn wants_icrc(&mut self, dst: SocketAddr, dest_qp: u32, len: usize) -> bool {
        let Some(outbox) = &mut self.outbox else {
            return true;
        };
        let now = std::time::Instant::now();
        outbox.route_to(dst, dest_qp, len, now) == local::Route::Udp
    }

    fn ipv4_ident(&self, src_port: u16) -> Option<u16> {
        self.tx.get(&src_port).and_then(|t| t.next_ident)
    }

    fn segment_limits(&self) -> SegmentLimits {
        if !self.gso {
            return SegmentLimits::NONE;
        }
        SegmentLimits {
            max_segments: MAX_SEGMENTS,
            // The largest IPv4 UDP payload (65535 - 20 - 8), IPv6's being larger.
            max_bytes: 65_507,
            // Two runs fit in one call at least.
            max_pieces: MAX_IOVS / 2,
        }
    }

    fn sleep_gate(&self) -> Option<std::sync::Arc<local::SleepGate>> {
        self.inbox.as_ref().map(local::Inbox::gate)
    }

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.ring.as_ref().map_or(self.rx.as_raw_fd(), RxRing::fd))
    }

    // `rx` takes the old socket's descriptor number (dup2), so a thread sleeping on
    // `wait_fd` wakes for the new one; the old socket is closed unless the agent holds it.
    fn adopt_receive_socket(&mut self, rx: UdpSocket) -> io::Result<()> {
        configure_receive_socket(&rx, self.local)?;
        if self.ring.is_some() {
            setsockopt(&rx, libc::SOL_UDP, UDP_GRO, 1)?;
            ring::attach_filter(rx.as_raw_fd(), &ring::longer_than_the_ring())?;
        }
        // SAFETY: both descriptors are open sockets this transport owns; dup2 closes the old
        // one's description as it installs the new one under the same number.
        if unsafe { libc::dup2(rx.as_raw_fd(), self.rx.as_raw_fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn stats(&self) -> TransportStats {
        let (tx_local, tx_local_bytes, tx_local_dropped, tx_local_rung) = self
            .outbox
            .as_ref()
            .map_or((0, 0, 0, 0), |o| (o.sent, o.bytes, o.dropped, o.rung));
        TransportStats {
            rx_from_ring: self.ring.is_some(),
            rx_ring_dropped: self.ring.as_ref().map_or(0, RxRing::dropped),
            tx_packets: self.stats.tx_packets + tx_local,
            tx_bytes: self.stats.tx_bytes + tx_local_bytes,
            tx_local,
            tx_local_dropped,
            tx_local_rung,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests;
