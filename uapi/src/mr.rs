//! Memory regions (`ibv_reg_mr`, `ibv_dereg_mr`): see the crate doc for how aliasing is
//! avoided.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::Arc;

use softrnic_provider::mr::{Access, MrKeys};
use softrnic_provider::{Error, Result};

use crate::context::Pd;

/// The page size regions are aligned to.
pub const PAGE: usize = 4096;

/// Allocates `len` zeroed bytes in whole pages, registers them with `register`, and makes
/// the region the buffer's owner; frees the buffer if registration fails.
pub(crate) fn with_owned_buffer(
    len: usize,
    register: impl FnOnce(*mut u8) -> Result<MemoryRegion>,
) -> Result<MemoryRegion> {
    if len == 0 {
        return Err(Error::InvalidArgument("zero-length memory region"));
    }
    let layout = len
        .checked_next_multiple_of(PAGE)
        .and_then(|size| Layout::from_size_align(size, PAGE).ok())
        .ok_or(Error::InvalidArgument("region too large"))?;
    // SAFETY: non-zero size.
    let addr = unsafe { alloc_zeroed(layout) };
    if addr.is_null() {
        return Err(Error::NoMemory("cannot allocate the region"));
    }
    match register(addr) {
        Ok(mut mr) => {
            mr.owned = Some(layout);
            Ok(mr)
        }
        Err(e) => {
            // SAFETY: allocated above with this layout, never registered.
            unsafe { dealloc(addr, layout) };
            Err(e)
        }
    }
}

/// A registered memory region (`ibv_mr`).
pub struct MemoryRegion {
    pub(crate) pd: Pd,
    pub(crate) keys: MrKeys,
    pub(crate) addr: *mut u8,
    pub(crate) len: usize,
    pub(crate) access: Access,
    /// The layout, when the region owns its buffer.
    pub(crate) owned: Option<Layout>,
    pub(crate) registered: bool,
    /// Registered by `reg_mr_relaxed` (`relaxed.rs`).
    pub(crate) relaxed: bool,
    /// The file mapping the region covers (`mr_file.rs`), unmapped after deregistration.
    pub(crate) mapping: Option<memmap2::MmapMut>,
    /// The device memory the region covers (`dm.rs`), held until deregistration.
    pub(crate) device_memory: Option<crate::dm::DmHold>,
}

// SAFETY: the region's bytes are only reached through the key table (which synchronizes), and
// the raw pointer is only used to free an owned buffer after deregistration.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; `&MemoryRegion` gives no access that bypasses the table.
unsafe impl Sync for MemoryRegion {}

impl Pd {
    /// `ibv_reg_mr` of a new, zeroed, page-aligned buffer of `len` bytes that the region owns.
    ///
    /// # Errors
    /// As `ibv_reg_mr`: `EINVAL` for bad access flags (REMOTE_WRITE or REMOTE_ATOMIC without
    /// LOCAL_WRITE) or `len` 0; `ENOMEM` if the buffer or a key cannot be had.
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        // SAFETY: the buffer is ours, valid until `Drop` frees it after deregistration.
        with_owned_buffer(len, |addr| unsafe { self.reg_mr_raw(addr, len, access) })
    }

    /// `ibv_reg_mr` of memory the caller owns; peers address it by its virtual address.
    ///
    /// # Safety
    /// `addr..addr + len` must stay valid for reads and writes until the region is dropped or
    /// deregistered, and the caller must not hold Rust references to it meanwhile (the NIC
    /// writes it at any time, as a DMA engine would).
    ///
    /// # Errors
    /// As [`Pd::reg_mr`].
    pub unsafe fn reg_mr_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion> {
        let mrs = self.ctx.inner.device.mrs();
        // SAFETY: forwarded from the caller.
        let keys = unsafe { mrs.register(self.handle, addr, len, addr as u64, access)? };
        Ok(self.registered(keys, addr, len, access))
    }

    /// The region `keys` name: `len` bytes at `addr` with `access`, registered in this PD (by
    /// the caller: a plain registration, not owning its buffer; callers set what differs).
    pub(crate) fn registered(
        &self,
        keys: MrKeys,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> MemoryRegion {
        MemoryRegion {
            pd: self.clone(),
            keys,
            addr,
            len,
            access,
            owned: None,
            registered: true,
            relaxed: false,
            mapping: None,
            device_memory: None,
        }
    }
}

impl MemoryRegion {
    /// The access flags it was registered with (`ibv_reg_mr`'s `access`).
    pub fn access(&self) -> Access {
        self.access
    }

    /// The PD the region belongs to.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The L_Key, for SGEs.
    pub fn lkey(&self) -> u32 {
        self.keys.lkey
    }

    /// The R_Key, for peers.
    pub fn rkey(&self) -> u32 {
        self.keys.rkey
    }

    /// The address peers and SGEs use (the region's start).
    pub fn addr(&self) -> u64 {
        self.addr as u64
    }

    /// The address of the region's first byte as peers and SGEs name it (`ibv_mr`'s iova):
    /// 0 for a zero-based region, else [`MemoryRegion::addr`]. Unlike the buffer's address it
    /// is the same in every run for a zero-based region.
    pub fn iova(&self) -> u64 {
        self.start_va()
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: zero-length regions are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the region's first byte for SGEs and peers: 0 when zero-based (the
    /// key table's iova), else its virtual address.
    fn start_va(&self) -> u64 {
        if self.access.contains(Access::ZERO_BASED) {
            0
        } else {
            self.addr()
        }
    }

    /// The address of `offset..offset + len` of the region, if the range is inside it
    /// (checked without overflow: `EINVAL` otherwise).
    fn va(&self, offset: usize, len: usize) -> Result<u64> {
        const OUTSIDE: Error = Error::InvalidArgument("the range leaves the memory region");
        if offset.checked_add(len).ok_or(OUTSIDE)? > self.len {
            return Err(OUTSIDE);
        }
        // Cannot overflow: registration refused regions whose end overflows.
        Ok(self.start_va() + offset as u64)
    }

    /// Copies `out.len()` bytes from `offset` out of the region.
    ///
    /// # Errors
    /// `EINVAL` beyond the region or after deregistration.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let va = self.va(offset, out.len())?;
        let mrs = self.pd.ctx.inner.device.mrs();
        mrs.with_local_read(self.keys.lkey, self.pd.handle, va, out.len(), |b| {
            b.copy_to(out)
        })
        .map_err(|_| Error::InvalidArgument("read outside the memory region"))
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// # Errors
    /// `EINVAL` beyond the region, after deregistration, or without LOCAL_WRITE.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let va = self.va(offset, data.len())?;
        let mrs = self.pd.ctx.inner.device.mrs();
        mrs.with_local_write(self.keys.lkey, self.pd.handle, va, data.len(), |mut b| {
            b.copy_from(data)
        })
        .map_err(|_| Error::InvalidArgument("write outside the memory region (or no LOCAL_WRITE)"))
    }

    /// An SGE of `len` bytes at `offset`, unchecked as an `ibv_sge` is: a range outside the
    /// region fails when the work request executes (`IBV_WC_LOC_PROT_ERR`). An offset whose
    /// address overflows gets lkey 0, which no region has. [`try_sge`](Self::try_sge) checks.
    pub fn sge(&self, offset: usize, len: u32) -> crate::Sge {
        match self.start_va().checked_add(offset as u64) {
            Some(addr) => crate::Sge {
                addr,
                length: len,
                lkey: self.keys.lkey,
            },
            None => crate::Sge {
                addr: 0,
                length: len,
                lkey: 0,
            },
        }
    }

    /// An SGE of `len` bytes at `offset`, if they are inside the region.
    ///
    /// # Errors
    /// `EINVAL` if `offset..offset + len` leaves the region (or overflows).
    pub fn try_sge(&self, offset: usize, len: u32) -> Result<crate::Sge> {
        Ok(crate::Sge {
            addr: self.va(offset, len as usize)?,
            length: len,
            lkey: self.keys.lkey,
        })
    }

    /// `ibv_dereg_mr`: the keys die; accesses in progress finish first. (For a relaxed region,
    /// as [`dereg_relaxed`](Self::dereg_relaxed): the keys die at the next flush.)
    ///
    /// # Errors
    /// `EBUSY` while a memory window is bound: the region is given back, still registered
    /// and usable, so that the caller can unbind and try again (`ibv_dereg_mr` leaves the MR
    /// valid when it fails).
    pub fn dereg(mut self) -> core::result::Result<(), (MemoryRegion, Error)> {
        match self.deregister() {
            Ok(()) => Ok(()),
            Err(e) => Err((self, e)),
        }
    }

    /// `ibv_rereg_mr` with `IBV_REREG_MR_CHANGE_PD` and/or `IBV_REREG_MR_CHANGE_ACCESS`
    /// (`None` keeps it): the region keeps its keys, which carry the new rights and PD from
    /// now on (see the key table's `rereg.rs`). Changing the translation is
    /// [`MemoryRegion::rereg_translation`].
    ///
    /// # Errors
    /// `EINVAL` for bad access flags, a PD of another device, or a relaxed region; `EBUSY`
    /// while a memory window is bound; on any error the region is unchanged.
    pub fn rereg(&mut self, pd: Option<&Pd>, access: Option<Access>) -> Result<()> {
        // SAFETY: no new translation.
        unsafe { self.rereg_with(pd, access, None) }
    }

    /// `ibv_rereg_mr` with `IBV_REREG_MR_CHANGE_TRANSLATION` (and optionally PD and access):
    /// the region now covers `len` bytes at `addr`, addressed by peers from `addr`, under new
    /// keys (the old ones die as at deregistration).
    ///
    /// # Safety
    /// As [`Pd::reg_mr_raw`] for the new memory. The region must not own its buffer (one
    /// from [`Pd::reg_mr`]): that buffer would be lost (refused with `EINVAL`).
    ///
    /// # Errors
    /// As [`MemoryRegion::rereg`], and `EINVAL` for a bad range.
    pub unsafe fn rereg_translation(
        &mut self,
        addr: *mut u8,
        len: usize,
        pd: Option<&Pd>,
        access: Option<Access>,
    ) -> Result<()> {
        if self.owned.is_some() {
            return Err(Error::InvalidArgument(
                "the region owns its buffer; register the new memory instead",
            ));
        }
        let t = softrnic_provider::mr::Translation {
            addr,
            len,
            iova: addr as u64,
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.rereg_with(pd, access, Some(t)) }
    }

    /// # Safety
    /// As [`MemoryRegion::rereg_translation`] when `translation` is given.
    unsafe fn rereg_with(
        &mut self,
        pd: Option<&Pd>,
        access: Option<Access>,
        translation: Option<softrnic_provider::mr::Translation>,
    ) -> Result<()> {
        if self.relaxed || !self.registered {
            return Err(Error::InvalidArgument(
                "not a registered normal memory region",
            ));
        }
        if pd.is_some_and(|p| !Arc::ptr_eq(&p.ctx.inner, &self.pd.ctx.inner)) {
            return Err(Error::InvalidArgument("the PD belongs to another device"));
        }
        let change = softrnic_provider::mr::Rereg {
            translation,
            pd: pd.map(|p| p.handle),
            access,
        };
        let mrs = self.pd.ctx.inner.device.mrs().clone();
        // SAFETY: forwarded from the caller.
        let keys = unsafe { mrs.reregister(self.keys.lkey, change)? };
        self.keys = keys;
        if let Some(p) = pd {
            self.pd = p.clone();
        }
        if let Some(a) = access {
            self.access = a;
        }
        if let Some(t) = translation {
            self.addr = t.addr;
            self.len = t.len;
        }
        Ok(())
    }

    pub(crate) fn deregister(&mut self) -> Result<()> {
        if self.registered && self.relaxed {
            self.pd.relaxed.deregister(self.keys.lkey)?;
            self.registered = false;
        } else if self.registered {
            self.pd.ctx.inner.device.mrs().deregister(self.keys.lkey)?;
            self.registered = false;
        }
        Ok(())
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        if self.deregister().is_err() {
            // Still registered (a bound window): leak the buffer (or mapping) rather than free
            // memory the NIC can reach.
            std::mem::forget(self.mapping.take());
            std::mem::forget(self.device_memory.take());
            return;
        }
        if let Some(layout) = self.owned {
            if self.relaxed {
                // Reachable until the next flush: freed by it.
                self.pd.relaxed.free_after_flush(self.addr, layout);
                return;
            }
            // SAFETY: allocated by `reg_mr` with this layout; deregistered, so unreachable.
            unsafe { dealloc(self.addr, layout) };
        }
    }
}
