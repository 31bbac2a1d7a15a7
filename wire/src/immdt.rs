//! The Immediate Data Extended Transport Header (IBTA 9.3.7, figure 108): 4 bytes the requester
//! hands to the responder's completion, carried by the `*_WITH_IMMEDIATE` opcodes.

crate::u32_header!("ImmDt", ImmDtRepr, imm, set_imm, "Immediate Data");
