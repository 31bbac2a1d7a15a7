//! Sending: a socket per UDP source port (the first [`MAX_SOURCE_SOCKETS`]; later ports share
//! them), connected to its QP's peer, one `sendmmsg` per run of
//! packets from one port, every packet as an iovec list over the caller's pieces, a
//! segmentation run as one message with `UDP_SEGMENT`; and, on a connected IPv4 socket, each
//! packet's ICRC moved to the IP Identification the kernel will give it (see the module
//! comment of `udp/mod.rs` and `udp/ident.rs`).
//!
//! The iovecs take the pieces' addresses as they are ([`Bytes::as_ptr`]): payload in
//! registered memory goes to the kernel without a slice ever formed over it (`mr/bytes.rs`).

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use softrnic_wire::icrc::{with_ipv4_ident, ICRC_LEN};
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::sock::{disconnect, open_socket, per_packet_error, setsockopt, write_sockaddr};
use super::{
    ident, mcast, ControlBuf, MessagePlan, Scratch, UdpTransport, MAX_IOVS, MAX_MSGS, UDP_SEGMENT,
};
use crate::transport::{Bytes, OutPacket, TransportStats};

/// The most source-port sockets a transport opens. A17.2.3's flow entropy needs far fewer
/// ports than a device has QPs, and a socket per QP's port took one file descriptor per QP:
/// 1024 QPs ran a process into the usual limit of 1024 (`ulimit -n`), and the packets whose
/// socket could not be opened were lost until their WRs ended in `IBV_WC_RETRY_EXC_ERR`.
/// Past this many, a QP's packets leave from one of these sockets, shared.
pub(super) const MAX_SOURCE_SOCKETS: usize = 256;

/// Whether opening a socket failed for want of a file descriptor (the process's limit or
/// the system's).
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The socket of a source port.
#[derive(Debug)]
pub(super) struct TxSocket {
    pub(super) sock: UdpSocket,
    /// The destination it is connected to, which its datagrams go to without an address.
    pub(super) peer: Option<SocketAddr>,
    /// Connected and IPv4: the IP Identification the kernel gives its next datagram.
    pub(super) next_ident: Option<u16>,
}

impl UdpTransport {
    /// The socket sending from `port` (descriptor, connected peer, next IP ID), opened on
    /// first use and then connected to `dst`, the destination of its first packet.
    fn tx_socket(&mut self, port: u16, dst: SocketAddr) -> io::Result<TxSocketView> {
        if port == ROCE_V2_UDP_PORT {
            return Ok(TxSocketView {
                fd: self.rx.as_raw_fd(),
                peer: None,
                next_ident: None,
            });
        }
        if port == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UDP source port 0 cannot be sent from",
            ));
        }
        if !self.tx.contains_key(&port) {
            self.open_tx_socket(port, dst)?;
        }
        let t = &self.tx[&port];
        Ok(TxSocketView {
            fd: t.sock.as_raw_fd(),
            peer: t.peer,
            next_ident: t.next_ident,
        })
    }

    /// The port packets meant for source port `wanted` leave from ([`Transport::source_port`]):
    /// `wanted`, or, if another socket of the host holds it, a port the kernel picks, kept
    /// for `wanted` from then on. Opens the socket if it is not open.
    ///
    /// Past [`MAX_SOURCE_SOCKETS`] ports, or when the process has no descriptor left, the
    /// port shares an open one from then on ([`UdpTransport::share_a_port`]).
    ///
    /// [`Transport::source_port`]: crate::transport::Transport::source_port
    pub(super) fn resolve_source_port(&mut self, wanted: u16, dst: SocketAddr) -> u16 {
        let port = self.moved_ports.get(&wanted).copied().unwrap_or(wanted);
        if matches!(port, 0 | ROCE_V2_UDP_PORT) || self.tx.contains_key(&port) {
            return port;
        }
        if self.tx.len() >= MAX_SOURCE_SOCKETS {
            return self.share_a_port(wanted, dst);
        }
        match self.open_tx_socket(port, dst) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => match self.open_tx_socket(0, dst) {
                Ok(other) => {
                    self.moved_ports.insert(wanted, other);
                    self.stats.tx_ports_moved += 1;
                    other
                }
                Err(e) if out_of_descriptors(&e) => self.share_a_port(wanted, dst),
                Err(_) => port,
            },
            Err(e) if out_of_descriptors(&e) => self.share_a_port(wanted, dst),
            // Any other error is the send's to report.
            _ => port,
        }
    }

    /// Packets meant for source port `wanted` leave from an open source-port socket from now
    /// on: one connected to `dst` if any is (the QPs of a peer spread over its sockets, which
    /// keep their route and their IPv4 ID counter), else any; from the receive socket, port
    /// 4791, if none is open. (Once per port: the sockets are looked through, not kept in
    /// order.)
    fn share_a_port(&mut self, wanted: u16, dst: SocketAddr) -> u16 {
        let to_dst = |t: &TxSocket| t.peer == Some(dst);
        let n = self.tx.values().filter(|t| to_dst(t)).count();
        let port = if n > 0 {
            let k = usize::from(wanted) % n;
            self.tx.iter().filter(|(_, t)| to_dst(t)).nth(k)
        } else {
            let k = usize::from(wanted) % self.tx.len().max(1);
            self.tx.iter().nth(k)
        }
        .map_or(ROCE_V2_UDP_PORT, |(&p, _)| p);
        self.moved_ports.insert(wanted, port);
        self.stats.tx_ports_shared += 1;
        port
    }

    /// Opens the socket of source port `port` (0: one the kernel picks) and connects it to
    /// `dst`; returns its port.
    fn open_tx_socket(&mut self, port: u16, dst: SocketAddr) -> io::Result<u16> {
        let s = open_socket(self.local, port)?;
        let port = s.local_addr()?.port();
        // Stray datagrams to a source port are not read: keep their queue minimal.
        let _ = setsockopt(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, 0);
        mcast::set_send_options(&s, self.local);
        let mut t = TxSocket {
            sock: s,
            peer: None,
            next_ident: None,
        };
        let unicast = !dst.ip().is_multicast() && dst.is_ipv4() == self.local.is_ipv4();
        if self.connect && unicast {
            self.connect_to(&mut t, dst);
        }
        self.tx.insert(port, t);
        Ok(port)
    }

    /// Connects `t` to `dst` and, IPv4, learns its IP ID counter; leaves it unconnected if
    /// either fails, and connects no more sockets if the kernel cannot tell the counter.
    fn connect_to(&mut self, t: &mut TxSocket, dst: SocketAddr) {
        if t.sock.connect(dst).is_err() {
            return;
        }
        t.peer = Some(dst);
        if dst.is_ipv4() && learn_ident(&mut self.sink, self.local, t, &mut self.stats).is_err() {
            // A socket that could not say once will not say later: unconnected from now on.
            self.connect = false;
            t.peer = None;
            t.next_ident = None;
            if disconnect(&t.sock).is_err() {
                // Still connected, with an unknown counter: a fresh socket is opened next time.
                t.peer = Some(dst);
            }
        }
    }

    /// After a send on `port` handed `messages` datagrams to the kernel: the counter moves on
    /// by as many, or, when a send failed (`failed`), is learnt again; a socket whose counter
    /// cannot be learnt is closed (the next packet opens a new one).
    fn sent_from(&mut self, port: u16, messages: usize, failed: bool) {
        let Some(t) = self.tx.get_mut(&port) else {
            return;
        };
        let Some(id) = t.next_ident else {
            return;
        };
        if !failed {
            t.next_ident = Some(id.wrapping_add(messages as u16));
        } else if learn_ident(&mut self.sink, self.local, t, &mut self.stats).is_err() {
            self.tx.remove(&port);
        }
    }

    /// Sends packets from `pkts[0].src_port`, one message per segmentation run (at most
    /// [`MAX_MSGS`] messages and [`MAX_IOVS`] pieces per call). Returns how many packets are
    /// done with, and whether the socket would block. Fails only if nothing was done.
    pub(super) fn send_run(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<(usize, bool)> {
        let port = pkts[0].src_port;
        let dst = pkts[0].dst;
        let sock = self.tx_socket(port, dst)?;
        let Scratch {
            addrs,
            iovs,
            hdrs,
            ctrls,
            icrcs,
            plans,
        } = &mut *self.scratch;
        // The caller's pieces taken (the limit is on those), and the iovecs written (a moved
        // ICRC takes one more: see `SCRATCH_IOVS`).
        let (mut n, mut used, mut used_iovs, mut i) = (0, 0, 0, 0);
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
            // Message `n` carries the counter's `n`-th number from here (see `udp/ident.rs`).
            let ident = sock.next_ident.map(|id| id.wrapping_add(n as u16));
            // The ID each packet of the run carries, where its ICRC covers another.
            let moved = |q: &OutPacket<'_>| {
                ident
                    .map(|id| id.wrapping_add(q.segment))
                    .filter(|&id| id != q.ident)
            };
            let pieces: usize = run_pkts.iter().map(|q| q.pieces.len()).sum();
            let run_iovs: usize = run_pkts.iter().map(|q| iovs_of(q, moved(q))).sum();
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
            let mut at = used_iovs;
            for q in run_pkts {
                put_packet(q, &mut iovs[at..], icrcs.get_mut(at), moved(q));
                at += iovs_of(q, moved(q));
            }
            plans[n] = MessagePlan {
                bytes: run_pkts.iter().map(OutPacket::len).sum(),
                segs: run,
                first_iov: used_iovs,
            };
            let h = &mut hdrs[n].msg_hdr;
            // To the connected peer without an address: the kernel uses the kept route.
            h.msg_namelen = if sock.peer == Some(p.dst) {
                0
            } else {
                write_sockaddr(p.dst, &mut addrs[n])
            };
            h.msg_iovlen = run_iovs as _;
            h.msg_controllen = match size {
                Some(size) if run > 1 => write_segment_size(&mut ctrls[n], size),
                _ => 0,
            };
            used += pieces;
            used_iovs += run_iovs;
            n += 1;
            i += run;
        }
        // The pointers last, from one base pointer per array, once the arrays are written.
        let (addr_base, iov_base, ctrl_base) =
            (addrs.as_mut_ptr(), iovs.as_mut_ptr(), ctrls.as_mut_ptr());
        for (m, h) in hdrs[..n].iter_mut().enumerate() {
            let h = &mut h.msg_hdr;
            // SAFETY: m < n <= MAX_MSGS and plans[m].first_iov <= used_iovs <= SCRATCH_IOVS: in
            // bounds (or one past the end, for a message with no iovec).
            unsafe {
                h.msg_name = if h.msg_namelen == 0 {
                    std::ptr::null_mut()
                } else {
                    addr_base.add(m).cast()
                };
                h.msg_iov = iov_base.add(plans[m].first_iov);
                h.msg_control = if h.msg_controllen == 0 {
                    std::ptr::null_mut()
                } else {
                    ctrl_base.add(m).cast()
                };
            }
        }
        // Messages done with, and the packets in them.
        let (mut k, mut done) = (0, 0);
        let mut result = Ok((0, false));
        let mut failed = false;
        while k < n {
            // SAFETY: hdrs[k..n] point into addrs, iovs, ctrls and icrcs, which outlive the
            // call, and iovs point into the caller's pieces, which the kernel only reads.
            let r = unsafe {
                libc::sendmmsg(
                    sock.fd,
                    hdrs[k..].as_mut_ptr(),
                    (n - k) as _,
                    libc::MSG_DONTWAIT as _,
                )
            };
            if r > 0 {
                let sent = r as usize;
                let pkts_sent: usize = plans[k..k + sent].iter().map(|p| p.segs).sum();
                self.stats.tx_packets += pkts_sent as u64;
                self.stats.tx_bytes +=
                    plans[k..k + sent].iter().map(|p| p.bytes).sum::<usize>() as u64;
                self.stats.tx_segmented += (pkts_sent - sent) as u64;
                done += pkts_sent;
                k += sent;
                result = Ok((done, false));
                continue;
            }
            let err = io::Error::last_os_error();
            let errno = err.raw_os_error().unwrap_or(0);
            match errno {
                libc::EINTR => {}
                libc::EAGAIN => {
                    self.blocked = Some(port);
                    self.stats.tx_blocked += 1;
                    result = Ok((done, true));
                    break;
                }
                e if per_packet_error(e) || (plans[k].segs > 1 && e == libc::EIO) => {
                    // Dropped, as a NIC drops what it cannot send. A run refused as a whole
                    // (the route cannot segment: EIO; or EINVAL) turns segmentation off.
                    if plans[k].segs > 1 && matches!(e, libc::EIO | libc::EINVAL) {
                        self.gso = false;
                    }
                    self.stats.tx_errors += plans[k].segs as u64;
                    self.stats.last_errno = e;
                    done += plans[k].segs;
                    k += 1;
                    result = Ok((done, false));
                    if sock.next_ident.is_some() {
                        // The failed datagram may have used a number: the ICRCs of the
                        // messages after it may be wrong. They go in the next call.
                        failed = true;
                        break;
                    }
                }
                _ => {
                    failed = true;
                    if k == 0 {
                        result = Err(err);
                    }
                    break;
                }
            }
        }
        self.sent_from(port, k, failed);
        result
    }
}

/// What [`UdpTransport::send_run`] needs of a source port's socket.
#[derive(Debug, Clone, Copy)]
struct TxSocketView {
    fd: RawFd,
    peer: Option<SocketAddr>,
    next_ident: Option<u16>,
}

/// Learns the IP ID the kernel gives `t`'s next datagram, probing through `sink` (opened on
/// `local` the first time); see `udp/ident.rs`.
fn learn_ident(
    sink: &mut Option<UdpSocket>,
    local: IpAddr,
    t: &mut TxSocket,
    stats: &mut TransportStats,
) -> io::Result<()> {
    if sink.is_none() {
        let s = UdpSocket::bind(SocketAddr::new(local, 0))?;
        s.set_nonblocking(true)?;
        *sink = Some(s);
    }
    let sink = sink.as_ref().expect("opened above");
    t.next_ident = None;
    t.next_ident = Some(ident::probe(&t.sock, sink)?);
    stats.ident_probes += 1;
    Ok(())
}

/// Writes the iovecs of `q` into `iovs` (as many as [`iovs_of`] says). With `ident`, the IP
/// ID its datagram will carry where its ICRC covers another (`q.ident`), the last 4 bytes
/// (the ICRC) go from `slot`, moved to `ident`. (`slot` is `None` only past the end of the
/// scratch space, where no packet with pieces starts.)
fn put_packet(
    q: &OutPacket<'_>,
    iovs: &mut [libc::iovec],
    slot: Option<&mut [u8; ICRC_LEN]>,
    ident: Option<u16>,
) {
    let mut k = 0;
    let mut put = |b: Bytes<'_>| {
        // The kernel only reads through `iov_base` (`sendmmsg`).
        iovs[k] = libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        };
        k += 1;
    };
    let last = q.pieces.split_last();
    let split = last.and_then(|(last, rest)| {
        let (body, icrc) = last.split_at(last.len().checked_sub(ICRC_LEN)?)?;
        Some((rest, body, icrc))
    });
    match (ident, slot, split) {
        (Some(id), Some(slot), Some((rest, body, icrc))) => {
            rest.iter().for_each(|&p| put(p));
            put(body);
            let mut sent = [0u8; ICRC_LEN];
            icrc.copy_to(&mut sent);
            let icrc = u32::from_le_bytes(sent);
            *slot = with_ipv4_ident(icrc, q.ident, id, q.len()).to_le_bytes();
            put(Bytes::from(&*slot));
        }
        _ => q.pieces.iter().for_each(|&p| put(p)),
    }
}

/// How many iovecs [`put_packet`] writes for `q` (its ICRC moved to `ident`, if any).
fn iovs_of(q: &OutPacket<'_>, ident: Option<u16>) -> usize {
    let split = ident.is_some() && q.pieces.last().is_some_and(|p| p.len() >= ICRC_LEN);
    q.pieces.len() + usize::from(split)
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
