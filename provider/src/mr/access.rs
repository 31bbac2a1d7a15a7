//! Access rights: the `IBV_ACCESS_*` bits of libibverbs, and their check at registration.

use core::fmt;
use core::ops::{BitOr, BitOrAssign};

use crate::error::{Error, Result};

/// Access rights of a memory region (or, later, a memory window): the `enum ibv_access_flags`
/// bits of libibverbs (`verbs.h`), with the same values, so the C ABI passes them through.
///
/// Local read is always allowed and has no bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

impl Access {
    /// `IBV_ACCESS_LOCAL_WRITE`: the local QP may write (receive, RDMA READ responses).
    pub const LOCAL_WRITE: Access = Access(1);
    /// `IBV_ACCESS_REMOTE_WRITE`: peers may RDMA WRITE. Needs `LOCAL_WRITE`.
    pub const REMOTE_WRITE: Access = Access(1 << 1);
    /// `IBV_ACCESS_REMOTE_READ`: peers may RDMA READ.
    pub const REMOTE_READ: Access = Access(1 << 2);
    /// `IBV_ACCESS_REMOTE_ATOMIC`: peers may do atomics. Needs `LOCAL_WRITE`.
    pub const REMOTE_ATOMIC: Access = Access(1 << 3);
    /// `IBV_ACCESS_MW_BIND`: memory windows may be bound to the MR.
    pub const MW_BIND: Access = Access(1 << 4);
    /// `IBV_ACCESS_ZERO_BASED`: addresses are offsets from the start (the iova is 0).
    pub const ZERO_BASED: Access = Access(1 << 5);
    /// `IBV_ACCESS_ON_DEMAND`: on-demand paging (`odp.rs`). Kept: it marks the regions
    /// `ibv_advise_mr` may prefetch; softrnic pins nothing anyway.
    pub const ON_DEMAND: Access = Access(1 << 6);
    /// `IBV_ACCESS_HUGETLB`: a libibverbs hint about huge pages. Accepted and ignored.
    pub const HUGETLB: Access = Access(1 << 7);
    /// `IBV_ACCESS_FLUSH_GLOBAL`: the MR may be the target of a global-visibility FLUSH.
    pub const FLUSH_GLOBAL: Access = Access(1 << 8);
    /// `IBV_ACCESS_FLUSH_PERSISTENT`: persistence FLUSH. Only for a region that maps a file
    /// ([`MrTable::register_file`](super::MrTable::register_file): a persistence FLUSH
    /// `msync`s it); refused (`EOPNOTSUPP`) for anonymous memory, which has nowhere to persist.
    pub const FLUSH_PERSISTENT: Access = Access(1 << 9);
    /// `IBV_ACCESS_RELAXED_ORDERING` (= `IBV_ACCESS_OPTIONAL_FIRST`): optional, ignored.
    pub const RELAXED_ORDERING: Access = Access(1 << 20);
    /// `IBV_ACCESS_OPTIONAL_RANGE`: bits 20..=29. A provider must accept and may ignore them.
    pub const OPTIONAL_RANGE: Access = Access(0x3ff0_0000);

    /// Every non-optional bit softrnic knows (bits 0..=9).
    const KNOWN: Access = Access(0x3ff);

    /// No rights beyond local read.
    pub const fn empty() -> Access {
        Access(0)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is set in `self` (true for an empty `other`).
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set in `self`.
    pub const fn intersects(self, other: Access) -> bool {
        self.0 & other.0 != 0
    }

    /// Checks the rights given to `ibv_reg_mr` and returns them without the optional bits.
    ///
    /// The order and errnos follow the kernel's `ib_check_mr_access` (`ib_verbs.h`).
    ///
    /// # Errors
    ///
    /// - `EINVAL` ([`Error::InvalidArgument`]): `REMOTE_WRITE` or `REMOTE_ATOMIC` without
    ///   `LOCAL_WRITE` (IBTA 10.6: a region peers may write must be locally writable too);
    ///   a bit outside the known set and outside `OPTIONAL_RANGE`.
    /// - `EOPNOTSUPP` ([`Error::NotSupported`]): `FLUSH_PERSISTENT`.
    pub fn check_for_mr(self) -> Result<Access> {
        let required = self.check_for_file_mr()?;
        if required.contains(Access::FLUSH_PERSISTENT) {
            return Err(Error::NotSupported(
                "no persistent memory for FLUSH_PERSISTENT",
            ));
        }
        Ok(required)
    }

    /// [`check_for_mr`](Self::check_for_mr) for a region that maps a file: the same checks,
    /// but `FLUSH_PERSISTENT` is allowed.
    ///
    /// # Errors
    ///
    /// `EINVAL` as [`check_for_mr`](Self::check_for_mr).
    pub fn check_for_file_mr(self) -> Result<Access> {
        if self.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !self.contains(Access::LOCAL_WRITE)
        {
            return Err(Error::InvalidArgument(
                "remote write or remote atomic access needs local write",
            ));
        }
        let required = Access(self.0 & !Access::OPTIONAL_RANGE.0);
        if required.0 & !Access::KNOWN.0 != 0 {
            return Err(Error::InvalidArgument("unknown access flag"));
        }
        Ok(required)
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Access) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Access, &str); 10] = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
            (Access::MW_BIND, "MW_BIND"),
            (Access::ZERO_BASED, "ZERO_BASED"),
            (Access::ON_DEMAND, "ON_DEMAND"),
            (Access::HUGETLB, "HUGETLB"),
            (Access::FLUSH_GLOBAL, "FLUSH_GLOBAL"),
            (Access::FLUSH_PERSISTENT, "FLUSH_PERSISTENT"),
        ];
        write!(f, "Access(")?;
        let mut rest = self.0;
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                write!(f, "{}{name}", if first { "" } else { "|" })?;
                first = false;
                rest &= !flag.0;
            }
        }
        if rest != 0 || first {
            write!(f, "{}{rest:#x}", if first { "" } else { "|" })?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LW: Access = Access::LOCAL_WRITE;

    #[test]
    fn remote_write_or_atomic_need_local_write() {
        for a in [
            Access::REMOTE_WRITE,
            Access::REMOTE_ATOMIC,
            Access::REMOTE_WRITE | Access::REMOTE_ATOMIC | Access::REMOTE_READ,
        ] {
            assert!(
                matches!(a.check_for_mr(), Err(Error::InvalidArgument(_))),
                "{a:?}"
            );
            assert_eq!(a.check_for_mr().unwrap_err().errno(), 22);
            assert_eq!((a | LW).check_for_mr(), Ok(a | LW));
        }
    }

    #[test]
    fn read_only_and_empty_are_fine() {
        assert_eq!(Access::empty().check_for_mr(), Ok(Access::empty()));
        assert_eq!(Access::REMOTE_READ.check_for_mr(), Ok(Access::REMOTE_READ));
        let hints = Access::MW_BIND
            | Access::ZERO_BASED
            | Access::ON_DEMAND
            | Access::HUGETLB
            | Access::FLUSH_GLOBAL;
        assert_eq!(hints.check_for_mr(), Ok(hints));
    }

    #[test]
    fn unknown_bits_are_einval() {
        for bit in (10..20).chain(30..32) {
            let a = LW | Access(1 << bit);
            assert!(
                matches!(a.check_for_mr(), Err(Error::InvalidArgument(_))),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn optional_bits_are_accepted_and_dropped() {
        for bit in 20..30 {
            let a = Access::REMOTE_READ | Access(1 << bit);
            assert_eq!(a.check_for_mr(), Ok(Access::REMOTE_READ), "bit {bit}");
        }
        let all = LW | Access::RELAXED_ORDERING | Access::OPTIONAL_RANGE;
        assert_eq!(all.check_for_mr(), Ok(LW));
    }

    #[test]
    fn flush_persistent_is_not_supported() {
        let e = (LW | Access::FLUSH_PERSISTENT).check_for_mr().unwrap_err();
        assert_eq!(e.errno(), 95);
    }

    #[test]
    fn contains_and_debug() {
        let a = LW | Access::REMOTE_READ;
        assert!(a.contains(LW) && a.contains(Access::empty()) && !a.contains(Access::REMOTE_WRITE));
        assert_eq!(format!("{a:?}"), "Access(LOCAL_WRITE|REMOTE_READ)");
        assert_eq!(format!("{:?}", Access::empty()), "Access(0x0)");
        assert_eq!(format!("{:?}", Access(1 << 20)), "Access(0x100000)");
    }
}
