//! The Base Transport Header (IBTA 9.2, figure 101): the 12 bytes that start every RoCEv2
//! transport packet.
//!
//! ```text
//!  byte 0   | OpCode                                        |
//!  byte 1   | SE | M | PadCnt (2) | TVer (4)                 |
//!  byte 2-3 | P_Key                                         |
//!  byte 4   | FECN | BECN | reserved (6)                    |   (RoCEv2: A17.9.1)
//!  byte 5-7 | DestQP (24)                                   |
//!  byte 8   | AckReq | reserved (7)                         |
//!  byte 9-11| PSN (24)                                      |
//! ```
//!
//! Reserved bits are sent as zero and ignored on receipt (IBTA C9-3 "reserved fields shall be
//! transmitted as zero ... and not checked by the receiver").

use core::fmt;

use crate::{check_len, fixed_view, read_u24, write_u24, Error, Opcode, Psn, Result};

/// BTH length in bytes.
pub const HEADER_LEN: usize = 12;
/// The only transport header version defined (IBTA 9.2.6: "TVer ... shall be 0").
pub const TVER: u8 = 0;
/// The default partition key, as kernel rxe sends it.
pub const DEFAULT_PKEY: u16 = 0xffff;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const OPCODE: usize = 0;
    /// SE (bit 7), MigReq (bit 6), PadCnt (bits 5-4), TVer (bits 3-0).
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    /// FECN (bit 7), BECN (bit 6), reserved.
    pub const CN: usize = 4;
    pub const DEST_QP: Field = 5..8;
    /// AckReq (bit 7), reserved.
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;

    pub const SE: u8 = 0x80;
    pub const MIG_REQ: u8 = 0x40;
    pub const PAD_SHIFT: u8 = 4;
    pub const PAD_MASK: u8 = 0x30;
    pub const TVER_MASK: u8 = 0x0f;
    pub const FECN: u8 = 0x80;
    pub const BECN: u8 = 0x40;
    pub const ACK_REQ_BIT: u8 = 0x80;
}

/// Byte 4 of the BTH, masked to ones in the ICRC (A17.4.2).
pub const ICRC_MASKED_BYTE: usize = field::CN;

fixed_view!("BTH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The OpCode field.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[field::OPCODE])
    }
    /// The Solicited Event bit.
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & field::SE != 0
    }
    /// The MigReq bit (path migration state).
    pub fn mig_req(&self) -> bool {
        self.b()[field::FLAGS] & field::MIG_REQ != 0
    }
    /// The PadCnt field: bytes of padding before the ICRC.
    pub fn pad_count(&self) -> u8 {
        (self.b()[field::FLAGS] & field::PAD_MASK) >> field::PAD_SHIFT
    }
    /// The TVer field.
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & field::TVER_MASK
    }
    /// The P_Key field.
    pub fn pkey(&self) -> u16 {
        u16::from_be_bytes([self.b()[field::PKEY.start], self.b()[field::PKEY.start + 1]])
    }
    /// The FECN bit (RoCEv2: congestion experienced, A17.9.1).
    pub fn fecn(&self) -> bool {
        self.b()[field::CN] & field::FECN != 0
    }
    /// The BECN bit.
    pub fn becn(&self) -> bool {
        self.b()[field::CN] & field::BECN != 0
    }
    /// The DestQP field.
    pub fn dest_qp(&self) -> u32 {
        read_u24(&self.b()[field::DEST_QP])
    }
    /// The AckReq bit.
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACK_REQ] & field::ACK_REQ_BIT != 0
    }
    /// The PSN field.
    pub fn psn(&self) -> Psn {
        Psn::new(read_u24(&self.b()[field::PSN]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    fn set_bit(&mut self, byte: usize, bit: u8, on: bool) {
        let b = &mut self.b_mut()[byte];
        *b = if on { *b | bit } else { *b & !bit };
    }
    /// Sets the OpCode field.
    pub fn set_opcode(&mut self, v: Opcode) {
        self.b_mut()[field::OPCODE] = v.0;
    }
    /// Sets the Solicited Event bit.
    pub fn set_solicited(&mut self, v: bool) {
        self.set_bit(field::FLAGS, field::SE, v);
    }
    /// Sets the MigReq bit.
    pub fn set_mig_req(&mut self, v: bool) {
        self.set_bit(field::FLAGS, field::MIG_REQ, v);
    }
    /// Sets the PadCnt field (`v` in `0..4`).
    pub fn set_pad_count(&mut self, v: u8) {
        let b = &mut self.b_mut()[field::FLAGS];
        *b = (*b & !field::PAD_MASK) | ((v << field::PAD_SHIFT) & field::PAD_MASK);
    }
    /// Sets the TVer field.
    pub fn set_tver(&mut self, v: u8) {
        let b = &mut self.b_mut()[field::FLAGS];
        *b = (*b & !field::TVER_MASK) | (v & field::TVER_MASK);
    }
    /// Sets the P_Key field.
    pub fn set_pkey(&mut self, v: u16) {
        self.b_mut()[field::PKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the FECN bit and BECN bit, clearing the reserved bits of byte 4.
    pub fn set_congestion(&mut self, fecn: bool, becn: bool) {
        self.b_mut()[field::CN] =
            if fecn { field::FECN } else { 0 } | if becn { field::BECN } else { 0 };
    }
    /// Sets the DestQP field (low 24 bits of `v`).
    pub fn set_dest_qp(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::DEST_QP], v);
    }
    /// Sets the AckReq bit, clearing the reserved bits of byte 8.
    pub fn set_ack_req(&mut self, v: bool) {
        self.b_mut()[field::ACK_REQ] = if v { field::ACK_REQ_BIT } else { 0 };
    }
    /// Sets the PSN field.
    pub fn set_psn(&mut self, v: Psn) {
        write_u24(&mut self.b_mut()[field::PSN], v.value());
    }
}

/// A parsed BTH. The pad count is not kept here: it follows from the payload length and is
/// written by [`crate::roce::RoceRepr::emit_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BthRepr {
    /// OpCode; always one in [`crate::opcode::TABLE`] after `parse`.
    pub opcode: Opcode,
    /// Solicited Event.
    pub solicited: bool,
    /// MigReq.
    pub mig_req: bool,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl BthRepr {
    /// Parses a BTH: checks length, TVer and that the opcode is in the table.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<BthRepr> {
        packet.check_len()?;
        if packet.tver() != TVER {
            return Err(Error::BadVersion {
                what: "BTH TVer",
                version: packet.tver(),
            });
        }
        let opcode = packet.opcode();
        if opcode.info().is_none() {
            return Err(Error::UnknownOpcode(opcode.0));
        }
        Ok(BthRepr {
            opcode,
            solicited: packet.solicited(),
            mig_req: packet.mig_req(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// The BTH length (always 12).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the BTH with the given pad count; reserved bits are written as zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>, pad_count: u8) {
        packet.b_mut()[field::FLAGS] = 0;
        packet.set_opcode(self.opcode);
        packet.set_solicited(self.solicited);
        packet.set_mig_req(self.mig_req);
        packet.set_pad_count(pad_count);
        packet.set_tver(TVER);
        packet.set_pkey(self.pkey);
        packet.set_congestion(self.fecn, self.becn);
        packet.set_dest_qp(self.dest_qp);
        packet.set_ack_req(self.ack_req);
        packet.set_psn(self.psn);
    }
}

impl fmt::Display for BthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} qp={:#x} psn={}", self.opcode, self.dest_qp, self.psn)?;
        if self.ack_req {
            f.write_str(" A")?;
        }
        if self.solicited {
            f.write_str(" SE")?;
        }
        if self.fecn {
            f.write_str(" FECN")?;
        }
        if self.becn {
            f.write_str(" BECN")?;
        }
        if self.pkey != DEFAULT_PKEY {
            write!(f, " pkey={:#06x}", self.pkey)?;
        }
        Ok(())
    }
}

// Keep `check_len` referenced for the macro's users in this module.
#[allow(unused)]
fn _uses(b: &[u8]) -> Result<()> {
    check_len("BTH", b, HEADER_LEN)
}

#[cfg(test)]
mod test {
    use super::*;

    // The BTH of the scapy UC SEND_ONLY golden vector: opcode 0x24, M, pad 2, P_Key 0xffff,
    // DestQP 211, PSN 13571856.
    static PACKET_BYTES: [u8; 12] = [
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10,
    ];

    fn repr() -> BthRepr {
        BthRepr {
            opcode: Opcode::UC_SEND_ONLY,
            solicited: false,
            mig_req: true,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: 211,
            ack_req: false,
            psn: Psn::new(13571856),
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::UC_SEND_ONLY);
        assert!(!p.solicited());
        assert!(p.mig_req());
        assert_eq!(p.pad_count(), 2);
        assert_eq!(p.tver(), 0);
        assert_eq!(p.pkey(), 0xffff);
        assert!(!p.fecn() && !p.becn());
        assert_eq!(p.dest_qp(), 211);
        assert!(!p.ack_req());
        assert_eq!(p.psn(), Psn::new(13571856));
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 12];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_opcode(Opcode::UC_SEND_ONLY);
        p.b_mut()[field::FLAGS] = 0;
        p.set_mig_req(true);
        p.set_pad_count(2);
        p.set_tver(0);
        p.set_pkey(0xffff);
        p.set_congestion(false, false);
        p.set_dest_qp(211);
        p.set_ack_req(false);
        p.set_psn(Psn::new(13571856));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(BthRepr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; 12];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]), 2);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..11]).unwrap_err(),
            Error::Truncated {
                what: "BTH",
                need: 12,
                have: 11
            }
        );
    }

    #[test]
    fn test_bad_version_and_opcode() {
        let mut bytes = PACKET_BYTES;
        bytes[1] |= 0x01;
        assert!(matches!(
            BthRepr::parse(&Packet::new_unchecked(&bytes[..])),
            Err(Error::BadVersion { version: 1, .. })
        ));
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x15;
        assert_eq!(
            BthRepr::parse(&Packet::new_unchecked(&bytes[..])),
            Err(Error::UnknownOpcode(0x15))
        );
    }
}
