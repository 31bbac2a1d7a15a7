//! Packet transports: the thin I/O layer under the sans-IO protocol engine.
//!
//! A transport moves RoCEv2 UDP datagrams (IBTA annex A17.2, "RoCEv2 packet format"): the UDP
//! payload is BTH, extension headers, payload, pad and ICRC; the UDP destination port is 4791
//! ([`ROCE_V2_UDP_PORT`], A17.2.2); the UDP source port is flow entropy chosen by the sender
//! (A17.2.3 — kernel rxe uses one port >= 0xC000 per QP), so [`OutPacket`] carries it.
//!
//! The driver owns one [`Transport`] per device and calls, in a loop:
//!
//! * [`Transport::send_batch`] with the packets the engine emitted, each given as a list of
//!   byte pieces (headers from a scratch buffer, payload straight from registered memory, the
//!   ICRC's 4 bytes) that the transport hands to the kernel as an iovec list, never gathered.
//!   The pieces are [`Bytes`], pointer and length: registered memory may change under the
//!   send (the application owns it), so a transport reads a piece only by address or by
//!   copy, never as a slice (`mr/bytes.rs`);
//! * [`Transport::recv_batch`] into a caller-owned, reused [`RecvBatch`];
//! * [`Transport::poll`] to sleep until a packet arrives or the engine's next deadline;
//! * [`Transport::join_multicast`] / [`Transport::leave_multicast`] when the device's first
//!   QP attaches to a multicast group or its last one detaches (IBTA 10.5).
//!
//! Implementations: [`udp::UdpTransport`] (kernel UDP sockets, unprivileged; to another
//! softrnic device of the host, shared memory: `udp/local/`) and
//! [`fabric::Fabric`] (an in-memory network with seeded fault injection, for deterministic
//! tests); [`faults::FaultInjector`] wraps either to drop or duplicate chosen packets.
//!
//! # The ICRC and what a receiver can see
//!
//! The ICRC (A17.4.2) covers the IP header except its variant fields. For IPv4 that includes
//! the Identification and the flags, which a UDP socket never reports, and senders number
//! their datagrams (kernel rxe increments the IP ID; a connected socket counts its own). A
//! packet is never handed on unless its ICRC matches ([`RecvPacket::icrc_status`]):
//!
//! * over the IP header as received, where the transport saw it (the in-memory fabric, a
//!   packet ring): [`IcrcStatus::Ok`];
//! * for IPv6 through a socket, over the header rebuilt from the addresses and the length,
//!   which is all of it the ICRC covers: [`IcrcStatus::Ok`];
//! * for IPv4 whose Identification was not seen (through a socket: DF assumed, as RoCEv2
//!   senders set it; a later segment of a run a packet ring saw, whose header is the run's
//!   first one's): for the ID that makes it match, found by solving
//!   ([`softrnic_wire::icrc::ipv4_ident_matching`]), [`IcrcStatus::OkForIdent`]. The price
//!   of the unseen ID: a corrupted packet whose ICRC comes out random passes with
//!   probability 2^-16, not 2^-32.
//!
//! Anything else, and a packet too short to carry a BTH and an ICRC, is [`IcrcStatus::Bad`].
//!
//! A datagram of the host-local path (`udp/local/`) went through no link, only through
//! memory shared by two processes of one user: it is not checked at all
//! ([`RecvMeta::intact`]), as the kernel does not check the checksums of a packet that went
//! through its loopback device (`CHECKSUM_UNNECESSARY`). Its sender leaves the ICRC zero
//! ([`Transport::wants_icrc`]) unless it captures, and a capture on the receiving side
//! writes the ICRC it has on a link; its headers are parsed and checked as any packet's.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::RawFd;
use std::time::Duration;

use softrnic_wire::frame::{
    emit_masked_outer, IpHeader, UdpHeader, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN,
};
use softrnic_wire::icrc::{ipv4_ident_matching, Icrc, ICRC_LEN};
use softrnic_wire::{bth, ROCE_V2_UDP_PORT};

pub use crate::mr::Bytes;

pub mod capture;
pub mod fabric;
pub mod faults;
pub(crate) mod idents;
pub mod udp;

pub use capture::{Capture, CaptureConfig};
pub use fabric::{Fabric, FabricConfig, FabricEndpoint, FabricStats, SplitMix64};
pub use faults::{FaultControl, FaultInjector};
pub use udp::local::SleepGate;
pub use udp::UdpTransport;

/// A clock other than the system's: the time since some fixed start, as a function (the
/// in-memory fabric's virtual time, [`Fabric::clock`]). A device or a capture given one reads
/// it instead of the wall clock, so that a run on the fabric, driven by one thread, is the
/// same run every time.
#[derive(Clone)]
pub struct Clock(std::sync::Arc<dyn Fn() -> Duration + Send + Sync>);

impl Clock {
    /// The clock `now` reads.
    pub fn new(now: impl Fn() -> Duration + Send + Sync + 'static) -> Clock {
        Clock(std::sync::Arc::new(now))
    }

    /// The time now.
    pub fn now(&self) -> Duration {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

/// The TTL / hop limit of the IP headers softrnic writes (the ICRC masks it).
pub(crate) const HOP_LIMIT: u8 = 64;

/// One datagram to send.
#[derive(Debug, Clone, Copy)]
pub struct OutPacket<'a> {
    /// Destination address and UDP port (normally 4791).
    pub dst: SocketAddr,
    /// UDP source port: RoCEv2 flow entropy (A17.2.3), one per QP.
    pub src_port: u16,
    /// The UDP payload, in pieces that are sent back to back without being copied. A piece
    /// may lie in registered memory, which the application may be writing: it is read by
    /// address or by copy only ([`Bytes`]); build one of a buffer of your own with
    /// `Bytes::from`.
    pub pieces: &'a [Bytes<'a>],
    /// Its place in a segmentation run (see [`SegmentLimits`]): 0 starts a run (or is a
    /// packet on its own); `k > 0` continues the run of the packet just before it, as its
    /// `k`-th segment, and carries IPv4 Identification `k`.
    pub segment: u16,
    /// The IPv4 Identification its ICRC covers: `segment`, or what
    /// [`Transport::ipv4_ident`] said (IPv6 has none; then anything).
    pub ident: u16,
}

/// What a transport can send as one *segmentation run* (Linux UDP GSO, `UDP_SEGMENT`):
/// consecutive packets from one source port to one destination, all of the first one's length
/// except the last, which may be shorter, handed to the kernel as one datagram that it (or the
/// NIC) cuts into segments. One pass through the stack instead of one per packet, for a
/// message of many MTU-sized packets.
///
/// The kernel numbers the segments' IPv4 Identification from the first one's, which is 0 for
/// a DF datagram from an unconnected socket, so segment `k` carries ID `k`; the ICRC covers
/// the ID, so the emitter computes each packet's ICRC for its place in the run. (A transport
/// whose datagrams carry other IDs, as a connected socket's do, moves the ICRC to them: see
/// `udp/mod.rs`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLimits {
    /// Most packets in a run (1: no segmentation).
    pub max_segments: usize,
    /// Most UDP payload bytes in a run, all packets together.
    pub max_bytes: usize,
    /// Most pieces in a run, all packets together.
    pub max_pieces: usize,
}

impl SegmentLimits {
    /// No segmentation: every packet on its own.
    pub const NONE: SegmentLimits = SegmentLimits {
        max_segments: 1,
        max_bytes: usize::MAX,
        max_pieces: usize::MAX,
    };
}

impl OutPacket<'_> {
    /// Length of the UDP payload (the sum of the pieces).
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }

    /// Whether the UDP payload is empty.
    pub fn is_empty(&self) -> bool {
        self.pieces.iter().all(|p| p.is_empty())
    }
}

/// Where the IP header of a received packet comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpHeaderOrigin {
    /// The header as it was on the wire (the fabric; a packet ring).
    Received,
    /// An IPv4 header known but for its Identification: a later segment of a segmentation
    /// run a packet ring saw, whose header is the run's first one's with the ID it likely
    /// carried (the first one's plus its place in the run; receive offload may have joined
    /// segments of other IDs), or a segment of a run read from the socket, with the ID the
    /// ring's notice of it suggests.
    IdentUnknown,
    /// Not seen: the packet came through a UDP socket. The ICRC is checked over a header
    /// rebuilt from the addresses and length (see the module comment).
    NotSeen,
}

/// What an ICRC check says about a received packet (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcStatus {
    /// The ICRC matches over the IP header as received, or (IPv6 through a socket) rebuilt.
    Ok,
    /// An IPv4 packet whose Identification was not seen: the ICRC matches had the ID been
    /// this one (a wrong ICRC passes with probability 2^-16).
    OkForIdent(u16),
    /// The ICRC does not match, or the packet is too short to carry a BTH and an ICRC: drop it.
    Bad,
}

/// Metadata of one received datagram, filled by the transport.
#[derive(Debug, Clone, Copy)]
pub struct RecvMeta {
    /// Source address and UDP source port.
    pub src: SocketAddr,
    /// Destination IP address: the local one, or a multicast group the transport joined.
    pub dst: IpAddr,
    /// Bytes of UDP payload stored in the slot.
    pub len: usize,
    /// The datagram was longer than the slot and was cut; drop it.
    pub truncated: bool,
    /// Where [`RecvMeta::ip_header`] comes from.
    pub origin: IpHeaderOrigin,
    /// The datagram came through memory its sender shares with this process (the host-local
    /// path, `udp/local/`), not over any link: nothing on its way could corrupt it, and its
    /// ICRC is not checked ([`RecvPacket::icrc_status`]).
    pub intact: bool,
    ip_header: [u8; IPV6_HEADER_LEN],
    ip_header_len: u8,
}

impl Default for RecvMeta {
    fn default() -> RecvMeta {
        RecvMeta {
            src: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            len: 0,
            truncated: false,
            origin: IpHeaderOrigin::NotSeen,
            intact: false,
            ip_header: [0; IPV6_HEADER_LEN],
            ip_header_len: 0,
        }
    }
}

impl RecvMeta {
    /// The metadata of a datagram of `len` bytes from `src` to `dst` as a UDP socket reports
    /// it: no IP header seen.
    pub fn from_socket(src: SocketAddr, dst: IpAddr, len: usize) -> RecvMeta {
        RecvMeta {
            src,
            dst,
            len,
            ..RecvMeta::default()
        }
    }

    /// The IP header as received, if the transport saw it (empty otherwise).
    pub fn ip_header(&self) -> &[u8] {
        &self.ip_header[..usize::from(self.ip_header_len)]
    }

    /// Stores the received IP header (at most 40 bytes; longer ones — IPv4 options — are not
    /// kept) and sets the origin to [`IpHeaderOrigin::Received`].
    pub fn set_ip_header(&mut self, header: &[u8]) {
        if header.len() <= IPV6_HEADER_LEN {
            self.ip_header[..header.len()].copy_from_slice(header);
            self.ip_header_len = header.len() as u8;
            self.origin = IpHeaderOrigin::Received;
        } else {
            self.clear_ip_header();
        }
    }

    /// Stores the IPv4 header of a packet whose Identification is not certain (`header`'s is
    /// a guess; see [`IpHeaderOrigin::IdentUnknown`]).
    pub fn set_ip_header_ident_unknown(&mut self, header: &[u8]) {
        self.set_ip_header(header);
        if self.origin == IpHeaderOrigin::Received {
            self.origin = IpHeaderOrigin::IdentUnknown;
        }
    }

    /// Writes into `buf` the IP header a UDP socket with `IP_PMTUDISC_DO` sends this datagram
    /// with (from `src` to `dst`, `len` bytes of UDP payload; IPv4: DF), IPv4 Identification
    /// `ident`; returns its length, `None` when the address families differ. For a transport
    /// that knows what the sender's socket would have put on the wire but did not see it.
    pub(crate) fn socket_ip_header(
        &self,
        ident: u16,
        buf: &mut [u8; IPV6_HEADER_LEN],
    ) -> Option<usize> {
        IpHeader::udp_socket(self.src.ip(), self.dst, HOP_LIMIT)?
            .with_ident(ident)
            .emit(UDP_HEADER_LEN + self.len, buf)
            .ok()
    }

    /// Forgets the IP header; the origin becomes [`IpHeaderOrigin::NotSeen`].
    pub fn clear_ip_header(&mut self) {
        self.ip_header_len = 0;
        self.origin = IpHeaderOrigin::NotSeen;
    }
}

/// A received datagram: a view into a [`RecvBatch`] slot.
#[derive(Debug, Clone, Copy)]
pub struct RecvPacket<'a> {
    /// Its metadata.
    pub meta: &'a RecvMeta,
    /// The UDP payload (BTH through ICRC for RoCEv2).
    pub payload: &'a [u8],
}

impl RecvPacket<'_> {
    /// Checks the ICRC (see the module comment): over the received IP header if the transport
    /// saw it; otherwise over a rebuilt one (IPv4: the header a UDP socket with
    /// `IP_PMTUDISC_DO` sends, DF and IP ID 0). An IPv4 header whose Identification was not
    /// seen is [`IcrcStatus::OkForIdent`] if some ID makes the ICRC match. The UDP header is
    /// rebuilt (its checksum is masked). An [`intact`](RecvMeta::intact) datagram is
    /// [`IcrcStatus::Ok`] unchecked, as long as it has room for a BTH and an ICRC.
    pub fn icrc_status(&self) -> IcrcStatus {
        let m = self.meta;
        if self.too_short() {
            return IcrcStatus::Bad;
        }
        if m.intact {
            return IcrcStatus::Ok;
        }
        let (body, icrc) = self.payload.split_at(self.payload.len() - ICRC_LEN);
        let wanted = u32::from_le_bytes(icrc.try_into().expect("ICRC_LEN bytes"));
        let computed = match m.origin {
            IpHeaderOrigin::Received | IpHeaderOrigin::IdentUnknown => {
                icrc_under(m.ip_header(), m.src.port(), body)
            }
            IpHeaderOrigin::NotSeen => socket_icrc(m.src, m.dst, body),
        };
        let Some(computed) = computed else {
            return IcrcStatus::Bad;
        };
        match self.unseen_ident() {
            None if computed == wanted => IcrcStatus::Ok,
            None => IcrcStatus::Bad,
            Some((ident, ip_len)) => {
                match ipv4_ident_matching(computed, ident, wanted, ip_len, self.payload.len()) {
                    Some(id) => IcrcStatus::OkForIdent(id),
                    None => IcrcStatus::Bad,
                }
            }
        }
    }

    /// For an IPv4 packet whose Identification was not seen, the ID its ICRC was computed for
    /// above and the IP header's length.
    fn unseen_ident(&self) -> Option<(u16, usize)> {
        let m = self.meta;
        match m.origin {
            IpHeaderOrigin::Received => None,
            IpHeaderOrigin::IdentUnknown => {
                let h = m.ip_header();
                (h.len() >= IPV4_HEADER_LEN && h[0] >> 4 == 4)
                    .then(|| (u16::from_be_bytes([h[4], h[5]]), h.len()))
            }
            IpHeaderOrigin::NotSeen => m.src.is_ipv4().then_some((0, IPV4_HEADER_LEN)),
        }
    }

    /// Cut by the transport, or too short to carry a BTH and an ICRC.
    fn too_short(&self) -> bool {
        self.meta.truncated || self.payload.len() < bth::HEADER_LEN + ICRC_LEN
    }
}

/// The ICRC of a RoCEv2 datagram under IP header `ip` from UDP port `src_port`, whose UDP
/// payload is `body` (BTH on, at least a BTH long) and its ICRC; `None` if `ip` is no IP
/// header.
pub(crate) fn icrc_under(ip: &[u8], src_port: u16, body: &[u8]) -> Option<u32> {
    let (bth, rest) = body.split_at(bth::HEADER_LEN);
    let mut u = [0u8; UDP_HEADER_LEN];
    udp_header(src_port)
        .emit(UDP_HEADER_LEN + body.len() + ICRC_LEN, &mut u)
        .and_then(|_| Icrc::start(ip, &u, bth))
        .ok()
        .map(|mut c| {
            c.update(rest);
            c.finish()
        })
}

/// The UDP header of a RoCEv2 datagram from `src_port`, as the ICRC sees it (checksum
/// masked).
fn udp_header(src_port: u16) -> UdpHeader {
    UdpHeader {
        src_port,
        dst_port: ROCE_V2_UDP_PORT,
        checksum: 0,
    }
}

/// The ICRC of a datagram whose UDP payload is `body` and its ICRC, from `src` to `dst`, sent
/// by a UDP socket with `IP_PMTUDISC_DO` (IPv4: DF, IP ID 0); `None` for mixed address
/// families (no socket sends that) or a body shorter than a BTH.
fn socket_icrc(src: SocketAddr, dst: IpAddr, body: &[u8]) -> Option<u32> {
    let ip = IpHeader::udp_socket(src.ip(), dst, HOP_LIMIT)?;
    let udp_len = UDP_HEADER_LEN + body.len() + ICRC_LEN;
    let (bth, rest) = body.split_at_checked(bth::HEADER_LEN)?;
    let mut view = [0u8; MASKED_VIEW_MAX];
    let at = emit_masked_outer(&ip, &udp_header(src.port()), udp_len, &mut view).ok()?;
    view[at..at + bth::HEADER_LEN].copy_from_slice(bth);
    let mut c = Icrc::start_masked(&mut view[..at + bth::HEADER_LEN], at).ok()?;
    c.update(rest);
    Some(c.finish())
}

/// Waits up to `timeout` for any of `fds` to be readable, and says which woke (readable, or
/// in error: the caller reads it and sees). `ppoll(2)`, to the microsecond: `poll(2)` would
/// round a held ACK's deadline, tens of them away, up to a millisecond. A descriptor of -1
/// is ignored.
pub(crate) fn wait_readable<const N: usize>(fds: [RawFd; N], timeout: Duration) -> [bool; N] {
    let mut p = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // SAFETY: `N` pollfds and a timespec, both outliving the call; a descriptor closed
    // meanwhile is reported (POLLNVAL), not used; a null sigmask leaves the mask alone.
    unsafe { libc::ppoll(p.as_mut_ptr(), N as libc::nfds_t, &ts, std::ptr::null()) };
    p.map(|p| p.revents != 0)
}

/// Writes into the last [`ICRC_LEN`] bytes of `payload`, a RoCEv2 UDP payload, the ICRC it
/// has when a UDP socket with `IP_PMTUDISC_DO` sends it from `src` to `dst` (IPv4: DF, IP ID
/// 0): what a peer that computes ICRCs sends. For harnesses that forge packets (tests,
/// fuzzing) and hand them to [`crate::driver::accept`]. `false`, and `payload` unchanged, if
/// it is too short for a BTH and an ICRC or the address families differ.
pub fn seal_as_socket_sent(src: SocketAddr, dst: IpAddr, payload: &mut [u8]) -> bool {
    let Some(at) = payload.len().checked_sub(ICRC_LEN) else {
        return false;
    };
    let Some(icrc) = socket_icrc(src, dst, &payload[..at]) else {
        return false;
    };
    payload[at..].copy_from_slice(&icrc.to_le_bytes());
    true
}

/// The ICRC's view of rebuilt headers up to the BTH's end: LRH placeholder, IPv6, UDP, BTH.
const MASKED_VIEW_MAX: usize = 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + bth::HEADER_LEN;

/// Caller-owned receive buffers, reused from call to call: `capacity` slots of `slot_len`
/// bytes each, allocated once by [`RecvBatch::new`].
///
/// A transport may also leave a datagram where it received it and hand over only its place
/// ([`RecvBatch::set_outside`]): the host-local path does so for its lanes' slots, which
/// their sender does not reuse until the receiver says it is done with them
/// ([`Transport::release_received`]). The payload is then copied once, from the slot straight
/// to where the engine places it, rather than into the batch first.
#[derive(Debug)]
pub struct RecvBatch {
    data: Vec<u8>,
    slot_len: usize,
    meta: Vec<RecvMeta>,
    /// Per slot: the datagram left outside the batch, if it was.
    outside: Vec<Option<Outside>>,
    /// How many of `outside` are set (none, mostly: nothing to clear).
    outside_n: usize,
    filled: usize,
    watched: usize,
}

/// A datagram a transport left where it received it: its first byte and length.
#[derive(Debug, Clone, Copy)]
struct Outside {
    at: *const u8,
    len: usize,
}

// SAFETY: an `Outside` points into memory the transport keeps mapped and unchanged for as
// long as the batch lists it (`RecvBatch::set_outside`), whichever thread holds the batch;
// it is only read, through `RecvBatch::get`.
unsafe impl Send for RecvBatch {}
// SAFETY: as above; a shared batch only gives shared views of it.
unsafe impl Sync for RecvBatch {}

impl RecvBatch {
    /// `capacity` slots of `slot_len` bytes. A slot must hold a whole UDP payload: path MTU
    /// (up to 4096) plus BTH, extension headers and ICRC — 4224 is enough; larger datagrams
    /// arrive marked [`RecvMeta::truncated`].
    pub fn new(capacity: usize, slot_len: usize) -> RecvBatch {
        RecvBatch {
            data: vec![0; capacity * slot_len],
            slot_len,
            meta: vec![RecvMeta::default(); capacity],
            outside: vec![None; capacity],
            outside_n: 0,
            filled: 0,
            watched: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    /// Bytes per slot.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Number of packets received by the last `recv_batch`.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Whether the last `recv_batch` received nothing.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Packet `i` of those received, if `i < len()`.
    pub fn get(&self, i: usize) -> Option<RecvPacket<'_>> {
        if i >= self.filled {
            return None;
        }
        let meta = &self.meta[i];
        let at = i * self.slot_len;
        let payload = match self.outside[i] {
            // SAFETY: readable for `len` bytes and unchanged while the batch lists it
            // (`set_outside`'s contract); the view borrows the batch.
            Some(o) => unsafe { std::slice::from_raw_parts(o.at, o.len.min(self.slot_len)) },
            None => &self.data[at..at + meta.len.min(self.slot_len)],
        };
        Some(RecvPacket { meta, payload })
    }

    /// The packets received, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = RecvPacket<'_>> + '_ {
        (0..self.filled).filter_map(|i| self.get(i))
    }

    /// For transports: every slot's buffer and metadata, to fill from slot 0 on; then call
    /// [`RecvBatch::set_len`].
    ///
    /// A received packet left outside the batch is copied into its slot first, so that what
    /// is changed there is the packet (a fault injector moves packets down over the ones it
    /// drops).
    pub fn slots_mut(&mut self) -> impl Iterator<Item = (&mut [u8], &mut RecvMeta)> + '_ {
        for i in 0..self.filled {
            self.bring_in(i);
        }
        self.data
            .chunks_mut(self.slot_len)
            .zip(self.meta.iter_mut())
    }

    /// For transports: slot `i`'s buffer and metadata, if `i < capacity()`.
    pub fn slot_mut(&mut self, i: usize) -> Option<(&mut [u8], &mut RecvMeta)> {
        if i < self.filled {
            self.bring_in(i);
        } else if self.outside.get(i).is_some_and(Option::is_some) {
            self.outside[i] = None;
            self.outside_n -= 1;
        }
        let meta = self.meta.get_mut(i)?;
        let at = i * self.slot_len;
        Some((&mut self.data[at..at + self.slot_len], meta))
    }

    /// For transports: declares slots `0..n` filled (clamped to the capacity), none of them
    /// watched. Slots from `n` on hold no packet any more, nor one left outside.
    pub fn set_len(&mut self, n: usize) {
        self.filled = n.min(self.capacity());
        self.watched = 0;
        if self.outside_n > 0 {
            for o in &mut self.outside[self.filled..] {
                self.outside_n -= usize::from(o.take().is_some());
            }
        }
    }

    /// For transports, while filling slot `i` (after [`RecvBatch::slot_mut`] gave its
    /// metadata): its datagram, `len` bytes at `at`, stays where it is rather than in the
    /// slot's buffer (cut to the slot's length as a copy would be).
    ///
    /// # Safety
    /// `at` is readable for `len` bytes, and nothing writes them, until the batch is next
    /// filled (its [`RecvBatch::set_len`] with less than `i + 1`, or `i`'s `slot_mut` again)
    /// or [`Transport::release_received`] is called, whichever comes first.
    pub unsafe fn set_outside(&mut self, i: usize, at: *const u8, len: usize) {
        if let Some(o) = self.outside.get_mut(i) {
            self.outside_n += usize::from(o.is_none());
            *o = Some(Outside { at, len });
        }
    }

    /// Copies packet `i`, if left outside, into its slot's buffer.
    fn bring_in(&mut self, i: usize) {
        let Some(o) = self.outside.get_mut(i).and_then(Option::take) else {
            return;
        };
        self.outside_n -= 1;
        let n = o.len.min(self.slot_len);
        // SAFETY: `set_outside`'s contract: readable for `len` bytes until now.
        let from = unsafe { std::slice::from_raw_parts(o.at, n) };
        let at = i * self.slot_len;
        self.data[at..at + n].copy_from_slice(from);
    }

    /// How many of the packets came from senders that watch them until they are read and
    /// wake the receiver if it stops reading (the host-local path, `udp/local/unread.rs`):
    /// no progress thread needs to look often for such packets.
    pub fn watched(&self) -> usize {
        self.watched
    }

    /// For transports, after [`RecvBatch::set_len`]: `n` of the packets are watched.
    pub fn set_watched(&mut self, n: usize) {
        self.watched = n.min(self.filled);
    }
}

/// What [`Transport::poll`] found ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready {
    /// A packet is waiting: call [`Transport::recv_batch`].
    pub recv: bool,
    /// Sending may go on: no socket is blocked (a short `send_batch` can be retried).
    pub send: bool,
}

/// Counters of a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransportStats {
    /// Datagrams handed to the network.
    pub tx_packets: u64,
    /// Their UDP payload bytes.
    pub tx_bytes: u64,
    /// Datagrams dropped on a per-packet error (`EMSGSIZE`, unreachable, ...).
    pub tx_errors: u64,
    /// `send_batch` calls cut short because the network would block.
    pub tx_blocked: u64,
    /// Packets that went out as the second or later segment of a segmentation run (counted in
    /// `tx_packets` too): the passes through the kernel's stack saved.
    pub tx_segmented: u64,
    /// Datagrams received.
    pub rx_packets: u64,
    /// Their UDP payload bytes (as stored).
    pub rx_bytes: u64,
    /// Datagrams that did not fit their slot.
    pub rx_truncated: u64,
    /// Source ports another socket of the host held, whose packets leave from another port
    /// (see [`Transport::source_port`]).
    pub tx_ports_moved: u64,
    /// Source ports whose packets leave from another port's socket, shared: past the
    /// transport's number of source-port sockets, or when no file descriptor was left.
    pub tx_ports_shared: u64,
    /// The errno of the last per-packet send error (0: none).
    pub last_errno: i32,
    /// Times a connected socket's IPv4 ID counter was learnt (at connect, and after a send
    /// error; see `udp/ident.rs`).
    pub ident_probes: u64,
    /// Datagrams are read from a packet ring, not a socket (`udp/ring.rs`).
    pub rx_from_ring: bool,
    /// Datagrams the packet ring had no free slot for (lost, as from a full socket buffer).
    pub rx_ring_dropped: u64,
    /// Datagrams written into another device's inbox on this host instead of sent over UDP
    /// (counted in `tx_packets` too; `udp/local/`).
    pub tx_local: u64,
    /// Datagrams read from this device's inbox (counted in `rx_packets` too).
    pub rx_local: u64,
    /// Datagrams for another device's inbox dropped because their lane was full (the
    /// receiver was behind, as when a socket's buffer is full).
    pub tx_local_dropped: u64,
    /// Doorbells rung for datagrams another device's receiver left unread in its inbox
    /// (`udp/local/unread.rs`).
    pub tx_local_rung: u64,
}

/// A packet transport, as the driver uses it.
///
/// No method allocates per packet, and none but [`Transport::poll`] blocks.
pub trait Transport {
    /// Sends `pkts` in order. Returns `n`: packets `0..n` are done with — sent, or dropped on
    /// a per-packet error (counted in [`TransportStats::tx_errors`]), as a NIC drops what it
    /// cannot send; RC retransmission recovers. `n < pkts.len()` means the network would
    /// block: retry `pkts[n..]` when [`Transport::poll`] reports [`Ready::send`].
    ///
    /// # Errors
    ///
    /// A failure of the transport itself (a source-port socket cannot be bound, an invalid
    /// packet) when it concerns `pkts[0]`; for a later packet the call returns the packets
    /// before it and the next call reports the error.
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize>;

    /// Receives up to `batch.capacity()` datagrams into `batch` (replacing what it held) and
    /// returns how many. Returns 0 at once when nothing is pending.
    ///
    /// # Errors
    ///
    /// The socket's errors other than "would block".
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize>;

    /// Tells the transport that the packet at `index` of the batch the last
    /// [`Transport::recv_batch`] returned was dropped after it was received, and why (`why`
    /// says it in words: the headers do not parse, no QP has its DestQP, ...). A capture
    /// writes it beside the packet; by default nothing is done.
    fn note_dropped(&mut self, index: usize, why: &'static str) {
        let _ = (index, why);
    }

    /// The packets of the batch the last [`Transport::recv_batch`] returned are handled: a
    /// transport that left some where they arrived ([`RecvBatch::set_outside`]) lets their
    /// sender reuse that room now. By default nothing to do.
    fn release_received(&mut self) {}

    /// Waits until a packet can be received (or a blocked send may go on), or `timeout`
    /// passes (`None`: no timeout; `Some(Duration::ZERO)`: just look).
    ///
    /// # Errors
    ///
    /// The OS's errors of `poll` other than `EINTR` (which returns nothing ready).
    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready>;

    /// The local IP address (the device's GID, as an IP address).
    fn local_addr(&self) -> IpAddr;

    /// The segmentation runs it accepts in [`Transport::send_batch`]; by default none, and
    /// every packet must have `segment` 0. A transport that accepts runs sends each one whole
    /// or not at all: `send_batch` never returns in the middle of a run.
    fn segment_limits(&self) -> SegmentLimits {
        SegmentLimits::NONE
    }

    /// Whether a datagram of `len` bytes for `dst` whose BTH names QP `dest_qp` needs its
    /// ICRC computed: by default yes. The host-local path's datagrams need none (their
    /// receiver does not check it, see the module comment): a transport that will write
    /// this one into a lane says no, and the emitter leaves its ICRC zero, saving a pass
    /// over the payload in registered memory. A capture says yes (its file shows the ICRC).
    /// Asked right before the datagram is built and handed to [`Transport::send_batch`].
    fn wants_icrc(&mut self, dst: SocketAddr, dest_qp: u32, len: usize) -> bool {
        let _ = (dst, dest_qp, len);
        true
    }

    /// The UDP source port a packet meant to leave from `src_port` for `dst` leaves from: the
    /// same port, unless the transport cannot send from it, and then one it can. The emitter
    /// writes this one into the UDP header, which the ICRC covers (IBTA annex A17.4.2),
    /// before it builds the packet. By default the same port. Asked only for a datagram the
    /// transport wants an ICRC for ([`Transport::wants_icrc`]): one for a lane leaves from no
    /// socket and names the QP's own port.
    ///
    /// Why a port may be refused: the QPs' ports (0xC000 and up, A17.2.3, as rxe's) lie in
    /// Linux's ephemeral range, where any socket of the host may hold one, and a socket bound
    /// there without `SO_REUSEADDR` keeps a source-port socket from binding it. Sent from
    /// there regardless, every packet of the QPs on that port would be lost, and their WRs
    /// would end in `IBV_WC_RETRY_EXC_ERR`.
    fn source_port(&mut self, src_port: u16, dst: SocketAddr) -> u16 {
        let _ = dst;
        src_port
    }

    /// The IPv4 Identification the next datagram from `src_port` will carry, when the
    /// transport knows it and it is not the segment rule (a connected socket counts its own,
    /// see `udp/ident.rs`); the `k`-th message after that carries this plus `k` (plus its
    /// segment number). The emitter computes ICRCs for it, and the transport then sends them
    /// as they are; one built for another ID it moves (`ident` of [`OutPacket`]).
    fn ipv4_ident(&self, src_port: u16) -> Option<u16> {
        let _ = src_port;
        None
    }

    /// The counters so far.
    fn stats(&self) -> TransportStats;

    /// Joins the IP multicast group `group` (a multicast GID's address, IBTA annex A17): from
    /// now on datagrams sent to `(group, 4791)` are received too, with
    /// [`RecvMeta::dst`] = `group`. Called when a device's first QP attaches to the group
    /// (`ibv_attach_mcast`, IBTA 10.5). By default not supported.
    ///
    /// # Errors
    ///
    /// `Unsupported` (`EOPNOTSUPP`) for a transport without multicast; the OS's errors.
    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let _ = group;
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }

    /// Leaves a group joined with [`Transport::join_multicast`] (its last QP detached).
    ///
    /// # Errors
    ///
    /// As [`Transport::join_multicast`]; `InvalidInput` for a group not joined.
    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let _ = group;
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }

    /// Receives on `rx` from now on instead of the receive socket it had (a shared device's
    /// socket of the host's group, handed out again after the group was rebuilt; see
    /// `host/`). By default not supported.
    ///
    /// # Errors
    ///
    /// `Unsupported` (`EOPNOTSUPP`) for a transport without a receive socket; the OS's.
    fn adopt_receive_socket(&mut self, rx: std::net::UdpSocket) -> io::Result<()> {
        drop(rx);
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }

    /// A file descriptor that becomes readable when a packet arrives, for a driver that sleeps
    /// in `poll(2)` without holding the transport; `None` if there is none (the in-memory
    /// fabric), and the driver then sleeps briefly instead.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// What a thread sleeping on [`Transport::wait_fd`] must also do, for a transport that
    /// other devices of the host write into (`udp/local/`): say it sleeps, poll the gate's
    /// descriptors too, say it woke. `None` by default.
    fn sleep_gate(&self) -> Option<std::sync::Arc<SleepGate>> {
        None
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    //! RoCEv2 packets for the transport tests, built with the wire crate.

    use std::net::IpAddr;

    use softrnic_wire::bth::BthRepr;
    use softrnic_wire::frame::{DatagramRepr, IpHeader, UdpHeader, UDP_HEADER_LEN};
    use softrnic_wire::opcode::Opcode;
    use softrnic_wire::roce::RoceRepr;
    use softrnic_wire::{bth, Psn, ROCE_V2_UDP_PORT};

    /// An RC SEND_ONLY to QP `qpn` with `payload`: returns (headers, trailer), the trailer
    /// being the pad and the ICRC, computed over the IP header a UDP socket with DF sends.
    pub fn send_only(
        src: (IpAddr, u16),
        dst: IpAddr,
        qpn: u32,
        psn: u32,
        payload: &[u8],
    ) -> (Vec<u8>, Vec<u8>) {
        let mut roce = RoceRepr::new(BthRepr {
            opcode: Opcode::RC_SEND_ONLY,
            solicited: false,
            mig_req: false,
            pkey: bth::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: qpn,
            ack_req: true,
            psn: Psn::new(psn),
        });
        roce.payload_len = payload.len();
        let datagram = DatagramRepr {
            ip: IpHeader::udp_socket(src.0, dst, super::HOP_LIMIT).unwrap(),
            udp: UdpHeader {
                src_port: src.1,
                dst_port: ROCE_V2_UDP_PORT,
                checksum: 0,
            },
            roce,
        };
        let mut headers = vec![0u8; datagram.header_len()];
        let n = datagram.emit_headers(&mut headers).unwrap();
        let icrc = datagram.icrc(&headers[..n], &[payload]).unwrap();
        let hdr = headers[datagram.ip.header_len() + UDP_HEADER_LEN..n].to_vec();
        let mut trailer = vec![0u8; softrnic_wire::roce::pad_len(payload.len())];
        trailer.extend_from_slice(&icrc.to_le_bytes());
        (hdr, trailer)
    }
}
