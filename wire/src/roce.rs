//! A RoCEv2 transport packet — the UDP payload: BTH, the extension headers its opcode calls
//! for, payload, pad and ICRC (IBTA 9.2–9.3; annex A17.4).
//!
//! ```text
//! | BTH (12) | ext. headers (per opcode) | payload | pad (0-3) | ICRC (4) |
//! ```
//!
//! Which extension headers follow, and whether a payload may, comes from the one opcode table
//! ([`crate::opcode`]). The payload length is not carried in any transport header: it is what
//! remains of the UDP payload after the headers, the pad and the ICRC (IBTA 9.2.3 "PadCnt").

use core::fmt;

use crate::aeth::{self, AethRepr};
use crate::atomic_ack_eth::{self, AtomicAckEthRepr};
use crate::atomic_eth::{self, AtomicEthRepr};
use crate::bth::{self, BthRepr};
use crate::cnp::{self, CnpRepr};
use crate::deth::{self, DethRepr};
use crate::feth::{self, FethRepr};
use crate::icrc::ICRC_LEN;
use crate::ieth::{self, IethRepr};
use crate::immdt::{self, ImmDtRepr};
use crate::opcode::{ExtHeader, OpcodeInfo, PayloadRule, PATH_MTUS};
use crate::reth::{self, RethRepr};
use crate::xrceth::{self, XrcethRepr};
use crate::{check_len, Error, Result};

/// The parsed headers of a RoCEv2 transport packet. An extension header is `Some` exactly when
/// the opcode table lists it for `bth.opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceRepr {
    /// Base transport header.
    pub bth: BthRepr,
    /// XRC ETH (XRC requests).
    pub xrceth: Option<XrcethRepr>,
    /// Datagram ETH (UD).
    pub deth: Option<DethRepr>,
    /// FLUSH ETH.
    pub feth: Option<FethRepr>,
    /// RDMA ETH.
    pub reth: Option<RethRepr>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// ACK ETH.
    pub aeth: Option<AethRepr>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data.
    pub immdt: Option<ImmDtRepr>,
    /// Invalidate ETH.
    pub ieth: Option<IethRepr>,
    /// Payload length in bytes, pad excluded.
    pub payload_len: usize,
}

/// A parsed transport packet: the headers, and borrowed views of the payload and ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocePacket<'a> {
    /// The headers.
    pub repr: RoceRepr,
    /// The payload, pad excluded.
    pub payload: &'a [u8],
    /// The ICRC as found on the wire (little-endian value of the last 4 bytes).
    pub icrc: u32,
}

/// The pad that aligns `payload_len` to 4 bytes (IBTA 9.2.3).
pub const fn pad_len(payload_len: usize) -> usize {
    (4 - payload_len % 4) % 4
}

impl RoceRepr {
    /// A packet of `bth.opcode` with no extension headers filled in yet.
    pub fn new(bth: BthRepr) -> RoceRepr {
        RoceRepr {
            bth,
            xrceth: None,
            deth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            payload_len: 0,
        }
    }

    /// The table entry of the opcode. Fails for opcodes not in the table.
    pub fn info(&self) -> Result<&'static OpcodeInfo> {
        self.bth
            .opcode
            .info()
            .ok_or(Error::UnknownOpcode(self.bth.opcode.0))
    }

    /// Parses a UDP payload (BTH through ICRC). The ICRC is returned, not verified: that needs
    /// the IP and UDP headers (see [`crate::frame`] and [`crate::icrc`]).
    pub fn parse(bytes: &[u8]) -> Result<RocePacket<'_>> {
        let bth = BthRepr::parse(&bth::Packet::new_checked(bytes)?)?;
        let mut repr = RoceRepr::new(bth);
        let info = repr.info()?;
        let mut at = bth::HEADER_LEN;
        for &h in info.headers {
            let b = &bytes[at..];
            match h {
                ExtHeader::Xrceth => {
                    repr.xrceth = Some(XrcethRepr::parse(&xrceth::Packet::new_checked(b)?)?)
                }
                ExtHeader::Deth => {
                    repr.deth = Some(DethRepr::parse(&deth::Packet::new_checked(b)?)?)
                }
                ExtHeader::Feth => {
                    repr.feth = Some(FethRepr::parse(&feth::Packet::new_checked(b)?)?)
                }
                ExtHeader::Reth => {
                    repr.reth = Some(RethRepr::parse(&reth::Packet::new_checked(b)?)?)
                }
                ExtHeader::AtomicEth => {
                    repr.atomic_eth =
                        Some(AtomicEthRepr::parse(&atomic_eth::Packet::new_checked(b)?)?)
                }
                ExtHeader::Aeth => {
                    repr.aeth = Some(AethRepr::parse(&aeth::Packet::new_checked(b)?)?)
                }
                ExtHeader::AtomicAckEth => {
                    repr.atomic_ack_eth = Some(AtomicAckEthRepr::parse(
                        &atomic_ack_eth::Packet::new_checked(b)?,
                    )?)
                }
                ExtHeader::ImmDt => {
                    repr.immdt = Some(ImmDtRepr::parse(&immdt::Packet::new_checked(b)?)?)
                }
                ExtHeader::Ieth => {
                    repr.ieth = Some(IethRepr::parse(&ieth::Packet::new_checked(b)?)?)
                }
                ExtHeader::CnpPad => {
                    CnpRepr::parse(&cnp::Packet::new_checked(b)?)?;
                }
            }
            at += h.size();
        }
        check_len("ICRC", &bytes[at..], ICRC_LEN)?;
        let body = bytes.len() - at - ICRC_LEN;
        if !body.is_multiple_of(4) {
            return Err(Error::BadPad {
                pad: bth_pad(bytes),
                reason: "payload and pad are not a multiple of 4 bytes",
            });
        }
        let pad = bth_pad(bytes) as usize;
        if pad > body {
            return Err(Error::BadPad {
                pad: pad as u8,
                reason: "more pad than bytes after the headers",
            });
        }
        repr.payload_len = body - pad;
        check_payload(info, repr.payload_len, pad)?;
        let icrc_at = bytes.len() - ICRC_LEN;
        let icrc = u32::from_le_bytes([
            bytes[icrc_at],
            bytes[icrc_at + 1],
            bytes[icrc_at + 2],
            bytes[icrc_at + 3],
        ]);
        Ok(RocePacket {
            repr,
            payload: &bytes[at..at + repr.payload_len],
            icrc,
        })
    }

    /// Length of the BTH and extension headers.
    pub fn header_len(&self) -> usize {
        bth::HEADER_LEN + self.info().map_or(0, OpcodeInfo::ext_len)
    }

    /// Length of the whole transport packet: headers, payload, pad, ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len + pad_len(self.payload_len) + ICRC_LEN
    }

    /// Checks that the extension headers present are exactly the ones the opcode table lists,
    /// and that the payload length obeys the opcode's rule.
    pub fn check(&self) -> Result<()> {
        let info = self.info()?;
        let present = [
            (ExtHeader::Xrceth, self.xrceth.is_some()),
            (ExtHeader::Deth, self.deth.is_some()),
            (ExtHeader::Feth, self.feth.is_some()),
            (ExtHeader::Reth, self.reth.is_some()),
            (ExtHeader::AtomicEth, self.atomic_eth.is_some()),
            (ExtHeader::Aeth, self.aeth.is_some()),
            (ExtHeader::AtomicAckEth, self.atomic_ack_eth.is_some()),
            (ExtHeader::ImmDt, self.immdt.is_some()),
            (ExtHeader::Ieth, self.ieth.is_some()),
        ]
        .iter()
        .fold(0, |set, &(h, is)| if is { set | h.bit() } else { set });
        // The CNP's reserved bytes have no field: they are there whenever the opcode says.
        let expected = info.header_set() & !ExtHeader::CnpPad.bit();
        if present != expected {
            return Err(Error::Mismatch(if present & !expected != 0 {
                "an extension header the opcode does not carry is present"
            } else {
                "an extension header the opcode requires is missing"
            }));
        }
        check_payload(info, self.payload_len, pad_len(self.payload_len))
    }

    /// Writes the BTH (with the pad count for `payload_len`) and the extension headers into
    /// the start of `buf`; returns their length. The payload, pad and ICRC are the caller's
    /// (see [`crate::frame::FrameRepr::emit`] for a whole frame).
    pub fn emit_headers(&self, buf: &mut [u8]) -> Result<usize> {
        self.check()?;
        let len = self.header_len();
        if buf.len() < len {
            return Err(Error::BufferTooSmall {
                need: len,
                have: buf.len(),
            });
        }
        let info = self.info()?;
        self.bth.emit(
            &mut bth::Packet::new_unchecked(&mut buf[..bth::HEADER_LEN]),
            pad_len(self.payload_len) as u8,
        );
        let mut at = bth::HEADER_LEN;
        for &h in info.headers {
            let b = &mut buf[at..at + h.size()];
            // `check` made sure every header the table lists is `Some`.
            match h {
                ExtHeader::Xrceth => emit_opt(&self.xrceth, |r| {
                    r.emit(&mut xrceth::Packet::new_unchecked(b))
                }),
                ExtHeader::Deth => {
                    emit_opt(&self.deth, |r| r.emit(&mut deth::Packet::new_unchecked(b)))
                }
                ExtHeader::Feth => {
                    emit_opt(&self.feth, |r| r.emit(&mut feth::Packet::new_unchecked(b)))
                }
                ExtHeader::Reth => {
                    emit_opt(&self.reth, |r| r.emit(&mut reth::Packet::new_unchecked(b)))
                }
                ExtHeader::AtomicEth => emit_opt(&self.atomic_eth, |r| {
                    r.emit(&mut atomic_eth::Packet::new_unchecked(b))
                }),
                ExtHeader::Aeth => {
                    emit_opt(&self.aeth, |r| r.emit(&mut aeth::Packet::new_unchecked(b)))
                }
                ExtHeader::AtomicAckEth => emit_opt(&self.atomic_ack_eth, |r| {
                    r.emit(&mut atomic_ack_eth::Packet::new_unchecked(b))
                }),
                ExtHeader::ImmDt => emit_opt(&self.immdt, |r| {
                    r.emit(&mut immdt::Packet::new_unchecked(b))
                }),
                ExtHeader::Ieth => {
                    emit_opt(&self.ieth, |r| r.emit(&mut ieth::Packet::new_unchecked(b)))
                }
                ExtHeader::CnpPad => CnpRepr.emit(&mut cnp::Packet::new_unchecked(b)),
            }
            at += h.size();
        }
        Ok(at)
    }
}

fn emit_opt<R>(r: &Option<R>, f: impl FnOnce(&R)) {
    if let Some(r) = r {
        f(r)
    }
}

fn bth_pad(bytes: &[u8]) -> u8 {
    bth::Packet::new_unchecked(bytes).pad_count()
}

/// The payload rules of IBTA 9.2 and table 38, as the opcode table states them.
fn check_payload(info: &OpcodeInfo, len: usize, pad: usize) -> Result<()> {
    let bad = |reason| {
        Err(Error::BadPayload {
            opcode: info.code,
            len,
            reason,
        })
    };
    match info.payload {
        PayloadRule::None if pad != 0 => Err(Error::BadPad {
            pad: pad as u8,
            reason: "pad on an opcode without payload",
        }),
        PayloadRule::None if len != 0 => bad("the opcode carries no payload"),
        PayloadRule::FullMtu if !PATH_MTUS.contains(&len) => {
            bad("a first or middle packet must carry exactly one path MTU")
        }
        PayloadRule::Exact(n) if len != n => bad("wrong payload length for the opcode"),
        _ => Ok(()),
    }
}

impl fmt::Display for RoceRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bth)?;
        fn opt<R: fmt::Display>(f: &mut fmt::Formatter<'_>, r: &Option<R>) -> fmt::Result {
            match r {
                Some(r) => write!(f, " {r}"),
                None => Ok(()),
            }
        }
        opt(f, &self.xrceth)?;
        opt(f, &self.deth)?;
        opt(f, &self.feth)?;
        opt(f, &self.reth)?;
        opt(f, &self.atomic_eth)?;
        opt(f, &self.aeth)?;
        opt(f, &self.atomic_ack_eth)?;
        opt(f, &self.immdt)?;
        opt(f, &self.ieth)?;
        write!(f, " len={}", self.payload_len)
    }
}
