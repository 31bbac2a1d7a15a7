//! The Atomic Acknowledge Extended Transport Header (IBTA 9.3.6, figure 107): the value the
//! remote 8 bytes held before a CmpSwap or FetchAdd.

use core::fmt;

use crate::{be_u64, fixed_view, Result};

/// AtomicAckETH length in bytes.
pub const HEADER_LEN: usize = 8;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub const ORIG_REM_DT: Field = 0..8;
}

fixed_view!("AtomicAckETH", HEADER_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The OrigRemDt field.
    pub fn orig_rem_dt(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::ORIG_REM_DT])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the OrigRemDt field.
    pub fn set_orig_rem_dt(&mut self, v: u64) {
        self.buffer.as_mut()[field::ORIG_REM_DT].copy_from_slice(&v.to_be_bytes());
    }
}

/// A parsed AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicAckEthRepr {
    /// The original remote data.
    pub orig_rem_dt: u64,
}

impl AtomicAckEthRepr {
    /// Parses an AtomicAckETH.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<AtomicAckEthRepr> {
        packet.check_len()?;
        Ok(AtomicAckEthRepr {
            orig_rem_dt: packet.orig_rem_dt(),
        })
    }
    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the AtomicAckETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_orig_rem_dt(self.orig_rem_dt);
    }
}

impl fmt::Display for AtomicAckEthRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AtomicAckETH orig={:#x}", self.orig_rem_dt)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::Error;

    static PACKET_BYTES: [u8; 8] = [0, 0, 0, 0, 0, 0, 0x01, 0x2c];
    const REPR: AtomicAckEthRepr = AtomicAckEthRepr { orig_rem_dt: 300 };

    #[test]
    fn test_deconstruct() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..])
                .unwrap()
                .orig_rem_dt(),
            300
        );
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 8];
        Packet::new_unchecked(&mut bytes[..]).set_orig_rem_dt(300);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(AtomicAckEthRepr::parse(&p).unwrap(), REPR);
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
