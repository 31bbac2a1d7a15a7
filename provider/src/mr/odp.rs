//! On-demand paging (ODP): the capabilities softrnic reports and `ibv_advise_mr(3)`.
//!
//! Read first: rdma-core `ibv_reg_mr(3)` (`IBV_ACCESS_ON_DEMAND`), `ibv_query_device_ex(3)`
//! (`struct ibv_odp_caps`), `ibv_advise_mr(3)`; the kernel's `ib_umem_odp.c` and mlx5's
//! `odp.c` (`mlx5_ib_advise_mr_prefetch`, `get_prefetchable_mr`).
//!
//! # Why ODP is natural here
//!
//! A hardware NIC with ODP keeps no pages pinned: it faults on a missing translation and asks
//! the kernel for the page. softrnic's engine reads and writes through the process's own
//! mappings, so every page is "on demand" already: the CPU's own page fault brings it in.
//! An `ON_DEMAND` region is therefore an ordinary region (the flag is kept in its rights so
//! that prefetch can tell ODP regions from others), and every operation of every transport
//! works on it exactly as on a pinned one: [`ODP_TRANSPORT_CAPS`].
//!
//! Registration still checks that the range is mapped with the protection its rights need
//! (`pages.rs`), as for any region: the engine must never touch memory that is not there.
//! Implicit ODP (`ibv_reg_mr(pd, NULL, SIZE_MAX, ..)`, a region over the whole address space,
//! `IBV_ODP_SUPPORT_IMPLICIT`) is `implicit.rs`: nothing is checked at registration, so every
//! access to it goes through a copy that cannot fault (`process_vm_readv`/`writev`).
//!
//! # Prefetch
//!
//! `ibv_advise_mr` validates every SGE as the man page orders and then pages the range in with
//! `madvise(MADV_POPULATE_READ/WRITE)` (`pages.rs`): the same work a hardware NIC's prefetch
//! does minus the translation upload, and it changes no byte. `PREFETCH_NO_FAULT` only makes
//! present pages visible to a device; for softrnic every present page already is, so after the
//! validation it does nothing. With `IBV_ADVISE_MR_FLAG_FLUSH` a range that cannot be paged in
//! fails the call with `EFAULT`; without it the prefetch is best effort (the man page lets the
//! driver postpone it, and mlx5 ignores the outcome of its deferred work), so only the
//! validation can fail. The paging is always done before returning: postponing is allowed,
//! not required.

use core::fmt;

use super::check::{check_entry, AccessError, Op};
use super::{pages, read, Access, MrTable, PdHandle, Who};
use crate::wr::Sge;

bitflags::bitflags! {
    /// `enum ibv_odp_general_caps` (`ibv_odp_caps.general_caps`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OdpGeneralCaps: u64 {
        /// `IBV_ODP_SUPPORT`: explicit ODP regions.
        const SUPPORT = 1 << 0;
        /// `IBV_ODP_SUPPORT_IMPLICIT`: regions over the whole address space (`implicit.rs`).
        const SUPPORT_IMPLICIT = 1 << 1;
    }
}

bitflags::bitflags! {
    /// `enum ibv_odp_transport_cap_bits`: the operations an ODP region supports on one
    /// transport.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OdpTransportCap: u32 {
        /// `IBV_ODP_SUPPORT_SEND`.
        const SEND = 1 << 0;
        /// `IBV_ODP_SUPPORT_RECV`.
        const RECV = 1 << 1;
        /// `IBV_ODP_SUPPORT_WRITE`.
        const WRITE = 1 << 2;
        /// `IBV_ODP_SUPPORT_READ`.
        const READ = 1 << 3;
        /// `IBV_ODP_SUPPORT_ATOMIC`.
        const ATOMIC = 1 << 4;
        /// `IBV_ODP_SUPPORT_SRQ_RECV`.
        const SRQ_RECV = 1 << 5;
    }
}

/// The general ODP capabilities (`ibv_odp_caps.general_caps`).
pub const ODP_GENERAL_CAPS: OdpGeneralCaps =
    OdpGeneralCaps::SUPPORT.union(OdpGeneralCaps::SUPPORT_IMPLICIT);

/// What an ODP region supports per transport (`rc_odp_caps`, `uc_odp_caps`, `ud_odp_caps`,
/// `xrc_odp_caps`): each transport's own operations, since an ODP region is accessed like
/// any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OdpTransportCaps {
    /// RC: every operation.
    pub rc: OdpTransportCap,
    /// UC: SEND and RDMA WRITE (UC has no READ or atomics).
    pub uc: OdpTransportCap,
    /// UD: SEND only.
    pub ud: OdpTransportCap,
    /// XRC: RC's operations, its receives always from an XRC SRQ.
    pub xrc: OdpTransportCap,
}

/// softrnic's per-transport ODP capabilities.
pub const ODP_TRANSPORT_CAPS: OdpTransportCaps = OdpTransportCaps {
    rc: OdpTransportCap::SEND
        .union(OdpTransportCap::RECV)
        .union(OdpTransportCap::WRITE)
        .union(OdpTransportCap::READ)
        .union(OdpTransportCap::ATOMIC)
        .union(OdpTransportCap::SRQ_RECV),
    uc: OdpTransportCap::SEND
        .union(OdpTransportCap::RECV)
        .union(OdpTransportCap::WRITE)
        .union(OdpTransportCap::SRQ_RECV),
    ud: OdpTransportCap::SEND
        .union(OdpTransportCap::RECV)
        .union(OdpTransportCap::SRQ_RECV),
    xrc: OdpTransportCap::SEND
        .union(OdpTransportCap::WRITE)
        .union(OdpTransportCap::READ)
        .union(OdpTransportCap::ATOMIC)
        .union(OdpTransportCap::SRQ_RECV),
};

/// `enum ibv_advise_mr_advice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH` (0): page in for reading.
    Prefetch,
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE` (1): page in for writing; the region must be
    /// writable (`LOCAL_WRITE`).
    PrefetchWrite,
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT` (2): expose present pages, fault none in.
    PrefetchNoFault,
}

impl Advice {
    /// The advice of its C value; `None` for an unknown one (`EOPNOTSUPP`).
    pub fn from_raw(raw: u32) -> Option<Advice> {
        match raw {
            0 => Some(Advice::Prefetch),
            1 => Some(Advice::PrefetchWrite),
            2 => Some(Advice::PrefetchNoFault),
            _ => None,
        }
    }
}

bitflags::bitflags! {
    /// `enum ibv_advise_mr_flags`. Flags from a C caller are taken with
    /// [`from_bits_retain`](Self::from_bits_retain): [`MrTable::advise`] refuses an unknown
    /// bit with `EINVAL`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct AdviseFlags: u32 {
        /// `IBV_ADVISE_MR_FLAG_FLUSH`: complete the prefetch before returning, and report its
        /// failure.
        const FLUSH = 1 << 0;
    }
}

/// Why `ibv_advise_mr` failed, with the errno `ibv_advise_mr(3)` gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdviseError {
    /// `EOPNOTSUPP`: an unknown advice.
    NotSupported,
    /// `EINVAL`: unknown flags, no SGE, or an lkey naming a memory window.
    Invalid,
    /// `EFAULT`: an lkey that names no region (unknown, stale, being deregistered), a range
    /// outside its region, or (with the flush flag) pages that cannot be had.
    Fault,
    /// `EPERM`: a region of another PD ("outside the caller's security scope"), or
    /// `PREFETCH_WRITE` of a region without `LOCAL_WRITE`.
    Permission,
    /// `ENOENT`: the region is not an ODP region (as mlx5's `get_prefetchable_mr`, which
    /// finds no prefetchable region for the lkey).
    NotOdp,
}

impl AdviseError {
    /// The errno `ibv_advise_mr` returns.
    pub fn errno(self) -> i32 {
        match self {
            AdviseError::NotSupported => 95, // EOPNOTSUPP
            AdviseError::Invalid => 22,      // EINVAL
            AdviseError::Fault => 14,        // EFAULT
            AdviseError::Permission => 1,    // EPERM
            AdviseError::NotOdp => 2,        // ENOENT
        }
    }
}

impl fmt::Display for AdviseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdviseError::NotSupported => "unknown advice",
            AdviseError::Invalid => "invalid flags, SGE list, or a memory window's key",
            AdviseError::Fault => "invalid lkey, range outside the region, or unmapped pages",
            AdviseError::Permission => "another PD's region, or prefetch-write of a read-only one",
            AdviseError::NotOdp => "not an on-demand-paging region",
        })
    }
}

impl std::error::Error for AdviseError {}

/// The `ibv_advise_mr(3)` errno of a failed lkey check.
fn advise_error(e: AccessError) -> AdviseError {
    match e {
        AccessError::PdMismatch | AccessError::MissingRight(_) => AdviseError::Permission,
        AccessError::Unbound | AccessError::QpMismatch => AdviseError::Invalid,
        AccessError::BadIndex
        | AccessError::NotRegistered
        | AccessError::KeyMismatch
        | AccessError::Invalidated
        | AccessError::OutOfBounds
        | AccessError::Misaligned => AdviseError::Fault,
    }
}

impl MrTable {
    /// `ibv_advise_mr(pd, advice, flags, sg_list, num_sge)` (module doc): checks every SGE
    /// (an lkey of an ODP region of `pd`, its range inside the region, `LOCAL_WRITE` for
    /// [`Advice::PrefetchWrite`]), then pages each range in.
    ///
    /// # Errors
    ///
    /// The first failure, as [`AdviseError`] describes; nothing is paged in unless every SGE
    /// passes.
    pub fn advise(
        &self,
        pd: PdHandle,
        advice: Advice,
        flags: AdviseFlags,
        sges: &[Sge],
    ) -> Result<(), AdviseError> {
        if !AdviseFlags::all().contains(flags) || sges.is_empty() {
            return Err(AdviseError::Invalid);
        }
        let op = match advice {
            Advice::PrefetchWrite => Op::LocalWrite,
            Advice::Prefetch | Advice::PrefetchNoFault => Op::LocalRead,
        };
        for sge in sges {
            self.with_odp_range(pd, op, sge, |_, _| Ok(()))?;
        }
        if advice == Advice::PrefetchNoFault {
            return Ok(());
        }
        let writable = advice == Advice::PrefetchWrite;
        for sge in sges {
            // The lock held by `with_odp_range` keeps the region registered while its pages
            // are faulted in; `MADV_POPULATE_*` touches no byte and raises no signal.
            let paged = self.with_odp_range(pd, op, sge, |addr, len| {
                pages::fault_in(addr, len, writable).map_err(|_| AdviseError::Fault)
            });
            if flags.contains(AdviseFlags::FLUSH) {
                paged?;
            }
        }
        Ok(())
    }

    /// Runs `f(address, length)` on the memory of `sge` under its region's read lock, after
    /// checking that the lkey names an ODP region of `pd` allowing `op` over the range.
    fn with_odp_range(
        &self,
        pd: PdHandle,
        op: Op,
        sge: &Sge,
        f: impl FnOnce(usize, usize) -> Result<(), AdviseError>,
    ) -> Result<(), AdviseError> {
        let len = sge.length as usize;
        let (slot, key, op, window) = self
            .resolve(sge.lkey, Who::local(pd), op, sge.addr, len)
            .map_err(advise_error)?;
        if window.is_some() {
            return Err(AdviseError::Invalid);
        }
        let entry = read(&slot.entry);
        if entry.window.is_some() {
            return Err(AdviseError::Invalid);
        }
        let tag = slot.tag.load(core::sync::atomic::Ordering::Acquire);
        let offset = check_entry(tag, &entry, key, pd, op, sge.addr, len).map_err(advise_error)?;
        if !entry.access.contains(Access::ON_DEMAND) {
            return Err(AdviseError::NotOdp);
        }
        f(entry.addr.0 as usize + offset, len)
    }
}
