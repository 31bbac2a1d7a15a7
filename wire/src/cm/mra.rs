//! MessageReceiptAcknowledgement, MRA (IBTA 12.6.6, table "MRA message contents"): "your
//! REQ, REP or LAP arrived, and my answer will take longer than you wait": the receiver
//! extends its timer by the Service Timeout given here instead of retrying.
//!
//! ```text
//!  byte 0-3    | Local Communication ID                    |
//!  byte 4-7    | Remote Communication ID                   |
//!  byte 8      | Message MRAed (2) | reserved (6)          |
//!  byte 9      | Service Timeout (5) | reserved (3)        |
//!  byte 10-231 | Private Data (222)                        |
//! ```

use super::layout::{self, message, Bits};
use super::MSG_LEN;

/// Bytes of private data in an MRA.
pub const PRIVATE_DATA_LEN: usize = 222;

/// Message MRAed: a REQ.
pub const MSG_MRAED_REQ: u8 = 0;
/// Message MRAed: a REP.
pub const MSG_MRAED_REP: u8 = 1;
/// Message MRAed: a LAP.
pub const MSG_MRAED_LAP: u8 = 2;

message! {
    "CM MRA", MSG_LEN;
    /// A parsed MRA: every field of the message.
    pub struct MraRepr {
        /// Local Communication ID: the sender's handle (0 if it has none yet).
        value local_comm_id / set_local_comm_id: u32 = 0..4,
        /// Remote Communication ID: the receiver's handle.
        value remote_comm_id / set_remote_comm_id: u32 = 4..8,
        /// Message MRAed (2 bits, `MSG_MRAED_*`).
        value message_mraed / set_message_mraed: u8 = Bits::new(8, 6, 2),
        /// Service Timeout (5 bits; the answer comes within 4.096 µs · 2^value).
        value service_timeout / set_service_timeout: u8 = Bits::new(9, 3, 5),
        /// Private Data (222 bytes).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 10..232,
    }
    display(r) "local_comm_id={:#010x} remote_comm_id={:#010x} mraed={} service_timeout={}",
        r.local_comm_id, r.remote_comm_id, r.message_mraed, r.service_timeout;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit: the low 6 bits of byte 8 and the low 3 of byte 9.
    pub fn clear_reserved(&mut self) {
        layout::clear(self.b_mut(), &[], &[Bits::new(8, 0, 6), Bits::new(9, 0, 3)]);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;

    // Made up (the capture has no MRA): the passive side of the capture acknowledging a
    // duplicate REQ, answer within 4.096 µs · 2^24 (about 69 s), private data "hi".
    static PACKET_BYTES: [u8; MSG_LEN] = zero_padded(&[
        0xb9, 0xa6, 0xe9, 0x21, 0x35, 0x70, 0xa4, 0x9b, 0x00, 0xc0, b'h', b'i',
    ]);

    fn repr() -> MraRepr {
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data[..2].copy_from_slice(b"hi");
        MraRepr {
            local_comm_id: 0xb9a6_e921,
            remote_comm_id: 0x3570_a49b,
            message_mraed: MSG_MRAED_REQ,
            service_timeout: 24,
            private_data,
        }
    }

    crate::cm::layout::message_tests!(MraRepr, "CM MRA", 232);

    #[test]
    fn test_bit_fields() {
        let mut bytes = [0xffu8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        assert_eq!((p.message_mraed(), p.service_timeout()), (3, 31));
        p.set_message_mraed(MSG_MRAED_REP);
        p.set_service_timeout(1);
        assert_eq!(bytes[8..10], [0x40, 0x08]);
        assert_eq!(
            repr().to_string(),
            "CM MRA local_comm_id=0xb9a6e921 remote_comm_id=0x3570a49b mraed=0 service_timeout=24"
        );
    }
}
