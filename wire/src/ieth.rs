//! The Invalidate Extended Transport Header (IBTA 9.3.8, figure 109): the R_Key that a
//! `SEND_*_WITH_INVALIDATE` asks the responder to invalidate (IBTA 10.6.7.2).

crate::u32_header!("IETH", IethRepr, rkey, set_rkey, "R_Key to invalidate");
