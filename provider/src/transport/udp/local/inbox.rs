//! The receiving side of the host-local path (see `local/mod.rs`): the inbox a device
//! listens on, the lanes it gives its senders, and the datagrams it takes out of them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use softrnic_wire::frame::IPV6_HEADER_LEN;

use super::{inbox_name, ring, Region, LANES};
use crate::host::block::QpnBlock;
use crate::host::fdpass;
use crate::transport::{wait_readable, RecvBatch, RecvMeta};

/// How often a polling receiver looks for new senders and gone ones unasked.
///
/// A look is system calls (an `accept`, and a peek at each sender's connection): 4 to 16 us
/// of the application's poll here. Every millisecond, that was the slowest one poll in 400
/// of an `ib_write_lat` run, and p99 was 3.2x to 4x the typical figure; every 100 ms, 2x
/// to 2.6x (`ib_send_lat` 2.7x-3.8x against 1.4x-2.2x, alternating runs). A new sender
/// need not wait for it: connecting wakes the progress thread, which waits on the inbox's
/// socket whether it sleeps or stays away, and the next receive admits the sender at once
/// ([`SleepGate::wait_rung`]). What waits is a gone sender's lane, and in polling mode
/// (no progress thread) a new sender, which meanwhile goes over UDP.
const TEND_EVERY: Duration = Duration::from_millis(100);

/// Receive calls between two looks at the clock for [`TEND_EVERY`].
const CALLS_PER_CLOCK: u32 = 64;

/// A device's inbox.
#[derive(Debug)]
pub(crate) struct Inbox {
    local: IpAddr,
    region: Arc<Region>,
    listener: UnixListener,
    /// Each lane's sender, by its connection.
    senders: [Option<UnixStream>; LANES],
    /// Each lane's count of slots consumed: taken into a batch, their datagrams left in the
    /// slots. `head` is set to it once the batch is handled ([`Inbox::release`]).
    heads: [u64; LANES],
    /// The lanes with slots taken but not yet released, one bit each.
    unreleased: u32,
    /// The lanes ever given to a sender, one bit each: those the receiver looks at (a gone
    /// sender's last datagrams are still read).
    given: u32,
    /// The lanes whose pages are resident ([`Region::populate_lane`]), one bit each.
    populated: u32,
    gate: Arc<SleepGate>,
    calls: u32,
    tended: Instant,
}

/// What the progress thread of a device with an inbox does around its sleep (see
/// `local/mod.rs`): says it sleeps, polls the doorbell and the inbox's socket beside the
/// receive socket, and says it woke.
#[derive(Debug)]
pub struct SleepGate {
    region: Arc<Region>,
    bell: OwnedFd,
    listener: OwnedFd,
    /// Set when a sender connecting woke the thread: the next receive admits it.
    woke: AtomicBool,
}

impl SleepGate {
    /// The descriptors to poll for reading while asleep: the doorbell, and the inbox's socket
    /// (a sender connecting).
    pub fn fds(&self) -> [RawFd; 2] {
        [self.bell.as_raw_fd(), self.listener.as_raw_fd()]
    }

    /// The thread is about to sleep: `false` if a datagram already waits (then it must not).
    /// Looks at the next slot of every lane, after the last `head` the consumer published
    /// (one it has read meanwhile only makes the thread look once more).
    pub fn sleep(&self) -> bool {
        let sleeping = self.region.sleeping();
        sleeping.store(1, Ordering::SeqCst);
        let waiting = (0..LANES).any(|lane| {
            let head = self.region.head(lane).load(Ordering::SeqCst);
            self.region.published_seqcst(lane, head)
        });
        if waiting {
            sleeping.store(0, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Waits up to `timeout` for the doorbell, as the thread does while the application
    /// polls: a sender rings it then only for datagrams left unread (`local/unread.rs`),
    /// and the device when the application is about to stop polling ([`SleepGate::ring`]).
    /// Also for `socket` (-1: none) to be readable. Returns whether it was rung (and takes
    /// the ring) and whether `socket` is readable. A sender connecting wakes it too: the
    /// next receive (the application's poll) admits it at once rather than at its next
    /// look, so a conversation leaves UDP within its first round trips.
    pub fn wait_rung(&self, timeout: Duration, socket: RawFd) -> (bool, bool) {
        // Until the polls admit the sender that woke it, the listener stays readable.
        let listener = if self.woke.load(Ordering::Relaxed) {
            -1
        } else {
            self.listener.as_raw_fd()
        };
        let [rung, connecting, readable] =
            wait_readable([self.bell.as_raw_fd(), listener, socket], timeout);
        self.woke(rung, connecting);
        (rung, readable)
    }

    /// Rings the doorbell as a sender does: the device's own thread, waiting in
    /// [`SleepGate::wait_rung`] or asleep, wakes.
    pub fn ring(&self) {
        ring(&self.bell);
    }

    /// The thread woke; the doorbell was `rung`, a sender is `connecting` (the poll said
    /// so of their descriptors).
    pub fn woke(&self, rung: bool, connecting: bool) {
        self.region.sleeping().store(0, Ordering::SeqCst);
        if rung {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into `v` from a nonblocking eventfd.
            let _ = unsafe { libc::read(self.bell.as_raw_fd(), (&raw mut v).cast(), 8) };
        }
        if connecting {
            self.woke.store(true, Ordering::Relaxed);
        }
    }
}

impl Inbox {
    /// Creates the inbox of the device on `local` receiving the QPs of `block` (`None`: all
    /// of them) and listens on its name.
    ///
    /// # Errors
    /// `AddrInUse` if another inbox has the name; the errors of creating the region, the
    /// doorbell or the socket.
    pub fn open(local: IpAddr, block: Option<QpnBlock>) -> io::Result<Inbox> {
        let region = Arc::new(Region::create()?);
        // The first sender's lane, ready before it comes: populating it takes a couple of
        // milliseconds here, better spent opening the device than in a poll.
        region.populate_lane(0);
        let name = UnixAddr::from_abstract_name(inbox_name(local, block))?;
        let listener = UnixListener::bind_addr(&name)?;
        listener.set_nonblocking(true)?;
        // SAFETY: a plain system call; the result is checked.
        let bell = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if bell < 0 {
            return Err(io::Error::last_os_error());
        }
        let gate = Arc::new(SleepGate {
            region: region.clone(),
            // SAFETY: a fresh descriptor nothing else owns.
            bell: unsafe { OwnedFd::from_raw_fd(bell) },
            listener: listener.as_fd().try_clone_to_owned()?,
            woke: AtomicBool::new(false),
        });
        Ok(Inbox {
            local,
            region,
            listener,
            senders: Default::default(),
            heads: [0; LANES],
            unreleased: 0,
            given: 0,
            populated: 1, // lane 0, above
            gate,
            calls: 0,
            tended: Instant::now(),
        })
    }

    /// The gate the device's progress thread sleeps through.
    pub fn gate(&self) -> Arc<SleepGate> {
        self.gate.clone()
    }

    /// Senders with a lane now.
    pub fn senders(&self) -> usize {
        self.senders.iter().flatten().count()
    }

    /// Takes up to `batch.capacity() - first` datagrams into `batch`'s slots from `first` on;
    /// returns how many. Each stays in its lane's slot ([`RecvBatch::set_outside`]) until
    /// [`Inbox::release`], which the next call makes first if nobody did. Now and then (and
    /// after the progress thread woke) it first admits new senders and frees the lanes of gone
    /// ones.
    pub fn recv(&mut self, batch: &mut RecvBatch, first: usize) -> usize {
        self.release();
        self.calls = self.calls.wrapping_add(1);
        if self.gate.woke.swap(false, Ordering::Relaxed)
            || (self.calls % CALLS_PER_CLOCK == 0 && self.tended.elapsed() >= TEND_EVERY)
        {
            self.tend();
        }
        let mut n = first;
        let mut lanes = self.given;
        while lanes != 0 {
            let lane = lanes.trailing_zeros() as usize;
            lanes &= lanes - 1;
            if self.region.published(lane, self.heads[lane]) {
                n = self.drain(lane, batch, n);
            }
        }
        n - first
    }

    /// The datagrams taken are handled: their senders may write their slots again (`head`
    /// stored, release: every read of a slot comes before its sender's next write).
    pub fn release(&mut self) {
        while self.unreleased != 0 {
            let lane = self.unreleased.trailing_zeros() as usize;
            self.unreleased &= self.unreleased - 1;
            self.region
                .head(lane)
                .store(self.heads[lane], Ordering::Release);
        }
    }

    /// Takes lane `lane`'s published datagrams into `batch` from slot `n` on, as many as fit;
    /// returns the next free slot. Only a slot's header is copied out and parsed here (its
    /// sender could change it under the reader); the datagram is left in the slot, which its
    /// sender does not write again until `head` passes it, and is read from there once, when
    /// the engine places its payload.
    fn drain(&mut self, lane: usize, batch: &mut RecvBatch, mut n: usize) -> usize {
        let mut head = self.heads[lane];
        let room = batch.slot_len();
        while n < batch.capacity() && self.region.published(lane, head) {
            let Some((_, meta)) = batch.slot_mut(n) else {
                break;
            };
            // SAFETY: this inbox is the lane's consumer, and `head` is published.
            let h = unsafe { self.region.read_header(lane, head) };
            let at = self.region.payload(lane, head);
            head = head.wrapping_add(1);
            let Some(h) = h else {
                continue; // a malformed slot: dropped
            };
            *meta = RecvMeta::from_socket(SocketAddr::new(h.src, h.src_port), self.local, h.len);
            meta.truncated = h.len > room;
            meta.intact = true;
            let mut ip = [0u8; IPV6_HEADER_LEN];
            match meta.socket_ip_header(h.ident, &mut ip) {
                Some(len) => meta.set_ip_header(&ip[..len]),
                None => continue, // another address family than the device's: dropped
            }
            // SAFETY: the slot's `h.len` bytes (at most `SLOT_PAYLOAD`) are inside the mapping,
            // which the inbox keeps, and this lane's sender does not write them before
            // `release` publishes a `head` past them: the next `recv` does, after the batch
            // is filled again, or the caller's `release` once it handled the batch.
            unsafe { batch.set_outside(n, at, h.len) };
            n += 1;
        }
        self.heads[lane] = head;
        self.unreleased |= 1 << lane;
        n
    }

    /// Frees the lanes of senders whose connection closed, and admits the senders waiting on
    /// the socket.
    fn tend(&mut self) {
        self.tended = Instant::now();
        for s in &mut self.senders {
            if s.as_ref().is_some_and(closed) {
                *s = None;
            }
        }
        while let Ok((s, _)) = self.listener.accept() {
            let _ = self.admit(s);
        }
    }

    /// Gives sender `s` a free lane: its number and the region, then the doorbell. A sender
    /// of another user, or one beyond the lanes, is turned away (its connection closed): it
    /// sends over UDP.
    fn admit(&mut self, s: UnixStream) -> io::Result<()> {
        if !same_user(&s)? {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        let Some(lane) = self.senders.iter().position(Option::is_none) else {
            return Err(io::ErrorKind::OutOfMemory.into());
        };
        if self.populated & (1 << lane) == 0 {
            self.region.populate_lane(lane);
            self.populated |= 1 << lane;
        }
        // Whatever an earlier sender left unread goes: the new one starts at the tail.
        let tail = self.region.tail(lane).load(Ordering::Acquire);
        self.heads[lane] = tail;
        self.region.head(lane).store(tail, Ordering::Release);
        s.set_nonblocking(false)?;
        let hello = lane_message(lane);
        fdpass::send(&s, &hello, Some(self.region.fd().as_raw_fd()))?;
        fdpass::send(&s, BELL_MESSAGE, Some(self.gate.bell.as_raw_fd()))?;
        s.set_nonblocking(true)?;
        self.senders[lane] = Some(s);
        self.given |= 1 << lane;
        Ok(())
    }
}

/// The first message to a sender: `LANE` and the lane's number.
pub(super) fn lane_message(lane: usize) -> [u8; 8] {
    let mut m = *b"LANE\0\0\0\0";
    m[4..].copy_from_slice(&(lane as u32).to_le_bytes());
    m
}

/// The second message, beside the doorbell.
pub(super) const BELL_MESSAGE: &[u8; 8] = b"BELL\0\0\0\0";

/// Whether the peer of `s` closed its end (reads nothing at once; never blocks).
pub(super) fn closed(s: &UnixStream) -> bool {
    let mut b = 0u8;
    // SAFETY: peeks at most one byte into `b`.
    let n = unsafe {
        libc::recv(
            s.as_raw_fd(),
            (&raw mut b).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// Whether the process at the other end of `s` runs as this one's user.
fn same_user(s: &UnixStream) -> io::Result<bool> {
    // SAFETY: all-zero is a valid ucred.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are writable and sized as SO_PEERCRED needs.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a plain system call.
    Ok(cred.uid == unsafe { libc::geteuid() })
}
