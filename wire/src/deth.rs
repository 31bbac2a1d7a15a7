//! The Datagram Extended Transport Header (IBTA 9.3.2, figure 103): the Q_Key and source QP of
//! a UD packet.
//!
//! ```text
//!  byte 0-3 | Q_Key                 |
//!  byte 4   | reserved              |
//!  byte 5-7 | SrcQP (24)            |
//! ```

use core::fmt;

use crate::{be_u32, fixed_view, read_u24, write_u24, Result};

/// DETH length in bytes.
pub const HEADER_LEN: usize = 8;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const QKEY: Field = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Field = 5..8;
}

fixed_view!("DETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The Q_Key field.
    pub fn qkey(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::QKEY])
    }
    /// The SrcQP field.
    pub fn src_qp(&self) -> u32 {
        read_u24(&self.buffer.as_ref()[field::SRC_QP])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the Q_Key field.
    pub fn set_qkey(&mut self, v: u32) {
        self.buffer.as_mut()[field::QKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the SrcQP field and clears the reserved byte before it.
    pub fn set_src_qp(&mut self, v: u32) {
        self.buffer.as_mut()[field::RESERVED] = 0;
        write_u24(&mut self.buffer.as_mut()[field::SRC_QP], v);
    }
}

/// A parsed DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Parses a DETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<DethRepr> {
        packet.check_len()?;
        Ok(DethRepr {
            qkey: packet.qkey(),
            src_qp: packet.src_qp(),
        })
    }
    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the DETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_qkey(self.qkey);
        packet.set_src_qp(self.src_qp);
    }
}

impl fmt::Display for DethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DETH qkey={:#x} src_qp={:#x}", self.qkey, self.src_qp)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::Error;

    // A CM MAD to QP1 from kernel rxe: Q_Key 0x80010000, source QP 1.
    static PACKET_BYTES: [u8; 8] = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
    const REPR: DethRepr = DethRepr {
        qkey: 0x8001_0000,
        src_qp: 1,
    };

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.qkey(), 0x8001_0000);
        assert_eq!(p.src_qp(), 1);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 8];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_qkey(0x8001_0000);
        p.set_src_qp(1);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(DethRepr::parse(&p).unwrap(), REPR);
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; 8];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..7]),
            Err(Error::Truncated {
                need: 8,
                have: 7,
                ..
            })
        ));
    }
}
