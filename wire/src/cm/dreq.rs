//! DisconnectRequest, DREQ (IBTA 12.6.10, table "DREQ message contents"): either side asks to
//! tear the connection down.
//!
//! ```text
//!  byte 0-3    | Local Communication ID                   |
//!  byte 4-7    | Remote Communication ID                  |
//!  byte 8-11   | Remote QPN/EECN (24)    | reserved (8)   |
//!  byte 12-231 | Private Data (220)                       |
//! ```

use super::layout::message;
use super::MSG_LEN;

/// Bytes of private data in a DREQ (220: the IBTA table and Linux
/// `IB_CM_DREQ_PRIVATE_DATA_SIZE` agree; not 224 as in RTU and DREP).
pub const PRIVATE_DATA_LEN: usize = 220;

message! {
    "CM DREQ", MSG_LEN;
    /// A parsed DREQ: every field of the message.
    pub struct DreqRepr {
        /// Local Communication ID: the sender's handle.
        value local_comm_id / set_local_comm_id: u32 = 0..4,
        /// Remote Communication ID: the receiver's handle.
        value remote_comm_id / set_remote_comm_id: u32 = 4..8,
        /// Remote QPN/EECN: the receiver's QP, which the receiver checks (24 bits).
        value remote_qpn_eecn / set_remote_qpn_eecn: u32 = 8..11,
        /// Private Data (220 bytes).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 12..232,
    }
    display(r) "local_comm_id={:#010x} remote_comm_id={:#010x} remote_qpn={:#x}",
        r.local_comm_id, r.remote_comm_id, r.remote_qpn_eecn;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit: byte 11.
    pub fn clear_reserved(&mut self) {
        self.b_mut()[11] = 0;
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;

    // The DREQ of frame 64 of tests/data/rping_rdmacm.pcap (MAD data; zero private data).
    static PACKET_BYTES: [u8; MSG_LEN] = zero_padded(&[
        0x35, 0x70, 0xa4, 0x9b, 0xb9, 0xa6, 0xe9, 0x21, 0x00, 0x00, 0x1e, 0x00,
    ]);

    fn repr() -> DreqRepr {
        DreqRepr {
            local_comm_id: 0x3570_a49b,
            remote_comm_id: 0xb9a6_e921,
            remote_qpn_eecn: 0x1e,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    crate::cm::layout::message_tests!(DreqRepr, "CM DREQ", 232, frame 64);

    /// The values tshark shows for frame 64 ("CM DisconnectRequest").
    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.local_comm_id(), 0x3570a49b);
        assert_eq!(p.remote_comm_id(), 0xb9a6e921);
        assert_eq!(p.remote_qpn_eecn(), 0x00001e);
        assert_eq!(p.private_data(), &[0u8; PRIVATE_DATA_LEN][..]);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        p.set_local_comm_id(0x3570a49b);
        p.set_remote_comm_id(0xb9a6e921);
        p.set_remote_qpn_eecn(0x1e);
        p.private_data_mut().fill(0);
        assert_eq!(bytes, PACKET_BYTES);
    }
}
