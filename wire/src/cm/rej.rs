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

use super::layout::{self, message, Bits};
use super::MSG_LEN;

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

message! {
    "CM REJ", MSG_LEN;
    /// A parsed REJ: every field of the message.
    pub struct RejRepr {
        /// Local Communication ID: the sender's handle (0 if it never had one).
        value local_comm_id / set_local_comm_id: u32 = 0..4,
        /// Remote Communication ID: the receiver's handle.
        value remote_comm_id / set_remote_comm_id: u32 = 4..8,
        /// Message REJected (2 bits, `MSG_REJECTED_*`).
        value message_rejected / set_message_rejected: u8 = Bits::new(8, 6, 2),
        /// Reject Info Length: meaningful bytes of `ari` (7 bits).
        value reject_info_length / set_reject_info_length: u8 = Bits::new(9, 1, 7),
        /// Reason (`REASON_*`).
        value reason / set_reason: u16 = 10..12,
        /// Additional Reject Information, all 72 bytes as sent.
        bytes ari / ari_mut: [u8; ARI_LEN] = 12..84,
        /// Private Data (148 bytes).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 84..232,
    }
    display(r) "local_comm_id={:#010x} remote_comm_id={:#010x} rejected={} reason={}",
        r.local_comm_id, r.remote_comm_id, r.message_rejected_name(), r.reason;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit: the low 6 bits of byte 8 and the lowest of byte 9.
    pub fn clear_reserved(&mut self) {
        layout::clear(self.b_mut(), &[], &[Bits::new(8, 0, 6), Bits::new(9, 0, 1)]);
    }
}

impl RejRepr {
    /// The meaningful part of the ARI: its first `reject_info_length` bytes (at most 72).
    pub fn ari_info(&self) -> &[u8] {
        &self.ari[..usize::from(self.reject_info_length).min(ARI_LEN)]
    }

    /// Which message Message REJected names, for `Display`.
    fn message_rejected_name(&self) -> &'static str {
        match self.message_rejected {
            MSG_REJECTED_REQ => "REQ",
            MSG_REJECTED_REP => "REP",
            MSG_REJECTED_OTHER => "other",
            _ => "reserved",
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;

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

    crate::cm::layout::message_tests!(RejRepr, "CM REJ", 232);

    /// The first `reject_info_length` bytes of the parsed ARI: the GID.
    #[test]
    fn test_ari_info() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        let r = RejRepr::parse(&p).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.ari_info(), &GID[..]);
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
