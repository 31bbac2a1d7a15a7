//! Accepting a received datagram (IBTA A17.4.2, 9.6 "Packet transport header validation"):
//! the ICRC is checked where the transport lets it be (see [`IcrcStatus`]), then the transport
//! headers are parsed with the wire layer's checks. What fails is dropped and counted, never
//! acted on.

use softrnic_wire::roce::{RocePacket, RoceRepr};

use crate::transport::{IcrcStatus, RecvPacket};

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// The ICRC does not match.
    BadIcrc,
    /// The headers do not parse (unknown opcode, bad lengths, ...).
    Malformed,
}

/// Checks and parses a received datagram. The second value says whether the ICRC was verified
/// (`false`: the transport could not see the covered IP fields; see [`IcrcStatus`]).
///
/// # Errors
/// [`Rejected`] for a bad ICRC or malformed headers.
pub fn accept<'a>(pkt: &RecvPacket<'a>) -> Result<(RocePacket<'a>, bool), Rejected> {
    let verified = match pkt.icrc_status() {
        IcrcStatus::Ok => true,
        IcrcStatus::Unverifiable => false,
        IcrcStatus::Bad => return Err(Rejected::BadIcrc),
    };
    let p = RoceRepr::parse(pkt.payload).map_err(|_| Rejected::Malformed)?;
    Ok((p, verified))
}
