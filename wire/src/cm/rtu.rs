//! ReadyToUse, RTU (IBTA 12.6.9, table "RTU message contents"): the active side confirms the
//! REP; the connection is established.
//!
//! ```text
//!  byte 0-3   | Local Communication ID       |
//!  byte 4-7   | Remote Communication ID      |
//!  byte 8-231 | Private Data (224)           |
//! ```

super::comm_ids::comm_ids_message!("CM RTU", "RTU", RtuRepr);

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::{capture_data, zero_padded};
    use crate::Error;

    // The RTU of frame 3 of tests/data/rping_rdmacm.pcap (MAD data; zero private data).
    static PACKET_BYTES: [u8; MSG_LEN] =
        zero_padded(&[0x35, 0x70, 0xa4, 0x9b, 0xb9, 0xa6, 0xe9, 0x21]);

    fn repr() -> RtuRepr {
        RtuRepr {
            local_comm_id: 0x3570_a49b,
            remote_comm_id: 0xb9a6_e921,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    #[test]
    fn test_capture_bytes() {
        assert_eq!(PACKET_BYTES, capture_data(3));
    }

    /// The values tshark shows for frame 3 ("CM ReadyToUse").
    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.local_comm_id(), 0x3570a49b);
        assert_eq!(p.remote_comm_id(), 0xb9a6e921);
        assert_eq!(p.private_data(), &[0u8; PRIVATE_DATA_LEN][..]);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_local_comm_id(0x3570a49b);
        p.set_remote_comm_id(0xb9a6e921);
        p.private_data_mut().fill(0);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(RtuRepr::parse(&p).unwrap(), repr());
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
                what: "CM RTU",
                need: 232,
                have: 231
            }
        );
    }
}
