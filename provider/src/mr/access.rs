//! Access rights: the `IBV_ACCESS_*` bits of libibverbs, and their check at registration.

use crate::error::{Error, Result};

bitflags::bitflags! {
    /// Access rights of a memory region (or, later, a memory window): the `enum ibv_access_flags`
    /// bits of libibverbs (`verbs.h`), with the same values, so the C ABI passes them through.
    ///
    /// Local read is always allowed and has no bit. Rights from a C caller are taken with
    /// [`from_bits_retain`](Self::from_bits_retain): an unknown bit must reach
    /// [`check_for_mr`](Self::check_for_mr), which refuses it with `EINVAL`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Access: u32 {
        /// `IBV_ACCESS_LOCAL_WRITE`: the local QP may write (receive, RDMA READ responses).
        const LOCAL_WRITE = 1;
        /// `IBV_ACCESS_REMOTE_WRITE`: peers may RDMA WRITE. Needs `LOCAL_WRITE`.
        const REMOTE_WRITE = 1 << 1;
        /// `IBV_ACCESS_REMOTE_READ`: peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// `IBV_ACCESS_REMOTE_ATOMIC`: peers may do atomics. Needs `LOCAL_WRITE`.
        const REMOTE_ATOMIC = 1 << 3;
        /// `IBV_ACCESS_MW_BIND`: memory windows may be bound to the MR.
        const MW_BIND = 1 << 4;
        /// `IBV_ACCESS_ZERO_BASED`: addresses are offsets from the start (the iova is 0).
        const ZERO_BASED = 1 << 5;
        /// `IBV_ACCESS_ON_DEMAND`: on-demand paging (`odp.rs`). Kept: it marks the regions
        /// `ibv_advise_mr` may prefetch; softrnic pins nothing anyway.
        const ON_DEMAND = 1 << 6;
        /// `IBV_ACCESS_HUGETLB`: a libibverbs hint about huge pages. Accepted and ignored.
        const HUGETLB = 1 << 7;
        /// `IBV_ACCESS_FLUSH_GLOBAL`: the MR may be the target of a global-visibility FLUSH.
        const FLUSH_GLOBAL = 1 << 8;
        /// `IBV_ACCESS_FLUSH_PERSISTENT`: persistence FLUSH. Only for a region that maps a file
        /// ([`MrTable::register_file`](super::MrTable::register_file): a persistence FLUSH
        /// `msync`s it); refused (`EOPNOTSUPP`) for anonymous memory, which has nowhere to persist.
        const FLUSH_PERSISTENT = 1 << 9;
        /// `IBV_ACCESS_RELAXED_ORDERING` (= `IBV_ACCESS_OPTIONAL_FIRST`): optional, ignored.
        const RELAXED_ORDERING = 1 << 20;
    }
}

impl Access {
    /// `IBV_ACCESS_OPTIONAL_RANGE`: bits 20..=29. A provider must accept and may ignore them.
    /// Not a flag of its own (outside the `bitflags!` block), so that [`Access::all`] and
    /// `Debug` name only single rights.
    pub const OPTIONAL_RANGE: Access = Access::from_bits_retain(0x3ff0_0000);

    /// Every non-optional bit softrnic knows (bits 0..=9).
    const KNOWN: Access = Access::from_bits_retain(0x3ff);

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
        let required = self.difference(Access::OPTIONAL_RANGE);
        if !Access::KNOWN.contains(required) {
            return Err(Error::InvalidArgument("unknown access flag"));
        }
        Ok(required)
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
            let a = LW | Access::from_bits_retain(1 << bit);
            assert!(
                matches!(a.check_for_mr(), Err(Error::InvalidArgument(_))),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn optional_bits_are_accepted_and_dropped() {
        for bit in 20..30 {
            let a = Access::REMOTE_READ | Access::from_bits_retain(1 << bit);
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
        assert_eq!(format!("{a:?}"), "Access(LOCAL_WRITE | REMOTE_READ)");
        assert_eq!(format!("{:?}", Access::empty()), "Access(0x0)");
        assert_eq!(
            format!("{:?}", Access::from_bits_retain(1 << 21)),
            "Access(0x200000)"
        );
    }
}
