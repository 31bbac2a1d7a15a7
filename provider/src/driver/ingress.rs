//! Accepting a received datagram (IBTA A17.4.2, 9.6 "Packet transport header validation"):
//! the ICRC is checked (see [`IcrcStatus`]: over the IP header as received, or for an IPv4
//! packet whose Identification was not seen, for the ID that makes it match), then the
//! transport headers are parsed with the wire layer's checks. What fails is dropped and
//! counted, never acted on.

use softrnic_wire::roce::{RocePacket, RoceRepr};

use crate::transport::{IcrcStatus, RecvPacket};

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// The ICRC does not match, or there is no room for one.
    BadIcrc,
    /// The headers do not parse (unknown opcode, bad lengths, ...).
    Malformed,
}

impl Rejected {
    /// Why a malformed packet was dropped, in words (as a capture's comment says it).
    pub const MALFORMED: &'static str = "dropped: its transport headers do not parse";
}

/// Checks and parses a received datagram. The second value says whether the ICRC was checked
/// over the IP header as received (`false`: an IPv4 packet whose Identification was solved
/// for, [`IcrcStatus::OkForIdent`]).
///
/// # Errors
/// [`Rejected`] for a bad ICRC or malformed headers.
pub fn accept<'a>(pkt: &RecvPacket<'a>) -> Result<(RocePacket<'a>, bool), Rejected> {
    let seen = match pkt.icrc_status() {
        IcrcStatus::Ok => true,
        IcrcStatus::OkForIdent(_) => false,
        IcrcStatus::Bad => return Err(Rejected::BadIcrc),
    };
    let p = RoceRepr::parse(pkt.payload).map_err(|_| Rejected::Malformed)?;
    Ok((p, seen))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    use softrnic_wire::icrc::with_ipv4_ident;

    use super::*;
    use crate::transport::test_util::send_only;
    use crate::transport::RecvMeta;

    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    /// A RoCE datagram from `src` as a UDP socket hands it over (no IP header): its ICRC for
    /// IP ID `ident`, with `flip` xored into it.
    fn datagram(src: SocketAddr, ident: u16, flip: u32) -> (RecvMeta, Vec<u8>) {
        let dst = match src {
            SocketAddr::V4(_) => DST,
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        let (mut bytes, icrc) = send_only((src.ip(), src.port()), dst, 0x11, 7, b"ping");
        bytes.extend_from_slice(b"ping");
        let len = bytes.len() + icrc.len();
        let icrc = u32::from_le_bytes(icrc.try_into().unwrap());
        let icrc = with_ipv4_ident(icrc, 0, ident, len) ^ flip;
        bytes.extend_from_slice(&icrc.to_le_bytes());
        let meta = RecvMeta::from_socket(src, dst, bytes.len());
        (meta, bytes)
    }

    fn accepted(src: SocketAddr, ident: u16, flip: u32) -> Result<bool, Rejected> {
        let (meta, payload) = datagram(src, ident, flip);
        accept(&RecvPacket {
            meta: &meta,
            payload: &payload,
        })
        .map(|(_, seen)| seen)
    }

    #[test]
    fn an_ipv4_packet_through_a_socket_is_accepted_for_whatever_ident_it_had() {
        let src = SocketAddr::from(([10, 0, 0, 1], 0xc000));
        for ident in [0, 1, 0x4242, 0xffff] {
            assert_eq!(accepted(src, ident, 0), Ok(false), "{ident:#x}");
            assert_eq!(accepted(src, ident, 1 << 7), Err(Rejected::BadIcrc));
        }
    }

    #[test]
    fn a_packet_too_short_for_an_icrc_is_bad() {
        let src = SocketAddr::from(([10, 0, 0, 1], 0xc000));
        let (mut meta, payload) = datagram(src, 0, 0);
        let short = RecvPacket {
            meta: &meta,
            payload: &payload[..10],
        };
        assert_eq!(short.icrc_status(), IcrcStatus::Bad);
        meta.truncated = true;
        let cut = RecvPacket {
            meta: &meta,
            payload: &payload,
        };
        assert_eq!(cut.icrc_status(), IcrcStatus::Bad);
    }

    #[test]
    fn an_ipv6_packet_is_checked_over_its_whole_header() {
        let src = SocketAddr::from((Ipv6Addr::LOCALHOST, 0xc000));
        assert_eq!(accepted(src, 0, 0), Ok(true));
        assert_eq!(accepted(src, 0, 1), Err(Rejected::BadIcrc));
    }
}
