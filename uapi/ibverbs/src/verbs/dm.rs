//! Device memory: the `verbs_context` ops `alloc_dm`, `free_dm` and `reg_dm_mr` that verbs.h's
//! inline `ibv_alloc_dm`, `ibv_free_dm` and `ibv_reg_dm_mr` call, and the `memcpy_to_dm` /
//! `memcpy_from_dm` pointers of `struct ibv_dm` behind the inline `ibv_memcpy_to_dm` and
//! `ibv_memcpy_from_dm` (`ibv_alloc_dm(3)`).
//!
//! An `ibv_dm` is the first field of a boxed [`SoftDm`] holding the [`DeviceMemory`]; the
//! memory itself is host memory standing in for the NIC's (`softrnic_uapi`'s `dm.rs`, with
//! the budget `max_dm_size` reports). A region over it is an ordinary `ibv_mr` whose keys
//! address the DM from 0 (`IBV_ACCESS_ZERO_BASED` is required), so its `addr` is NULL, as
//! rdma-core's `ibv_cmd_reg_dm_mr` sets it.
//!
//! Errors are mlx5's: `ibv_alloc_dm` NULL with `EINVAL` for a non-zero `comp_mask` (or length
//! 0, an alignment above a page) and `ENOMEM` past the budget; the copies `EFAULT` beyond the
//! DM and `EINVAL` for an offset or length that is not a multiple of 4; `ibv_free_dm`
//! `EBUSY` while a region covers the DM, as the kernel refuses to destroy an object in use.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, c_uint, c_void, size_t};
use softrnic_uapi::{Access, DeviceMemory};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_alloc_dm_attr, ibv_dm, ibv_mr, ibv_pd};
use crate::context;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::pd::{pd_of, publish_mr};

/// `IBV_DM_MASK_HANDLE` (`enum ibv_dm_mask`): `ibv_dm.handle` is valid.
const DM_MASK_HANDLE: u32 = 1 << 0;

/// Device memory.
#[repr(C)]
struct SoftDm {
    ibv: ibv_dm,
    dm: DeviceMemory,
}

pub(crate) static DMS: Live = Live::new();

/// The handles given to DMs, one per allocation in the process.
static NEXT_HANDLE: AtomicU32 = AtomicU32::new(1);

/// The DM at `dm`, if alive. Valid until `ibv_free_dm(dm)`.
fn dm_of<'a>(dm: *const ibv_dm) -> Option<&'a SoftDm> {
    // SAFETY: a live DM pointer is the `ibv` field, at offset 0, of a boxed SoftDm.
    DMS.contains(dm).then(|| unsafe { &*dm.cast::<SoftDm>() })
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// `struct ibv_dm *alloc_dm(struct ibv_context *, struct ibv_alloc_dm_attr *)`: NULL with
/// `errno` as the module comment says (and `EINVAL` for a bad context or NULL `attr`).
pub(crate) unsafe extern "C" fn op_alloc_dm(
    context: *mut ibv_context,
    attr: *mut ibv_alloc_dm_attr,
) -> *mut ibv_dm {
    catch(null_mut(), || {
        let Some(c) = context::lookup(context) else {
            return fail(libc::EINVAL);
        };
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-null; the caller passes a valid ibv_alloc_dm_attr.
        let attr = unsafe { &*attr };
        if attr.comp_mask != 0 {
            return fail(libc::EINVAL);
        }
        let rt = match c.runtime() {
            Ok(rt) => rt,
            Err(e) => return fail(e),
        };
        let dm = match rt.alloc_dm(attr.length, attr.log_align_req) {
            Ok(dm) => dm,
            Err(e) => return fail(e.errno()),
        };
        let ibv = ibv_dm {
            context,
            memcpy_to_dm: Some(memcpy_to_dm),
            memcpy_from_dm: Some(memcpy_from_dm),
            comp_mask: DM_MASK_HANDLE,
            handle: NEXT_HANDLE.fetch_add(1, Ordering::Relaxed),
        };
        let p = Box::into_raw(Box::new(SoftDm { ibv, dm })).cast::<ibv_dm>();
        DMS.insert(p);
        p
    })
}

/// `int free_dm(struct ibv_dm *)`: 0, `EINVAL` for a pointer that is not a live DM, `EBUSY`
/// while a memory region covers it (the DM then stays valid).
pub(crate) unsafe extern "C" fn op_free_dm(dm: *mut ibv_dm) -> c_int {
    catch(libc::EIO, || {
        if !DMS.remove(dm) {
            return libc::EINVAL;
        }
        // SAFETY: `dm` was live, so it came from Box::into_raw of a SoftDm; removing it from
        // DMS makes this the only owner.
        let mut soft = unsafe { Box::from_raw(dm.cast::<SoftDm>()) };
        match soft.dm.free() {
            Ok(()) => 0,
            Err((back, e)) => {
                // Still in use: the same ibv_dm stays live for the program.
                soft.dm = back;
                DMS.insert(Box::into_raw(soft).cast::<ibv_dm>());
                e.errno()
            }
        }
    })
}

/// `int memcpy_to_dm(struct ibv_dm *, uint64_t dm_offset, const void *host_addr,
/// size_t length)`: 0 or the errno (the module comment; `EINVAL` for a dead DM).
unsafe extern "C" fn memcpy_to_dm(
    dm: *mut ibv_dm,
    dm_offset: u64,
    host_addr: *const c_void,
    length: size_t,
) -> c_int {
    catch(libc::EIO, || {
        let Some(soft) = dm_of(dm) else {
            return libc::EINVAL;
        };
        if host_addr.is_null() && length != 0 {
            return libc::EINVAL;
        }
        let data = if length == 0 {
            &[][..]
        } else {
            // SAFETY: the caller passes `length` readable bytes at `host_addr`.
            unsafe { std::slice::from_raw_parts(host_addr.cast::<u8>(), length) }
        };
        soft.dm
            .copy_to(dm_offset, data)
            .map_or_else(|e| e.errno(), |()| 0)
    })
}

/// `int memcpy_from_dm(void *host_addr, struct ibv_dm *, uint64_t dm_offset, size_t length)`:
/// 0 or the errno, as [`memcpy_to_dm`].
unsafe extern "C" fn memcpy_from_dm(
    host_addr: *mut c_void,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: size_t,
) -> c_int {
    catch(libc::EIO, || {
        let Some(soft) = dm_of(dm) else {
            return libc::EINVAL;
        };
        if host_addr.is_null() && length != 0 {
            return libc::EINVAL;
        }
        let out = if length == 0 {
            &mut [][..]
        } else {
            // SAFETY: the caller passes `length` writable bytes at `host_addr`, not aliased
            // during the call.
            unsafe { std::slice::from_raw_parts_mut(host_addr.cast::<u8>(), length) }
        };
        soft.dm
            .copy_from(dm_offset, out)
            .map_or_else(|e| e.errno(), |()| 0)
    })
}

/// `struct ibv_mr *reg_dm_mr(struct ibv_pd *, struct ibv_dm *, uint64_t dm_offset,
/// size_t length, unsigned int access)`: a region of `length` bytes of the DM from
/// `dm_offset`, addressed from 0; NULL with `errno` `EINVAL` for a bad PD or DM, a range
/// beyond the DM, `access` without `IBV_ACCESS_ZERO_BASED` or with a right device memory
/// cannot have (memory-window binding, flushes); `ENOMEM` when the key table is full.
pub(crate) unsafe extern "C" fn op_reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: size_t,
    access: c_uint,
) -> *mut ibv_mr {
    catch(null_mut(), || {
        let (Some(soft_pd), Some(soft_dm)) = (pd_of(pd), dm_of(dm)) else {
            return fail(libc::EINVAL);
        };
        let mr = match soft_pd.pd.reg_dm_mr(
            &soft_dm.dm,
            dm_offset,
            length,
            Access::from_bits_retain(access),
        ) {
            Ok(mr) => mr,
            Err(e) => return fail(e.errno()),
        };
        let p = publish_mr(pd, soft_pd, mr);
        // SAFETY: just published: a live ibv_mr nobody else holds yet.
        unsafe { (*p).addr = null_mut() };
        p
    })
}

/// `ibv_import_dm`: an `ibv_dm` of `context` for the live DM `handle` of the same device (see
/// `import`); NULL with `errno` `EINVAL` for a bad context or a handle of no such DM.
pub(crate) fn import(context: *mut ibv_context, handle: u32) -> *mut ibv_dm {
    if context::lookup(context).is_none() {
        return fail(libc::EINVAL);
    }
    let found = DMS.find(|d: *const ibv_dm| {
        // SAFETY: a live DM pointer (the set's lock is held) is the `ibv` field of a SoftDm.
        let d = unsafe { &*d.cast::<SoftDm>() };
        d.ibv.handle == handle && crate::verbs::import::same_device(d.ibv.context, context)
    });
    let Some(original) = dm_of(found) else {
        return fail(libc::EINVAL);
    };
    let ibv = ibv_dm {
        context,
        ..original.ibv
    };
    let p = Box::into_raw(Box::new(SoftDm {
        ibv,
        dm: original.dm.share(),
    }))
    .cast::<ibv_dm>();
    DMS.insert(p);
    p
}

/// `ibv_unimport_dm`: frees the `ibv_dm` `import` made (the memory stays while the DM it
/// stands for does); nothing for a pointer that is no live DM.
pub(crate) fn unimport(dm: *mut ibv_dm) {
    if DMS.remove(dm) {
        // SAFETY: it was live, so it came from Box::into_raw of a SoftDm; removing it from
        // DMS makes this the only release.
        drop(unsafe { Box::from_raw(dm.cast::<SoftDm>()) });
    }
}
