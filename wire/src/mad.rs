//! The Management Datagram (MAD) common header (IBTA 13.4.2 "Management datagram format"; the
//! methods and the Status field are defined alongside it in IBTA 13.4).
//!
//! A MAD is always 256 bytes: a 24-byte common header, then 232 bytes of class data. On RoCEv2
//! the connection manager's MADs travel as UD SEND_ONLY packets to QP1 (the GSI) with the
//! well-known Q_Key [`QP1_QKEY`]; [`crate::cm`] parses the class data of class [`MGMT_CLASS_CM`].
//!
//! ```text
//!  byte 0     | BaseVersion                                   |
//!  byte 1     | MgmtClass                                     |
//!  byte 2     | ClassVersion                                  |
//!  byte 3     | R | Method (7)                                |
//!  byte 4-5   | Status                                        |
//!  byte 6-7   | ClassSpecific                                 |
//!  byte 8-15  | TransactionID                                 |
//!  byte 16-17 | AttributeID                                   |
//!  byte 18-19 | reserved                                      |
//!  byte 20-23 | AttributeModifier                             |
//!  byte 24-255| class data (232 bytes)                        |
//! ```

use core::fmt;

use crate::{fixed_view, Error, Result};

/// Length of the common MAD header.
pub const HEADER_LEN: usize = 24;
/// Length of the class data that follows the header.
pub const DATA_LEN: usize = 232;
/// Length of every MAD.
pub const MAD_LEN: usize = HEADER_LEN + DATA_LEN;

/// The only BaseVersion defined for InfiniBand MADs.
pub const BASE_VERSION: u8 = 1;

/// QP1, the General Services Interface QP that receives the CM's MADs.
pub const GSI_QPN: u32 = 1;
/// The well-known Q_Key of QP1 (IBTA chapter 13, the GSI): GMPs to QP1 carry it in their DETH.
pub const QP1_QKEY: u32 = 0x8001_0000;

/// The MgmtClass value of the Communication Manager.
pub const MGMT_CLASS_CM: u8 = 0x07;
/// The ClassVersion of the CM class that current stacks (Linux ib_cm) speak.
pub const CM_CLASS_VERSION: u8 = 2;

/// Method Get (7-bit method value; the R bit is separate, see [`MadRepr::response`]).
pub const METHOD_GET: u8 = 0x01;
/// Method Set.
pub const METHOD_SET: u8 = 0x02;
/// Method Send: the only method of CM messages other than ClassPortInfo.
pub const METHOD_SEND: u8 = 0x03;
/// Method Trap.
pub const METHOD_TRAP: u8 = 0x05;
/// Method Report.
pub const METHOD_REPORT: u8 = 0x06;
/// Method TrapRepress.
pub const METHOD_TRAP_REPRESS: u8 = 0x07;

/// Status: the responder is busy (bit 0).
pub const STATUS_BUSY: u16 = 0x0001;
/// Status: redirection required (bit 1).
pub const STATUS_REDIRECT: u16 = 0x0002;
/// Status: invalid-field code 1, bad BaseVersion or ClassVersion.
pub const STATUS_BAD_VERSION: u16 = 0x0004;
/// Status: invalid-field code 2, method not supported.
pub const STATUS_METHOD_UNSUPPORTED: u16 = 0x0008;
/// Status: invalid-field code 3, method/attribute combination not supported.
pub const STATUS_METHOD_ATTR_UNSUPPORTED: u16 = 0x000c;
/// Status: invalid-field code 7, invalid value in an attribute or attribute modifier.
pub const STATUS_INVALID_ATTR_VALUE: u16 = 0x001c;

/// CM attribute ClassPortInfo.
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
/// CM attribute ConnectRequest (REQ, IBTA 12.6.5).
pub const ATTR_CM_REQ: u16 = 0x0010;
/// CM attribute MsgRcptAck (MRA, 12.6.6).
pub const ATTR_CM_MRA: u16 = 0x0011;
/// CM attribute ConnectReject (REJ, 12.6.7).
pub const ATTR_CM_REJ: u16 = 0x0012;
/// CM attribute ConnectReply (REP, 12.6.8).
pub const ATTR_CM_REP: u16 = 0x0013;
/// CM attribute ReadyToUse (RTU, 12.6.9).
pub const ATTR_CM_RTU: u16 = 0x0014;
/// CM attribute DisconnectRequest (DREQ, 12.6.10).
pub const ATTR_CM_DREQ: u16 = 0x0015;
/// CM attribute DisconnectReply (DREP, 12.6.11).
pub const ATTR_CM_DREP: u16 = 0x0016;
/// CM attribute ServiceIDResReq (SIDR_REQ).
pub const ATTR_CM_SIDR_REQ: u16 = 0x0017;
/// CM attribute ServiceIDResReqResp (SIDR_REP).
pub const ATTR_CM_SIDR_REP: u16 = 0x0018;
/// CM attribute LoadAlternatePath (LAP).
pub const ATTR_CM_LAP: u16 = 0x0019;
/// CM attribute AlternatePathResponse (APR).
pub const ATTR_CM_APR: u16 = 0x001a;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    /// R (bit 7), Method (bits 6-0).
    pub const METHOD: usize = 3;
    pub const STATUS: Field = 4..6;
    pub const CLASS_SPECIFIC: Field = 6..8;
    pub const TRANSACTION_ID: Field = 8..16;
    pub const ATTRIBUTE_ID: Field = 16..18;
    pub const RESERVED: Field = 18..20;
    pub const ATTRIBUTE_MODIFIER: Field = 20..24;
    pub const DATA: Field = 24..256;

    pub const R_BIT: u8 = 0x80;
    pub const METHOD_MASK: u8 = 0x7f;
}

fixed_view!("MAD", MAD_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn array<const N: usize>(&self, f: field::Field) -> [u8; N] {
        self.b()[f].try_into().expect("field length")
    }
    /// The BaseVersion field.
    pub fn base_version(&self) -> u8 {
        self.b()[field::BASE_VERSION]
    }
    /// The MgmtClass field.
    pub fn mgmt_class(&self) -> u8 {
        self.b()[field::MGMT_CLASS]
    }
    /// The ClassVersion field.
    pub fn class_version(&self) -> u8 {
        self.b()[field::CLASS_VERSION]
    }
    /// The R bit: set on responses (GetResp is Get with R set).
    pub fn response(&self) -> bool {
        self.b()[field::METHOD] & field::R_BIT != 0
    }
    /// The Method field (7 bits, without the R bit).
    pub fn method(&self) -> u8 {
        self.b()[field::METHOD] & field::METHOD_MASK
    }
    /// The Status field.
    pub fn status(&self) -> u16 {
        u16::from_be_bytes(self.array(field::STATUS))
    }
    /// The ClassSpecific field.
    pub fn class_specific(&self) -> u16 {
        u16::from_be_bytes(self.array(field::CLASS_SPECIFIC))
    }
    /// The TransactionID field.
    pub fn transaction_id(&self) -> u64 {
        u64::from_be_bytes(self.array(field::TRANSACTION_ID))
    }
    /// The AttributeID field.
    pub fn attribute_id(&self) -> u16 {
        u16::from_be_bytes(self.array(field::ATTRIBUTE_ID))
    }
    /// The AttributeModifier field.
    pub fn attribute_modifier(&self) -> u32 {
        u32::from_be_bytes(self.array(field::ATTRIBUTE_MODIFIER))
    }
    /// The 232 bytes of class data after the header.
    pub fn data(&self) -> &[u8] {
        &self.b()[field::DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the BaseVersion field.
    pub fn set_base_version(&mut self, v: u8) {
        self.b_mut()[field::BASE_VERSION] = v;
    }
    /// Sets the MgmtClass field.
    pub fn set_mgmt_class(&mut self, v: u8) {
        self.b_mut()[field::MGMT_CLASS] = v;
    }
    /// Sets the ClassVersion field.
    pub fn set_class_version(&mut self, v: u8) {
        self.b_mut()[field::CLASS_VERSION] = v;
    }
    /// Sets the R bit and the Method field (low 7 bits of `method`).
    pub fn set_method(&mut self, response: bool, method: u8) {
        self.b_mut()[field::METHOD] =
            if response { field::R_BIT } else { 0 } | (method & field::METHOD_MASK);
    }
    /// Sets the Status field.
    pub fn set_status(&mut self, v: u16) {
        self.b_mut()[field::STATUS].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the ClassSpecific field.
    pub fn set_class_specific(&mut self, v: u16) {
        self.b_mut()[field::CLASS_SPECIFIC].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the TransactionID field.
    pub fn set_transaction_id(&mut self, v: u64) {
        self.b_mut()[field::TRANSACTION_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the AttributeID field and clears the reserved 16 bits after it.
    pub fn set_attribute_id(&mut self, v: u16) {
        self.b_mut()[field::ATTRIBUTE_ID].copy_from_slice(&v.to_be_bytes());
        self.b_mut()[field::RESERVED].fill(0);
    }
    /// Sets the AttributeModifier field.
    pub fn set_attribute_modifier(&mut self, v: u32) {
        self.b_mut()[field::ATTRIBUTE_MODIFIER].copy_from_slice(&v.to_be_bytes());
    }
    /// The 232 bytes of class data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::DATA]
    }
}

/// A parsed MAD common header. The class data is not copied: read it with [`Packet::data`]
/// and hand it to the class's parser (for the CM, [`crate::cm::CmMessage::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MadRepr {
    /// Management class ([`MGMT_CLASS_CM`] for the CM).
    pub mgmt_class: u8,
    /// Version of the management class ([`CM_CLASS_VERSION`] for the CM).
    pub class_version: u8,
    /// The R bit: this MAD is a response.
    pub response: bool,
    /// The method, 7 bits (`METHOD_*`).
    pub method: u8,
    /// Status (`STATUS_*`; 0 on requests).
    pub status: u16,
    /// The class-specific 16 bits (zero for the CM).
    pub class_specific: u16,
    /// Transaction ID, chosen by the requester and echoed in responses.
    pub transaction_id: u64,
    /// Attribute ID (`ATTR_*`): for the CM, which message the data holds.
    pub attribute_id: u16,
    /// Attribute modifier.
    pub attribute_modifier: u32,
}

impl MadRepr {
    /// Parses the common header of a 256-byte MAD; fails on a short buffer and on a
    /// BaseVersion other than [`BASE_VERSION`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<MadRepr> {
        packet.check_len()?;
        if packet.base_version() != BASE_VERSION {
            return Err(Error::BadVersion {
                what: "MAD BaseVersion",
                version: packet.base_version(),
            });
        }
        Ok(MadRepr {
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            response: packet.response(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            transaction_id: packet.transaction_id(),
            attribute_id: packet.attribute_id(),
            attribute_modifier: packet.attribute_modifier(),
        })
    }

    /// Checks what a CM must check before looking at the data: class [`MGMT_CLASS_CM`],
    /// ClassVersion [`CM_CLASS_VERSION`] (the only one Linux ib_cm registers for), and method
    /// Send, R bit clear, for every attribute but ClassPortInfo (Linux ib_mad drops the rest).
    pub fn check_cm(&self) -> Result<()> {
        if self.mgmt_class != MGMT_CLASS_CM {
            return Err(Error::BadField {
                what: "MAD MgmtClass (expected CM)",
                value: self.mgmt_class.into(),
            });
        }
        if self.class_version != CM_CLASS_VERSION {
            return Err(Error::BadVersion {
                what: "CM ClassVersion",
                version: self.class_version,
            });
        }
        if self.attribute_id != ATTR_CLASS_PORT_INFO
            && (self.response || self.method != METHOD_SEND)
        {
            return Err(Error::BadField {
                what: "CM method (expected Send)",
                value: (u64::from(self.response) << 7) | u64::from(self.method),
            });
        }
        Ok(())
    }

    /// The length of a MAD (always 256): header plus class data.
    pub const fn buffer_len(&self) -> usize {
        MAD_LEN
    }

    /// Writes the 24-byte header (BaseVersion 1, reserved bits zero); the class data is left
    /// to the caller ([`Packet::data_mut`]).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_base_version(BASE_VERSION);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method(self.response, self.method);
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_transaction_id(self.transaction_id);
        packet.set_attribute_id(self.attribute_id);
        packet.set_attribute_modifier(self.attribute_modifier);
    }
}

/// The name of a CM attribute ID, or `None` for other values.
pub fn cm_attribute_name(attribute_id: u16) -> Option<&'static str> {
    Some(match attribute_id {
        ATTR_CLASS_PORT_INFO => "ClassPortInfo",
        ATTR_CM_REQ => "REQ",
        ATTR_CM_MRA => "MRA",
        ATTR_CM_REJ => "REJ",
        ATTR_CM_REP => "REP",
        ATTR_CM_RTU => "RTU",
        ATTR_CM_DREQ => "DREQ",
        ATTR_CM_DREP => "DREP",
        ATTR_CM_SIDR_REQ => "SIDR_REQ",
        ATTR_CM_SIDR_REP => "SIDR_REP",
        ATTR_CM_LAP => "LAP",
        ATTR_CM_APR => "APR",
        _ => return None,
    })
}

impl fmt::Display for MadRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let method = match self.method {
            METHOD_GET => "Get",
            METHOD_SET => "Set",
            METHOD_SEND => "Send",
            METHOD_TRAP => "Trap",
            METHOD_REPORT => "Report",
            METHOD_TRAP_REPRESS => "TrapRepress",
            _ => "method",
        };
        write!(
            f,
            "MAD class={:#04x} v{} {}{}",
            self.mgmt_class,
            self.class_version,
            method,
            if self.response { "Resp" } else { "" }
        )?;
        if method == "method" {
            write!(f, "({:#04x})", self.method)?;
        }
        write!(f, " tid={:#x} attr=", self.transaction_id)?;
        match cm_attribute_name(self.attribute_id) {
            Some(name) if self.mgmt_class == MGMT_CLASS_CM => f.write_str(name)?,
            _ => write!(f, "{:#06x}", self.attribute_id)?,
        }
        if self.attribute_modifier != 0 {
            write!(f, " mod={:#x}", self.attribute_modifier)?;
        }
        if self.status != 0 {
            write!(f, " status={:#06x}", self.status)?;
        }
        Ok(())
    }
}

/// The MADs of the ground-truth capture, for the tests of this module and of [`crate::cm`].
#[cfg(test)]
pub(crate) mod capture {
    use super::MAD_LEN;

    /// Offset of the MAD in a RoCEv2 UD frame over IPv4: Ethernet 14 + IPv4 20 + UDP 8 +
    /// BTH 12 + DETH 8.
    const MAD_OFFSET: usize = 62;

    /// Every MAD of `tests/data/rping_rdmacm.pcap` (kernel rxe, rping over rdma_cm), with its
    /// 1-based frame number: UD SEND_ONLY frames to QP1 over IPv4. A tiny classic-pcap reader.
    pub(crate) fn rping_mads() -> Vec<(usize, [u8; MAD_LEN])> {
        let file = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/rping_rdmacm.pcap"
        ))
        .expect("read the capture");
        let little = match file[..4] {
            [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
            [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
            _ => panic!("not a classic pcap file"),
        };
        let u32_at = |at: usize| {
            let b = [file[at], file[at + 1], file[at + 2], file[at + 3]];
            if little {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            }
        };
        assert_eq!(u32_at(20), 1, "link type Ethernet");
        let mut mads = Vec::new();
        let (mut at, mut number) = (24, 0);
        while at + 16 <= file.len() {
            let incl = u32_at(at + 8) as usize;
            let frame = &file[at + 16..at + 16 + incl];
            at += 16 + incl;
            number += 1;
            let is_mad = frame.len() >= MAD_OFFSET + MAD_LEN
                && frame[12..14] == [0x08, 0x00] // IPv4
                && frame[14] == 0x45 // no IP options
                && frame[23] == 17 // UDP
                && frame[36..38] == crate::ROCE_V2_UDP_PORT.to_be_bytes()
                && frame[42] == 0x64 // UD SEND_ONLY
                && frame[47..50] == [0, 0, 1]; // DestQP 1
            if is_mad {
                let mut mad = [0u8; MAD_LEN];
                mad.copy_from_slice(&frame[MAD_OFFSET..MAD_OFFSET + MAD_LEN]);
                mads.push((number, mad));
            }
        }
        mads
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // Frame 65 of tests/data/rping_rdmacm.pcap, the DREP: tshark shows BaseVersion 1,
    // MgmtClass 0x07, ClassVersion 2, Method Send() (0x03), Status 0, ClassSpecific 0,
    // TransactionID 0x000000029ba47035, AttributeID 0x0016, AttributeModifier 0; the data
    // holds the two communication IDs, then zeros.
    static PACKET_BYTES: [u8; MAD_LEN] = {
        let mut b = [0u8; MAD_LEN];
        let head: [u8; 32] = [
            0x01, 0x07, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x9b, 0xa4,
            0x70, 0x35, 0x00, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb9, 0xa6, 0xe9, 0x21,
            0x35, 0x70, 0xa4, 0x9b,
        ];
        let mut i = 0;
        while i < head.len() {
            b[i] = head[i];
            i += 1;
        }
        b
    };

    fn repr() -> MadRepr {
        MadRepr {
            mgmt_class: MGMT_CLASS_CM,
            class_version: 2,
            response: false,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            transaction_id: 0x0000_0002_9ba4_7035,
            attribute_id: ATTR_CM_DREP,
            attribute_modifier: 0,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), 0x07);
        assert_eq!(p.class_version(), 2);
        assert!(!p.response());
        assert_eq!(p.method(), 0x03);
        assert_eq!(p.status(), 0);
        assert_eq!(p.class_specific(), 0);
        assert_eq!(p.transaction_id(), 0x0000_0002_9ba4_7035);
        assert_eq!(p.attribute_id(), 0x0016);
        assert_eq!(p.attribute_modifier(), 0);
        assert_eq!(p.data().len(), DATA_LEN);
        assert_eq!(
            p.data()[..8],
            [0xb9, 0xa6, 0xe9, 0x21, 0x35, 0x70, 0xa4, 0x9b]
        );
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; MAD_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_base_version(1);
        p.set_mgmt_class(0x07);
        p.set_class_version(2);
        p.set_method(false, 0x03);
        p.set_status(0);
        p.set_class_specific(0);
        p.set_transaction_id(0x0000_0002_9ba4_7035);
        p.set_attribute_id(0x0016);
        p.set_attribute_modifier(0);
        p.data_mut().copy_from_slice(&PACKET_BYTES[HEADER_LEN..]);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        let r = MadRepr::parse(&p).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.check_cm(), Ok(()));
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; MAD_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        repr().emit(&mut p);
        p.data_mut().copy_from_slice(&PACKET_BYTES[HEADER_LEN..]);
        assert_eq!(bytes, PACKET_BYTES);
        assert_eq!(repr().buffer_len(), 256);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..255]).unwrap_err(),
            Error::Truncated {
                what: "MAD",
                need: 256,
                have: 255
            }
        );
        assert!(MadRepr::parse(&Packet::new_unchecked(&PACKET_BYTES[..24])).is_err());
    }

    #[test]
    fn test_bad_version_and_cm_checks() {
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x80; // an OPA MAD
        assert_eq!(
            MadRepr::parse(&Packet::new_unchecked(&bytes[..])),
            Err(Error::BadVersion {
                what: "MAD BaseVersion",
                version: 0x80
            })
        );
        let cm = repr();
        assert!(matches!(
            MadRepr {
                mgmt_class: 0x03,
                ..cm
            }
            .check_cm(),
            Err(Error::BadField { value: 0x03, .. })
        ));
        assert!(matches!(
            MadRepr {
                class_version: 1,
                ..cm
            }
            .check_cm(),
            Err(Error::BadVersion { version: 1, .. })
        ));
        assert!(matches!(
            MadRepr {
                method: METHOD_GET,
                ..cm
            }
            .check_cm(),
            Err(Error::BadField { value: 0x01, .. })
        ));
        let get_cpi = MadRepr {
            method: METHOD_GET,
            attribute_id: ATTR_CLASS_PORT_INFO,
            ..cm
        };
        assert_eq!(get_cpi.check_cm(), Ok(()));
    }

    #[test]
    fn test_response_bit() {
        let mut bytes = PACKET_BYTES;
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_method(true, METHOD_GET);
        assert_eq!(p.b()[field::METHOD], 0x81); // GetResp
        let r = MadRepr::parse(&Packet::new_unchecked(&bytes[..])).unwrap();
        assert!(r.response);
        assert_eq!(r.method, METHOD_GET);
    }

    #[test]
    fn test_display() {
        assert_eq!(
            repr().to_string(),
            "MAD class=0x07 v2 Send tid=0x29ba47035 attr=DREP"
        );
    }

    /// Every MAD of the capture: the header fields tshark shows, and header parse→emit gives
    /// back the 24 bytes.
    #[test]
    fn test_capture_headers() {
        let mads = capture::rping_mads();
        let attrs: Vec<(usize, u16)> = mads
            .iter()
            .map(|(n, m)| (*n, Packet::new_unchecked(&m[..]).attribute_id()))
            .collect();
        assert_eq!(
            attrs,
            [
                (1, ATTR_CM_REQ),
                (2, ATTR_CM_REP),
                (3, ATTR_CM_RTU),
                (64, ATTR_CM_DREQ),
                (65, ATTR_CM_DREP)
            ]
        );
        for (_, mad) in &mads {
            let r = MadRepr::parse(&Packet::new_checked(&mad[..]).unwrap()).unwrap();
            assert_eq!(
                r,
                MadRepr {
                    attribute_id: r.attribute_id,
                    ..repr()
                }
            );
            r.check_cm().unwrap();
            let mut out = *mad;
            out[..HEADER_LEN].fill(0xa5);
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            assert_eq!(out, *mad);
        }
        assert_eq!(mads[4].1, PACKET_BYTES);
    }
}
