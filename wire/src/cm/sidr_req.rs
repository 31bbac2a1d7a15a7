//! ServiceIDResolutionRequest, SIDR_REQ (IBTA 12.11.1, table "SIDR_REQ message contents"):
//! which UD QP and Q_Key serve this Service ID? The answer is a [`super::sidr_rep`].
//!
//! ```text
//!  byte 0-3    | Request ID                                |
//!  byte 4-5    | Partition Key      | reserved (16)        |
//!  byte 8-15   | ServiceID                                 |
//!  byte 16-231 | Private Data (216)                        |
//! ```

use super::layout::message;
use super::MSG_LEN;

/// Bytes of private data in a SIDR_REQ.
pub const PRIVATE_DATA_LEN: usize = 216;

message! {
    "CM SIDR_REQ", MSG_LEN;
    /// A parsed SIDR_REQ: every field of the message.
    pub struct SidrReqRepr {
        /// Request ID: the requester's handle, echoed by the SIDR_REP.
        value request_id / set_request_id: u32 = 0..4,
        /// Partition Key of the requester.
        value partition_key / set_partition_key: u16 = 4..6,
        /// ServiceID to resolve.
        value service_id / set_service_id: u64 = 8..16,
        /// Private Data (216 bytes; rdma_cm puts its IP header here).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 16..232,
    }
    display(r) "request_id={:#010x} service_id={:#x}", r.request_id, r.service_id;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit: bytes 6-7.
    pub fn clear_reserved(&mut self) {
        self.b_mut()[6..8].fill(0);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;

    // Made up (the capture has no SIDR): udaddy's request for UDP port 7174, Request ID
    // 0x00400007, P_Key 0xffff, private data starting 0, 0x40 (rdma_cm header, IPv4).
    static PACKET_BYTES: [u8; MSG_LEN] = zero_padded(&[
        0x00, 0x40, 0x00, 0x07, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x11, 0x1c,
        0x06, 0x00, 0x40,
    ]);

    fn repr() -> SidrReqRepr {
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data[1] = 0x40;
        SidrReqRepr {
            request_id: 0x0040_0007,
            partition_key: 0xffff,
            service_id: 0x0111_1c06,
            private_data,
        }
    }

    crate::cm::layout::message_tests!(SidrReqRepr, "CM SIDR_REQ", 232);

    #[test]
    fn test_display() {
        assert_eq!(
            repr().to_string(),
            "CM SIDR_REQ request_id=0x00400007 service_id=0x1111c06"
        );
    }
}
