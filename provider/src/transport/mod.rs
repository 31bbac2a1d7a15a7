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
//!   ICRC's 4 bytes) that the transport hands to the kernel as an iovec list, never gathered;
//! * [`Transport::recv_batch`] into a caller-owned, reused [`RecvBatch`];
//! * [`Transport::poll`] to sleep until a packet arrives or the engine's next deadline;
//! * [`Transport::join_multicast`] / [`Transport::leave_multicast`] when the device's first
//!   QP attaches to a multicast group or its last one detaches (IBTA 10.5).
//!
//! Implementations: [`udp::UdpTransport`] (kernel UDP sockets, unprivileged) and
//! [`fabric::Fabric`] (an in-memory network with seeded fault injection, for deterministic
//! tests); [`faults::FaultInjector`] wraps either to drop or duplicate chosen packets.
//!
//! # The ICRC and what a receiver can see
//!
//! The ICRC (A17.4.2) covers the IP header except its variant fields. For IPv4 that includes
//! the identification and the DF flag, which a UDP socket never reports: a UDP-socket receiver
//! cannot verify the ICRC of IPv4 packets from other senders (kernel rxe increments the IP ID).
//! For IPv6 every covered field (addresses, payload length, next header) is known to the
//! socket, so the header can be rebuilt and the ICRC verified. [`RecvPacket::icrc_status`]
//! reports [`IcrcStatus::Unverifiable`] where it cannot tell; the in-memory fabric carries the
//! real IP header, so there every packet is verifiable.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use softrnic_wire::frame::{
    emit_masked_outer, IpHeader, UdpHeader, IPV6_HEADER_LEN, UDP_HEADER_LEN,
};
use softrnic_wire::icrc::{Icrc, ICRC_LEN};
use softrnic_wire::{bth, ROCE_V2_UDP_PORT};

pub mod fabric;
pub mod faults;
pub mod udp;

pub use fabric::{Fabric, FabricConfig, FabricEndpoint, FabricStats};
pub use faults::{FaultControl, FaultInjector};
pub use udp::UdpTransport;

/// The TTL / hop limit of the IP headers softrnic writes (the ICRC masks it).
pub(crate) const HOP_LIMIT: u8 = 64;

/// One datagram to send.
#[derive(Debug, Clone, Copy)]
pub struct OutPacket<'a> {
    /// Destination address and UDP port (normally 4791).
    pub dst: SocketAddr,
    /// UDP source port: RoCEv2 flow entropy (A17.2.3), one per QP.
    pub src_port: u16,
    /// The UDP payload, in pieces that are sent back to back without being copied.
    pub pieces: &'a [&'a [u8]],
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
    /// The header as it was on the wire (the fabric; a raw-socket transport).
    Received,
    /// Not seen: the packet came through a UDP socket. IPv6 headers are rebuilt from the
    /// addresses and length, which is all the ICRC covers; IPv4 headers cannot be.
    NotSeen,
}

/// What an ICRC check could say about a received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcStatus {
    /// The ICRC matches.
    Ok,
    /// The ICRC does not match, or the packet is too short to carry a BTH and an ICRC: drop it.
    Bad,
    /// Cannot be checked: an IPv4 packet through a UDP socket whose ICRC does not match the
    /// header an unconnected UDP socket would send (DF, IP ID 0). Packets of kernel rxe and of
    /// a softrnic sending from connected sockets look like this (their IP IDs count up); so
    /// would a corrupt one. Accept it: UDP checksums and the link's FCS are the only
    /// protection left.
    Unverifiable,
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
    /// Checks the ICRC: over the received IP header if the transport saw it; otherwise over a
    /// rebuilt one (exact for IPv6; for IPv4 the header an unconnected UDP socket with
    /// `IP_PMTUDISC_DO` sends — DF, IP ID 0 — so packets sent so verify and others are
    /// [`IcrcStatus::Unverifiable`]). The UDP header is rebuilt (its checksum is masked).
    pub fn icrc_status(&self) -> IcrcStatus {
        let m = self.meta;
        if self.too_short() {
            return IcrcStatus::Bad;
        }
        let udp_len = UDP_HEADER_LEN + self.payload.len();
        let udp = UdpHeader {
            src_port: m.src.port(),
            dst_port: ROCE_V2_UDP_PORT,
            checksum: 0,
        };
        let (body, icrc) = self.payload.split_at(self.payload.len() - ICRC_LEN);
        let (bth, rest) = body.split_at(bth::HEADER_LEN);
        let started = match m.origin {
            IpHeaderOrigin::Received => {
                let mut u = [0u8; UDP_HEADER_LEN];
                udp.emit(udp_len, &mut u)
                    .and_then(|_| Icrc::start(m.ip_header(), &u, bth))
            }
            IpHeaderOrigin::NotSeen => match IpHeader::udp_socket(m.src.ip(), m.dst, HOP_LIMIT) {
                // Mixed address families: no socket sent that, so nothing can match.
                None => return self.mismatch(),
                Some(ip) => {
                    let mut view = [0u8; MASKED_VIEW_MAX];
                    emit_masked_outer(&ip, &udp, udp_len, &mut view).and_then(|at| {
                        view[at..at + bth::HEADER_LEN].copy_from_slice(bth);
                        Icrc::start_masked(&mut view[..at + bth::HEADER_LEN], at)
                    })
                }
            },
        };
        let Ok(mut c) = started else {
            return IcrcStatus::Bad;
        };
        c.update(rest);
        if c.finish().to_le_bytes() == icrc {
            IcrcStatus::Ok
        } else {
            self.mismatch()
        }
    }

    /// Whether an ICRC check can only guess at the header: an IPv4 packet whose IP header the
    /// transport did not see (its IP ID is unknown; see [`IcrcStatus::Unverifiable`]).
    pub fn icrc_is_a_guess(&self) -> bool {
        self.meta.origin == IpHeaderOrigin::NotSeen && self.meta.src.is_ipv4()
    }

    /// What [`RecvPacket::icrc_status`] says of a packet whose guess is not tried (see
    /// [`RecvPacket::icrc_is_a_guess`]): `Bad` if it is cut or too short to carry an ICRC, as
    /// always, and otherwise `Unverifiable`, which is all a guess that fails can say.
    pub fn icrc_status_untried(&self) -> IcrcStatus {
        if self.too_short() {
            IcrcStatus::Bad
        } else {
            IcrcStatus::Unverifiable
        }
    }

    /// Cut by the transport, or too short to carry a BTH and an ICRC.
    fn too_short(&self) -> bool {
        self.meta.truncated || self.payload.len() < bth::HEADER_LEN + ICRC_LEN
    }

    /// What an ICRC that does not match means: for an IPv4 packet whose IP header was not
    /// seen, only that the sender's IP ID was not 0; otherwise a bad packet.
    fn mismatch(&self) -> IcrcStatus {
        match (self.meta.origin, self.meta.src.ip()) {
            (IpHeaderOrigin::NotSeen, IpAddr::V4(_)) => IcrcStatus::Unverifiable,
            _ => IcrcStatus::Bad,
        }
    }
}

/// The ICRC's view of rebuilt headers up to the BTH's end: LRH placeholder, IPv6, UDP, BTH.
const MASKED_VIEW_MAX: usize = 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + bth::HEADER_LEN;

/// Caller-owned receive buffers, reused from call to call: `capacity` slots of `slot_len`
/// bytes each, allocated once by [`RecvBatch::new`].
#[derive(Debug)]
pub struct RecvBatch {
    data: Vec<u8>,
    slot_len: usize,
    meta: Vec<RecvMeta>,
    filled: usize,
}

impl RecvBatch {
    /// `capacity` slots of `slot_len` bytes. A slot must hold a whole UDP payload: path MTU
    /// (up to 4096) plus BTH, extension headers and ICRC — 4224 is enough; larger datagrams
    /// arrive marked [`RecvMeta::truncated`].
    pub fn new(capacity: usize, slot_len: usize) -> RecvBatch {
        RecvBatch {
            data: vec![0; capacity * slot_len],
            slot_len,
            meta: vec![RecvMeta::default(); capacity],
            filled: 0,
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
        Some(RecvPacket {
            meta,
            payload: &self.data[at..at + meta.len.min(self.slot_len)],
        })
    }

    /// The packets received, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = RecvPacket<'_>> + '_ {
        (0..self.filled).filter_map(|i| self.get(i))
    }

    /// For transports: every slot's buffer and metadata, to fill from slot 0 on; then call
    /// [`RecvBatch::set_len`].
    pub fn slots_mut(&mut self) -> impl Iterator<Item = (&mut [u8], &mut RecvMeta)> + '_ {
        self.data
            .chunks_mut(self.slot_len)
            .zip(self.meta.iter_mut())
    }

    /// For transports: declares slots `0..n` filled (clamped to the capacity).
    pub fn set_len(&mut self, n: usize) {
        self.filled = n.min(self.capacity());
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
    /// The errno of the last per-packet send error (0: none).
    pub last_errno: i32,
    /// Times a connected socket's IPv4 ID counter was learnt (at connect, and after a send
    /// error; see `udp/ident.rs`).
    pub ident_probes: u64,
    /// Datagrams are read from a packet ring, not a socket (`udp/ring.rs`).
    pub rx_from_ring: bool,
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
