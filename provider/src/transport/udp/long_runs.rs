//! The datagrams too long for a packet ring's slot (`udp/ring.rs`), read from the receive
//! socket: in practice the segmentation runs of a bulk transfer from this host, up to 64 KiB
//! each, which the socket hands over whole because it has `UDP_GRO` on. The kernel says the
//! segment size in a `UDP_GRO` control message; each segment becomes one datagram of the
//! caller's batch, as if the kernel had cut the run (which it does for a socket without
//! `UDP_GRO`). The socket does not give the IP header: each segment's ICRC is checked for the IPv4
//! Identification that makes it match, as on the socket path (see below for the guess that
//! makes that cheap).
//!
//! A run is read straight into the caller's slots where it can be: the kernel fills an iovec
//! list in order, so with one iovec per free slot, each as long as a segment, segment `k`
//! lands at the start of slot `k` (one copy, the kernel's, where reading the run into a buffer
//! and cutting it into the slots made two). The segment size is known only once the run is
//! read, so the read bets on the last run's: a bulk transfer's runs all have the same. What
//! does not fit the free slots goes on into a buffer of its own, handed out by later calls
//! (copied into their slots); a run of another segment size is gathered into that buffer
//! whole and handed out the same way.
//!
//! The socket does not give a run's IP header, but the ring's notice did: its segments carry
//! the notice's IPv4 Identification plus their place (a sender's GSO numbers them so), and
//! each segment gets the header a UDP socket sends with that ID as a guess
//! ([`IpHeaderOrigin::IdentUnknown`](super::super::IpHeaderOrigin::IdentUnknown)), its ICRC
//! checked over it. A right guess is checked at once; a wrong one (a notice paired with
//! another run after a loss) only costs the solving the unseen ID costs anyway.
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

use softrnic_wire::frame::{IPV4_HEADER_LEN, IPV6_HEADER_LEN};

use super::super::{RecvBatch, RecvMeta};
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

/// Notices whose Identification is kept while their runs are not read yet (more are counted,
/// their segments then checked without a guess).
const NOTICES: usize = 16;

/// Most slots one read scatters a run into: enough for a 64 KiB run of segments of 1 KiB or
/// more (the rest of a run of shorter ones goes into the buffer).
const SCATTER_MAX: usize = 64;

/// A run read from the socket and the part of it not yet handed out.
pub(super) struct LongRuns {
    /// What of a run is not in the caller's slots: their overflow, or a whole run.
    buf: Box<[u8]>,
    /// The segment size the next read bets on (that of the last run; 0: none yet, or one no
    /// slot holds).
    guess: usize,
    /// The part of a run in `buf`: its length, its segment size, and where its next segment
    /// starts.
    len: usize,
    segment: usize,
    next: usize,
    truncated: bool,
    src: SocketAddr,
    /// Runs the ring noticed and the socket has not given yet.
    noticed: usize,
    /// Their first segments' IPv4 Identifications, from `idents[head]` on (the first
    /// [`NOTICES`] of them), and that of the run read last.
    idents: [u16; NOTICES],
    head: usize,
    ident: u16,
    /// The place in its run of the first segment in `buf`.
    buf_first: usize,
    /// Empty reads since the last run came.
    dry: u32,
}

impl LongRuns {
    pub(super) fn new() -> LongRuns {
        LongRuns {
            buf: vec![0; RUN_MAX].into_boxed_slice(),
            guess: 0,
            len: 0,
            segment: 1,
            next: 0,
            truncated: false,
            src: SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
            noticed: 0,
            idents: [0; NOTICES],
            head: 0,
            ident: 0,
            buf_first: 0,
            dry: 0,
        }
    }

    /// The ring saw the headers of a run too long for it, with IPv4 Identification `ident`.
    pub(super) fn noticed(&mut self, ident: u16) {
        if self.noticed < NOTICES {
            self.idents[(self.head + self.noticed) % NOTICES] = ident;
        }
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
        let cap = cap.min(batch.capacity().saturating_sub(first));
        let mut got = 0;
        while got < cap {
            if self.next < self.len {
                got += self.hand_out(local, batch, first + got, cap - got);
                continue;
            }
            if self.noticed == 0 {
                break;
            }
            match self.read(socket, batch, first + got, cap - got)? {
                Some(placed) => {
                    let slots = batch.slots_mut().skip(first + got).take(placed);
                    for (k, (_, meta)) in slots.enumerate() {
                        meta.dst = local;
                        guess_header(meta, self.ident.wrapping_add(k as u16));
                    }
                    got += placed;
                }
                None => break,
            }
        }
        Ok(got)
    }

    /// Copies segments of the run in `buf` into `batch`'s slots from `first` on, up to `cap`:
    /// how many.
    fn hand_out(
        &mut self,
        local: IpAddr,
        batch: &mut RecvBatch,
        first: usize,
        cap: usize,
    ) -> usize {
        let mut got = 0;
        for (buf, meta) in batch.slots_mut().skip(first).take(cap) {
            if self.next >= self.len {
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
            let k = self.buf_first + self.next / self.segment;
            guess_header(meta, self.ident.wrapping_add(k as u16));
            self.next += seg.len().max(1);
            got += 1;
        }
        got
    }

    /// Reads the next run from `socket`, betting on its segment size: segment `k` into slot
    /// `first + k` of `batch` (up to `cap` slots), the rest into `buf`. Returns the segments
    /// left in slots (their metadata filled but for the IP header and destination), `None`
    /// when no run came. A run whose segment size was not the bet is gathered into `buf`, and
    /// none is left in slots.
    fn read(
        &mut self,
        socket: RawFd,
        batch: &mut RecvBatch,
        first: usize,
        cap: usize,
    ) -> io::Result<Option<usize>> {
        let guess = self.guess;
        // (A batch of shorter slots than the last one's gets no bet.)
        let slots = if guess == 0 || guess > batch.slot_len() {
            0
        } else {
            cap.min(RUN_MAX.div_ceil(guess)).min(SCATTER_MAX)
        };
        let mut iovs = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; SCATTER_MAX + 1];
        for (iov, (buf, _)) in iovs
            .iter_mut()
            .zip(batch.slots_mut().skip(first).take(slots))
        {
            *iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: guess, // <= the slot's length
            };
        }
        let in_slots = slots * guess;
        iovs[slots] = libc::iovec {
            iov_base: self.buf.as_mut_ptr().cast(),
            iov_len: self.buf.len(),
        };
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut control = [0u64; 4]; // room for one int control message, aligned
                                     // SAFETY: all-zero is a valid msghdr; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
        msg.msg_iov = iovs.as_mut_ptr();
        msg.msg_iovlen = slots + 1;
        msg.msg_control = control.as_mut_ptr().cast();
        let mut since = None;
        let n = loop {
            // (The kernel writes back the lengths it used.)
            msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_controllen = size_of_val(&control) as _;
            // SAFETY: `msg` describes live buffers of the lengths given: the slots' first
            // `guess` bytes (the slots are `batch`'s, borrowed mutably for the call) and `buf`.
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
                return Ok(None);
            }
            std::hint::spin_loop();
        };
        self.noticed = self.noticed.saturating_sub(1);
        self.ident = self.idents[self.head];
        self.head = (self.head + 1) % NOTICES;
        self.dry = 0;
        self.truncated = msg.msg_flags & libc::MSG_TRUNC != 0;
        let segment = gro_segment_size(&msg).unwrap_or(n).max(1);
        self.segment = segment;
        self.src = read_sockaddr(&addr).unwrap_or(self.src);
        self.guess = if segment <= batch.slot_len() {
            segment
        } else {
            0
        };
        self.next = 0;
        if segment == guess {
            // Segment k is in slot k's first bytes, the rest in `buf` from its start (the
            // slots hold whole segments: `in_slots` is a multiple of the segment size).
            let placed = n.div_ceil(segment).min(slots);
            for (k, (_, meta)) in batch.slots_mut().skip(first).take(placed).enumerate() {
                meta.len = (n - k * segment).min(segment);
                meta.truncated = self.truncated;
                meta.src = self.src;
            }
            self.len = n.saturating_sub(in_slots);
            self.buf_first = slots;
            return Ok(Some(placed));
        }
        // Gathered into `buf`: what came after the slots moves up behind what they hold.
        let rest = n.saturating_sub(in_slots);
        self.buf.copy_within(..rest, in_slots.min(n));
        for (k, (buf, _)) in batch.slots_mut().skip(first).take(slots).enumerate() {
            let from = k * guess;
            if from >= n {
                break;
            }
            let m = guess.min(n - from);
            self.buf[from..from + m].copy_from_slice(&buf[..m]);
        }
        self.len = n;
        self.buf_first = 0;
        Ok(Some(0))
    }
}

/// Gives `meta`, a segment read from the socket, the IPv4 header a UDP socket sends from its
/// source to its destination, with Identification `ident`, as a guess
/// ([`RecvMeta::set_ip_header_ident_unknown`]); no header for IPv6 (which has no ID).
fn guess_header(meta: &mut RecvMeta, ident: u16) {
    let mut ip = [0u8; IPV6_HEADER_LEN];
    match meta
        .socket_ip_header(ident, &mut ip)
        .filter(|&n| n == IPV4_HEADER_LEN)
    {
        Some(n) => meta.set_ip_header_ident_unknown(&ip[..n]),
        None => meta.clear_ip_header(),
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
