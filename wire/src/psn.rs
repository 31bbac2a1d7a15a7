//! Packet Sequence Numbers: 24-bit counters compared modulo 2^24 (IBTA 9.7.1).
//!
//! > "The PSN is a 24 bit value ... PSNs wrap" — and a PSN is "ahead" of another when it lies
//! > within the half of the sequence space (2^23) following it (IBTA 9.7.1.1, C9-48/C9-49 on the
//! > valid and duplicate PSN regions).

use core::{cmp::Ordering, fmt};

/// A 24-bit Packet Sequence Number with modular arithmetic and comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// All PSN bits.
    pub const MASK: u32 = 0x00ff_ffff;
    /// Half the sequence space: the window within which one PSN is "ahead" of another.
    pub const HALF: u32 = 1 << 23;

    /// A PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }

    /// The PSN as a number in `0..2^24`.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    #[allow(clippy::should_implement_trait)]
    pub const fn add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// `self - n`, wrapping at 2^24.
    pub const fn sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// The forward distance from `earlier` to `self`, in `0..2^24`.
    pub const fn distance_from(self, earlier: Psn) -> u32 {
        self.0.wrapping_sub(earlier.0) & Self::MASK
    }

    /// Compares two PSNs in the modular sense: `self` is greater when it lies in the 2^23
    /// PSNs that follow `other`.
    pub fn cmp_modular(self, other: Psn) -> Ordering {
        match other.distance_from(self) {
            0 => Ordering::Equal,
            d if d < Self::HALF => Ordering::Less,
            _ => Ordering::Greater,
        }
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_2_pow_24() {
        assert_eq!(Psn::new(0xff_ffff).add(1), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), Psn::new(0xff_ffff));
        assert_eq!(Psn::new(0x1_000_005).value(), 5);
        assert_eq!(Psn::new(3).distance_from(Psn::new(0xff_fffe)), 5);
    }

    #[test]
    fn compares_across_the_wrap() {
        let last = Psn::new(0xff_ffff);
        let first = Psn::new(0);
        assert_eq!(first.cmp_modular(last), Ordering::Greater);
        assert_eq!(last.cmp_modular(first), Ordering::Less);
        assert_eq!(first.cmp_modular(first), Ordering::Equal);
    }

    proptest! {
        #[test]
        fn ahead_by_less_than_half_is_greater(base in 0u32..(1 << 24), d in 1u32..Psn::HALF) {
            let a = Psn::new(base);
            let b = a.add(d);
            prop_assert_eq!(b.cmp_modular(a), Ordering::Greater);
            prop_assert_eq!(a.cmp_modular(b), Ordering::Less);
            prop_assert_eq!(b.distance_from(a), d);
            prop_assert_eq!(b.sub(d), a);
        }
    }
}
