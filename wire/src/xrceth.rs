//! The XRC Extended Transport Header (IBTA annex A14.6.1 "XRCETH"): carried right after the
//! BTH by every XRC request packet, it names the XRC SRQ at the target whose receive queue and
//! completion queue the message uses (IBTA A14.4: the XRC target QP only supplies the transport
//! state; the receive resources come from the SRQ the requester names).
//!
//! ```text
//!  bits 31-24 | reserved            |
//!  bits 23-0  | XRC SRQ number (24) |
//! ```
//! Responses (ACK, READ responses, atomic ACK) do not carry it.

use core::fmt;

use crate::{be_u32, fixed_view, Result};

/// XRCETH length in bytes.
pub const HEADER_LEN: usize = 4;

/// The XRC SRQ number field's 24 bits.
pub const SRQN_MASK: u32 = 0x00ff_ffff;

fixed_view!("XRCETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The XRC SRQ number (the reserved top byte is ignored, as IBTA asks of receivers).
    pub fn srqn(&self) -> u32 {
        be_u32(self.buffer.as_ref()) & SRQN_MASK
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the XRC SRQ number (its low 24 bits) and clears the reserved byte.
    pub fn set_srqn(&mut self, srqn: u32) {
        self.buffer.as_mut()[..HEADER_LEN].copy_from_slice(&(srqn & SRQN_MASK).to_be_bytes());
    }
}

/// A parsed XRCETH: the 24-bit XRC SRQ number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XrcethRepr {
    /// The XRC SRQ number at the target.
    pub srqn: u32,
}

impl XrcethRepr {
    /// Parses an XRCETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<XrcethRepr> {
        packet.check_len()?;
        Ok(XrcethRepr {
            srqn: packet.srqn(),
        })
    }

    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the XRCETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_srqn(self.srqn);
    }
}

impl fmt::Display for XrcethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "XRCETH srqn={:#08x}", self.srqn)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn reserved_byte_is_ignored_and_cleared() {
        let bytes = [0xff, 0x12, 0x34, 0x56];
        let r = XrcethRepr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(r.srqn, 0x12_3456);
        let mut out = [0xaa; 4];
        XrcethRepr { srqn: 0xab12_3456 }.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, [0x00, 0x12, 0x34, 0x56]);
    }

    #[test]
    fn truncated() {
        assert!(Packet::new_checked(&[0u8; 3][..]).is_err());
    }
}
