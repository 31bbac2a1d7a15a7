//! The RoCEv2 Congestion Notification Packet (IBTA annex A17.9.3): BTH opcode 0x81, FECN/BECN,
//! then 16 reserved bytes and the ICRC. The reserved bytes are sent as zero and not checked.

use crate::{fixed_view, Result};

/// Length of the reserved block that follows the BTH of a CNP.
pub const HEADER_LEN: usize = 16;

fixed_view!("CNP reserved bytes", HEADER_LEN);

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the reserved bytes.
    pub fn clear(&mut self) {
        self.buffer.as_mut()[..HEADER_LEN].fill(0);
    }
}

/// A parsed CNP body: nothing but reserved bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CnpRepr;

impl CnpRepr {
    /// Parses (length-checks) the reserved block.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<CnpRepr> {
        packet.check_len()?;
        Ok(CnpRepr)
    }
    /// The block's length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes 16 zero bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.clear();
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::Error;

    #[test]
    fn test_emit_and_parse() {
        let mut bytes = [0xa5u8; 16];
        CnpRepr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, [0u8; 16]);
        assert_eq!(
            CnpRepr::parse(&Packet::new_unchecked(&bytes[..])),
            Ok(CnpRepr)
        );
    }

    #[test]
    fn test_truncated() {
        assert!(matches!(
            Packet::new_checked(&[0u8; 15][..]),
            Err(Error::Truncated {
                need: 16,
                have: 15,
                ..
            })
        ));
    }
}
