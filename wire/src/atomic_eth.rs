//! The Atomic Extended Transport Header (IBTA 9.3.4, figure 105): the target and operands of a
//! CmpSwap or FetchAdd on 8 aligned remote bytes.
//!
//! ```text
//!  byte 0-7   | Virtual Address        |
//!  byte 8-11  | R_Key                  |
//!  byte 12-19 | Swap (or Add) Data     |
//!  byte 20-27 | Compare Data           |
//! ```

use core::fmt;

use crate::{be_u32, be_u64, fixed_view, Result};

/// AtomicETH length in bytes.
pub const HEADER_LEN: usize = 28;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const SWAP_ADD: Field = 12..20;
    pub const COMPARE: Field = 20..28;
}

fixed_view!("AtomicETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The Virtual Address field.
    pub fn va(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::VA])
    }
    /// The R_Key field.
    pub fn rkey(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::RKEY])
    }
    /// The Swap Data (CmpSwap) or Add Data (FetchAdd) field.
    pub fn swap_add(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::SWAP_ADD])
    }
    /// The Compare Data field (CmpSwap only).
    pub fn compare(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::COMPARE])
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
    /// Sets the Swap/Add Data field.
    pub fn set_swap_add(&mut self, v: u64) {
        self.buffer.as_mut()[field::SWAP_ADD].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Compare Data field.
    pub fn set_compare(&mut self, v: u64) {
        self.buffer.as_mut()[field::COMPARE].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicEthRepr {
    /// Remote virtual address (8-byte aligned for a valid request).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap data (CmpSwap) or add data (FetchAdd).
    pub swap_add: u64,
    /// Compare data (CmpSwap; ignored by FetchAdd).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Parses an AtomicETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<AtomicEthRepr> {
        packet.check_len()?;
        Ok(AtomicEthRepr {
            va: packet.va(),
            rkey: packet.rkey(),
            swap_add: packet.swap_add(),
            compare: packet.compare(),
        })
    }
    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the AtomicETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_swap_add(self.swap_add);
        packet.set_compare(self.compare);
    }
}

impl fmt::Display for AtomicEthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AtomicETH va={:#x} rkey={:#x} swap_add={:#x} compare={:#x}",
            self.va, self.rkey, self.swap_add, self.compare
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::Error;

    static PACKET_BYTES: [u8; 28] = [
        0, 0, 0x55, 0x55, 0x66, 0x77, 0x80, 0x08, // va
        0, 0, 0x02, 0x01, // rkey
        0, 0, 0, 0, 0, 0, 0, 0x01, // swap/add
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, // compare
    ];
    const REPR: AtomicEthRepr = AtomicEthRepr {
        va: 0x5555_6677_8008,
        rkey: 0x201,
        swap_add: 1,
        compare: 0xffff_ffff_ffff_fffe,
    };

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.va(), REPR.va);
        assert_eq!(p.rkey(), REPR.rkey);
        assert_eq!(p.swap_add(), REPR.swap_add);
        assert_eq!(p.compare(), REPR.compare);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 28];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_va(REPR.va);
        p.set_rkey(REPR.rkey);
        p.set_swap_add(REPR.swap_add);
        p.set_compare(REPR.compare);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(AtomicEthRepr::parse(&p).unwrap(), REPR);
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; 28];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..27]),
            Err(Error::Truncated {
                need: 28,
                have: 27,
                ..
            })
        ));
    }
}
