//! The host-local path: datagrams between two softrnic devices of one host go through shared
//! memory instead of the kernel's UDP stack.
//!
//! Between two addresses of one host the kernel delivers a UDP datagram locally, through the
//! loopback device: a system call, an skb and two copies for every packet, and a wake-up of
//! a sleeping receiver. softrnic's two ends of such a datagram are both user space, so they
//! can hand it over through memory they share: the same RoCEv2 datagram (BTH through ICRC),
//! from the same source port to the same destination, written into a slot the receiver
//! reads. No system call on either side while the receiver polls, which is what a
//! ping-pong's latency is made of (`docs/performance.md`). The receiver does not check the
//! ICRC of such a datagram (`RecvMeta::intact`): no link lies between, as none lies between
//! the two ends of the kernel's loopback, which does not check checksums either (the check
//! was 16 % of a receiving thread's time under a stream of RDMA WRITEs). So the sender does
//! not compute it either (`Transport::wants_icrc`) and leaves it zero, unless it captures;
//! a capture on the receiving side writes the ICRC the datagram has on a link.
//!
//! Only where the kernel itself would deliver locally: the receiver's *inbox* is found by an
//! abstract Unix socket name, `softrnic/<address>/inbox` (a device that owns its address) or
//! `softrnic/<address>/inbox/<n>` (the process owning QPN block `n` of a device the host's
//! processes share, `host/`), and abstract names belong to a network namespace: a peer in
//! another namespace, behind a veth or a relay, is reached over UDP as before. Everything
//! else (QP1's MADs, which go to the host's agent; multicast; a packet too long for a slot)
//! goes over UDP too. The inbox disappears with its process, however it ends: nothing is
//! left behind in a file system.
//!
//! # The inbox
//!
//! A receiving device creates one shared memory region (`memfd_create`) of [`LANES`] lanes,
//! each a single-producer, single-consumer ring of [`SLOTS`] slots, and listens on its name.
//! A sender connects (the receiver checks it runs as the same user, `SO_PEERCRED`), and the
//! receiver, at its next look, gives it a free lane: the lane's number and the region's
//! descriptor in one message, the doorbell's descriptor (an `eventfd`) in a second
//! (`SCM_RIGHTS`). Until then packets go over UDP; a lane is freed when its sender's
//! connection closes. A datagram for a full lane is dropped, as a full socket buffer drops
//! it: its receiver is behind, and RC resends.
//!
//! A slot holds one datagram: its length, UDP source port, the sender's address and the IPv4
//! Identification its ICRC was computed for, then the UDP payload, and a sequence word on
//! the header's cache line. The producer writes the slot, then publishes it by storing its
//! sequence number plus one in that word (release), the slots of what it sends at once
//! together (`Outbox::push`); the consumer polls the word of the next slot it expects in
//! each lane that has a sender (acquire), copies out each published slot's description
//! (length, source, Identification: checked against the slot's bounds before anything
//! trusts them) and lists the datagram in its receive batch where it is, in the slot
//! (`RecvBatch::set_outside`). The engine parses it there and places its payload straight
//! from the slot into registered memory: one copy on the receiving side instead of two
//! (into the batch, then into memory), the second of which was nearly a third of a
//! receiving thread's time under a stream of RDMA WRITEs. Once the batch is handled
//! (`Transport::release_received`, or the next receive) the consumer publishes `head`, its
//! count of slots read (release): the producer writes none of them before. A sender that
//! broke that rule (it is the same user, `SO_PEERCRED`) could change only its own datagram
//! under the reader, as a corrupt link changes bytes: every length the engine acts on is
//! read once into its parsed headers, and every view of the slot stays within it. So a
//! datagram costs the consumer the cache lines of its slot and nothing else: a lane-wide
//! `tail` and a word of pending lanes, which the first version polled, were two more lines
//! to move between the cores for every datagram, about 0.25 us each on this VM. The
//! producer still writes `tail` (its count of slots written) for the next sender given the
//! lane.
//!
//! After publishing, a producer reads `sleeping`: a receiver whose progress thread is about
//! to sleep sets it and then looks at each lane's next slot once more (both sequentially
//! consistent, so one of the two sees the other), and a producer that sees it rings the
//! doorbell, which the sleeping thread polls beside the receive socket. A receiver that
//! polls is not rung; one that stops reading with datagrams in its lane is, by their sender,
//! which watches its lanes whenever it receives (`local/unread.rs`): the receiver's thread
//! waits on the doorbell too while its application polls, and needs no frequent looks for
//! this path.
//!
//! `SOFTRNIC_LOCAL=0` keeps every datagram on UDP (for comparisons, and to test that path).

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::host::addr;
use crate::host::block::QpnBlock;

mod inbox;
mod outbox;
#[cfg(test)]
mod tests;
pub(crate) mod unread;

pub(crate) use inbox::Inbox;
pub use inbox::SleepGate;

/// Rings the doorbell `bell` (an eventfd).
fn ring(bell: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one` to the eventfd; a full counter (EAGAIN) is already
    // rung.
    let _ = unsafe { libc::write(bell.as_raw_fd(), (&raw const one).cast(), 8) };
}
pub(crate) use outbox::{Outbox, Route};

/// Lanes of an inbox: senders at once (a device, per QPN block of the receiver).
pub const LANES: usize = 16;
/// Slots per lane (a power of two): 4.4 MB of datagrams, about what the receive socket's
/// buffer holds (`RX_BUFFER`).
pub const SLOTS: u64 = 1024;
/// The most UDP payload a slot holds: a 4096-byte MTU's payload and every header before it
/// (BTH, RETH or AtomicETH, ImmDt), the pad and the ICRC. Longer datagrams go over UDP.
pub const SLOT_PAYLOAD: usize = 4224;

/// The slot header: length (u32), UDP source port (u16), IPv4 Identification (u16), the
/// address family (4 or 6, u8), then the source address (16 bytes, IPv4 in the first four,
/// at 16), and at [`AT_SLOT_SEQ`] the sequence word (u64, atomic).
const SLOT_HEADER: usize = 64;
/// The described part of the slot header (copied as bytes).
const SLOT_DESCRIPTION: usize = 32;
/// Where in a slot its sequence word is: slot `seq` holds a datagram once the word is
/// `seq + 1` (0, the memory's first value, is no slot's).
const AT_SLOT_SEQ: usize = 56;
const SLOT_LEN: usize = SLOT_HEADER + SLOT_PAYLOAD;
/// The region's first page: magic, version and geometry, then `sleeping` on a cache line of
/// its own.
const CONTROL_LEN: usize = 4096;
/// A lane's header: `tail` (the producer's) and `head` (the consumer's), a cache line each.
const LANE_HEADER: usize = 128;
const LANE_LEN: usize = LANE_HEADER + SLOTS as usize * SLOT_LEN;
/// The region's length.
pub const REGION_LEN: usize = CONTROL_LEN + LANES * LANE_LEN;

const MAGIC: u64 = u64::from_le_bytes(*b"srnicLP2");
const AT_MAGIC: usize = 0;
const AT_GEOMETRY: usize = 8;
const AT_SLEEPING: usize = 64;

/// The geometry words after the magic: lanes, slots, slot length, payload room.
fn geometry() -> [u32; 4] {
    [
        LANES as u32,
        SLOTS as u32,
        SLOT_LEN as u32,
        SLOT_PAYLOAD as u32,
    ]
}

/// The inbox name of the device on `addr` that receives the QPs of `block` (`None`: the
/// device owns the address, all its QPNs).
pub fn inbox_name(addr: IpAddr, block: Option<QpnBlock>) -> String {
    match block {
        Some(b) => format!("softrnic/{addr}/inbox/{}", b.0),
        None => format!("softrnic/{addr}/inbox"),
    }
}

/// Whether the environment leaves the host-local path on (`SOFTRNIC_LOCAL=0` turns it off).
pub fn wanted() -> bool {
    std::env::var_os("SOFTRNIC_LOCAL").is_none_or(|v| v != "0")
}

/// One datagram's description in a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHeader {
    /// UDP payload bytes.
    pub len: usize,
    /// UDP source port.
    pub src_port: u16,
    /// The IPv4 Identification its ICRC covers (0 for IPv6).
    pub ident: u16,
    /// The sender's address.
    pub src: IpAddr,
}

/// An inbox's shared memory, mapped.
pub(crate) struct Region {
    map: MmapRaw,
    fd: OwnedFd,
}

// SAFETY: the region is shared memory accessed only through atomics and raw-pointer copies;
// nothing in it is tied to a thread.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region").field("fd", &self.fd).finish()
    }
}

impl Region {
    /// Creates a region (all lanes empty).
    ///
    /// # Errors
    /// `memfd_create`'s, `ftruncate`'s, `mmap`'s.
    pub fn create() -> io::Result<Region> {
        // SAFETY: a plain system call on a constant C string; the result is checked.
        let raw = unsafe { libc::memfd_create(c"softrnic-inbox".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a plain system call on an open descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), REGION_LEN as libc::off_t) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let r = Region::map(fd)?;
        // SAFETY: in bounds of the mapping; aligned (page start); nobody else has it yet.
        unsafe {
            r.at(AT_MAGIC).cast::<u64>().write(MAGIC);
            let g = r.at(AT_GEOMETRY).cast::<[u32; 4]>();
            g.write(geometry());
        }
        Ok(r)
    }

    /// Maps the region another device created, whose descriptor came over its inbox's
    /// socket.
    ///
    /// # Errors
    /// `InvalidData` if it is not an inbox of this layout (too short, another magic or
    /// geometry); `mmap`'s.
    pub fn open(fd: OwnedFd) -> io::Result<Region> {
        // SAFETY: all-zero is a valid `stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is writable; the descriptor is open.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if (st.st_size as u64) < REGION_LEN as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "inbox too short",
            ));
        }
        let r = Region::map(fd)?;
        // SAFETY: in bounds and aligned; read volatile, as another process wrote it.
        let (magic, g) = unsafe {
            (
                r.at(AT_MAGIC).cast::<u64>().read_volatile(),
                r.at(AT_GEOMETRY).cast::<[u32; 4]>().read_volatile(),
            )
        };
        if magic != MAGIC || g != geometry() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not an inbox of this layout",
            ));
        }
        Ok(r)
    }

    fn map(fd: OwnedFd) -> io::Result<Region> {
        let map = MmapOptions::new().len(REGION_LEN).map_raw(fd.as_raw_fd())?;
        Ok(Region { map, fd })
    }

    /// The descriptor, to hand to a sender.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset < REGION_LEN);
        // SAFETY: callers pass offsets inside the mapping.
        unsafe { self.map.as_mut_ptr().add(offset) }
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: 8-aligned offsets inside the mapping, which lives as long as `self`; shared
        // memory is only ever accessed atomically at these offsets.
        unsafe { &*self.at(offset).cast::<AtomicU64>() }
    }

    /// Set while the receiver's progress thread sleeps (see the module comment).
    pub fn sleeping(&self) -> &AtomicU32 {
        // SAFETY: as in `atomic_u64`.
        unsafe { &*self.at(AT_SLEEPING).cast::<AtomicU32>() }
    }

    fn lane(lane: usize) -> usize {
        assert!(lane < LANES);
        CONTROL_LEN + lane * LANE_LEN
    }

    /// Maps in every page of lane `lane` now, writable (`MADV_POPULATE_WRITE`), so that
    /// neither side takes a page fault on its first lap of the slots. Each slot is a page
    /// or more, so the first 1024 datagrams each way faulted on both sides (over 4000
    /// faults for `ib_write_lat`, a few microseconds each here: its first 20000 iterations
    /// had five times the slow ones of any later 20000). Best effort: a kernel without it
    /// (before 5.14) faults as before.
    pub fn populate_lane(&self, lane: usize) {
        let page = 4096;
        let start = Region::lane(lane) / page * page;
        let end = (Region::lane(lane) + LANE_LEN).min(REGION_LEN);
        // SAFETY: advice over a range inside the mapping (page-aligned start); it changes
        // no byte of it.
        unsafe {
            libc::madvise(
                self.at(start).cast(),
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }

    /// Lane `lane`'s count of slots written (the producer's; the next sender given the lane
    /// starts there).
    pub fn tail(&self, lane: usize) -> &AtomicU64 {
        self.atomic_u64(Region::lane(lane))
    }

    /// Lane `lane`'s count of slots consumed (the consumer's).
    pub fn head(&self, lane: usize) -> &AtomicU64 {
        self.atomic_u64(Region::lane(lane) + 64)
    }

    fn slot_offset(lane: usize, seq: u64) -> usize {
        let i = (seq % SLOTS) as usize;
        Region::lane(lane) + LANE_HEADER + i * SLOT_LEN
    }

    fn slot(&self, lane: usize, seq: u64) -> *mut u8 {
        self.at(Region::slot_offset(lane, seq))
    }

    /// The sequence word of the slot of datagram `seq` in `lane`.
    fn slot_seq(&self, lane: usize, seq: u64) -> &AtomicU64 {
        self.atomic_u64(Region::slot_offset(lane, seq) + AT_SLOT_SEQ)
    }

    /// Whether datagram `seq` of `lane` is published (in its slot, and not yet overwritten
    /// by one a lap later).
    pub fn published(&self, lane: usize, seq: u64) -> bool {
        self.slot_seq(lane, seq).load(Ordering::Acquire) == seq.wrapping_add(1)
    }

    /// The same, sequentially consistent (see the module comment on `sleeping`).
    pub fn published_seqcst(&self, lane: usize, seq: u64) -> bool {
        self.slot_seq(lane, seq).load(Ordering::SeqCst) == seq.wrapping_add(1)
    }

    /// Writes datagram `seq` into its slot of `lane`, unpublished: the header, then the
    /// payload by `write(dst)`, which must fill `dst` (`h.len` bytes, at most
    /// [`SLOT_PAYLOAD`]). [`Region::publish`] publishes it.
    ///
    /// # Safety
    /// The caller is the lane's producer and the slot is free (`seq - head < SLOTS`).
    pub unsafe fn write_slot(
        &self,
        lane: usize,
        seq: u64,
        h: &SlotHeader,
        write: impl FnOnce(*mut u8),
    ) {
        assert!(h.len <= SLOT_PAYLOAD);
        let s = self.slot(lane, seq);
        let mut head = [0u8; SLOT_DESCRIPTION];
        head[0..4].copy_from_slice(&(h.len as u32).to_le_bytes());
        head[4..6].copy_from_slice(&h.src_port.to_le_bytes());
        head[6..8].copy_from_slice(&h.ident.to_le_bytes());
        let (family, addr) = addr::encode(h.src);
        head[8] = family;
        head[16..32].copy_from_slice(&addr);
        // SAFETY: the slot is inside the mapping and this producer's alone until published.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), s, SLOT_DESCRIPTION);
            write(s.add(SLOT_HEADER));
        }
    }

    /// Publishes slot `seq` of `lane`, written: stores its sequence word (release).
    ///
    /// # Safety
    /// The caller is the lane's producer and wrote the slot ([`Region::write_slot`]).
    pub unsafe fn publish(&self, lane: usize, seq: u64) {
        self.slot_seq(lane, seq)
            .store(seq.wrapping_add(1), Ordering::Release);
    }

    /// Reads slot `seq` of `lane`'s header, if well formed: the datagram's length (at most
    /// [`SLOT_PAYLOAD`]), source and IPv4 Identification. Its payload is at
    /// [`Region::payload`].
    ///
    /// # Safety
    /// The caller is the lane's consumer and the slot was published ([`Region::published`]).
    pub unsafe fn read_header(&self, lane: usize, seq: u64) -> Option<SlotHeader> {
        let s = self.slot(lane, seq);
        let mut head = [0u8; SLOT_DESCRIPTION];
        // SAFETY: the slot is inside the mapping; copied out before anything is read of it.
        unsafe { std::ptr::copy_nonoverlapping(s, head.as_mut_ptr(), SLOT_DESCRIPTION) };
        let len = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) as usize;
        let src = addr::decode(head[8], head[16..32].try_into().expect("16 bytes"))?;
        if len > SLOT_PAYLOAD {
            return None;
        }
        Some(SlotHeader {
            len,
            src_port: u16::from_le_bytes([head[4], head[5]]),
            ident: u16::from_le_bytes([head[6], head[7]]),
            src,
        })
    }

    /// The first byte of slot `seq` of `lane`'s datagram: [`SLOT_PAYLOAD`] bytes of the
    /// mapping, which stay the consumer's until it publishes a `head` past `seq`.
    pub fn payload(&self, lane: usize, seq: u64) -> *const u8 {
        // SAFETY: the slot is inside the mapping (`slot`), its payload after its header.
        unsafe { self.slot(lane, seq).add(SLOT_HEADER) }
    }
}
