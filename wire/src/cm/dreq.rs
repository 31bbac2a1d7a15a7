//! DisconnectRequest, DREQ (IBTA 12.6.10, table "DREQ message contents"): either side asks to
//! tear the connection down.
//!
//! ```text
//!  byte 0-3    | Local Communication ID                   |
//!  byte 4-7    | Remote Communication ID                  |
//!  byte 8-11   | Remote QPN/EECN (24)    | reserved (8)   |
//!  byte 12-231 | Private Data (220)                       |
//! ```

use core::fmt;

use super::{get_array, get_u32, MSG_LEN};
use crate::{fixed_view, read_u24, write_u24, Result};

/// Bytes of private data in a DREQ (220: the IBTA table and Linux
/// `IB_CM_DREQ_PRIVATE_DATA_SIZE` agree; not 224 as in RTU and DREP).
pub const PRIVATE_DATA_LEN: usize = 220;

mod field {
    use crate::cm::Field;

    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const REMOTE_QPN_EECN: Field = 8..11;
    pub const PRIVATE_DATA: Field = 12..232;

    pub const RESERVED: usize = 11;
}

fixed_view!("CM DREQ", MSG_LEN);

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
    /// The Remote QPN/EECN field (24 bits).
    pub fn remote_qpn_eecn(&self) -> u32 {
        read_u24(&self.b()[field::REMOTE_QPN_EECN])
    }
    /// The Private Data field (220 bytes).
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
        self.b_mut()[field::RESERVED] = 0;
    }
    /// Sets the Local Communication ID field.
    pub fn set_local_comm_id(&mut self, v: u32) {
        self.b_mut()[field::LOCAL_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Remote Communication ID field.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        self.b_mut()[field::REMOTE_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Remote QPN/EECN field (low 24 bits of `v`).
    pub fn set_remote_qpn_eecn(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::REMOTE_QPN_EECN], v);
    }
    /// The Private Data field, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::PRIVATE_DATA]
    }
}

/// A parsed DREQ: every field of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DreqRepr {
    /// Local Communication ID: the sender's handle.
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle.
    pub remote_comm_id: u32,
    /// Remote QPN/EECN: the receiver's QP, which the receiver checks (24 bits).
    pub remote_qpn_eecn: u32,
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl DreqRepr {
    /// Parses a DREQ from the 232 bytes of MAD data.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<DreqRepr> {
        packet.check_len()?;
        Ok(DreqRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            remote_qpn_eecn: packet.remote_qpn_eecn(),
            private_data: get_array(packet.b(), field::PRIVATE_DATA),
        })
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
        packet.set_remote_qpn_eecn(self.remote_qpn_eecn);
        packet
            .private_data_mut()
            .copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for DreqRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CM DREQ local_comm_id={:#010x} remote_comm_id={:#010x} remote_qpn={:#x}",
            self.local_comm_id, self.remote_comm_id, self.remote_qpn_eecn
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::{capture_data, zero_padded};
    use crate::Error;

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

    #[test]
    fn test_capture_bytes() {
        assert_eq!(PACKET_BYTES, capture_data(64));
    }

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

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(DreqRepr::parse(&p).unwrap(), repr());
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
                what: "CM DREQ",
                need: 232,
                have: 231
            }
        );
    }
}
