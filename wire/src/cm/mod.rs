//! Communication Manager messages (IBTA chapter 12, 12.6 "Communication management
//! messages"), carried in the 232 bytes of class data of a MAD of class
//! [`MGMT_CLASS_CM`]; the MAD's AttributeID says which message.
//!
//! | AttributeID | message | IBTA    | module   | private data |
//! |-------------|---------|---------|----------|--------------|
//! | 0x0010      | REQ     | 12.6.5  | [`req`]  | 92 bytes     |
//! | 0x0011      | MRA     | 12.6.6  | [`mra`]  | 222 bytes    |
//! | 0x0012      | REJ     | 12.6.7  | [`rej`]  | 148 bytes    |
//! | 0x0013      | REP     | 12.6.8  | [`rep`]  | 196 bytes    |
//! | 0x0014      | RTU     | 12.6.9  | [`rtu`]  | 224 bytes    |
//! | 0x0015      | DREQ    | 12.6.10 | [`dreq`] | 220 bytes    |
//! | 0x0016      | DREP    | 12.6.11 | [`drep`] | 224 bytes    |
//! | 0x0017      | SIDR_REQ | 12.11.1 | [`sidr_req`] | 216 bytes |
//! | 0x0018      | SIDR_REP | 12.11.2 | [`sidr_rep`] | 136 bytes |
//!
//! Each module has a zero-copy `Packet<T>` view over the 232 bytes and a `Repr` holding every
//! field, private data included, so that parse then emit gives back the 232 bytes; reserved
//! bits are emitted as zero (and each view's `clear_reserved` zeroes them). [`CmMessage`] picks
//! the message by attribute ID. LAP and APR (alternate paths, which RoCE has no use for) are
//! not implemented, but [`addressee()`] reads who any CM MAD is for.
//!
//! Each module writes its message as the IBTA field table, in order; the private `layout`
//! module turns such a table into the view and the `Repr` (and says how bits are numbered).

use core::fmt;

use crate::mad::{
    self, MadRepr, ATTR_CM_DREP, ATTR_CM_DREQ, ATTR_CM_MRA, ATTR_CM_REJ, ATTR_CM_REP, ATTR_CM_REQ,
    ATTR_CM_RTU, ATTR_CM_SIDR_REP, ATTR_CM_SIDR_REQ, CM_CLASS_VERSION, DATA_LEN, MAD_LEN,
    METHOD_SEND, MGMT_CLASS_CM,
};
use crate::{Error, Result};

pub mod addressee;
mod comm_ids;
pub mod drep;
pub mod dreq;
pub mod ip_service;
mod layout;
pub mod mra;
pub mod path;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;
pub mod sidr_rep;
pub mod sidr_req;

pub use addressee::{addressee, Addressee};
pub use drep::DrepRepr;
pub use dreq::DreqRepr;
pub use ip_service::{IpHeader, PortSpace};
pub use mra::MraRepr;
pub use path::PathRepr;
pub use rej::RejRepr;
pub use rep::RepRepr;
pub use req::ReqRepr;
pub use rtu::RtuRepr;
pub use sidr_rep::SidrRepRepr;
pub use sidr_req::SidrReqRepr;

/// Length of every CM message: the MAD class data.
pub const MSG_LEN: usize = DATA_LEN;

/// A GID: 16 bytes; on RoCEv2 an IPv6 address or an IPv4-mapped IPv4 address.
pub type Gid = [u8; 16];

/// Transport Service Type of a REQ: Reliable Connection.
pub const TRANSPORT_RC: u8 = 0;
/// Transport Service Type of a REQ: Unreliable Connection.
pub const TRANSPORT_UC: u8 = 1;
/// Transport Service Type of a REQ: Reliable Datagram.
pub const TRANSPORT_RD: u8 = 2;

/// A parsed CM message of one of the kinds this crate implements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmMessage {
    /// ConnectRequest.
    Req(ReqRepr),
    /// MessageReceiptAcknowledgement.
    Mra(MraRepr),
    /// ConnectReply.
    Rep(RepRepr),
    /// ReadyToUse.
    Rtu(RtuRepr),
    /// ConnectReject.
    Rej(RejRepr),
    /// DisconnectRequest.
    Dreq(DreqRepr),
    /// DisconnectReply.
    Drep(DrepRepr),
    /// ServiceIDResolutionRequest.
    SidrReq(SidrReqRepr),
    /// ServiceIDResolutionResponse.
    SidrRep(SidrRepRepr),
}

impl CmMessage {
    /// Parses the 232-byte MAD data of a CM MAD with the given AttributeID. Fails with
    /// [`Error::Truncated`] on short data and [`Error::BadField`] for an attribute that is
    /// unknown or not implemented here (ClassPortInfo, LAP, APR).
    pub fn parse(attribute_id: u16, data: &[u8]) -> Result<CmMessage> {
        Ok(match attribute_id {
            ATTR_CM_REQ => CmMessage::Req(ReqRepr::parse(&req::Packet::new_checked(data)?)?),
            ATTR_CM_REP => CmMessage::Rep(RepRepr::parse(&rep::Packet::new_checked(data)?)?),
            ATTR_CM_RTU => CmMessage::Rtu(RtuRepr::parse(&rtu::Packet::new_checked(data)?)?),
            ATTR_CM_REJ => CmMessage::Rej(RejRepr::parse(&rej::Packet::new_checked(data)?)?),
            ATTR_CM_DREQ => CmMessage::Dreq(DreqRepr::parse(&dreq::Packet::new_checked(data)?)?),
            ATTR_CM_DREP => CmMessage::Drep(DrepRepr::parse(&drep::Packet::new_checked(data)?)?),
            ATTR_CM_MRA => CmMessage::Mra(MraRepr::parse(&mra::Packet::new_checked(data)?)?),
            ATTR_CM_SIDR_REQ => {
                CmMessage::SidrReq(SidrReqRepr::parse(&sidr_req::Packet::new_checked(data)?)?)
            }
            ATTR_CM_SIDR_REP => {
                CmMessage::SidrRep(SidrRepRepr::parse(&sidr_rep::Packet::new_checked(data)?)?)
            }
            other => {
                return Err(Error::BadField {
                    what: "CM attribute ID",
                    value: other.into(),
                })
            }
        })
    }

    /// The AttributeID of the MAD that carries this message.
    pub fn attribute_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => ATTR_CM_REQ,
            CmMessage::Rep(_) => ATTR_CM_REP,
            CmMessage::Rtu(_) => ATTR_CM_RTU,
            CmMessage::Rej(_) => ATTR_CM_REJ,
            CmMessage::Dreq(_) => ATTR_CM_DREQ,
            CmMessage::Drep(_) => ATTR_CM_DREP,
            CmMessage::Mra(_) => ATTR_CM_MRA,
            CmMessage::SidrReq(_) => ATTR_CM_SIDR_REQ,
            CmMessage::SidrRep(_) => ATTR_CM_SIDR_REP,
        }
    }

    /// The length of the message: always the 232 bytes of MAD data.
    pub const fn buffer_len(&self) -> usize {
        MSG_LEN
    }

    /// Writes all 232 bytes of the message into `data` (the MAD data); fails with
    /// [`Error::BufferTooSmall`] if `data` is shorter. Bytes past the 232nd are not touched.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        if data.len() < MSG_LEN {
            return Err(Error::BufferTooSmall {
                need: MSG_LEN,
                have: data.len(),
            });
        }
        match self {
            CmMessage::Req(r) => r.emit(&mut req::Packet::new_unchecked(data)),
            CmMessage::Rep(r) => r.emit(&mut rep::Packet::new_unchecked(data)),
            CmMessage::Rtu(r) => r.emit(&mut rtu::Packet::new_unchecked(data)),
            CmMessage::Rej(r) => r.emit(&mut rej::Packet::new_unchecked(data)),
            CmMessage::Dreq(r) => r.emit(&mut dreq::Packet::new_unchecked(data)),
            CmMessage::Drep(r) => r.emit(&mut drep::Packet::new_unchecked(data)),
            CmMessage::Mra(r) => r.emit(&mut mra::Packet::new_unchecked(data)),
            CmMessage::SidrReq(r) => r.emit(&mut sidr_req::Packet::new_unchecked(data)),
            CmMessage::SidrRep(r) => r.emit(&mut sidr_rep::Packet::new_unchecked(data)),
        }
        Ok(())
    }

    /// The whole MAD a CM sends this message in: the common MAD header (IBTA 13.4.2) of
    /// class CM, class version 2, method Send (a CM message is never a response),
    /// Transaction ID `tid`, and the message as its data.
    pub fn to_mad(&self, tid: u64) -> [u8; MAD_LEN] {
        let mut bytes = [0u8; MAD_LEN];
        let mut p = mad::Packet::new_unchecked(&mut bytes[..]);
        MadRepr {
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            response: false,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            transaction_id: tid,
            attribute_id: self.attribute_id(),
            attribute_modifier: 0,
        }
        .emit(&mut p);
        // The MAD's data is exactly MSG_LEN bytes: emit cannot fail.
        let _ = self.emit(p.data_mut());
        bytes
    }
}

impl fmt::Display for CmMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmMessage::Req(r) => r.fmt(f),
            CmMessage::Rep(r) => r.fmt(f),
            CmMessage::Rtu(r) => r.fmt(f),
            CmMessage::Rej(r) => r.fmt(f),
            CmMessage::Dreq(r) => r.fmt(f),
            CmMessage::Drep(r) => r.fmt(f),
            CmMessage::Mra(r) => r.fmt(f),
            CmMessage::SidrReq(r) => r.fmt(f),
            CmMessage::SidrRep(r) => r.fmt(f),
        }
    }
}

#[cfg(test)]
mod test_util {
    use super::MSG_LEN;

    /// `prefix` followed by zeros up to a whole message: the capture's messages are mostly
    /// zero private data.
    pub(crate) const fn zero_padded(prefix: &[u8]) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        let mut i = 0;
        while i < prefix.len() {
            b[i] = prefix[i];
            i += 1;
        }
        b
    }

    /// The MAD data of frame `number` of the ground-truth capture.
    pub(crate) fn capture_data(number: usize) -> [u8; MSG_LEN] {
        let (_, mad) = crate::mad::capture::rping_mads()
            .into_iter()
            .find(|(n, _)| *n == number)
            .expect("frame in capture");
        mad[crate::mad::HEADER_LEN..].try_into().unwrap()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::mad::{self, MadRepr, ATTR_CM_APR, ATTR_CM_LAP};
    use proptest::prelude::*;

    /// Every MAD of the capture: parse the header and the CM message, emit both into a buffer
    /// pre-filled with 0xa5, and get back the 256 bytes; `to_mad` of the message gives them
    /// too.
    #[test]
    fn test_capture_roundtrip() {
        let mads = mad::capture::rping_mads();
        assert_eq!(mads.len(), 5);
        let mut seen = Vec::new();
        for (number, bytes) in &mads {
            let p = mad::Packet::new_checked(&bytes[..]).unwrap();
            let header = MadRepr::parse(&p).unwrap();
            header.check_cm().unwrap();
            let msg = CmMessage::parse(header.attribute_id, p.data()).unwrap();
            assert_eq!(msg.attribute_id(), header.attribute_id);
            let mut out = [0xa5u8; mad::MAD_LEN];
            let mut q = mad::Packet::new_unchecked(&mut out[..]);
            header.emit(&mut q);
            msg.emit(q.data_mut()).unwrap();
            assert_eq!(out, *bytes, "frame {number}: {msg}");
            // The kernel's MADs are exactly the ones a CM sends for the message.
            assert_eq!(msg.to_mad(header.transaction_id), *bytes, "frame {number}");
            seen.push(msg.to_string());
        }
        assert_eq!(
            seen,
            [
                "CM REQ local_comm_id=0x3570a49b service_id=0x1061c06 qpn=0x1c psn=611073",
                "CM REP local_comm_id=0xb9a6e921 remote_comm_id=0x3570a49b qpn=0x1e \
                 psn=9751546",
                "CM RTU local_comm_id=0x3570a49b remote_comm_id=0xb9a6e921",
                "CM DREQ local_comm_id=0x3570a49b remote_comm_id=0xb9a6e921 remote_qpn=0x1e",
                "CM DREP local_comm_id=0xb9a6e921 remote_comm_id=0x3570a49b",
            ]
        );
    }

    #[test]
    fn test_unsupported_attribute() {
        let data = [0u8; MSG_LEN];
        for attr in [mad::ATTR_CLASS_PORT_INFO, ATTR_CM_LAP, ATTR_CM_APR, 0x1234] {
            assert_eq!(
                CmMessage::parse(attr, &data),
                Err(Error::BadField {
                    what: "CM attribute ID",
                    value: attr.into()
                })
            );
        }
    }

    #[test]
    fn test_truncated_and_short_buffer() {
        let data = [0u8; MSG_LEN];
        assert_eq!(
            CmMessage::parse(ATTR_CM_RTU, &data[..MSG_LEN - 1]),
            Err(Error::Truncated {
                what: "CM RTU",
                need: MSG_LEN,
                have: MSG_LEN - 1
            })
        );
        let msg = CmMessage::parse(ATTR_CM_RTU, &data).unwrap();
        let mut out = [0u8; MSG_LEN - 1];
        assert_eq!(
            msg.emit(&mut out),
            Err(Error::BufferTooSmall {
                need: MSG_LEN,
                have: MSG_LEN - 1
            })
        );
    }

    /// `bytes` with every reserved bit of message `attr` cleared.
    fn cleared(attr: u16, mut bytes: [u8; MSG_LEN]) -> [u8; MSG_LEN] {
        let b = &mut bytes[..];
        match attr {
            ATTR_CM_REQ => req::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_REP => rep::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_RTU => rtu::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_REJ => rej::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_DREQ => dreq::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_DREP => drep::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_MRA => mra::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_SIDR_REQ => sidr_req::Packet::new_unchecked(b).clear_reserved(),
            ATTR_CM_SIDR_REP => sidr_rep::Packet::new_unchecked(b).clear_reserved(),
            _ => unreachable!(),
        }
        bytes
    }

    proptest! {
        /// Every non-reserved bit of every message survives parse→emit (so each `Repr` holds
        /// every field), and every reserved bit comes out zero.
        #[test]
        fn roundtrip_any_bytes(
            attr in prop::sample::select(vec![
                ATTR_CM_REQ, ATTR_CM_REP, ATTR_CM_RTU, ATTR_CM_REJ, ATTR_CM_DREQ, ATTR_CM_DREP,
                ATTR_CM_MRA, ATTR_CM_SIDR_REQ, ATTR_CM_SIDR_REP,
            ]),
            data in prop::collection::vec(any::<u8>(), MSG_LEN),
        ) {
            let bytes: [u8; MSG_LEN] = data.try_into().unwrap();
            let msg = CmMessage::parse(attr, &bytes).unwrap();
            let mut out = [0xa5u8; MSG_LEN];
            msg.emit(&mut out).unwrap();
            prop_assert_eq!(out, cleared(attr, bytes));
            prop_assert_eq!(CmMessage::parse(attr, &out).unwrap(), msg);
        }
    }
}
