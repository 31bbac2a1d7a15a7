//! The ACK Extended Transport Header (IBTA 9.3.5, figure 106; syndrome encoding in 9.7.5.2.1,
//! table 42): how a responder acknowledges, asks for a retry later (RNR NAK), or refuses (NAK).
//!
//! ```text
//!  byte 0   | Syndrome: reserved (1) | type (2) | value (5) |
//!  byte 1-3 | MSN (24)                                     |
//! ```
//!
//! | type | meaning | value |
//! |------|---------|-------|
//! | 00   | ACK     | credit count (5 bits, table 45; 0x1F = "invalid", i.e. unlimited) |
//! | 01   | RNR NAK | RNR timer code (table 46) |
//! | 10   | reserved | |
//! | 11   | NAK     | 0 PSN sequence error, 1 invalid request, 2 remote access error, 3 remote operational error, 4 invalid RD request |

use core::fmt;

use crate::{fixed_view, read_u24, write_u24, Error, Result};

/// AETH length in bytes.
pub const HEADER_LEN: usize = 4;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

const TYPE_SHIFT: u8 = 5;
const VALUE_MASK: u8 = 0x1f;
const TYPE_ACK: u8 = 0b000;
const TYPE_RNR_NAK: u8 = 0b001;
const TYPE_NAK: u8 = 0b011;

fixed_view!("AETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The raw Syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// The Message Sequence Number.
    pub fn msn(&self) -> u32 {
        read_u24(&self.buffer.as_ref()[field::MSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the raw Syndrome byte.
    pub fn set_syndrome(&mut self, v: u8) {
        self.buffer.as_mut()[field::SYNDROME] = v;
    }
    /// Sets the MSN (low 24 bits of `v`).
    pub fn set_msn(&mut self, v: u32) {
        write_u24(&mut self.buffer.as_mut()[field::MSN], v);
    }
}

/// The NAK codes (IBTA table 42).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum NakCode {
    /// PSN Sequence Error: a packet arrived out of order.
    PsnSequenceError = 0,
    /// Invalid Request: bad opcode sequence, unsupported operation, length error.
    InvalidRequest = 1,
    /// Remote Access Error: R_Key, bounds or rights violation.
    RemoteAccessError = 2,
    /// Remote Operational Error: the responder could not complete the request.
    RemoteOperationalError = 3,
    /// Invalid RD Request (RD only).
    InvalidRdRequest = 4,
}

impl NakCode {
    fn from_value(v: u8) -> Option<NakCode> {
        Some(match v {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            _ => return None,
        })
    }

    /// A short name, as `softrnic decode` prints it.
    pub const fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "NAK_PSN_SEQUENCE_ERROR",
            NakCode::InvalidRequest => "NAK_INVALID_REQUEST",
            NakCode::RemoteAccessError => "NAK_REMOTE_ACCESS_ERROR",
            NakCode::RemoteOperationalError => "NAK_REMOTE_OPERATIONAL_ERROR",
            NakCode::InvalidRdRequest => "NAK_INVALID_RD_REQUEST",
        }
    }
}

/// The credit-count encoding of an ACK (IBTA 9.7.7.2.4, table 45): a 5-bit code for a number of
/// receive WQEs; code 0x1F means "invalid" — no credit information, the requester may send
/// freely (what kernel rxe always sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditCode(pub u8);

impl CreditCode {
    /// Code 0x1F: no credit information.
    pub const UNLIMITED: CreditCode = CreditCode(0x1f);

    /// The number of credits for codes 0..=30 (table 45), `None` for 0x1F.
    pub fn credits(self) -> Option<u32> {
        const TABLE: [u32; 31] = [
            0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
        ];
        TABLE.get(self.0 as usize).copied()
    }
}

/// An RNR NAK timer code (IBTA 9.7.5.2.8, table 46): how long the requester waits before it
/// retries after a Receiver Not Ready NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RnrTimer(pub u8);

impl RnrTimer {
    /// The delay in microseconds for this code (code 0 is the longest, 655.36 ms).
    pub fn micros(self) -> u32 {
        const TABLE_US: [u32; 32] = [
            655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920,
            2_560, 3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920,
            122_880, 163_840, 245_760, 327_680, 491_520,
        ];
        TABLE_US[(self.0 & VALUE_MASK) as usize]
    }
}

/// A decoded AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syndrome {
    /// Positive acknowledgement with an end-to-end credit code.
    Ack(CreditCode),
    /// Receiver Not Ready NAK with the time to wait.
    RnrNak(RnrTimer),
    /// NAK.
    Nak(NakCode),
}

impl Syndrome {
    /// Decodes the syndrome byte; the reserved type `10`, the reserved bit 7 and NAK codes above
    /// 4 are errors.
    pub fn from_byte(b: u8) -> Result<Syndrome> {
        let value = b & VALUE_MASK;
        let bad = Error::BadField {
            what: "AETH syndrome",
            value: b as u64,
        };
        match b >> TYPE_SHIFT {
            TYPE_ACK => Ok(Syndrome::Ack(CreditCode(value))),
            TYPE_RNR_NAK => Ok(Syndrome::RnrNak(RnrTimer(value))),
            TYPE_NAK => NakCode::from_value(value).map(Syndrome::Nak).ok_or(bad),
            _ => Err(bad),
        }
    }

    /// Encodes the syndrome byte.
    pub fn to_byte(self) -> u8 {
        let (ty, value) = match self {
            Syndrome::Ack(c) => (TYPE_ACK, c.0),
            Syndrome::RnrNak(t) => (TYPE_RNR_NAK, t.0),
            Syndrome::Nak(code) => (TYPE_NAK, code as u8),
        };
        (ty << TYPE_SHIFT) | (value & VALUE_MASK)
    }

    /// A short name: `ACK`, `RNR_NAK` or the NAK code's name.
    pub const fn kind(self) -> &'static str {
        match self {
            Syndrome::Ack(_) => "ACK",
            Syndrome::RnrNak(_) => "RNR_NAK",
            Syndrome::Nak(code) => code.name(),
        }
    }
}

/// A parsed AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AethRepr {
    /// The decoded syndrome.
    pub syndrome: Syndrome,
    /// Message Sequence Number: how many messages the responder has completed (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Parses an AETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<AethRepr> {
        packet.check_len()?;
        Ok(AethRepr {
            syndrome: Syndrome::from_byte(packet.syndrome())?,
            msn: packet.msn(),
        })
    }
    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the AETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_syndrome(self.syndrome.to_byte());
        packet.set_msn(self.msn);
    }
}

impl fmt::Display for AethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AETH {} msn={}", self.syndrome.kind(), self.msn)?;
        match self.syndrome {
            Syndrome::Ack(c) if c != CreditCode::UNLIMITED => write!(f, " credits={}", c.0),
            Syndrome::RnrNak(t) => write!(f, " timer={}us", t.micros()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // An ACK from kernel rxe: syndrome 0x1f (ACK, no credits), MSN 20.
    static PACKET_BYTES: [u8; 4] = [0x1f, 0x00, 0x00, 0x14];
    const REPR: AethRepr = AethRepr {
        syndrome: Syndrome::Ack(CreditCode::UNLIMITED),
        msn: 20,
    };

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.syndrome(), 0x1f);
        assert_eq!(p.msn(), 20);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 4];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_syndrome(0x1f);
        p.set_msn(20);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(AethRepr::parse(&p).unwrap(), REPR);
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; 4];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..3]),
            Err(Error::Truncated {
                need: 4,
                have: 3,
                ..
            })
        ));
    }

    #[test]
    fn syndromes_round_trip_and_reserved_ones_fail() {
        let mut ok = 0;
        for b in 0..=255u8 {
            match Syndrome::from_byte(b) {
                Ok(s) => {
                    assert_eq!(s.to_byte(), b);
                    ok += 1;
                }
                Err(e) => assert!(matches!(e, Error::BadField { .. })),
            }
        }
        // 32 ACK codes + 32 RNR timers + 5 NAK codes.
        assert_eq!(ok, 69);
        assert_eq!(
            Syndrome::from_byte(0x62),
            Ok(Syndrome::Nak(NakCode::RemoteAccessError))
        );
        assert_eq!(
            Syndrome::from_byte(0x60).unwrap().kind(),
            "NAK_PSN_SEQUENCE_ERROR"
        );
    }

    #[test]
    fn timer_and_credit_tables() {
        assert_eq!(RnrTimer(0).micros(), 655_360);
        assert_eq!(RnrTimer(1).micros(), 10);
        assert_eq!(RnrTimer(14).micros(), 1_280);
        assert_eq!(RnrTimer(31).micros(), 491_520);
        assert_eq!(CreditCode(0).credits(), Some(0));
        assert_eq!(CreditCode(5).credits(), Some(6));
        assert_eq!(CreditCode(30).credits(), Some(32768));
        assert_eq!(CreditCode::UNLIMITED.credits(), None);
    }
}
