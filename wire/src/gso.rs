//! UDP GSO super-packets: what a capture on loopback shows of a segmentation run.
//!
//! softrnic hands the kernel a multi-packet message as one UDP GSO run (`UDP_SEGMENT`): one
//! `sendmsg` whose payload is the concatenation of whole RoCEv2 transport packets (BTH through
//! ICRC), each `gso_size` bytes but the last, which may be shorter. On a real NIC the run is
//! cut into datagrams; on `lo` it is not, and `tcpdump -i lo` sees one oversized frame:
//!
//! ```text
//! | IP (total length of the run) | UDP (length of the run) | seg 0 | seg 1 | ... | seg n-1 |
//! ```
//!
//! Each segment's ICRC (annex A17.4) covers the IP and UDP headers the segment has once cut,
//! not the super-packet's: IPv4 total length and UDP length of one segment, and the IPv4
//! Identification, which the kernel's segmentation numbers `id, id + 1, ...` (see
//! `tools/tests/gso_wire.rs`); for IPv6, the payload length. [`split`] finds the segment size
//! and [`Run::segment`] rebuilds each segment as the datagram it would have been on the wire,
//! so that [`crate::frame::DatagramRepr::parse`] can check its ICRC. [`coalesce`] is the
//! inverse, for tests: what the kernel hands `lo` for a list of datagrams.
//!
//! The segment size is not written anywhere in the super-packet. A segment boundary is where
//! a BTH of the same destination QP and P_Key as the first segment's starts, every `L` bytes;
//! among such sizes the one whose first segment's ICRC verifies is the run's. A capture whose
//! ICRCs are all wrong still splits when the first packet is a First or Middle packet: its
//! size follows from the opcode's headers and a path MTU (IBTA 9.2: First and Middle packets
//! carry exactly one PMTU).

use crate::bth;
use crate::frame::{emit_outer, parse_outer, DatagramRepr, IpHeader, UdpHeader, UDP_HEADER_LEN};
use crate::icrc::ICRC_LEN;
use crate::opcode::{PayloadRule, PATH_MTUS};
use crate::roce::RoceRepr;
use crate::{Error, Opcode, Result};

/// The smallest RoCEv2 transport packet: a BTH and the ICRC.
const MIN_SEGMENT: usize = bth::HEADER_LEN + ICRC_LEN;

/// A GSO super-packet split into segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run<'a> {
    ip: IpHeader,
    udp: UdpHeader,
    /// The UDP payload of the whole run.
    body: &'a [u8],
    /// UDP payload bytes per segment (`gso_size`).
    segment_len: usize,
    /// Whether the first segment's ICRC verified with the rebuilt headers.
    icrc_verified: bool,
}

impl<'a> Run<'a> {
    /// The IP header of the super-packet (that of the first segment, lengths aside).
    pub fn ip(&self) -> IpHeader {
        self.ip
    }

    /// The segment size: UDP payload bytes of every segment but the last.
    pub fn segment_len(&self) -> usize {
        self.segment_len
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.body.len().div_ceil(self.segment_len)
    }

    /// Always false: a run has at least two segments.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether the segment size was confirmed by the first segment's ICRC (rather than
    /// inferred from the opcode and a path MTU).
    pub fn icrc_verified(&self) -> bool {
        self.icrc_verified
    }

    /// The transport packet (BTH through ICRC) of segment `k`.
    pub fn payload(&self, k: usize) -> &'a [u8] {
        let at = k * self.segment_len;
        &self.body[at..(at + self.segment_len).min(self.body.len())]
    }

    /// Segment `k` (0-based) as the datagram it is once cut: IP header with the segment's
    /// length and IPv4 Identification `id + k`, UDP header with its length, the checksum as
    /// captured (the ICRC masks it), then the transport packet.
    pub fn segment(&self, k: usize) -> Vec<u8> {
        rebuild(&self.ip, &self.udp, k, self.payload(k))
    }

    /// Every segment, rebuilt (see [`Run::segment`]).
    pub fn segments(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        (0..self.len()).map(|k| self.segment(k))
    }
}

fn rebuild(ip: &IpHeader, udp: &UdpHeader, k: usize, packet: &[u8]) -> Vec<u8> {
    let ip = match ip {
        IpHeader::V4(h) => ip.with_ident(h.ident.wrapping_add(k as u16)),
        v6 => *v6,
    };
    let udp_len = UDP_HEADER_LEN + packet.len();
    let mut out = vec![0u8; ip.header_len() + udp_len];
    // Cannot fail: the buffer is sized for the headers, and a segment is shorter than the
    // run, whose length fitted in the same fields.
    let at = emit_outer(&ip, udp, udp_len, &mut out).expect("segment headers fit");
    out[at..].copy_from_slice(packet);
    out
}

/// Splits an IP datagram (from the IP header on) holding a GSO super-packet of RoCEv2
/// packets. Fails when the datagram is not IP/UDP to port 4791, or when no segment size
/// splits its UDP payload into two or more transport packets that parse.
pub fn split(datagram: &[u8]) -> Result<Run<'_>> {
    let (ip, _, udp, udp_datagram) = parse_outer(datagram)?;
    let body = &udp_datagram[UDP_HEADER_LEN..];
    let first = bth::BthRepr::parse(&bth::Packet::new_checked(body)?)?;
    let run = |segment_len, icrc_verified| Run {
        ip,
        udp,
        body,
        segment_len,
        icrc_verified,
    };
    let parses = |len: usize| {
        (0..body.len().div_ceil(len)).all(|k| {
            let at = k * len;
            RoceRepr::parse(&body[at..(at + len).min(body.len())]).is_ok()
        })
    };
    let candidates = boundaries(body);
    for &len in &candidates {
        if !parses(len) {
            continue;
        }
        let seg = rebuild(&ip, &udp, 0, &body[..len]);
        if DatagramRepr::parse(&seg).is_ok_and(|d| d.icrc_ok) {
            return Ok(run(len, true));
        }
    }
    // No ICRC verifies: trust the size a First or Middle packet must have, if it splits.
    mtu_sizes(first.opcode)
        .filter(|&len| len < body.len() && candidates.contains(&len))
        .find(|&len| parses(len))
        .map(|len| run(len, false))
        .ok_or(Error::BadPayload {
            opcode: first.opcode.0,
            len: body.len(),
            reason: "not a GSO run of whole RoCEv2 packets",
        })
}

/// The sizes `L` (a multiple of 4, shorter than `body`) at every multiple of which a BTH with
/// the first one's destination QP, P_Key and transport version starts.
fn boundaries(body: &[u8]) -> Vec<usize> {
    let same_flow = |at: usize| {
        let (a, b) = (&body[..bth::HEADER_LEN], &body[at..]);
        b.len() >= MIN_SEGMENT
            && b[2..4] == a[2..4]
            && b[5..8] == a[5..8]
            && b[1] & 0x0f == bth::TVER
            && Opcode(b[0]).info().is_some()
    };
    (MIN_SEGMENT..body.len())
        .step_by(4)
        .filter(|&len| (len..body.len()).step_by(len).all(same_flow))
        .collect()
}

/// The transport packet sizes of a First or Middle packet of `opcode`, one per path MTU.
fn mtu_sizes(opcode: Opcode) -> impl Iterator<Item = usize> {
    let header = opcode
        .info()
        .filter(|i| i.payload == PayloadRule::FullMtu)
        .map(|i| bth::HEADER_LEN + i.ext_len());
    PATH_MTUS
        .iter()
        .filter_map(move |mtu| header.map(|h| h + mtu + ICRC_LEN))
}

/// What the kernel hands `lo` for a GSO run of `datagrams` (whole IP datagrams of one flow,
/// every one but the last of the same length): the first one's IP and UDP headers with the
/// lengths of the whole run, then every datagram's transport packet.
pub fn coalesce(datagrams: &[&[u8]]) -> Result<Vec<u8>> {
    let (first, rest) = datagrams
        .split_first()
        .ok_or(Error::Mismatch("a GSO run needs a datagram"))?;
    let (ip, _, udp, _) = parse_outer(first)?;
    let mut body = Vec::new();
    for d in std::iter::once(first).chain(rest) {
        let (_, _, _, udp_datagram) = parse_outer(d)?;
        body.extend_from_slice(&udp_datagram[UDP_HEADER_LEN..]);
    }
    let udp_len = UDP_HEADER_LEN + body.len();
    let mut out = vec![0u8; ip.header_len() + udp_len];
    let at = emit_outer(&ip, &udp, udp_len, &mut out)?;
    out[at..].copy_from_slice(&body);
    Ok(out)
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::aeth::{AethRepr, CreditCode, Syndrome};
    use crate::bth::BthRepr;
    use crate::frame::Ipv4Header;
    use crate::Psn;
    use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    fn ip(src: IpAddr, dst: IpAddr) -> IpHeader {
        IpHeader::udp_socket(src, dst, 64).unwrap()
    }

    /// One packet to QP 0x11 with IPv4 Identification `id`.
    fn packet(ip: IpHeader, id: u16, opcode: Opcode, psn: u32, payload: &[u8]) -> Vec<u8> {
        let mut roce = RoceRepr::new(BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: 0x11,
            ack_req: false,
            psn: Psn::new(psn),
        });
        roce.payload_len = payload.len();
        if opcode == Opcode::RC_ACKNOWLEDGE {
            roce.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack(CreditCode::UNLIMITED),
                msn: 1,
            });
        }
        let repr = DatagramRepr {
            ip: ip.with_ident(id),
            udp: UdpHeader {
                src_port: 0xc000,
                dst_port: 4791,
                checksum: 0,
            },
            roce,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &[payload]).unwrap();
        buf
    }

    /// A SEND of `len` bytes cut into `mtu`-sized packets, as datagrams with IPv4
    /// Identifications `id, id + 1, ...`: the equal-sized packets softrnic sends as one run.
    fn send(ip: IpHeader, id: u16, mtu: usize, len: usize) -> Vec<Vec<u8>> {
        let n = len.div_ceil(mtu);
        let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        (0..n)
            .map(|k| {
                let opcode = match (k, n) {
                    (_, 1) => Opcode::RC_SEND_ONLY,
                    (0, _) => Opcode::RC_SEND_FIRST,
                    (k, n) if k == n - 1 => Opcode::RC_SEND_LAST,
                    _ => Opcode::RC_SEND_MIDDLE,
                };
                let piece = &data[k * mtu..((k + 1) * mtu).min(len)];
                packet(ip, id.wrapping_add(k as u16), opcode, 100 + k as u32, piece)
            })
            .collect()
    }

    fn check_round_trip(datagrams: &[Vec<u8>]) {
        let refs: Vec<&[u8]> = datagrams.iter().map(Vec::as_slice).collect();
        let sup = coalesce(&refs).unwrap();
        let whole = DatagramRepr::parse(&sup);
        assert!(!whole.is_ok_and(|d| d.icrc_ok), "a run is not one packet");
        let run = split(&sup).unwrap();
        assert!(run.icrc_verified());
        assert_eq!(run.len(), datagrams.len());
        for (k, seg) in run.segments().enumerate() {
            assert_eq!(seg, datagrams[k], "segment {k} is rebuilt byte for byte");
            assert!(DatagramRepr::parse(&seg).unwrap().icrc_ok);
        }
    }

    #[test]
    fn ipv4_runs_split_back_into_their_packets() {
        let (a, b) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
        for (mtu, len) in [(1024, 4096), (4096, 9000), (256, 600), (1024, 1025)] {
            check_round_trip(&send(ip(a.into(), b.into()), 0xfffe, mtu, len));
        }
    }

    #[test]
    fn an_answer_with_its_ack_behind_it_splits_by_icrc() {
        let ip = ip(
            Ipv4Addr::new(10, 0, 0, 1).into(),
            Ipv4Addr::new(10, 0, 0, 2).into(),
        );
        let answer = packet(ip, 9, Opcode::RC_SEND_ONLY, 7, &[1; 300]);
        let ack = packet(ip, 10, Opcode::RC_ACKNOWLEDGE, 3, &[]);
        check_round_trip(&[answer, ack]);
    }

    #[test]
    fn ipv6_runs_split_back_into_their_packets() {
        let (a, b) = (Ipv6Addr::LOCALHOST, "::2".parse::<Ipv6Addr>().unwrap());
        check_round_trip(&send(ip(a.into(), b.into()), 0, 2048, 5000));
    }

    #[test]
    fn a_wrong_ident_still_splits_by_path_mtu_with_bad_icrcs() {
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut d = send(ip(a.into(), b.into()), 5, 1024, 3000);
        let refs: Vec<&[u8]> = d.iter_mut().map(|v| &v[..]).collect();
        let mut sup = coalesce(&refs).unwrap();
        sup[4] ^= 0x80; // the IPv4 Identification the ICRCs cover
        let run = split(&sup).unwrap();
        assert!(!run.icrc_verified());
        assert_eq!((run.len(), run.segment_len()), (3, 12 + 1024 + 4));
        let IpHeader::V4(Ipv4Header { ident, .. }) = run.ip() else {
            panic!()
        };
        assert_eq!(ident, 5 ^ 0x8000);
    }

    #[test]
    fn a_single_packet_or_garbage_is_not_a_run() {
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let one = send(ip(a.into(), b.into()), 0, 1024, 100).remove(0);
        assert!(split(&one).is_err());
        let mut junk = send(ip(a.into(), b.into()), 0, 1024, 2048).remove(0);
        let n = junk.len();
        junk[n - 200..].fill(0xee);
        assert!(split(&junk).is_err());
    }
}
