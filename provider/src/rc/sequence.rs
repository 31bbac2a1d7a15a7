//! PSN checks of the RC responder (IBTA 9.7.5.1.1 "Packet sequence number validation").
//!
//! The responder keeps the expected PSN (ePSN). An arriving request's PSN is
//! * the expected one — execute it;
//! * in the duplicate region, the 2^23 PSNs before ePSN — a retransmission: do not execute it
//!   again, but answer it (re-ACK, re-read, replay the atomic's saved result) (C9-104..C9-107);
//! * otherwise (ahead of ePSN) — out of sequence: packets were lost; send one NAK "PSN sequence
//!   error" carrying ePSN and drop such packets until the expected one arrives (C9-102).

use softrnic_wire::Psn;

/// What a request PSN is, relative to the expected PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsnClass {
    /// The packet the responder expects.
    Expected,
    /// A packet already received: answered, never executed twice.
    Duplicate,
    /// A packet beyond the expected one: some were lost.
    OutOfSequence,
}

/// Classifies `psn` against the expected PSN `epsn`.
pub fn classify(epsn: Psn, psn: Psn) -> PsnClass {
    match psn.cmp_modular(epsn) {
        core::cmp::Ordering::Equal => PsnClass::Expected,
        core::cmp::Ordering::Less => PsnClass::Duplicate,
        core::cmp::Ordering::Greater => PsnClass::OutOfSequence,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn regions_around_the_expected_psn_and_across_the_wrap() {
        let e = Psn::new(5);
        assert_eq!(classify(e, Psn::new(5)), PsnClass::Expected);
        assert_eq!(classify(e, Psn::new(4)), PsnClass::Duplicate);
        assert_eq!(
            classify(e, Psn::new(0xff_fff0)),
            PsnClass::Duplicate,
            "before the wrap"
        );
        assert_eq!(classify(e, Psn::new(6)), PsnClass::OutOfSequence);
        assert_eq!(classify(e, e.add(Psn::HALF - 1)), PsnClass::OutOfSequence);
        assert_eq!(classify(e, e.sub(Psn::HALF - 1)), PsnClass::Duplicate);
        let e = Psn::new(0xff_ffff);
        assert_eq!(
            classify(e, Psn::new(0)),
            PsnClass::OutOfSequence,
            "after the wrap"
        );
        assert_eq!(classify(e, Psn::new(0xff_fffe)), PsnClass::Duplicate);
    }
}
