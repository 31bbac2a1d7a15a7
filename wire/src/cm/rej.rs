//! ConnectReject, REJ (IBTA 12.6.7, table "REJ message contents", and its table of rejection
//! reasons): either side refuses a REQ or REP (or gives up waiting for one).
//!
//! ```text
//!  byte 0-3    | Local Communication ID                                  |
//!  byte 4-7    | Remote Communication ID                                 |
//!  byte 8      | Message REJected (2) | reserved (6)                     |
//!  byte 9      | Reject Info Length (7) | reserved (1)                   |
//!  byte 10-11  | Reason                                                  |
//!  byte 12-83  | Additional Reject Information, ARI (72)                 |
//!  byte 84-231 | Private Data (148)                                      |
//! ```

use core::fmt;

use super::{get_array, get_u16, get_u32, MSG_LEN};
use crate::{fixed_view, Result};

/// Bytes of Additional Reject Information.
pub const ARI_LEN: usize = 72;
/// Bytes of private data in a REJ.
pub const PRIVATE_DATA_LEN: usize = 148;

/// Message REJected: the REQ.
pub const MSG_REJECTED_REQ: u8 = 0;
/// Message REJected: the REP.
pub const MSG_REJECTED_REP: u8 = 1;
/// Message REJected: no message (a timeout, or a REJ of an unknown connection).
pub const MSG_REJECTED_OTHER: u8 = 2;

/// Reason: no QP available.
pub const REASON_NO_QP: u16 = 1;
/// Reason: no EE context available.
pub const REASON_NO_EEC: u16 = 2;
/// Reason: no resources available.
pub const REASON_NO_RESOURCES: u16 = 3;
/// Reason: timeout.
pub const REASON_TIMEOUT: u16 = 4;
/// Reason: unsupported request.
pub const REASON_UNSUPPORTED: u16 = 5;
/// Reason: invalid Communication ID.
pub const REASON_INVALID_COMM_ID: u16 = 6;
/// Reason: invalid communication instance.
pub const REASON_INVALID_COMM_INSTANCE: u16 = 7;
/// Reason: invalid ServiceID (no one listens on it).
pub const REASON_INVALID_SERVICE_ID: u16 = 8;
/// Reason: invalid Transport Service Type.
pub const REASON_INVALID_TRANSPORT_TYPE: u16 = 9;
/// Reason: stale connection.
pub const REASON_STALE_CONN: u16 = 10;
/// Reason: RDC does not exist.
pub const REASON_RDC_NOT_EXIST: u16 = 11;
/// Reason: primary remote port GID rejected (ARI: an acceptable GID).
pub const REASON_INVALID_GID: u16 = 12;
/// Reason: primary remote port LID rejected.
pub const REASON_INVALID_LID: u16 = 13;
/// Reason: primary SL rejected.
pub const REASON_INVALID_SL: u16 = 14;
/// Reason: primary traffic class rejected.
pub const REASON_INVALID_TRAFFIC_CLASS: u16 = 15;
/// Reason: primary hop limit rejected.
pub const REASON_INVALID_HOP_LIMIT: u16 = 16;
/// Reason: primary packet rate rejected.
pub const REASON_INVALID_PACKET_RATE: u16 = 17;
/// Reason: alternate remote port GID rejected.
pub const REASON_INVALID_ALT_GID: u16 = 18;
/// Reason: alternate remote port LID rejected.
pub const REASON_INVALID_ALT_LID: u16 = 19;
/// Reason: alternate SL rejected.
pub const REASON_INVALID_ALT_SL: u16 = 20;
/// Reason: alternate traffic class rejected.
pub const REASON_INVALID_ALT_TRAFFIC_CLASS: u16 = 21;
/// Reason: alternate hop limit rejected.
pub const REASON_INVALID_ALT_HOP_LIMIT: u16 = 22;
/// Reason: alternate packet rate rejected.
pub const REASON_INVALID_ALT_PACKET_RATE: u16 = 23;
/// Reason: port and CM redirection.
pub const REASON_PORT_CM_REDIRECT: u16 = 24;
/// Reason: port redirection.
pub const REASON_PORT_REDIRECT: u16 = 25;
/// Reason: invalid Path MTU.
pub const REASON_INVALID_MTU: u16 = 26;
/// Reason: insufficient responder resources.
pub const REASON_INSUFFICIENT_RESP_RESOURCES: u16 = 27;
/// Reason: consumer reject (rdma_reject; the private data says why).
pub const REASON_CONSUMER_DEFINED: u16 = 28;
/// Reason: invalid RNR Retry Count.
pub const REASON_INVALID_RNR_RETRY: u16 = 29;
/// Reason: duplicate Local Communication ID.
pub const REASON_DUPLICATE_LOCAL_COMM_ID: u16 = 30;
/// Reason: unsupported ClassVersion.
pub const REASON_INVALID_CLASS_VERSION: u16 = 31;
/// Reason: invalid primary flow label.
pub const REASON_INVALID_FLOW_LABEL: u16 = 32;
/// Reason: invalid alternate flow label.
pub const REASON_INVALID_ALT_FLOW_LABEL: u16 = 33;

mod field {
    use crate::cm::{Bits, Field};

    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const MESSAGE_REJECTED: Bits = Bits::new(8, 6, 2);
    pub const REJECT_INFO_LENGTH: Bits = Bits::new(9, 1, 7);
    pub const REASON: Field = 10..12;
    pub const ARI: Field = 12..84;
    pub const PRIVATE_DATA: Field = 84..232;

    pub const RESERVED_BITS: [Bits; 2] = [Bits::new(8, 0, 6), Bits::new(9, 0, 1)];
}

fixed_view!("CM REJ", MSG_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The Local Communication ID field.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The Remote Communication ID field.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.b(), field::REMOTE_COMM_ID)
    }
    /// The Message REJected field (2 bits, `MSG_REJECTED_*`).
    pub fn message_rejected(&self) -> u8 {
        field::MESSAGE_REJECTED.get(self.b())
    }
    /// The Reject Info Length field (7 bits): how many bytes of the ARI are meaningful.
    pub fn reject_info_length(&self) -> u8 {
        field::REJECT_INFO_LENGTH.get(self.b())
    }
    /// The Reason field (`REASON_*`).
    pub fn reason(&self) -> u16 {
        get_u16(self.b(), field::REASON)
    }
    /// The Additional Reject Information field (all 72 bytes).
    pub fn ari(&self) -> &[u8] {
        &self.b()[field::ARI]
    }
    /// The Private Data field (148 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Zeroes every reserved bit.
    pub fn clear_reserved(&mut self) {
        super::clear(self.b_mut(), &[], &field::RESERVED_BITS);
    }
    /// Sets the Local Communication ID field.
    pub fn set_local_comm_id(&mut self, v: u32) {
        self.b_mut()[field::LOCAL_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Remote Communication ID field.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        self.b_mut()[field::REMOTE_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Message REJected field (low 2 bits of `v`).
    pub fn set_message_rejected(&mut self, v: u8) {
        field::MESSAGE_REJECTED.set(self.b_mut(), v);
    }
    /// Sets the Reject Info Length field (low 7 bits of `v`).
    pub fn set_reject_info_length(&mut self, v: u8) {
        field::REJECT_INFO_LENGTH.set(self.b_mut(), v);
    }
    /// Sets the Reason field.
    pub fn set_reason(&mut self, v: u16) {
        self.b_mut()[field::REASON].copy_from_slice(&v.to_be_bytes());
    }
    /// The Additional Reject Information field, writable.
    pub fn ari_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::ARI]
    }
    /// The Private Data field, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::PRIVATE_DATA]
    }
}

/// A parsed REJ: every field of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RejRepr {
    /// Local Communication ID: the sender's handle (0 if it never had one).
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle.
    pub remote_comm_id: u32,
    /// Message REJected (2 bits, `MSG_REJECTED_*`).
    pub message_rejected: u8,
    /// Reject Info Length: meaningful bytes of `ari` (7 bits).
    pub reject_info_length: u8,
    /// Reason (`REASON_*`).
    pub reason: u16,
    /// Additional Reject Information, all 72 bytes as sent.
    pub ari: [u8; ARI_LEN],
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl RejRepr {
    /// Parses a REJ from the 232 bytes of MAD data.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<RejRepr> {
        packet.check_len()?;
        Ok(RejRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            message_rejected: packet.message_rejected(),
            reject_info_length: packet.reject_info_length(),
            reason: packet.reason(),
            ari: get_array(packet.b(), field::ARI),
            private_data: get_array(packet.b(), field::PRIVATE_DATA),
        })
    }

    /// The meaningful part of the ARI: its first `reject_info_length` bytes (at most 72).
    pub fn ari_info(&self) -> &[u8] {
        &self.ari[..usize::from(self.reject_info_length).min(ARI_LEN)]
    }

    /// The message length (always 232).
    pub const fn buffer_len(&self) -> usize {
        MSG_LEN
    }

    /// Writes all 232 bytes, reserved bits as zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.clear_reserved();
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_message_rejected(self.message_rejected);
        packet.set_reject_info_length(self.reject_info_length);
        packet.set_reason(self.reason);
        packet.ari_mut().copy_from_slice(&self.ari);
        packet
            .private_data_mut()
            .copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for RejRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self.message_rejected {
            MSG_REJECTED_REQ => "REQ",
            MSG_REJECTED_REP => "REP",
            MSG_REJECTED_OTHER => "other",
            _ => "reserved",
        };
        write!(
            f,
            "CM REJ local_comm_id={:#010x} remote_comm_id={:#010x} rejected={} reason={}",
            self.local_comm_id, self.remote_comm_id, msg, self.reason
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;
    use crate::Error;

    // The capture has no REJ, so this one is made up: the passive side of the capture
    // rejecting its REQ because of the primary remote GID (reason 12), giving the acceptable
    // GID ::ffff:10.99.0.2 as 16 bytes of ARI, with private data 0, 1, 2, ..., 147.
    static PACKET_BYTES: [u8; MSG_LEN] = {
        let mut b = zero_padded(&[
            0xb9, 0xa6, 0xe9, 0x21, 0x35, 0x70, 0xa4, 0x9b, 0x00, 0x20, 0x00, 0x0c, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x0a, 0x63, 0x00, 0x02,
        ]);
        let mut i = 0;
        while i < PRIVATE_DATA_LEN {
            b[84 + i] = i as u8;
            i += 1;
        }
        b
    };

    const GID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, 2];

    fn ari() -> [u8; ARI_LEN] {
        let mut ari = [0u8; ARI_LEN];
        ari[..16].copy_from_slice(&GID);
        ari
    }

    fn private_data() -> [u8; PRIVATE_DATA_LEN] {
        core::array::from_fn(|i| i as u8)
    }

    fn repr() -> RejRepr {
        RejRepr {
            local_comm_id: 0xb9a6_e921,
            remote_comm_id: 0x3570_a49b,
            message_rejected: MSG_REJECTED_REQ,
            reject_info_length: 16,
            reason: REASON_INVALID_GID,
            ari: ari(),
            private_data: private_data(),
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.local_comm_id(), 0xb9a6e921);
        assert_eq!(p.remote_comm_id(), 0x3570a49b);
        assert_eq!(p.message_rejected(), MSG_REJECTED_REQ);
        assert_eq!(p.reject_info_length(), 16);
        assert_eq!(p.reason(), 12);
        assert_eq!(p.ari(), &ari()[..]);
        assert_eq!(p.private_data(), &private_data()[..]);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        p.set_local_comm_id(0xb9a6e921);
        p.set_remote_comm_id(0x3570a49b);
        p.set_message_rejected(MSG_REJECTED_REQ);
        p.set_reject_info_length(16);
        p.set_reason(REASON_INVALID_GID);
        p.ari_mut().copy_from_slice(&ari());
        p.private_data_mut().copy_from_slice(&private_data());
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        let r = RejRepr::parse(&p).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.ari_info(), &GID[..]);
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; MSG_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..231]).unwrap_err(),
            Error::Truncated {
                what: "CM REJ",
                need: 232,
                have: 231
            }
        );
    }

    #[test]
    fn test_bit_fields() {
        let mut bytes = [0xffu8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        assert_eq!(p.message_rejected(), 3);
        assert_eq!(p.reject_info_length(), 0x7f);
        p.set_message_rejected(MSG_REJECTED_OTHER);
        p.set_reject_info_length(72);
        assert_eq!(bytes[8..10], [0x80, 0x90]);
        assert_eq!(
            repr().to_string(),
            "CM REJ local_comm_id=0xb9a6e921 remote_comm_id=0x3570a49b rejected=REQ reason=12"
        );
    }
}
