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
//! * **Send**: the kernel takes a UDP source port from the socket's bound port, and RoCEv2
//!   needs a chosen source port per QP, so there is one socket per source port in use, bound
//!   to `(local address, port)` and opened lazily on its first packet (kept in a small map;
//!   port 4791 itself goes out of the receive socket). `IP_PKTINFO` can choose the source
//!   address but not the port, and raw sockets need privilege; this is the simplest design
//!   that works unprivileged. Each run of consecutive packets with the same source port goes
//!   out in one `sendmmsg`, every packet as an iovec list over the caller's pieces.
//! * **Segmentation (UDP GSO)**: a run of packets the emitter marked (see [`SegmentLimits`])
//!   goes out as one message with a `UDP_SEGMENT` control message, and the kernel (or the
//!   NIC) cuts it into the packets: one pass through the stack for a 64 KiB WRITE instead of
//!   sixteen, and for an answer with its ACK behind it instead of two. Probed at bind; a run
//!   the route refuses (`EIO`, `EINVAL`) is dropped (RC retransmits it) and segmentation is
//!   turned off for the transport. The environment variable `SOFTRNIC_GSO=0` turns it off
//!   from the start.
//! * Every socket has `IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER` = `PMTUDISC_DO`: the kernel
//!   never fragments, IPv4 packets carry DF and (unconnected socket) IP ID 0, as kernel rxe's
//!   carry DF. A datagram over the path MTU fails with `EMSGSIZE` and is dropped (counted).
//! * All sockets are nonblocking; [`Transport::poll`] is one `ppoll` on the receive socket
//!   and the multicast groups' (the first [`MAX_POLLED_GROUPS`]), and, after a send would
//!   block, on the blocked socket for `POLLOUT`.
//! * **Multicast** (IBTA 10.5, `ibv_attach_mcast`): a socket per joined group, bound to
//!   `(group, 4791)`, read by [`Transport::recv_batch`] after the receive socket; every socket
//!   sends multicast from the device's interface (see `udp/mcast.rs`). [`Transport::wait_fd`] is
//!   the receive socket only, so a progress thread sleeping on it notices a group's datagram
//!   at its next wake-up (at most a millisecond later), not at once.
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
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::{OutPacket, Ready, RecvBatch, SegmentLimits, Transport, TransportStats};

mod mcast;
mod sock;
use sock::{open_socket, per_packet_error, read_sockaddr, setsockopt, write_sockaddr};

/// Most datagrams per `sendmmsg` / `recvmmsg` call.
pub const MAX_MSGS: usize = 64;
/// Most pieces (iovecs) per `sendmmsg` call, all datagrams together; also the most pieces one
/// [`OutPacket`] may have.
pub const MAX_IOVS: usize = 512;

/// Most multicast group sockets [`Transport::poll`] waits on (the others are still read).
pub const MAX_POLLED_GROUPS: usize = 8;

/// Receive buffer asked for the 4791 socket (the kernel caps it at `net.core.rmem_max`).
const RX_BUFFER: libc::c_int = 4 << 20;

/// A device's transport over kernel UDP sockets.
#[derive(Debug)]
pub struct UdpTransport {
    local: IpAddr,
    rx: UdpSocket,
    tx: FxHashMap<u16, UdpSocket>,
    /// The source port whose socket last returned "would block".
    blocked: Option<u16>,
    stats: TransportStats,
    scratch: Box<Scratch>,
    /// Whether runs go out as one datagram with `UDP_SEGMENT` (see [`SegmentLimits`]).
    gso: bool,
    /// The multicast groups joined, each with its socket.
    groups: Vec<mcast::Group>,
    /// Datagrams the next receive on the receive socket asks for (see [`next_want`]).
    rx_want: usize,
}

/// How many datagrams to ask the next `recvmmsg` for, after one that returned `got`: twice
/// as many, at least one. `recvmmsg` tries for every datagram it is asked for, so a call that
/// asks for 32 and gets one makes the kernel look at the empty queue once more before it
/// returns: in a ping-pong, where each call finds one datagram or none, that is on the path of
/// every answer. Doubling still reaches a full batch in five calls when traffic is heavy.
fn next_want(got: usize) -> usize {
    (2 * got).clamp(1, MAX_MSGS)
}

/// The arrays `sendmmsg` / `recvmmsg` read, kept between calls so that a call writes only the
/// entries it uses (zeroing all of them each time cost more than the rest of a small send).
struct Scratch {
    addrs: [libc::sockaddr_storage; MAX_MSGS],
    iovs: [libc::iovec; MAX_IOVS],
    hdrs: [libc::mmsghdr; MAX_MSGS],
    ctrls: [ControlBuf; MAX_MSGS],
}

/// Room for one `UDP_SEGMENT` control message, aligned as `cmsghdr` must be.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct ControlBuf([u8; 32]);

// SAFETY: CMSG_SPACE only computes a length.
const _: () = assert!(unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as usize <= 32);

/// `UDP_SEGMENT` (linux/udp.h): the socket option and control message that give a datagram's
/// segment size, which makes the kernel send it as a segmentation run (UDP GSO, Linux 4.18).
const UDP_SEGMENT: libc::c_int = 103;

/// The kernel's most segments in one run (`UDP_MAX_SEGMENTS`, 64 before Linux 6.9).
const MAX_SEGMENTS: usize = 64;

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
        let rx = open_socket(local, ROCE_V2_UDP_PORT)?;
        // Best effort: a bigger buffer absorbs bursts between two recv_batch calls.
        let _ = setsockopt(&rx, libc::SOL_SOCKET, libc::SO_RCVBUF, RX_BUFFER);
        // A kernel that knows the option (segment size 0: none by default) can segment;
        // SOFTRNIC_GSO=0 turns it off (for comparisons, or a path that mishandles it).
        let wanted = std::env::var_os("SOFTRNIC_GSO").is_none_or(|v| v != "0");
        let gso = wanted && setsockopt(&rx, libc::SOL_UDP, UDP_SEGMENT, 0).is_ok();
        mcast::set_send_options(&rx, local);
        Ok(UdpTransport {
            local,
            rx,
            tx: FxHashMap::default(),
            blocked: None,
            stats: TransportStats::default(),
            scratch: Scratch::new(),
            gso,
            groups: Vec::new(),
            rx_want: MAX_MSGS,
        })
    }

    /// The same transport sending every packet as a datagram of its own, without UDP GSO (for
    /// comparisons, and for a path that cannot segment).
    pub fn without_segmentation(mut self) -> UdpTransport {
        self.gso = false;
        self
    }

    /// Number of source-port sockets opened so far.
    pub fn source_ports_open(&self) -> usize {
        self.tx.len()
    }

    /// The socket sending from `port`, opened on first use. It stays unconnected: the kernel
    /// gives a connected socket's DF datagrams a running IP ID, which the ICRC (computed here,
    /// over an IP ID of 0) does not mask.
    fn tx_fd(&mut self, port: u16) -> io::Result<RawFd> {
        if port == ROCE_V2_UDP_PORT {
            return Ok(self.rx.as_raw_fd());
        }
        if port == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UDP source port 0 cannot be sent from",
            ));
        }
        if let Some(s) = self.tx.get(&port) {
            return Ok(s.as_raw_fd());
        }
        let s = open_socket(self.local, port)?;
        // Stray datagrams to a source port are not read: keep their queue minimal.
        let _ = setsockopt(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, 0);
        mcast::set_send_options(&s, self.local);
        let fd = s.as_raw_fd();
        self.tx.insert(port, s);
        Ok(fd)
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
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += meta.len as u64;
            self.stats.rx_truncated += u64::from(meta.truncated);
        }
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

    /// Sends packets from `pkts[0].src_port`, one message per segmentation run (at most
    /// [`MAX_MSGS`] messages and [`MAX_IOVS`] pieces per call). Returns how many packets are
    /// done with, and whether the socket would block. Fails only if nothing was done.
    fn send_run(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<(usize, bool)> {
        let port = pkts[0].src_port;
        let fd = self.tx_fd(port)?;
        let Scratch {
            addrs,
            iovs,
            hdrs,
            ctrls,
        } = &mut *self.scratch;
        // Per message: UDP payload bytes, packets, first piece.
        let mut bytes = [0usize; MAX_MSGS];
        let mut segs = [0usize; MAX_MSGS];
        let mut first_iov = [0usize; MAX_MSGS];
        let (mut n, mut used, mut i) = (0, 0, 0);
        while i < pkts.len() && n < MAX_MSGS {
            let p = &pkts[i];
            if p.src_port != port {
                break;
            }
            let size = u16::try_from(p.len()).ok().filter(|_| self.gso);
            let run = 1 + size.map_or(0, |_| {
                (1..)
                    .zip(&pkts[i + 1..])
                    .take_while(|&(k, q)| q.segment == k && q.dst == p.dst && q.src_port == port)
                    .count()
            });
            let run_pkts = &pkts[i..i + run];
            let pieces: usize = run_pkts.iter().map(|q| q.pieces.len()).sum();
            let invalid = if p.dst.is_ipv4() != self.local.is_ipv4() {
                Some("destination address family differs from the local address's")
            } else if pieces > MAX_IOVS {
                Some("a packet or run has more pieces than MAX_IOVS")
            } else {
                None
            };
            if let Some(why) = invalid {
                if n == 0 {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
                }
                break; // The next call reports it.
            }
            if used + pieces > MAX_IOVS {
                break;
            }
            let all = run_pkts.iter().flat_map(|q| q.pieces.iter());
            for (iov, piece) in iovs[used..].iter_mut().zip(all) {
                iov.iov_base = piece.as_ptr() as *mut libc::c_void;
                iov.iov_len = piece.len();
            }
            bytes[n] = run_pkts.iter().map(OutPacket::len).sum();
            segs[n] = run;
            first_iov[n] = used;
            let h = &mut hdrs[n].msg_hdr;
            h.msg_namelen = write_sockaddr(p.dst, &mut addrs[n]);
            h.msg_iovlen = pieces as _;
            h.msg_controllen = match size {
                Some(size) if run > 1 => write_segment_size(&mut ctrls[n], size),
                _ => 0,
            };
            used += pieces;
            n += 1;
            i += run;
        }
        // The pointers last, from one base pointer per array, once the arrays are written.
        let (addr_base, iov_base, ctrl_base) =
            (addrs.as_mut_ptr(), iovs.as_mut_ptr(), ctrls.as_mut_ptr());
        for (m, h) in hdrs[..n].iter_mut().enumerate() {
            let h = &mut h.msg_hdr;
            // SAFETY: m < n <= MAX_MSGS and first_iov[m] < used <= MAX_IOVS: in bounds.
            unsafe {
                h.msg_name = addr_base.add(m).cast();
                h.msg_iov = iov_base.add(first_iov[m]);
                h.msg_control = if h.msg_controllen == 0 {
                    std::ptr::null_mut()
                } else {
                    ctrl_base.add(m).cast()
                };
            }
        }
        // Messages done with, and the packets in them.
        let (mut k, mut done) = (0, 0);
        while k < n {
            // SAFETY: hdrs[k..n] point into addrs, iovs and ctrls, which outlive the call, and
            // iovs point into the caller's pieces, which the kernel only reads.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    hdrs[k..].as_mut_ptr(),
                    (n - k) as _,
                    libc::MSG_DONTWAIT as _,
                )
            };
            if r > 0 {
                let sent = r as usize;
                let pkts_sent: usize = segs[k..k + sent].iter().sum();
                self.stats.tx_packets += pkts_sent as u64;
                self.stats.tx_bytes += bytes[k..k + sent].iter().sum::<usize>() as u64;
                self.stats.tx_segmented += (pkts_sent - sent) as u64;
                done += pkts_sent;
                k += sent;
                continue;
            }
            let err = io::Error::last_os_error();
            let errno = err.raw_os_error().unwrap_or(0);
            match errno {
                libc::EINTR => {}
                libc::EAGAIN => {
                    self.blocked = Some(port);
                    self.stats.tx_blocked += 1;
                    return Ok((done, true));
                }
                e if per_packet_error(e) || (segs[k] > 1 && e == libc::EIO) => {
                    // Dropped, as a NIC drops what it cannot send. A run refused as a whole
                    // (the route cannot segment: EIO; or EINVAL) turns segmentation off.
                    if segs[k] > 1 && matches!(e, libc::EIO | libc::EINVAL) {
                        self.gso = false;
                    }
                    self.stats.tx_errors += segs[k] as u64;
                    self.stats.last_errno = e;
                    done += segs[k];
                    k += 1;
                }
                _ if k == 0 => return Err(err),
                _ => return Ok((done, false)),
            }
        }
        Ok((done, false))
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

/// Writes a `UDP_SEGMENT` control message (the segment size of a run) into `buf`; returns
/// its length.
fn write_segment_size(buf: &mut ControlBuf, size: u16) -> libc::size_t {
    let c = buf.0.as_mut_ptr().cast::<libc::cmsghdr>();
    // SAFETY: `buf` is 8-byte aligned and larger than CMSG_SPACE(2) (checked at compile
    // time below), so the header and the u16 after it are in bounds.
    unsafe {
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = UDP_SEGMENT;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size);
        libc::CMSG_SPACE(size_of::<u16>() as u32) as _
    }
}

impl Transport for UdpTransport {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        let mut done = 0;
        while done < pkts.len() {
            match self.send_run(&pkts[done..]) {
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
        let (fd, local) = (self.rx.as_raw_fd(), self.local);
        let mut n = self.recv_from(fd, local, batch, 0, self.rx_want)?;
        self.rx_want = next_want(n);
        for i in 0..self.groups.len() {
            let g = &self.groups[i];
            let (fd, group) = (g.sock.as_raw_fd(), g.ip);
            // A group socket's error (none is expected of an unconnected UDP socket) must not
            // lose what the others received: that socket is skipped this time.
            n += self.recv_from(fd, group, batch, n, MAX_MSGS).unwrap_or(0);
        }
        batch.set_len(n);
        Ok(n)
    }

    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready> {
        let unused = libc::pollfd {
            fd: -1, // ignored by ppoll
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [unused; 2 + MAX_POLLED_GROUPS];
        fds[0].fd = self.rx.as_raw_fd();
        fds[1].events = libc::POLLOUT;
        if let Some(port) = self.blocked {
            fds[1].fd = self.tx_fd(port)?;
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

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.rx.as_raw_fd())
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
