//! The datagrams too long for a packet ring's slot (`udp/ring.rs`), read from the receive
//! socket: in practice the segmentation runs of a bulk transfer from this host, up to 64 KiB
//! each, which the socket hands over whole because it has `UDP_GRO` on. The kernel says the
//! segment size in a `UDP_GRO` control message; each segment becomes one datagram of the
//! caller's batch, as if the kernel had cut the run (which it does for a socket without
//! `UDP_GRO`). The socket does not give the IP header, so these are
//! [`IpHeaderOrigin::NotSeen`](super::super::IpHeaderOrigin::NotSeen), as on the socket path:
//! each segment's ICRC is checked for the IPv4 Identification that makes it match (the
//! notice's header could say only the first one's, and which notice is which run's is not
//! certain when a run is lost).
//!
//! The ring says when one came (its notice), so the socket is read only then: while runs are
//! noticed but not read, or a run read is not yet all handed out. The ring sees a datagram
//! before the IP layer has queued it on the socket, a few microseconds later, so a read that
//! finds nothing tries again for up to [`WAIT`] (a progress thread about to sleep on the ring
//! would not wake for the socket). A notice whose run never reaches the socket (its buffer was
//! full) is given up after [`GIVE_UP`] such reads, so a lost run cannot make every later poll
//! a system call.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::super::RecvBatch;
use super::nonblocking;
use super::ring::fill_slot;
use super::sock::read_sockaddr;

/// `UDP_GRO` (linux/udp.h): the socket option, and the control message with a run's segment
/// size.
pub const UDP_GRO: libc::c_int = 104;

/// The largest UDP payload (IPv6 jumbograms aside).
const RUN_MAX: usize = 65_535;

/// How long a read waits for a noticed run to reach the socket.
const WAIT: Duration = Duration::from_micros(50);

/// Reads that found nothing in [`WAIT`], after which the noticed runs are given up for lost.
const GIVE_UP: u32 = 8;

/// A run read from the socket and the part of it not yet handed out.
pub(super) struct LongRuns {
    buf: Box<[u8]>,
    /// The run's length, its segment size, and where its next segment starts.
    len: usize,
    segment: usize,
    next: usize,
    truncated: bool,
    src: SocketAddr,
    /// Runs the ring noticed and the socket has not given yet.
    noticed: usize,
    /// Empty reads since the last run came.
    dry: u32,
}

impl LongRuns {
    pub(super) fn new() -> LongRuns {
        LongRuns {
            buf: vec![0; RUN_MAX].into_boxed_slice(),
            len: 0,
            segment: 1,
            next: 0,
            truncated: false,
            src: SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
            noticed: 0,
            dry: 0,
        }
    }

    /// The ring saw the headers of a run too long for it.
    pub(super) fn noticed(&mut self) {
        self.noticed += 1;
    }

    /// Whether the socket has something to give, or a run read has segments left.
    pub(super) fn pending(&self) -> bool {
        self.noticed > 0 || self.next < self.len
    }

    /// Hands out up to `cap` segments into `batch`'s slots from `first` on, reading the next
    /// run from `socket` when the last one is all handed out; returns how many.
    ///
    /// # Errors
    /// The socket's, other than "would block".
    pub(super) fn recv(
        &mut self,
        socket: RawFd,
        local: IpAddr,
        batch: &mut RecvBatch,
        first: usize,
        cap: usize,
    ) -> io::Result<usize> {
        let mut got = 0;
        for (buf, meta) in batch.slots_mut().skip(first).take(cap) {
            if self.next >= self.len && (self.noticed == 0 || !self.read(socket)?) {
                break;
            }
            let seg = &self.buf[self.next..(self.next + self.segment).min(self.len)];
            fill_slot(
                (&mut *buf, &mut *meta),
                seg,
                self.truncated,
                self.src,
                local,
            );
            meta.clear_ip_header();
            self.next += seg.len().max(1);
            got += 1;
        }
        Ok(got)
    }

    /// Reads the next run from `socket`: whether one came.
    fn read(&mut self, socket: RawFd) -> io::Result<bool> {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut control = [0u64; 4]; // room for one int control message, aligned
        let mut iov = libc::iovec {
            iov_base: self.buf.as_mut_ptr().cast(),
            iov_len: self.buf.len(),
        };
        // SAFETY: all-zero is a valid msghdr; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        let mut since = None;
        let n = loop {
            // (The kernel writes back the lengths it used.)
            msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_controllen = size_of_val(&control) as _;
            // SAFETY: `msg` describes live buffers of the lengths given.
            let got =
                nonblocking(|| unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_DONTWAIT) })?;
            if let Some(n) = got {
                break n;
            }
            if since.get_or_insert_with(Instant::now).elapsed() > WAIT {
                self.dry += 1;
                if self.dry >= GIVE_UP {
                    (self.noticed, self.dry) = (0, 0);
                }
                return Ok(false);
            }
            std::hint::spin_loop();
        };
        self.noticed = self.noticed.saturating_sub(1);
        self.dry = 0;
        self.len = n;
        self.next = 0;
        self.truncated = msg.msg_flags & libc::MSG_TRUNC != 0;
        self.segment = gro_segment_size(&msg).unwrap_or(n).max(1);
        self.src = read_sockaddr(&addr).unwrap_or(self.src);
        Ok(true)
    }
}

/// The segment size a `UDP_GRO` control message of `msg` gives, if any.
pub fn gro_segment_size(msg: &libc::msghdr) -> Option<usize> {
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
    // `msg_controllen`; the data of a UDP_GRO message is one int.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(size).ok().filter(|&s| s > 0);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}
