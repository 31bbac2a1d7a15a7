//! QP1, the General Services Interface (IBTA 13.5.3 "General Services Interface", and
//! annex A17.4 for RoCEv2): how management datagrams (MADs, 13.4) travel. A MAD is the
//! 256-byte payload of a UD SEND-only packet from QP1 to QP1 with the default P_Key and the
//! GSI's well-known Q_Key 0x8001_0000 (13.5.3.2); kernel rxe sends the connection manager's
//! MADs exactly so and drops anything else that comes to its QP1.
//!
//! This module only turns a MAD into such a packet's UDP payload and back; who sends and who
//! receives it is the host's business (`host::mad_route`, `cm`).

use std::net::IpAddr;

use softrnic_wire::bth::{self, BthRepr};
use softrnic_wire::deth::DethRepr;
use softrnic_wire::frame::{DatagramRepr, IpHeader, UdpHeader, UDP_HEADER_LEN};
use softrnic_wire::icrc::ICRC_LEN;
use softrnic_wire::mad::{GSI_QPN, MAD_LEN, QP1_QKEY};
use softrnic_wire::roce::{RocePacket, RoceRepr};
use softrnic_wire::{deth, Opcode, Psn, ROCE_V2_UDP_PORT};

use crate::transport::HOP_LIMIT;

/// Length of the UDP payload that carries one MAD: BTH, DETH, MAD, ICRC.
pub const PAYLOAD_LEN: usize = bth::HEADER_LEN + deth::HEADER_LEN + MAD_LEN + ICRC_LEN;

/// The P_Key of a full member of the default partition, which QP1 uses (10.9.2).
pub const GSI_PKEY: u16 = bth::DEFAULT_PKEY;

/// Why a packet to QP1 is not a MAD the GSI accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsiError {
    /// Not a well-formed RoCE packet.
    Malformed(softrnic_wire::Error),
    /// Not for QP1.
    NotQp1(u32),
    /// Not a UD SEND-only.
    Opcode(Opcode),
    /// Not the default partition (full 0xFFFF or limited 0x7FFF member).
    PKey(u16),
    /// Not the GSI's Q_Key.
    QKey(u32),
    /// The payload is not one 256-byte MAD.
    Length(usize),
}

impl std::fmt::Display for GsiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GsiError::Malformed(e) => write!(f, "malformed packet to QP1: {e}"),
            GsiError::NotQp1(qp) => write!(f, "destination QP {qp:#x} is not QP1"),
            GsiError::Opcode(o) => write!(f, "opcode {:#04x} to QP1 is not UD SEND-only", o.0),
            GsiError::PKey(p) => write!(f, "P_Key {p:#06x} on QP1 is not the default"),
            GsiError::QKey(q) => write!(f, "Q_Key {q:#010x} on QP1 is not 0x80010000"),
            GsiError::Length(n) => write!(f, "{n}-byte payload on QP1 is not a 256-byte MAD"),
        }
    }
}

/// The UDP payload of `mad` sent from QP1 at `(src, src_port)` to QP1 at `dst`, with PSN
/// `psn`; its ICRC is for the IP header an unconnected UDP socket sends (DF, IPv4 ID 0).
/// `None` if `src` and `dst` are of different families.
pub fn encode(
    src: (IpAddr, u16),
    dst: IpAddr,
    psn: Psn,
    mad: &[u8; MAD_LEN],
) -> Option<[u8; PAYLOAD_LEN]> {
    let mut roce = RoceRepr::new(BthRepr {
        opcode: Opcode::UD_SEND_ONLY,
        solicited: false,
        mig_req: false,
        pkey: GSI_PKEY,
        fecn: false,
        becn: false,
        dest_qp: GSI_QPN,
        ack_req: false,
        psn,
    });
    roce.deth = Some(DethRepr {
        qkey: QP1_QKEY,
        src_qp: GSI_QPN,
    });
    roce.payload_len = MAD_LEN;
    let datagram = DatagramRepr {
        ip: IpHeader::udp_socket(src.0, dst, HOP_LIMIT)?,
        udp: UdpHeader {
            src_port: src.1,
            dst_port: ROCE_V2_UDP_PORT,
            checksum: 0,
        },
        roce,
    };
    let mut headers = [0u8; 40 + UDP_HEADER_LEN + bth::HEADER_LEN + deth::HEADER_LEN];
    let n = datagram.emit_headers(&mut headers).ok()?;
    let icrc = datagram.icrc(&headers[..n], &[mad]).ok()?;
    let at = datagram.ip.header_len() + UDP_HEADER_LEN;
    let mut out = [0u8; PAYLOAD_LEN];
    out[..n - at].copy_from_slice(&headers[at..n]);
    out[n - at..n - at + MAD_LEN].copy_from_slice(mad);
    out[PAYLOAD_LEN - ICRC_LEN..].copy_from_slice(&icrc.to_le_bytes());
    Some(out)
}

/// The MAD in `payload`, a UDP payload to QP1, if the GSI accepts it (the ICRC is the
/// transport's to check).
///
/// # Errors
/// [`GsiError`]: what is wrong with it.
pub fn decode(payload: &[u8]) -> Result<&[u8; MAD_LEN], GsiError> {
    let RocePacket { repr, payload, .. } = RoceRepr::parse(payload).map_err(GsiError::Malformed)?;
    let bth = repr.bth;
    if bth.dest_qp != GSI_QPN {
        return Err(GsiError::NotQp1(bth.dest_qp));
    }
    if bth.opcode != Opcode::UD_SEND_ONLY {
        return Err(GsiError::Opcode(bth.opcode));
    }
    if bth.pkey & 0x7fff != GSI_PKEY & 0x7fff {
        return Err(GsiError::PKey(bth.pkey));
    }
    let qkey = repr.deth.map_or(0, |d| d.qkey);
    if qkey != QP1_QKEY {
        return Err(GsiError::QKey(qkey));
    }
    payload
        .try_into()
        .map_err(|_| GsiError::Length(payload.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{IcrcStatus, RecvMeta, RecvPacket};
    use std::net::SocketAddr;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 99, 0, 3));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 99, 0, 2));

    fn mad() -> [u8; MAD_LEN] {
        core::array::from_fn(|i| i as u8)
    }

    #[test]
    fn a_mad_survives_encode_and_decode_with_a_good_icrc() {
        let p = encode((A, 0xc123), B, Psn::new(5), &mad()).unwrap();
        assert_eq!(decode(&p), Ok(&mad()));
        let meta = RecvMeta::from_socket(SocketAddr::new(A, 0xc123), B, p.len());
        let rx = RecvPacket {
            meta: &meta,
            payload: &p,
        };
        assert_eq!(rx.icrc_status(), IcrcStatus::OkForIdent(0), "for IP ID 0");
        assert!(encode((A, 1), "::1".parse().unwrap(), Psn::new(0), &mad()).is_none());
    }

    /// Every MAD of the rping capture, as kernel rxe sent it, decodes (the first is the REQ).
    #[test]
    fn kernel_rxe_s_mads_decode() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../wire/tests/data/rping_rdmacm.pcap"
        );
        let mads: Vec<_> = softrnic_wire::pcap::read_file(path)
            .unwrap()
            .iter()
            .filter_map(|r| {
                let f = softrnic_wire::frame::Frame::parse(&r.data).ok()?;
                (f.datagram.repr.roce.bth.dest_qp == GSI_QPN).then(|| {
                    let udp = &r.data[14 + f.datagram.repr.ip.header_len() + UDP_HEADER_LEN..];
                    *decode(udp).unwrap()
                })
            })
            .collect();
        assert_eq!(mads.len(), 5);
        assert_eq!(mads[0][16..18], [0x00, 0x10], "a REQ");
    }

    #[test]
    fn what_qp1_does_not_accept() {
        let p = encode((A, 0xc000), B, Psn::new(0), &mad()).unwrap();
        let bad = |at: usize, v: u8| {
            let mut q = p;
            q[at] = v;
            decode(&q).copied()
        };
        assert_eq!(bad(7, 2), Err(GsiError::NotQp1(2)));
        assert_eq!(bad(0, 0x04), Err(GsiError::Opcode(Opcode::RC_SEND_ONLY)));
        assert_eq!(
            bad(0, 0x65),
            Err(GsiError::Opcode(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE))
        );
        assert_eq!(bad(2, 0x12), Err(GsiError::PKey(0x12ff)));
        assert_eq!(bad(3, 0x00), Err(GsiError::PKey(0xff00)));
        assert_eq!(bad(12, 0x00), Err(GsiError::QKey(0x0001_0000)));
        assert!(matches!(decode(&p[..20]), Err(GsiError::Malformed(_))));
        let mut limited = p;
        limited[2] = 0x7f;
        assert_eq!(decode(&limited), Ok(&mad()), "a limited member may use QP1");
    }
}
