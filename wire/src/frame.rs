//! Whole RoCEv2 frames: Ethernet, IPv4 or IPv6, UDP to port 4791, then the transport packet
//! (IBTA annex A17.2 "RoCEv2 packet format").
//!
//! The outer headers are smoltcp's (`EthernetRepr`, `Ipv4Repr`, `Ipv6Repr`, `UdpPacket`). Their
//! `Repr`s drop fields that a RoCE peer sets and the ICRC covers (the IPv4 identification and
//! DF flag, DSCP/ECN, the IPv6 flow label), so [`Ipv4Header`] and [`Ipv6Header`] keep those
//! beside the smoltcp `Repr`; that is what lets a parsed frame be emitted byte for byte.
//!
//! [`DatagramRepr::emit_headers`] plus [`DatagramRepr::icrc`] is the data-path builder: it
//! writes every header into the caller's buffer without allocating, and checksums the payload
//! wherever it lies, in pieces.

use core::fmt;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr, UdpPacket,
};

use crate::icrc::{self, Icrc, ICRC_LEN, LRH_PLACEHOLDER};
use crate::roce::{pad_len, RoceRepr};
use crate::{bth, check_len, Error, Result, ROCE_V2_UDP_PORT};

/// Ethernet II header length.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// IPv4 header length (softrnic neither sends nor accepts IP options).
pub const IPV4_HEADER_LEN: usize = 20;
/// IPv6 header length (no extension headers).
pub const IPV6_HEADER_LEN: usize = 40;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;

/// An IPv4 header: smoltcp's `Repr` and the fields it leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Header {
    /// Addresses, protocol, hop limit (TTL); `payload_len` is recomputed on emit.
    pub repr: Ipv4Repr,
    /// Identification (covered by the ICRC).
    pub ident: u16,
    /// Differentiated services code point.
    pub dscp: u8,
    /// ECN bits (RoCEv2 congestion marking, A17.9).
    pub ecn: u8,
    /// Don't Fragment (kernel rxe sets it).
    pub dont_frag: bool,
}

/// An IPv6 header: smoltcp's `Repr` and the fields it leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Header {
    /// Addresses, next header, hop limit; `payload_len` is recomputed on emit.
    pub repr: Ipv6Repr,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

/// The IP header of a RoCEv2 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpHeader {
    /// IPv4.
    V4(Ipv4Header),
    /// IPv6.
    V6(Ipv6Header),
}

impl IpHeader {
    /// The header's length.
    pub const fn header_len(&self) -> usize {
        match self {
            IpHeader::V4(_) => IPV4_HEADER_LEN,
            IpHeader::V6(_) => IPV6_HEADER_LEN,
        }
    }

    /// The IP header a Linux UDP socket with `IP_PMTUDISC_DO` sends from `src` to `dst`:
    /// IPv4 with DF, IP ID 0, DSCP and ECN 0; IPv6 with traffic class and flow label 0. What a
    /// softrnic peer sending over kernel UDP puts on the wire, and so what its ICRC covers.
    /// `None` when the address families differ.
    #[inline]
    pub fn udp_socket(
        src: core::net::IpAddr,
        dst: core::net::IpAddr,
        hop_limit: u8,
    ) -> Option<IpHeader> {
        use core::net::IpAddr::{V4, V6};
        match (src, dst) {
            (V4(src_addr), V4(dst_addr)) => Some(IpHeader::V4(Ipv4Header {
                repr: Ipv4Repr {
                    src_addr,
                    dst_addr,
                    next_header: IpProtocol::Udp,
                    payload_len: 0,
                    hop_limit,
                },
                ident: 0,
                dscp: 0,
                ecn: 0,
                dont_frag: true,
            })),
            (V6(src_addr), V6(dst_addr)) => Some(IpHeader::V6(Ipv6Header {
                repr: Ipv6Repr {
                    src_addr,
                    dst_addr,
                    next_header: IpProtocol::Udp,
                    payload_len: 0,
                    hop_limit,
                },
                traffic_class: 0,
                flow_label: 0,
            })),
            _ => None,
        }
    }

    /// The same header with IPv4 Identification `ident`; an IPv6 header (whose fixed header
    /// has no Identification) is returned as it is. The ICRC covers the IPv4 Identification
    /// (A17.4.2 masks TTL, DSCP, ECN and the checksum, not it), so a sender must know the one
    /// each packet will carry.
    #[inline]
    pub fn with_ident(self, ident: u16) -> IpHeader {
        match self {
            IpHeader::V4(h) => IpHeader::V4(Ipv4Header { ident, ..h }),
            v6 @ IpHeader::V6(_) => v6,
        }
    }

    /// Writes the header for a UDP datagram of `udp_len` bytes: payload length `udp_len`,
    /// protocol UDP, the IPv4 checksum filled in. Returns the header's length.
    ///
    /// IPv4 is written by hand, field by field (RFC 791 3.1), as smoltcp's `Ipv4Repr::emit`
    /// and the setters of the fields it leaves out wrote it: a receiver of the host-local
    /// path rebuilds the header of every datagram it reads, and the generic way was a tenth
    /// of the time of a target's progress thread under `ib_write_bw`.
    #[inline]
    pub fn emit(&self, udp_len: usize, buf: &mut [u8]) -> Result<usize> {
        let ip_len = self.header_len();
        if buf.len() < ip_len {
            return Err(Error::BufferTooSmall {
                need: ip_len,
                have: buf.len(),
            });
        }
        if udp_len > usize::from(u16::MAX) - IPV6_HEADER_LEN {
            return Err(Error::BadField {
                what: "IP payload length",
                value: udp_len as u64,
            });
        }
        match *self {
            IpHeader::V4(h) => {
                // Fits: udp_len is at most 65535 - 40.
                let total = (IPV4_HEADER_LEN + udp_len) as u16;
                let flags: u16 = if h.dont_frag { 0x4000 } else { 0 }; // no fragment offset
                let (src, dst) = (h.repr.src_addr.octets(), h.repr.dst_addr.octets());
                // The header's 16-bit words, the checksum's (the sixth) zero.
                let words = [
                    u16::from_be_bytes([0x45, (h.dscp << 2) | (h.ecn & 0x3)]), // version, IHL 5
                    total,
                    h.ident,
                    flags,
                    u16::from_be_bytes([h.repr.hop_limit, IpProtocol::Udp.into()]),
                    0,
                    u16::from_be_bytes([src[0], src[1]]),
                    u16::from_be_bytes([src[2], src[3]]),
                    u16::from_be_bytes([dst[0], dst[1]]),
                    u16::from_be_bytes([dst[2], dst[3]]),
                ];
                // Summed from the values, not read back from `buf`: reading words just
                // written byte by byte stalled on store forwarding, three quarters of the
                // time this took.
                let checksum = ipv4_checksum(&words);
                for (i, w) in words.iter().enumerate() {
                    let w = if i == 5 { checksum } else { *w };
                    buf[2 * i..2 * i + 2].copy_from_slice(&w.to_be_bytes());
                }
            }
            IpHeader::V6(h) => {
                let mut p = Ipv6Packet::new_unchecked(&mut buf[..ip_len]);
                let repr = Ipv6Repr {
                    payload_len: udp_len,
                    next_header: IpProtocol::Udp,
                    ..h.repr
                };
                repr.emit(&mut p);
                p.set_traffic_class(h.traffic_class);
                p.set_flow_label(h.flow_label);
            }
        }
        Ok(ip_len)
    }

    /// Writes the header as the ICRC sees it (A17.4.2) for a UDP datagram of `udp_len` bytes:
    /// the fields it covers as [`IpHeader::emit`] writes them, the ones it masks all ones (see
    /// [`icrc::mask_ip_header`]). Written by hand, field by field: it is on the path of every
    /// packet a UDP socket sends, and needs no checksum. Returns the header's length.
    pub fn emit_masked(&self, udp_len: usize, buf: &mut [u8]) -> Result<usize> {
        let ip_len = self.header_len();
        check_len("IP header buffer", buf, ip_len)?;
        if udp_len > usize::from(u16::MAX) - IPV6_HEADER_LEN {
            return Err(Error::BadField {
                what: "IP payload length",
                value: udp_len as u64,
            });
        }
        let udp = IpProtocol::Udp.into();
        let b = &mut buf[..ip_len];
        // The masked fields are written 0 here and set by `mask_ip_header`.
        match self {
            IpHeader::V4(h) => {
                // Fits: udp_len is at most 65535 - 40.
                let total = (IPV4_HEADER_LEN + udp_len) as u16;
                let flags: u16 = if h.dont_frag { 0x4000 } else { 0 };
                b[0] = 0x45; // version 4, 5 words
                b[1] = 0; // DSCP, ECN
                b[2..4].copy_from_slice(&total.to_be_bytes());
                b[4..6].copy_from_slice(&h.ident.to_be_bytes());
                b[6..8].copy_from_slice(&flags.to_be_bytes());
                b[8] = 0; // TTL
                b[9] = udp;
                b[10..12].fill(0); // header checksum
                b[12..16].copy_from_slice(&h.repr.src_addr.octets());
                b[16..20].copy_from_slice(&h.repr.dst_addr.octets());
            }
            IpHeader::V6(h) => {
                b[0] = 0x60; // version 6, traffic class high nibble
                b[1..4].fill(0); // traffic class low nibble, flow label
                b[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                b[6] = udp;
                b[7] = 0; // hop limit
                b[8..24].copy_from_slice(&h.repr.src_addr.octets());
                b[24..40].copy_from_slice(&h.repr.dst_addr.octets());
            }
        }
        icrc::mask_ip_header(b)
    }

    /// Source address.
    pub fn src_addr(&self) -> core::net::IpAddr {
        match self {
            IpHeader::V4(h) => h.repr.src_addr.into(),
            IpHeader::V6(h) => h.repr.src_addr.into(),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> core::net::IpAddr {
        match self {
            IpHeader::V4(h) => h.repr.dst_addr.into(),
            IpHeader::V6(h) => h.repr.dst_addr.into(),
        }
    }
}

/// The Internet checksum (RFC 1071) of an IPv4 header's words, its checksum word zero.
fn ipv4_checksum(words: &[u16; 10]) -> u16 {
    let mut sum: u32 = words.iter().map(|&w| u32::from(w)).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The UDP header of a RoCEv2 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Source port: RoCEv2 uses it for flow entropy (kernel rxe: one port >= 0xC000 per QP).
    pub src_port: u16,
    /// Destination port, 4791.
    pub dst_port: u16,
    /// The checksum as sent: RoCEv2 senders usually send 0 ("none"), since the ICRC protects
    /// the packet. It is emitted verbatim, never computed.
    pub checksum: u16,
}

impl UdpHeader {
    /// Writes the UDP header of a datagram of `udp_len` bytes (header included); the checksum
    /// is written verbatim. Returns 8.
    pub fn emit(&self, udp_len: usize, buf: &mut [u8]) -> Result<usize> {
        check_len("UDP header buffer", buf, UDP_HEADER_LEN)?;
        let len = u16::try_from(udp_len)
            .ok()
            .filter(|&l| usize::from(l) >= UDP_HEADER_LEN)
            .ok_or(Error::BadField {
                what: "UDP length",
                value: udp_len as u64,
            })?;
        let mut p = UdpPacket::new_unchecked(&mut buf[..UDP_HEADER_LEN]);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(self.checksum);
        Ok(UDP_HEADER_LEN)
    }

    /// Writes the header as the ICRC sees it: [`UdpHeader::emit`] with the checksum masked
    /// (see [`icrc::mask_udp_header`]).
    pub fn emit_masked(&self, udp_len: usize, buf: &mut [u8]) -> Result<usize> {
        let n = self.emit(udp_len, buf)?;
        icrc::mask_udp_header(&mut buf[..n])?;
        Ok(n)
    }
}

/// IP + UDP + transport headers of a RoCEv2 datagram (everything but the Ethernet header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramRepr {
    /// IP header.
    pub ip: IpHeader,
    /// UDP header.
    pub udp: UdpHeader,
    /// Transport headers and payload length.
    pub roce: RoceRepr,
}

/// A parsed datagram: headers, payload, and the ICRC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The headers.
    pub repr: DatagramRepr,
    /// The payload, pad excluded.
    pub payload: &'a [u8],
    /// The ICRC found on the wire (little-endian value).
    pub icrc: u32,
    /// Whether it matches the ICRC computed over the packet.
    pub icrc_ok: bool,
}

/// A whole Ethernet frame carrying a RoCEv2 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRepr {
    /// Ethernet header.
    pub ethernet: EthernetRepr,
    /// The datagram.
    pub datagram: DatagramRepr,
}

/// A parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Ethernet header.
    pub ethernet: EthernetRepr,
    /// The datagram.
    pub datagram: Datagram<'a>,
}

impl<'a> Frame<'a> {
    /// Parses an Ethernet frame. Frames that are not IP/UDP to port 4791 give
    /// [`Error::NotRoce`]; Ethernet padding after the IP packet is ignored.
    pub fn parse(bytes: &'a [u8]) -> Result<Frame<'a>> {
        check_len("Ethernet header", bytes, ETHERNET_HEADER_LEN)?;
        let eth = EthernetFrame::new_unchecked(bytes);
        let ethernet = EthernetRepr::parse(&eth).map_err(|_| Error::Truncated {
            what: "Ethernet header",
            need: ETHERNET_HEADER_LEN,
            have: bytes.len(),
        })?;
        match ethernet.ethertype {
            EthernetProtocol::Ipv4 | EthernetProtocol::Ipv6 => {}
            _ => return Err(Error::NotRoce("the EtherType is not IPv4 or IPv6")),
        }
        Ok(Frame {
            ethernet,
            datagram: DatagramRepr::parse(&bytes[ETHERNET_HEADER_LEN..])?,
        })
    }

    /// The `Repr` of the whole frame.
    pub fn repr(&self) -> FrameRepr {
        FrameRepr {
            ethernet: self.ethernet,
            datagram: self.datagram.repr,
        }
    }
}

impl FrameRepr {
    /// Length of the whole frame.
    pub fn buffer_len(&self) -> usize {
        ETHERNET_HEADER_LEN + self.datagram.buffer_len()
    }

    /// Writes the whole frame — headers, `payload` (the concatenation of its pieces, which must
    /// add up to `roce.payload_len`), pad and ICRC — into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8], payload: &[&[u8]]) -> Result<usize> {
        let need = self.buffer_len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        self.ethernet.emit(&mut EthernetFrame::new_unchecked(
            &mut buf[..ETHERNET_HEADER_LEN],
        ));
        Ok(ETHERNET_HEADER_LEN
            + self
                .datagram
                .emit(&mut buf[ETHERNET_HEADER_LEN..], payload)?)
    }
}

impl DatagramRepr {
    /// Parses an IP datagram (from the IP header on) and verifies its ICRC.
    pub fn parse(bytes: &[u8]) -> Result<Datagram<'_>> {
        let (ip, ip_len, udp_hdr, rest) = parse_outer(bytes)?;
        let udp_len = rest.len();
        let datagram = &rest[..udp_len];
        let packet = RoceRepr::parse(&datagram[UDP_HEADER_LEN..])?;
        let computed = crate::icrc::compute(&bytes[..ip_len], &datagram[..udp_len - ICRC_LEN])?;
        Ok(Datagram {
            repr: DatagramRepr {
                ip,
                udp: udp_hdr,
                roce: packet.repr,
            },
            payload: packet.payload,
            icrc: packet.icrc,
            icrc_ok: computed == packet.icrc,
        })
    }

    /// Length of the UDP datagram (UDP header through ICRC).
    pub fn udp_len(&self) -> usize {
        UDP_HEADER_LEN + self.roce.buffer_len()
    }

    /// Length from the IP header through the ICRC.
    pub fn buffer_len(&self) -> usize {
        self.ip.header_len() + self.udp_len()
    }

    /// Length of the headers [`DatagramRepr::emit_headers`] writes: IP, UDP, BTH, extension
    /// headers.
    pub fn header_len(&self) -> usize {
        self.ip.header_len() + UDP_HEADER_LEN + self.roce.header_len()
    }

    /// Writes IP, UDP, BTH and extension headers into `buf` and returns their length. The IP
    /// and UDP lengths count `roce.payload_len` bytes of payload, the pad and the ICRC, which
    /// the caller sends after the headers (see [`DatagramRepr::icrc`]).
    pub fn emit_headers(&self, buf: &mut [u8]) -> Result<usize> {
        let need = self.header_len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let udp_len = self.checked_udp_len()?;
        let outer_len = emit_outer(&self.ip, &self.udp, udp_len, buf)?;
        let roce_len = self.roce.emit_headers(&mut buf[outer_len..])?;
        Ok(outer_len + roce_len)
    }

    /// [`DatagramRepr::udp_len`], or an error if the datagram does not fit in an IP packet.
    fn checked_udp_len(&self) -> Result<usize> {
        let udp_len = self.udp_len();
        if udp_len > usize::from(u16::MAX) - IPV6_HEADER_LEN {
            return Err(Error::BadPayload {
                opcode: self.roce.bth.opcode.0,
                len: self.roce.payload_len,
                reason: "the datagram does not fit in an IP packet",
            });
        }
        Ok(udp_len)
    }

    /// Where [`DatagramRepr::emit_masked`] puts the BTH: after the LRH placeholder and the IP
    /// and UDP headers.
    pub fn masked_prefix_len(&self) -> usize {
        LRH_PLACEHOLDER.len() + self.ip.header_len() + UDP_HEADER_LEN
    }

    /// Writes what the ICRC covers up to the end of the extension headers, for a sender whose
    /// IP and UDP headers someone else writes (a UDP socket's kernel): the LRH placeholder,
    /// the IP and UDP headers masked (see [`IpHeader::emit_masked`]), then from
    /// [`DatagramRepr::masked_prefix_len`] on the BTH and extension headers as sent. Returns
    /// the length written. The bytes from the BTH on are the head of the UDP payload; the
    /// packet's ICRC is [`Icrc::start_masked`] over the whole, then the payload and pad.
    pub fn emit_masked(&self, buf: &mut [u8]) -> Result<usize> {
        let need = self.masked_prefix_len() + self.roce.header_len();
        check_len("masked headers buffer", buf, need)?;
        let udp_len = self.checked_udp_len()?;
        let at = emit_masked_outer(&self.ip, &self.udp, udp_len, buf)?;
        Ok(at + self.roce.emit_headers(&mut buf[at..])?)
    }

    /// The ICRC of the datagram whose headers [`DatagramRepr::emit_headers`] wrote into
    /// `headers`, with the payload given in pieces (which must add up to `roce.payload_len`).
    /// Pad bytes are zero.
    pub fn icrc(&self, headers: &[u8], payload: &[&[u8]]) -> Result<u32> {
        let total: usize = payload.iter().map(|p| p.len()).sum();
        if total != self.roce.payload_len {
            return Err(Error::Mismatch(
                "payload pieces do not add up to payload_len",
            ));
        }
        let ip_len = self.ip.header_len();
        let roce_at = ip_len + UDP_HEADER_LEN;
        check_len("emitted headers", headers, self.header_len())?;
        let mut icrc = Icrc::start(
            &headers[..ip_len],
            &headers[ip_len..roce_at],
            &headers[roce_at..roce_at + bth::HEADER_LEN],
        )?;
        icrc.update(&headers[roce_at + bth::HEADER_LEN..self.header_len()]);
        for piece in payload {
            icrc.update(piece);
        }
        icrc.update(&[0u8; 3][..pad_len(total)]);
        Ok(icrc.finish())
    }

    /// Writes the whole datagram (IP header through ICRC) into `buf`, copying the payload
    /// pieces after the headers; returns its length.
    pub fn emit(&self, buf: &mut [u8], payload: &[&[u8]]) -> Result<usize> {
        let need = self.buffer_len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let mut at = self.emit_headers(buf)?;
        let icrc = self.icrc(&buf[..at], payload)?;
        for piece in payload {
            buf[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        let pad = pad_len(self.roce.payload_len);
        buf[at..at + pad].fill(0);
        at += pad;
        buf[at..at + ICRC_LEN].copy_from_slice(&icrc.to_le_bytes());
        Ok(at + ICRC_LEN)
    }
}

/// Writes the outer headers of a UDP datagram of `udp_len` bytes (UDP header included) — `ip`,
/// then `udp` — and returns their length. The one place outer headers are written: for whole
/// frames, and for transports that rebuild what a socket sent.
pub fn emit_outer(ip: &IpHeader, udp: &UdpHeader, udp_len: usize, buf: &mut [u8]) -> Result<usize> {
    let ip_len = ip.emit(udp_len, buf)?;
    Ok(ip_len + udp.emit(udp_len, &mut buf[ip_len..])?)
}

/// Writes the ICRC's view of the outer headers of a UDP datagram of `udp_len` bytes: the LRH
/// placeholder, then `ip` and `udp` masked (see [`IpHeader::emit_masked`]); returns its
/// length, where the BTH goes. The one place this prefix is written: for a packet to send
/// ([`DatagramRepr::emit_masked`]) and for one received through a socket, whose IP header is
/// rebuilt.
pub fn emit_masked_outer(
    ip: &IpHeader,
    udp: &UdpHeader,
    udp_len: usize,
    buf: &mut [u8],
) -> Result<usize> {
    check_len("masked headers buffer", buf, LRH_PLACEHOLDER.len())?;
    let mut at = LRH_PLACEHOLDER.len();
    buf[..at].copy_from_slice(&LRH_PLACEHOLDER);
    at += ip.emit_masked(udp_len, &mut buf[at..])?;
    Ok(at + udp.emit_masked(udp_len, &mut buf[at..])?)
}

/// Parses the IP and UDP headers of a datagram to port 4791: the IP header, its length, the
/// UDP header, and the UDP datagram (UDP header through the end of the IP payload, whose
/// length the UDP length field must match). Shared by [`DatagramRepr::parse`] and
/// [`crate::gso`], which splits what follows differently.
pub(crate) fn parse_outer(bytes: &[u8]) -> Result<(IpHeader, usize, UdpHeader, &[u8])> {
    check_len("IP header", bytes, 1)?;
    let (ip, ip_len, rest) = match bytes[0] >> 4 {
        4 => parse_ipv4(bytes)?,
        6 => parse_ipv6(bytes)?,
        v => {
            return Err(Error::BadVersion {
                what: "IP version",
                version: v,
            })
        }
    };
    check_len("UDP header", rest, UDP_HEADER_LEN)?;
    let udp = UdpPacket::new_unchecked(rest);
    let udp_len = udp.len() as usize;
    if udp_len < UDP_HEADER_LEN {
        return Err(Error::BadField {
            what: "UDP length",
            value: udp_len as u64,
        });
    }
    check_len("UDP datagram", rest, udp_len)?;
    if udp_len != rest.len() {
        // Bytes after the UDP datagram inside the IP packet: not a well-formed RoCEv2
        // packet, and no Repr could say where they were.
        return Err(Error::BadField {
            what: "UDP length (differs from the IP payload length)",
            value: udp_len as u64,
        });
    }
    if udp.dst_port() != ROCE_V2_UDP_PORT {
        return Err(Error::NotRoce("the UDP destination port is not 4791"));
    }
    let udp_hdr = UdpHeader {
        src_port: udp.src_port(),
        dst_port: udp.dst_port(),
        checksum: udp.checksum(),
    };
    Ok((ip, ip_len, udp_hdr, rest))
}

/// Parses an IPv4 header; returns it, its length and the IP payload (Ethernet padding cut).
fn parse_ipv4(bytes: &[u8]) -> Result<(IpHeader, usize, &[u8])> {
    check_len("IPv4 header", bytes, IPV4_HEADER_LEN)?;
    let p = Ipv4Packet::new_unchecked(bytes);
    if usize::from(p.header_len()) != IPV4_HEADER_LEN {
        return Err(Error::BadField {
            what: "IPv4 header length (options are not supported)",
            value: p.header_len() as u64,
        });
    }
    let total = usize::from(p.total_len());
    if total < IPV4_HEADER_LEN {
        return Err(Error::BadField {
            what: "IPv4 total length",
            value: total as u64,
        });
    }
    check_len("IPv4 packet", bytes, total)?;
    if p.more_frags() || p.frag_offset() != 0 {
        return Err(Error::NotRoce("an IPv4 fragment"));
    }
    if p.next_header() != IpProtocol::Udp {
        return Err(Error::NotRoce("the IP protocol is not UDP"));
    }
    let p = Ipv4Packet::new_unchecked(&bytes[..total]);
    let repr =
        Ipv4Repr::parse(&p, &ChecksumCapabilities::ignored()).map_err(|_| Error::BadField {
            what: "IPv4 header",
            value: 0,
        })?;
    let header = Ipv4Header {
        repr,
        ident: p.ident(),
        dscp: p.dscp(),
        ecn: p.ecn(),
        dont_frag: p.dont_frag(),
    };
    Ok((
        IpHeader::V4(header),
        IPV4_HEADER_LEN,
        &bytes[IPV4_HEADER_LEN..total],
    ))
}

/// Parses an IPv6 header; returns it, its length and the IP payload.
fn parse_ipv6(bytes: &[u8]) -> Result<(IpHeader, usize, &[u8])> {
    check_len("IPv6 header", bytes, IPV6_HEADER_LEN)?;
    let p = Ipv6Packet::new_unchecked(bytes);
    let total = IPV6_HEADER_LEN + usize::from(p.payload_len());
    check_len("IPv6 packet", bytes, total)?;
    if p.next_header() != IpProtocol::Udp {
        return Err(Error::NotRoce("the IPv6 next header is not UDP"));
    }
    let p = Ipv6Packet::new_unchecked(&bytes[..total]);
    let repr = Ipv6Repr::parse(&p).map_err(|_| Error::BadField {
        what: "IPv6 header",
        value: 0,
    })?;
    let header = Ipv6Header {
        repr,
        traffic_class: p.traffic_class(),
        flow_label: p.flow_label(),
    };
    Ok((
        IpHeader::V6(header),
        IPV6_HEADER_LEN,
        &bytes[IPV6_HEADER_LEN..total],
    ))
}

impl fmt::Display for Datagram<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} > {}:{} {} icrc={:08x} {}",
            // The ICRC's bytes in wire order, as Wireshark shows them.
            self.repr.ip.src_addr(),
            self.repr.udp.src_port,
            self.repr.ip.dst_addr(),
            self.repr.udp.dst_port,
            self.repr.roce,
            self.icrc.swap_bytes(),
            if self.icrc_ok { "ok" } else { "BAD" }
        )
    }
}
