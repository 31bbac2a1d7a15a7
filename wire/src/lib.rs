//! RoCEv2 packet formats: the bytes softrnic puts on the wire and accepts from it.
//!
//! This crate is the wire layer only — no I/O, no state — in the style of smoltcp's `wire`
//! module. Every header has two types:
//!
//! * a zero-copy view `Packet<T: AsRef<[u8]>>` with field getters (and setters when
//!   `T: AsMut<[u8]>`), and
//! * a plain `Repr` with `parse`, `buffer_len` and `emit`.
//!
//! The contract, written once here: `Packet::new_unchecked` never fails and its accessors may
//! panic on a short buffer; `Packet::new_checked` (which calls `check_len`) fails with
//! [`Error::Truncated`] instead, and after it succeeds no accessor panics. Untrusted input —
//! anything received — goes through `new_checked` (or a `Repr::parse` that does); emission
//! into buffers we sized ourselves may use `new_unchecked`.
//!
//! What to read first:
//! * InfiniBand Architecture Specification Vol. 1 (IBTA), chapter 9 "Transport layer":
//!   9.2 "Base transport header", 9.3 "Extended transport headers", 9.7 "Reliable service";
//! * Annex A17 "RoCEv2": UDP destination port 4791, the ICRC over the IP/UDP headers;
//! * IBTA chapters 13 and 12 for the MADs of the connection manager on QP1.
//!
//! Layout of a RoCEv2 frame, and the module for each part:
//!
//! ```text
//! Ethernet | IPv4 or IPv6 | UDP (dst 4791) | BTH | ext. headers | payload | pad | ICRC
//!  smoltcp     smoltcp        smoltcp         bth   reth aeth ...    (data)   0-3   icrc
//! `--------------- frame ---------------'   `------------- roce ---------------------'
//! ```
//!
//! [`opcode`] holds the one table that says, for every opcode, which extension headers follow.

// Unsafe code only where the ICRC reads bytes through raw pointers (`icrc/raw.rs` says why),
// each module of it allowing it by name.
#![deny(unsafe_code)]
#![deny(missing_docs)]

use core::fmt;

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm;
pub mod cnp;
pub mod deth;
pub mod feth;
pub mod frame;
pub mod gso;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod mad;
pub mod opcode;
pub mod pcap;
pub mod psn;
pub mod reth;
pub mod roce;
pub mod xrceth;

pub use opcode::Opcode;
pub use psn::Psn;

/// The UDP destination port of RoCEv2 (IBTA annex A17.2.2).
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// Why bytes could not be parsed or a `Repr` could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the header (or the field) named `what` does.
    Truncated {
        /// The header or field that did not fit.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A version field holds a value this implementation does not speak.
    BadVersion {
        /// Which version field.
        what: &'static str,
        /// The value found.
        version: u8,
    },
    /// The BTH opcode is reserved or belongs to a transport softrnic does not implement (RD, XRC).
    UnknownOpcode(u8),
    /// The BTH pad count does not fit the packet.
    BadPad {
        /// The pad count found.
        pad: u8,
        /// Why it does not fit.
        reason: &'static str,
    },
    /// The payload breaks the rules of its opcode (IBTA 9.2, C9-?? on packet lengths).
    BadPayload {
        /// The BTH opcode.
        opcode: u8,
        /// The payload length found.
        len: usize,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A field holds a reserved or otherwise invalid value.
    BadField {
        /// Which field.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// The frame is not RoCEv2 (not IP, not UDP, or not to port 4791).
    NotRoce(&'static str),
    /// A `Repr` to emit disagrees with the opcode table (say, a RETH on a SEND).
    Mismatch(&'static str),
    /// A buffer given to `emit` is too small.
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { what, need, have } => {
                write!(f, "truncated {what}: need {need} bytes, have {have}")
            }
            Error::BadVersion { what, version } => write!(f, "unsupported {what} {version}"),
            Error::UnknownOpcode(op) => write!(f, "unknown or unsupported BTH opcode {op:#04x}"),
            Error::BadPad { pad, reason } => write!(f, "bad pad count {pad}: {reason}"),
            Error::BadPayload {
                opcode,
                len,
                reason,
            } => write!(
                f,
                "bad payload for opcode {opcode:#04x} ({len} bytes): {reason}"
            ),
            Error::BadField { what, value } => write!(f, "invalid {what} {value:#x}"),
            Error::NotRoce(why) => write!(f, "not RoCEv2: {why}"),
            Error::Mismatch(why) => write!(f, "headers disagree with the opcode: {why}"),
            Error::BufferTooSmall { need, have } => {
                write!(f, "buffer too small: need {need} bytes, have {have}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// Fails with [`Error::Truncated`] unless `buf` holds at least `need` bytes.
#[inline]
pub(crate) fn check_len(what: &'static str, buf: &[u8], need: usize) -> Result<()> {
    if buf.len() < need {
        Err(Error::Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Big-endian 24-bit read (QPNs, PSNs, MSNs are 24-bit fields on the wire).
#[inline]
pub(crate) fn read_u24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// Big-endian 24-bit write; the top byte of `v` is ignored.
#[inline]
pub(crate) fn write_u24(b: &mut [u8], v: u32) {
    b.copy_from_slice(&v.to_be_bytes()[1..]);
}

/// The constructors every fixed-length header view shares (the contract in the crate docs).
macro_rules! fixed_view {
    ($what:literal, $len:expr) => {
        /// A read/write wrapper around a buffer holding this header.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps `buffer` without checking its length; accessors may then panic.
            pub const fn new_unchecked(buffer: T) -> Packet<T> {
                Packet { buffer }
            }

            /// Wraps `buffer`, failing with `Error::Truncated` if it is shorter than the header.
            pub fn new_checked(buffer: T) -> $crate::Result<Packet<T>> {
                let packet = Self::new_unchecked(buffer);
                packet.check_len()?;
                Ok(packet)
            }

            /// Fails with `Error::Truncated` if the buffer is shorter than the header.
            pub fn check_len(&self) -> $crate::Result<()> {
                $crate::check_len($what, self.buffer.as_ref(), $len)
            }

            /// Gives back the underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use fixed_view;

/// Big-endian u32 at the start of `b` (which must hold 4 bytes).
#[inline]
pub(crate) fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Big-endian u64 at the start of `b` (which must hold 8 bytes).
#[inline]
pub(crate) fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// A header that is one big-endian 32-bit field (ImmDt, IETH): view, `Repr` and tests.
macro_rules! u32_header {
    ($what:literal, $repr:ident, $getter:ident, $setter:ident, $doc:literal) => {
        /// Header length in bytes.
        pub const HEADER_LEN: usize = 4;

        $crate::fixed_view!($what, HEADER_LEN);

        impl<T: AsRef<[u8]>> Packet<T> {
            #[doc = concat!("The ", $doc, " field.")]
            pub fn $getter(&self) -> u32 {
                $crate::be_u32(self.buffer.as_ref())
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            #[doc = concat!("Sets the ", $doc, " field.")]
            pub fn $setter(&mut self, v: u32) {
                self.buffer.as_mut()[..HEADER_LEN].copy_from_slice(&v.to_be_bytes());
            }
        }

        #[doc = concat!("A parsed ", $what, ": the ", $doc, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $repr(pub u32);

        impl $repr {
            #[doc = concat!("Parses a ", $what, ".")]
            pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> $crate::Result<$repr> {
                packet.check_len()?;
                Ok($repr(packet.$getter()))
            }
            /// The header length.
            pub const fn buffer_len(&self) -> usize {
                HEADER_LEN
            }
            #[doc = concat!("Writes the ", $what, ".")]
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
                packet.$setter(self.0);
            }
        }

        impl core::fmt::Display for $repr {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{} {:#010x}", $what, self.0)
            }
        }

        #[cfg(test)]
        mod test {
            use super::*;

            static PACKET_BYTES: [u8; 4] = [0x12, 0x34, 0x56, 0x78];

            #[test]
            fn test_deconstruct() {
                let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
                assert_eq!(p.$getter(), 0x1234_5678);
            }

            #[test]
            fn test_construct() {
                let mut bytes = [0xa5u8; 4];
                Packet::new_unchecked(&mut bytes[..]).$setter(0x1234_5678);
                assert_eq!(bytes, PACKET_BYTES);
            }

            #[test]
            fn test_parse() {
                let p = Packet::new_unchecked(&PACKET_BYTES[..]);
                assert_eq!($repr::parse(&p).unwrap(), $repr(0x1234_5678));
            }

            #[test]
            fn test_emit() {
                let mut bytes = [0xa5u8; 4];
                $repr(0x1234_5678).emit(&mut Packet::new_unchecked(&mut bytes[..]));
                assert_eq!(bytes, PACKET_BYTES);
            }

            #[test]
            fn test_truncated() {
                assert!(matches!(
                    Packet::new_checked(&PACKET_BYTES[..3]),
                    Err($crate::Error::Truncated {
                        need: 4,
                        have: 3,
                        ..
                    })
                ));
            }
        }
    };
}
pub(crate) use u32_header;
