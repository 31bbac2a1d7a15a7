//! ServiceIDResolutionResponse, SIDR_REP (IBTA 12.11.2, table "SIDR_REP message contents"):
//! the UD QP and Q_Key that serve the Service ID of a [`super::sidr_req`], or why not.
//!
//! ```text
//!  byte 0-3    | Request ID                                          |
//!  byte 4      | Status      | byte 5: Additional Information Length |
//!  byte 8-11   | QPN (24)                  | reserved (8)            |
//!  byte 12-19  | ServiceID                                           |
//!  byte 20-23  | Q_Key                                               |
//!  byte 24-95  | Additional Information (72)                         |
//!  byte 96-231 | Private Data (136)                                  |
//! ```

use super::layout::{self, message};
use super::MSG_LEN;

/// Bytes of Additional Information.
pub const INFO_LEN: usize = 72;
/// Bytes of private data in a SIDR_REP.
pub const PRIVATE_DATA_LEN: usize = 136;

/// Status: the QPN and Q_Key are valid.
pub const STATUS_OK: u8 = 0;
/// Status: the Service ID is not supported (nobody listens on it).
pub const STATUS_UNSUPPORTED: u8 = 1;
/// Status: the service provider rejected the request (rdma_reject).
pub const STATUS_REJECTED: u8 = 2;
/// Status: no QP available.
pub const STATUS_NO_QP: u8 = 3;
/// Status: redirect (Additional Information holds ClassPortInfo).
pub const STATUS_REDIRECT: u8 = 4;
/// Status: unsupported ClassVersion.
pub const STATUS_BAD_CLASS_VERSION: u8 = 5;

message! {
    "CM SIDR_REP", MSG_LEN;
    /// A parsed SIDR_REP: every field of the message.
    pub struct SidrRepRepr {
        /// Request ID of the SIDR_REQ answered.
        value request_id / set_request_id: u32 = 0..4,
        /// Status (`STATUS_*`).
        value status / set_status: u8 = 4,
        /// Additional Information Length: meaningful bytes of `info`.
        value info_length / set_info_length: u8 = 5,
        /// QPN of the UD QP serving the Service ID (24 bits).
        value qpn / set_qpn: u32 = 8..11,
        /// ServiceID resolved.
        value service_id / set_service_id: u64 = 12..20,
        /// Q_Key to send with.
        value q_key / set_q_key: u32 = 20..24,
        /// Additional Information, all 72 bytes as sent.
        bytes info / info_mut: [u8; INFO_LEN] = 24..96,
        /// Private Data (136 bytes).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 96..232,
    }
    display(r) "request_id={:#010x} status={} qpn={:#x} q_key={:#x}",
        r.request_id, r.status, r.qpn, r.q_key;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit: bytes 6-7 and 11.
    pub fn clear_reserved(&mut self) {
        layout::clear(self.b_mut(), &[6..8, 11..12], &[]);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;

    // Made up (the capture has no SIDR): the answer to the SIDR_REQ of `sidr_req`'s test, UD
    // QP 0x11, rdma_cm's Q_Key for UDP port space 0x01234567, private data "ok".
    static PACKET_BYTES: [u8; MSG_LEN] = {
        let mut b = zero_padded(&[
            0x00, 0x40, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x01, 0x11, 0x1c, 0x06, 0x01, 0x23, 0x45, 0x67,
        ]);
        b[96] = b'o';
        b[97] = b'k';
        b
    };

    fn repr() -> SidrRepRepr {
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data[..2].copy_from_slice(b"ok");
        SidrRepRepr {
            request_id: 0x0040_0007,
            status: STATUS_OK,
            info_length: 0,
            qpn: 0x11,
            service_id: 0x0111_1c06,
            q_key: 0x0123_4567,
            info: [0; INFO_LEN],
            private_data,
        }
    }

    crate::cm::layout::message_tests!(SidrRepRepr, "CM SIDR_REP", 232);

    #[test]
    fn test_display() {
        assert_eq!(
            repr().to_string(),
            "CM SIDR_REP request_id=0x00400007 status=0 qpn=0x11 q_key=0x1234567"
        );
    }
}
