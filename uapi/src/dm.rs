//! Device memory: `ibv_alloc_dm(3)`, `ibv_free_dm`, `ibv_memcpy_to_dm`, `ibv_memcpy_from_dm`
//! and `ibv_reg_dm_mr`.
//!
//! A NIC with device memory (mlx5's MEMIC) lets a program allocate some of the NIC's own
//! memory, copy to and from it with `memcpy`-like calls, and register it as a memory region
//! that QPs use like host memory (zero-based: addresses are offsets into the region). softrnic
//! has no memory of its own, so host memory stands in: each allocation is a zeroed,
//! page-aligned buffer, and the device lends at most [`MAX_DM_SIZE`] bytes at a time, as a
//! real NIC's on-chip memory is small. The budget is the running device's, shared by every
//! context on it in the process.
//!
//! Copies follow mlx5 (`mlx5_access_dm`): offset and length must be multiples of 4 bytes,
//! and the data moves in 32-bit words, each copied atomically (relaxed), so a copy racing a
//! peer's RDMA WRITE into a region of the DM gives some mix of whole words, as on hardware.
//!
//! Freeing a DM that a region still covers is refused with `EBUSY`, as the kernel's uverbs
//! refuses to destroy an object still in use (`ib_destroy_usecnt`). The buffer itself lives
//! until the last region over it is gone, so no key ever reaches freed memory.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use softrnic_provider::mr::Access;
use softrnic_provider::{Error, Result};

use crate::context::{Context, Pd};
use crate::mr::{MemoryRegion, PAGE};

/// The device memory a device lends at a time (`ibv_device_attr_ex.max_dm_size`): 256 KiB,
/// the size of a ConnectX's MEMIC.
pub const MAX_DM_SIZE: usize = 256 * 1024;

/// The granularity of device memory copies: offsets and lengths are multiples of 4 bytes.
pub const DM_ALIGN: usize = 4;

/// The largest alignment an allocation may ask for (`log_align_req`): a page, which every
/// allocation has anyway.
const MAX_LOG_ALIGN: u32 = PAGE.trailing_zeros();

/// Device memory (`struct ibv_dm`). Dropping it frees it once no region covers it;
/// [`DeviceMemory::free`] reports a region that still does.
pub struct DeviceMemory {
    inner: Arc<DmInner>,
}

struct DmInner {
    ctx: Context,
    /// The buffer: `layout.size()` bytes, of which the first `len` are the DM's.
    addr: *mut u8,
    layout: Layout,
    len: usize,
    /// The regions registered over it.
    regions: Mutex<usize>,
}

// SAFETY: the buffer is reached only through atomic word copies and the key table, which
// synchronizes; the raw pointer is freed once, by the last owner.
unsafe impl Send for DmInner {}
// SAFETY: as above.
unsafe impl Sync for DmInner {}

impl Drop for DmInner {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc_dm` with this layout; the last owner, and no region
        // (each holds an owner) reaches it any more.
        unsafe { dealloc(self.addr, self.layout) };
        self.ctx
            .inner
            .dm_in_use
            .fetch_sub(self.len, Ordering::AcqRel);
    }
}

/// What a region over device memory holds: the DM, counted as in use until dropped.
pub(crate) struct DmHold(Arc<DmInner>);

impl Drop for DmHold {
    fn drop(&mut self) {
        *lock(&self.0.regions) -= 1;
    }
}

fn lock(m: &Mutex<usize>) -> std::sync::MutexGuard<'_, usize> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `len` bytes of `budget` (bytes in use, of at most [`MAX_DM_SIZE`]).
fn reserve(budget: &AtomicUsize, len: usize) -> Result<()> {
    budget
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(len).filter(|n| *n <= MAX_DM_SIZE)
        })
        .map(drop)
        .map_err(|_| Error::NoMemory("not enough device memory left"))
}

impl Context {
    /// `ibv_alloc_dm`: `len` zeroed bytes of device memory, aligned to `2^log_align` bytes.
    ///
    /// # Errors
    /// `EINVAL` for `len` 0 or an alignment above a page; `ENOMEM` when the device has
    /// fewer than `len` bytes left (see [`MAX_DM_SIZE`]) or the host cannot allocate them.
    pub fn alloc_dm(&self, len: usize, log_align: u32) -> Result<DeviceMemory> {
        if len == 0 {
            return Err(Error::InvalidArgument("zero-length device memory"));
        }
        if log_align > MAX_LOG_ALIGN {
            return Err(Error::InvalidArgument(
                "device memory alignment above a page",
            ));
        }
        reserve(&self.inner.dm_in_use, len)?;
        let layout = Layout::from_size_align(len.next_multiple_of(PAGE), PAGE)
            .expect("at most MAX_DM_SIZE bytes");
        // SAFETY: non-zero size.
        let addr = unsafe { alloc_zeroed(layout) };
        if addr.is_null() {
            self.inner.dm_in_use.fetch_sub(len, Ordering::AcqRel);
            return Err(Error::NoMemory("cannot allocate the device memory"));
        }
        let inner = DmInner {
            ctx: self.clone(),
            addr,
            layout,
            len,
            regions: Mutex::new(0),
        };
        Ok(DeviceMemory {
            inner: Arc::new(inner),
        })
    }
}

impl DeviceMemory {
    /// The length in bytes (`ibv_alloc_dm_attr.length`).
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether it is empty (never: zero-length allocations are refused).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The words `offset..offset + len` of the DM, after mlx5's checks.
    ///
    /// # Errors
    /// `EFAULT` beyond the DM (checked first, as mlx5 does); `EINVAL` for an offset or
    /// length that is not a multiple of [`DM_ALIGN`].
    fn words(&self, offset: u64, len: usize) -> Result<&[AtomicU32]> {
        let end = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(len));
        let Some(end) = end.filter(|e| *e <= self.inner.len) else {
            return Err(Error::BadAddress("beyond the device memory"));
        };
        let start = end - len;
        if start % DM_ALIGN != 0 || len % DM_ALIGN != 0 {
            return Err(Error::InvalidArgument(
                "device memory is copied in 4-byte words",
            ));
        }
        // SAFETY: `start..end` is inside the buffer (alive while `self` is), page-aligned
        // plus a multiple of 4, so aligned for AtomicU32; every access to these bytes outside
        // the key table is through atomics.
        Ok(unsafe {
            core::slice::from_raw_parts(
                self.inner.addr.add(start).cast::<AtomicU32>(),
                len / DM_ALIGN,
            )
        })
    }

    /// `ibv_memcpy_to_dm`: copies `data` into the DM at `offset`.
    ///
    /// # Errors
    /// As [`DeviceMemory::copy_from`].
    pub fn copy_to(&self, offset: u64, data: &[u8]) -> Result<()> {
        let words = self.words(offset, data.len())?;
        for (w, bytes) in words.iter().zip(data.chunks_exact(DM_ALIGN)) {
            let v = u32::from_ne_bytes(bytes.try_into().expect("4-byte chunk"));
            w.store(v, Ordering::Relaxed);
        }
        Ok(())
    }

    /// `ibv_memcpy_from_dm`: fills `out` from the DM at `offset`.
    ///
    /// # Errors
    /// `EFAULT` if `offset..offset + out.len()` is not inside the DM; `EINVAL` if `offset` or
    /// the length is not a multiple of [`DM_ALIGN`].
    pub fn copy_from(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let words = self.words(offset, out.len())?;
        for (w, bytes) in words.iter().zip(out.chunks_exact_mut(DM_ALIGN)) {
            bytes.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        Ok(())
    }

    /// Another handle on the same device memory, as `ibv_import_dm` gives one: the memory
    /// lives while either does.
    pub fn share(&self) -> DeviceMemory {
        DeviceMemory {
            inner: Arc::clone(&self.inner),
        }
    }

    /// `ibv_free_dm`: frees the DM.
    ///
    /// # Errors
    /// `EBUSY` while a memory region covers it: it is given back, unchanged.
    pub fn free(self) -> core::result::Result<(), (DeviceMemory, Error)> {
        if *lock(&self.inner.regions) != 0 {
            return Err((
                self,
                Error::Busy("a memory region covers the device memory"),
            ));
        }
        Ok(())
    }
}

impl Pd {
    /// `ibv_reg_dm_mr`: registers `len` bytes of `dm` from `offset`, addressed from 0
    /// (`access` must include [`Access::ZERO_BASED`]). `len` may be 0.
    ///
    /// # Errors
    /// `EINVAL` for a DM of another device, a range beyond the DM, or bad access flags
    /// (see `Access::check_for_device_memory`); `ENOMEM` when the key table is full.
    pub fn reg_dm_mr(
        &self,
        dm: &DeviceMemory,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion> {
        let dm = &dm.inner;
        if !Arc::ptr_eq(&dm.ctx.inner.shared, &self.ctx.inner.shared) {
            return Err(Error::InvalidArgument("the DM belongs to another device"));
        }
        let start = usize::try_from(offset)
            .ok()
            .filter(|o| len <= dm.len && *o <= dm.len - len)
            .ok_or(Error::InvalidArgument(
                "the range is beyond the device memory",
            ))?;
        let access = access.check_for_device_memory()?;
        // Counted before the keys exist, so a racing free sees the region.
        *lock(&dm.regions) += 1;
        let hold = DmHold(dm.clone());
        // SAFETY: `start + len <= dm.len`, inside the buffer, which `hold` keeps alive for as
        // long as the region exists (its Drop leaks the hold if deregistration fails).
        let addr = unsafe { dm.addr.add(start) };
        let mrs = self.ctx.inner.device.mrs();
        // SAFETY: as above; the buffer is touched outside the table only by atomic copies.
        let keys = unsafe { mrs.register_device_memory(self.handle, addr, len, access)? };
        let mut mr = self.registered(keys, addr, len, access);
        mr.device_memory = Some(hold);
        Ok(mr)
    }
}
