//! Which field of a CM MAD names the side it is for (IBTA 12.6): what a host that shares one
//! address among several CM instances reads to hand the MAD to the right one, without
//! parsing the rest.
//!
//! * A REQ (12.6.5) and a SIDR_REQ (12.11.1) open something new: their Service ID says which
//!   listener they are for.
//! * Every other CM message answers an ID the receiver chose. MRA, REJ, REP, RTU, DREQ, DREP,
//!   LAP and APR (12.6.6-12.6.11, 12.8) carry it as their Remote Communication ID, bytes 4-7
//!   of the class data (the sender's own is bytes 0-3); a SIDR_REP (12.11.2) echoes the
//!   requester's Request ID in bytes 0-3.
//! * ClassPortInfo (13.4.8.1) is about the port, not a connection.

use crate::mad::{
    ATTR_CLASS_PORT_INFO, ATTR_CM_APR, ATTR_CM_DREP, ATTR_CM_DREQ, ATTR_CM_LAP, ATTR_CM_MRA,
    ATTR_CM_REJ, ATTR_CM_REP, ATTR_CM_REQ, ATTR_CM_RTU, ATTR_CM_SIDR_REP, ATTR_CM_SIDR_REQ,
};
use crate::{Error, Result};

/// The side a CM MAD is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressee {
    /// A REQ or SIDR_REQ: the listener of this Service ID.
    Service(u64),
    /// An answer: the receiver's Communication ID (or, for a SIDR_REP, its Request ID).
    Id(u32),
    /// ClassPortInfo: the port's management agent itself.
    Port,
}

/// Reads the addressee of the CM MAD whose AttributeID is `attribute_id` from its class data
/// `data`. [`Error::Truncated`] if `data` is too short for the field, [`Error::BadField`] for
/// an AttributeID the CM class does not define.
pub fn addressee(attribute_id: u16, data: &[u8]) -> Result<Addressee> {
    let field = |range: core::ops::Range<usize>| {
        data.get(range.clone()).ok_or(Error::Truncated {
            what: "CM message",
            need: range.end,
            have: data.len(),
        })
    };
    Ok(match attribute_id {
        ATTR_CM_REQ | ATTR_CM_SIDR_REQ => {
            let b = field(8..16)?;
            Addressee::Service(u64::from_be_bytes(b.try_into().expect("8 bytes")))
        }
        ATTR_CM_MRA | ATTR_CM_REJ | ATTR_CM_REP | ATTR_CM_RTU | ATTR_CM_DREQ | ATTR_CM_DREP
        | ATTR_CM_LAP | ATTR_CM_APR => {
            let b = field(4..8)?;
            Addressee::Id(u32::from_be_bytes(b.try_into().expect("4 bytes")))
        }
        ATTR_CM_SIDR_REP => {
            let b = field(0..4)?;
            Addressee::Id(u32::from_be_bytes(b.try_into().expect("4 bytes")))
        }
        ATTR_CLASS_PORT_INFO => Addressee::Port,
        other => {
            return Err(Error::BadField {
                what: "CM attribute ID",
                value: other.into(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::{req, rtu, MSG_LEN};

    #[test]
    fn a_req_is_for_its_service_and_an_answer_for_its_remote_comm_id() {
        let mut data = [0u8; MSG_LEN];
        let mut p = req::Packet::new_unchecked(&mut data[..]);
        p.set_local_comm_id(0x1111_2222);
        p.set_service_id(0x0106_1c06);
        assert_eq!(
            addressee(ATTR_CM_REQ, &data),
            Ok(Addressee::Service(0x0106_1c06))
        );

        let mut data = [0u8; MSG_LEN];
        let mut p = rtu::Packet::new_unchecked(&mut data[..]);
        p.set_local_comm_id(0x1111_2222);
        p.set_remote_comm_id(0x0040_0001);
        for attr in [
            ATTR_CM_RTU,
            ATTR_CM_REP,
            ATTR_CM_REJ,
            ATTR_CM_MRA,
            ATTR_CM_DREQ,
        ] {
            assert_eq!(addressee(attr, &data), Ok(Addressee::Id(0x0040_0001)));
        }
        // A SIDR_REP echoes the requester's Request ID first.
        assert_eq!(
            addressee(ATTR_CM_SIDR_REP, &data),
            Ok(Addressee::Id(0x1111_2222))
        );
        assert_eq!(addressee(ATTR_CLASS_PORT_INFO, &[]), Ok(Addressee::Port));
    }

    #[test]
    fn short_data_and_unknown_attributes_are_errors() {
        assert!(matches!(
            addressee(ATTR_CM_REQ, &[0; 15]),
            Err(Error::Truncated {
                need: 16,
                have: 15,
                ..
            })
        ));
        assert!(matches!(
            addressee(ATTR_CM_DREP, &[0; 7]),
            Err(Error::Truncated { need: 8, .. })
        ));
        assert!(matches!(
            addressee(0x0099, &[0; MSG_LEN]),
            Err(Error::BadField { value: 0x99, .. })
        ));
    }
}
