//! Accepting a received datagram (IBTA A17.4.2, 9.6 "Packet transport header validation"):
//! the ICRC is checked where the transport lets it be (see [`IcrcStatus`]), then the transport
//! headers are parsed with the wire layer's checks. What fails is dropped and counted, never
//! acted on.
//!
//! An IPv4 packet through a UDP socket can only be checked against a guessed IP ID (0, what an
//! unconnected socket sends), and a guess that fails makes the packet unverifiable, not bad:
//! it is accepted either way. Senders that number their datagrams (kernel rxe, a softrnic
//! with connected sockets) never match, so [`IcrcGuesses`] stops computing an ICRC that can
//! only fail for a source whose last few packets all failed, and tries it again on every
//! 64th packet (`RETRY_EVERY`), in case the source changed. What is accepted, and what is
//! dropped, is the same; only the split of the counters between verified and unverifiable
//! packets may lag behind a source that changes.

use std::net::SocketAddr;

use rustc_hash::FxHashMap;
use softrnic_wire::roce::{RocePacket, RoceRepr};

use crate::transport::{IcrcStatus, RecvPacket};

/// Failed guesses in a row after which a source's guesses stop.
const GIVE_UP_AFTER: u8 = 4;

/// A source whose guesses stopped is tried again on every this-many-th packet.
const RETRY_EVERY: u8 = 64;

/// Sources remembered at most; one more starts the memory over (a bound against a flood of
/// forged sources).
const MAX_SOURCES: usize = 256;

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// The ICRC does not match.
    BadIcrc,
    /// The headers do not parse (unknown opcode, bad lengths, ...).
    Malformed,
}

/// Per source address and port, how the IPv4 ID guess has fared (see the module comment).
#[derive(Debug, Default)]
pub struct IcrcGuesses {
    by_src: FxHashMap<SocketAddr, Guess>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Guess {
    /// Failed guesses in a row, up to [`GIVE_UP_AFTER`].
    failed: u8,
    /// Packets not tried since the last try.
    untried: u8,
}

impl IcrcGuesses {
    /// The ICRC status of `pkt`: as [`RecvPacket::icrc_status`] says, except that a guess
    /// from a source that has given up is not tried (see the module comment).
    pub fn status(&mut self, pkt: &RecvPacket<'_>) -> IcrcStatus {
        if !pkt.icrc_is_a_guess() {
            return pkt.icrc_status();
        }
        if self.by_src.len() >= MAX_SOURCES && !self.by_src.contains_key(&pkt.meta.src) {
            self.by_src.clear();
        }
        let g = self.by_src.entry(pkt.meta.src).or_default();
        if g.failed >= GIVE_UP_AFTER && g.untried < RETRY_EVERY - 1 {
            g.untried += 1;
            return pkt.icrc_status_untried();
        }
        g.untried = 0;
        let status = pkt.icrc_status();
        g.failed = match status {
            IcrcStatus::Ok => 0,
            IcrcStatus::Unverifiable => (g.failed + 1).min(GIVE_UP_AFTER),
            IcrcStatus::Bad => g.failed,
        };
        status
    }
}

/// Checks and parses a received datagram. The second value says whether the ICRC was verified
/// (`false`: the transport could not see the covered IP fields; see [`IcrcStatus`]).
///
/// # Errors
/// [`Rejected`] for a bad ICRC or malformed headers.
pub fn accept<'a>(pkt: &RecvPacket<'a>) -> Result<(RocePacket<'a>, bool), Rejected> {
    parse(pkt, pkt.icrc_status())
}

impl IcrcGuesses {
    /// [`accept`], with the ICRC status from [`IcrcGuesses::status`].
    ///
    /// # Errors
    /// [`Rejected`] for a bad ICRC or malformed headers.
    pub fn accept<'a>(&mut self, pkt: &RecvPacket<'a>) -> Result<(RocePacket<'a>, bool), Rejected> {
        parse(pkt, self.status(pkt))
    }
}

/// Parses a datagram whose ICRC check said `icrc`.
fn parse<'a>(pkt: &RecvPacket<'a>, icrc: IcrcStatus) -> Result<(RocePacket<'a>, bool), Rejected> {
    let verified = match icrc {
        IcrcStatus::Ok => true,
        IcrcStatus::Unverifiable => false,
        IcrcStatus::Bad => return Err(Rejected::BadIcrc),
    };
    let p = RoceRepr::parse(pkt.payload).map_err(|_| Rejected::Malformed)?;
    Ok((p, verified))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    use super::*;
    use crate::transport::test_util::send_only;
    use crate::transport::RecvMeta;

    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    /// A RoCE datagram from `src` as a UDP socket hands it over (no IP header): its ICRC right
    /// for IP ID 0 if `good`, one bit off otherwise.
    fn datagram(src: SocketAddr, good: bool) -> (RecvMeta, Vec<u8>) {
        let dst = match src {
            SocketAddr::V4(_) => DST,
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        let (mut bytes, icrc) = send_only((src.ip(), src.port()), dst, 0x11, 7, b"ping");
        bytes.extend_from_slice(b"ping");
        bytes.extend_from_slice(&icrc);
        if !good {
            *bytes.last_mut().unwrap() ^= 1;
        }
        let meta = RecvMeta::from_socket(src, dst, bytes.len());
        (meta, bytes)
    }

    fn status(g: &mut IcrcGuesses, src: SocketAddr, good: bool) -> IcrcStatus {
        let (meta, payload) = datagram(src, good);
        g.status(&RecvPacket {
            meta: &meta,
            payload: &payload,
        })
    }

    #[test]
    fn a_source_whose_guesses_keep_failing_is_tried_only_every_retry_every_th_packet() {
        let mut g = IcrcGuesses::default();
        let (numbered, zero) = (
            SocketAddr::from(([10, 0, 0, 1], 0xc000)),
            SocketAddr::from(([10, 0, 0, 3], 0xc000)),
        );
        for _ in 0..GIVE_UP_AFTER {
            assert_eq!(status(&mut g, numbered, false), IcrcStatus::Unverifiable);
        }
        // Given up: even a packet the guess would verify is not tried ...
        for _ in 0..RETRY_EVERY - 1 {
            assert_eq!(status(&mut g, numbered, true), IcrcStatus::Unverifiable);
            // ... but a source whose guesses work keeps being verified,
            assert_eq!(status(&mut g, zero, true), IcrcStatus::Ok);
        }
        // ... until the retry, which finds the source changed and tries every packet again.
        assert_eq!(status(&mut g, numbered, true), IcrcStatus::Ok);
        assert_eq!(status(&mut g, numbered, true), IcrcStatus::Ok);
    }

    #[test]
    fn a_packet_too_short_for_an_icrc_is_bad_whether_tried_or_not() {
        let mut g = IcrcGuesses::default();
        let src = SocketAddr::from(([10, 0, 0, 1], 0xc000));
        for _ in 0..GIVE_UP_AFTER {
            status(&mut g, src, false);
        }
        let (mut meta, payload) = datagram(src, true);
        let short = RecvPacket {
            meta: &meta,
            payload: &payload[..10],
        };
        assert_eq!(g.status(&short), IcrcStatus::Bad);
        meta.truncated = true;
        let cut = RecvPacket {
            meta: &meta,
            payload: &payload,
        };
        assert_eq!(g.status(&cut), IcrcStatus::Bad);
    }

    #[test]
    fn the_memory_of_sources_is_bounded_and_starts_over_when_full() {
        let mut g = IcrcGuesses::default();
        let src = SocketAddr::from(([10, 0, 0, 1], 0xc000));
        for _ in 0..GIVE_UP_AFTER {
            status(&mut g, src, false);
        }
        assert_eq!(status(&mut g, src, true), IcrcStatus::Unverifiable);
        for port in 0..MAX_SOURCES as u16 {
            status(&mut g, SocketAddr::from(([10, 0, 1, 1], port)), false);
        }
        assert!(g.by_src.len() <= MAX_SOURCES);
        // Forgotten, so tried again.
        assert_eq!(status(&mut g, src, true), IcrcStatus::Ok);
    }

    #[test]
    fn an_ipv6_packet_is_always_checked_and_a_wrong_icrc_is_bad() {
        let mut g = IcrcGuesses::default();
        let src = SocketAddr::from((Ipv6Addr::LOCALHOST, 0xc000));
        for _ in 0..2 * GIVE_UP_AFTER {
            assert_eq!(status(&mut g, src, false), IcrcStatus::Bad);
        }
        assert_eq!(status(&mut g, src, true), IcrcStatus::Ok);
        assert!(g.by_src.is_empty());
    }
}
