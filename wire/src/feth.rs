//! The FLUSH Extended Transport Header (IBTA 1.5, 9.3.9 "FETH"), carried by RC FLUSH (0x1C)
//! before the RETH: what to make visible or persistent.
//!
//! ```text
//!  bits 31-6 | reserved |
//!  bits 5-4  | SelectivityLevel: 0 = the RETH's range, 1 = the whole memory region |
//!  bits 3-0  | PlacementType: bit 0 global visibility, bit 1 persistence           |
//! ```

use core::fmt;

use crate::{be_u32, fixed_view, Error, Result};

/// FETH length in bytes.
pub const HEADER_LEN: usize = 4;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const WORD: Field = 0..4;
    pub const SEL_SHIFT: u32 = 4;
    pub const SEL_MASK: u32 = 0x30;
    pub const PLT_MASK: u32 = 0x0f;
}

/// PlacementType bit: make the data globally visible.
pub const PLACEMENT_GLOBAL_VISIBILITY: u8 = 1 << 0;
/// PlacementType bit: make the data persistent.
pub const PLACEMENT_PERSISTENCE: u8 = 1 << 1;

fixed_view!("FETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn word(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::WORD])
    }
    /// The SelectivityLevel field.
    pub fn selectivity(&self) -> u8 {
        ((self.word() & field::SEL_MASK) >> field::SEL_SHIFT) as u8
    }
    /// The PlacementType field.
    pub fn placement(&self) -> u8 {
        (self.word() & field::PLT_MASK) as u8
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets SelectivityLevel and PlacementType; the reserved bits are cleared.
    pub fn set_fields(&mut self, selectivity: u8, placement: u8) {
        let w = ((selectivity as u32) << field::SEL_SHIFT) & field::SEL_MASK
            | (placement as u32 & field::PLT_MASK);
        self.buffer.as_mut()[field::WORD].copy_from_slice(&w.to_be_bytes());
    }
}

/// The FLUSH selectivity level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selectivity {
    /// Flush the range the RETH names.
    MemoryRange = 0,
    /// Flush the whole memory region the R_Key names.
    MemoryRegion = 1,
}

/// A parsed FETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FethRepr {
    /// What to flush.
    pub selectivity: Selectivity,
    /// PlacementType bits (`PLACEMENT_*`).
    pub placement: u8,
}

impl FethRepr {
    /// Parses a FETH; the reserved selectivity levels 2 and 3 are errors.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<FethRepr> {
        packet.check_len()?;
        let selectivity = match packet.selectivity() {
            0 => Selectivity::MemoryRange,
            1 => Selectivity::MemoryRegion,
            v => {
                return Err(Error::BadField {
                    what: "FETH selectivity level",
                    value: v as u64,
                })
            }
        };
        Ok(FethRepr {
            selectivity,
            placement: packet.placement(),
        })
    }
    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the FETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_fields(self.selectivity as u8, self.placement);
    }
}

impl fmt::Display for FethRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FETH sel={:?} placement={:#x}",
            self.selectivity, self.placement
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static PACKET_BYTES: [u8; 4] = [0, 0, 0, 0x12];
    const REPR: FethRepr = FethRepr {
        selectivity: Selectivity::MemoryRegion,
        placement: PLACEMENT_PERSISTENCE,
    };

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.selectivity(), 1);
        assert_eq!(p.placement(), 2);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 4];
        Packet::new_unchecked(&mut bytes[..]).set_fields(1, 2);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(FethRepr::parse(&p).unwrap(), REPR);
        let bad = [0u8, 0, 0, 0x21];
        assert!(matches!(
            FethRepr::parse(&Packet::new_unchecked(&bad[..])),
            Err(Error::BadField { value: 2, .. })
        ));
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; 4];
        REPR.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..3]),
            Err(Error::Truncated {
                need: 4,
                have: 3,
                ..
            })
        ));
    }
}
