//! The RDMA Extended Transport Header (IBTA 9.3.3, figure 104): where an RDMA WRITE, READ,
//! FLUSH or ATOMIC WRITE lands.
//!
//! ```text
//!  byte 0-7   | Virtual Address |
//!  byte 8-11  | R_Key           |
//!  byte 12-15 | DMA Length      |
//! ```

use core::fmt;

use crate::{be_u32, be_u64, fixed_view, Result};

/// RETH length in bytes.
pub const HEADER_LEN: usize = 16;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

fixed_view!("RETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The Virtual Address field.
    pub fn va(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::VA])
    }
    /// The R_Key field.
    pub fn rkey(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::RKEY])
    }
    /// The DMA Length field: bytes of the whole message.
    pub fn dma_len(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::DMA_LEN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the Virtual Address field.
    pub fn set_va(&mut self, v: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the R_Key field.
    pub fn set_rkey(&mut self, v: u32) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the DMA Length field.
    pub fn set_dma_len(&mut self, v: u32) {
        self.buffer.as_mut()[field::DMA_LEN].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RethRepr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole message in bytes.
    pub dma_len: u32,
}

impl RethRepr {
    /// Parses a RETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<RethRepr> {
        packet.check_len()?;
        Ok(RethRepr {
            va: packet.va(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
        })
    }
    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the RETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
    }
}

impl fmt::Display for RethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RETH va={:#x} rkey={:#x} dma_len={}",
            self.va, self.rkey, self.dma_len
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::Error;

    static PACKET_BYTES: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x70, 0x00, 0x00, 0x00, 0x12, 0x0e, 0x00, 0x01, 0x00,
        0x00,
    ];
    const REPR: RethRepr = RethRepr {
        va: 0x7f12_3456_7000,
        rkey: 0x120e,
        dma_len: 65536,
    };

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.va(), 0x7f12_3456_7000);
        assert_eq!(p.rkey(), 0x120e);
        assert_eq!(p.dma_len(), 65536);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 16];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_va(0x7f12_3456_7000);
        p.set_rkey(0x120e);
        p.set_dma_len(65536);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(RethRepr::parse(&p).unwrap(), REPR);
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; 16];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..15]),
            Err(Error::Truncated {
                need: 16,
                have: 15,
                ..
            })
        ));
    }
}
