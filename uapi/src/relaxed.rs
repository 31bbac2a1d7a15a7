//! Relaxed memory regions, after Solaris OFED (`ibv_reg_mr_relaxed`, `ibv_dereg_mr_relaxed`,
//! `ibv_flush_relaxed_mr`): [`Pd::reg_mr_relaxed`], [`MemoryRegion::dereg_relaxed`],
//! [`Pd::flush_relaxed_mr`].
//!
//! Each PD gets a pool of keys on its first relaxed registration
//! ([`RELAXED_POOL_DEFAULT`] keys, or what [`Pd::init_relaxed_pool`] asked), given back when
//! the last handle of the PD (regions included) is dropped. The range is rounded out to 4 KiB
//! pages ([`RELAXED_PAGE`]): the keys reach every byte of the pages the region touches. A
//! registration of exactly the pages and rights of a region deregistered but not yet flushed
//! takes that region back, keys and all, with no new key and no page check: the fast path of
//! a loop that registers the same buffers over and over.
//!
//! **Window of vulnerability** (the provider's `mr/relaxed.rs` says it exactly): after
//! `dereg_relaxed` (or dropping a relaxed region) returns, its keys keep reading and writing
//! its memory, locally and for peers, until [`Pd::flush_relaxed_mr`] (or a flush the provider
//! makes on its own under pool pressure) returns; after that none can. A region that owns its
//! buffer ([`Pd::reg_mr_relaxed`]) frees it only after a flush of the PD has covered it.

use std::alloc::{dealloc, Layout};
use std::sync::{Mutex, OnceLock, PoisonError};

pub use softrnic_provider::mr::RELAXED_PAGE;
use softrnic_provider::mr::{Access, PdHandle, RelaxedPool};
use softrnic_provider::{Error, Result};

use crate::context::{Context, Pd};
use crate::mr::{with_owned_buffer, MemoryRegion, PAGE};

// Owned relaxed buffers are whole pages of `with_owned_buffer`, the pages relaxed access extends to.
const _: () = assert!(PAGE == RELAXED_PAGE);

/// Keys in a PD's relaxed pool unless [`Pd::init_relaxed_pool`] says otherwise; the provider
/// flushes on its own when the pool is empty and half of them await invalidation.
pub const RELAXED_POOL_DEFAULT: usize = 1024;

/// A PD's relaxed state: the pool and the owned buffers waiting for a flush.
pub(crate) struct Relaxed {
    ctx: Context,
    pd: PdHandle,
    pool: OnceLock<RelaxedPool>,
    /// Buffers of deregistered owned regions: (address, layout), freed after a flush.
    pending: Mutex<Vec<(usize, Layout)>>,
}

impl Relaxed {
    pub(crate) fn new(ctx: Context, pd: PdHandle) -> Relaxed {
        Relaxed {
            ctx,
            pd,
            pool: OnceLock::new(),
            pending: Mutex::new(Vec::new()),
        }
    }

    fn init(&self, capacity: usize, flush_threshold: usize) -> Result<&RelaxedPool> {
        if let Some(pool) = self.pool.get() {
            return Ok(pool);
        }
        let mrs = self.ctx.inner.device.mrs();
        let pool = mrs.relaxed_pool(self.pd, capacity, flush_threshold)?;
        if let Err(lost) = self.pool.set(pool) {
            // Another thread made one first: give this one's keys back.
            let _ = mrs.release_relaxed_pool(&lost);
        }
        self.pool
            .get()
            .ok_or(Error::NoMemory("relaxed pool not initialised"))
    }

    fn pool(&self) -> Result<&RelaxedPool> {
        self.init(RELAXED_POOL_DEFAULT, RELAXED_POOL_DEFAULT / 2)
    }

    pub(crate) fn deregister(&self, key: u32) -> Result<()> {
        let pool = self
            .pool
            .get()
            .ok_or(Error::InvalidArgument("not a relaxed memory region"))?;
        self.ctx.inner.device.mrs().deregister_relaxed(pool, key)
    }

    pub(crate) fn free_after_flush(&self, addr: *mut u8, layout: Layout) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((addr as usize, layout));
    }

    fn pending_len(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn flush(&self) -> usize {
        let Some(pool) = self.pool.get() else {
            return 0;
        };
        // Buffers parked before the flush began belong to regions it covers.
        let parked =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        let n = self.ctx.inner.device.mrs().flush_relaxed(pool);
        for (addr, layout) in parked {
            // SAFETY: allocated by `reg_mr_relaxed` with this layout; its region was marked
            // before this flush began, and the flush has returned: no key reaches it.
            unsafe { dealloc(addr as *mut u8, layout) };
        }
        n
    }
}

impl Drop for Relaxed {
    fn drop(&mut self) {
        // The last handle of the PD: every region of it has been dropped (each holds a `Pd`).
        self.flush();
        if let Some(pool) = self.pool.get() {
            let _ = self.ctx.inner.device.mrs().release_relaxed_pool(pool);
        }
    }
}

impl Pd {
    /// Sets the size of this PD's relaxed pool (`capacity` keys taken from the device now) and
    /// the number of regions awaiting invalidation at which a registration that finds the
    /// pool empty flushes on its own (above `capacity`: never, so it fails with `EAGAIN`).
    ///
    /// # Errors
    /// `EBUSY` if the pool exists already; `EINVAL` for `capacity` 0; `ENOMEM` if the device
    /// has fewer free keys.
    pub fn init_relaxed_pool(&self, capacity: usize, flush_threshold: usize) -> Result<()> {
        if self.relaxed.pool.get().is_some() {
            return Err(Error::Busy("the relaxed pool exists already"));
        }
        self.relaxed.init(capacity, flush_threshold).map(drop)
    }

    /// `ibv_reg_mr_relaxed` of a new, zeroed, page-aligned buffer of `len` bytes that the
    /// region owns (freed after the flush that follows its deregistration).
    ///
    /// # Errors
    /// As `ibv_reg_mr` (`EINVAL` for bad access flags or `len` 0, also for `ZERO_BASED`;
    /// `ENOMEM`), and `EAGAIN` when the pool's keys are held by regions awaiting
    /// invalidation: [`flush_relaxed_mr`](Self::flush_relaxed_mr) and retry.
    pub fn reg_mr_relaxed(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        if len == 0 {
            return Err(Error::InvalidArgument("zero-length memory region"));
        }
        access.check_for_mr()?;
        // Keep parked buffers bounded when only the provider's own batches flush.
        if self.relaxed.pending_len() >= RELAXED_POOL_DEFAULT {
            self.relaxed.flush();
        }
        // SAFETY: whole pages of ours, valid until a flush after deregistration frees them.
        with_owned_buffer(len, |addr| unsafe {
            self.reg_mr_relaxed_raw(addr, len, access)
        })
    }

    /// `ibv_reg_mr_relaxed` of memory the caller owns.
    ///
    /// # Safety
    /// As [`Pd::reg_mr_raw`], for **every byte of the 4 KiB pages** that `addr..addr + len`
    /// touches, and until a [`flush_relaxed_mr`](Self::flush_relaxed_mr) that began after the
    /// region's deregistration (or drop) has returned.
    ///
    /// # Errors
    /// As [`Pd::reg_mr_relaxed`].
    pub unsafe fn reg_mr_relaxed_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion> {
        // Refusals that need no key do not make the pool.
        let checked = access.check_for_mr()?;
        if len == 0 || addr.is_null() || checked.contains(Access::ZERO_BASED) {
            return Err(Error::InvalidArgument(
                "zero length, null address or ZERO_BASED relaxed region",
            ));
        }
        let pool = self.relaxed.pool()?;
        let mrs = self.ctx.inner.device.mrs();
        // SAFETY: forwarded from the caller.
        let keys = unsafe { mrs.register_relaxed(pool, addr, len, access)? };
        let mut mr = self.registered(keys, addr, len, access);
        mr.relaxed = true;
        Ok(mr)
    }

    /// `ibv_flush_relaxed_mr`: invalidates every relaxed region of this PD deregistered so
    /// far and returns when none of their keys reaches memory any more; frees the buffers of
    /// those that owned theirs. Returns how many regions it invalidated.
    pub fn flush_relaxed_mr(&self) -> usize {
        self.relaxed.flush()
    }
}

impl MemoryRegion {
    /// `ibv_dereg_mr_relaxed`: marks the region for invalidation and returns at once; its keys
    /// keep working until the PD's next flush (see the module doc).
    ///
    /// # Errors
    /// The region is given back, still registered, with `EINVAL` if it is not relaxed (use
    /// [`dereg`](Self::dereg)) or `EBUSY` while a memory window is bound (as
    /// [`dereg`](Self::dereg) does).
    pub fn dereg_relaxed(mut self) -> core::result::Result<(), (MemoryRegion, Error)> {
        if !self.relaxed {
            return Err((self, Error::InvalidArgument("not a relaxed memory region")));
        }
        match self.deregister() {
            Ok(()) => Ok(()),
            Err(e) => Err((self, e)),
        }
    }

    /// Whether it was registered by `reg_mr_relaxed`.
    pub fn is_relaxed(&self) -> bool {
        self.relaxed
    }
}
