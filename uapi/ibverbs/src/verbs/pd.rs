//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_dealloc_pd`, `ibv_reg_mr`,
//! `ibv_reg_mr_iova`, `ibv_reg_mr_iova2`, `ibv_rereg_mr`, `ibv_dereg_mr`.
//!
//! Each C object is the first field of a boxed Rust one holding the `softrnic_uapi` object
//! (a [`Pd`] clone keeps the device running; a [`MemoryRegion`] deregisters when dropped).
//! The first PD of a context starts its device (binds its address).

use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, c_uint, c_void, size_t};
use softrnic_uapi::{Access, MemoryRegion, Pd};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_mr, ibv_pd};
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::parent_domain::{self, Parent};

/// A protection domain, or a parent domain standing for one (see `parent_domain`).
#[repr(C)]
pub(crate) struct SoftPd {
    pub ibv: ibv_pd,
    pub pd: Pd,
    /// The parent domains made of this PD: it refuses `ibv_dealloc_pd` while there are any.
    pub parents: AtomicU32,
    /// What makes this a parent domain; `None` for a PD.
    pub parent: Option<Parent>,
}

/// A memory region.
#[repr(C)]
pub(crate) struct SoftMr {
    pub ibv: ibv_mr,
    pub mr: MemoryRegion,
}

pub(crate) static PDS: Live = Live::new();
pub(crate) static MRS: Live = Live::new();

/// The PD at `pd`, if alive. Valid until `ibv_dealloc_pd(pd)`.
pub(crate) fn pd_of<'a>(pd: *const ibv_pd) -> Option<&'a SoftPd> {
    // SAFETY: a live PD pointer is the `ibv` field, at offset 0, of a boxed SoftPd.
    PDS.contains(pd).then(|| unsafe { &*pd.cast::<SoftPd>() })
}

/// The MR at `mr`, if alive. Valid until it is deregistered.
pub(crate) fn mr_of<'a>(mr: *const ibv_mr) -> Option<&'a SoftMr> {
    // SAFETY: a live MR pointer is the `ibv` field, at offset 0, of a boxed SoftMr.
    MRS.contains(mr).then(|| unsafe { &*mr.cast::<SoftMr>() })
}

/// Makes a live `ibv_pd` of `context` with `handle` for `pd`: a PD, or with `parent` a parent
/// domain.
pub(crate) fn publish_pd(
    context: *mut ibv_context,
    handle: u32,
    pd: Pd,
    parent: Option<Parent>,
) -> *mut ibv_pd {
    let soft = Box::new(SoftPd {
        ibv: ibv_pd { context, handle },
        pd,
        parents: AtomicU32::new(0),
        parent,
    });
    let p = Box::into_raw(soft).cast::<ibv_pd>();
    PDS.insert(p);
    p
}

/// Makes `mr`, registered on the PD `pd` (live, `soft`), a live `ibv_mr` for C.
pub(crate) fn publish_mr(pd: *mut ibv_pd, soft: &SoftPd, mr: MemoryRegion) -> *mut ibv_mr {
    let ibv = ibv_mr {
        context: soft.ibv.context,
        pd,
        addr: mr.addr() as *mut c_void,
        length: mr.len(),
        handle: mr.lkey(),
        lkey: mr.lkey(),
        rkey: mr.rkey(),
    };
    let p = Box::into_raw(Box::new(SoftMr { ibv, mr })).cast::<ibv_mr>();
    MRS.insert(p);
    p
}

/// Deregisters the live MR `mr` with `dereg` (a `MemoryRegion` method): 0, `EINVAL` for a
/// pointer that is not a live MR, or `dereg`'s errno, the MR then staying live for C.
pub(crate) fn dereg_with(
    mr: *mut ibv_mr,
    dereg: impl FnOnce(MemoryRegion) -> Result<(), (MemoryRegion, softrnic_uapi::Error)>,
) -> c_int {
    if !MRS.remove(mr) {
        return libc::EINVAL;
    }
    // SAFETY: `mr` was live, so it came from Box::into_raw of a SoftMr; removing it from MRS
    // makes this the only owner.
    let mut soft = unsafe { Box::from_raw(mr.cast::<SoftMr>()) };
    match dereg(soft.mr) {
        Ok(()) => 0,
        Err((back, e)) => {
            // Still registered: the same ibv_mr (same address) stays live for the program.
            soft.mr = back;
            MRS.insert(Box::into_raw(soft).cast::<ibv_mr>());
            e.errno()
        }
    }
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

export! { "IBVERBS_1.1";
    /// `struct ibv_pd *ibv_alloc_pd(struct ibv_context *)`: NULL with `errno` `EINVAL` for a
    /// bad context, or the errno of starting the device (`EADDRINUSE`: another process's
    /// device is bound to the address). Every context of the device in this process shares
    /// one running device; the first PD of the first context starts it.
    unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
        catch(null_mut(), || {
            let Some(c) = context::lookup(context) else { return fail(libc::EINVAL) };
            let pd = match c.runtime() {
                Ok(rt) => rt.alloc_pd(),
                Err(e) => return fail(e),
            };
            publish_pd(context, pd.handle(), pd, None)
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_dealloc_pd(struct ibv_pd *)`: 0, or `EINVAL` for a pointer that is not a live
    /// PD or parent domain, `EBUSY` for a PD while a parent domain of it lives. (MRs of the PD
    /// stay valid: each holds the PD.)
    unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
        catch(libc::EIO, || {
            if pd_of(pd).is_some_and(|p| p.parents.load(Ordering::Acquire) > 0) {
                return libc::EBUSY;
            }
            if !PDS.remove(pd) {
                return libc::EINVAL;
            }
            // SAFETY: `pd` was live, so it came from Box::into_raw of a SoftPd; removing it
            // from PDS makes this the only release.
            let soft = unsafe { Box::from_raw(pd.cast::<SoftPd>()) };
            if let Some(parent) = &soft.parent {
                parent_domain::release(parent);
            }
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *, void *addr, size_t length, int access)`
    /// (the exported form; verbs.h's inline `ibv_reg_mr` calls `ibv_reg_mr_iova2` when the
    /// flags may have optional bits).
    unsafe extern "C" fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: size_t, access: c_int) -> *mut ibv_mr {
        // SAFETY: forwarded; the caller's promises are those of ibv_reg_mr_iova2.
        unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as c_uint) }
    }
}

export! { "IBVERBS_1.7";
    /// `struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *, void *, size_t, uint64_t iova, int)`.
    unsafe extern "C" fn ibv_reg_mr_iova(pd: *mut ibv_pd, addr: *mut c_void, length: size_t, iova: u64, access: c_int) -> *mut ibv_mr {
        // SAFETY: forwarded; the caller's promises are those of ibv_reg_mr_iova2.
        unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as c_uint) }
    }
}

export! { "IBVERBS_1.8";
    /// `struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *, void *addr, size_t length,
    /// uint64_t iova, unsigned int access)`. Optional access bits
    /// (`IBV_ACCESS_OPTIONAL_RANGE`, such as `IBV_ACCESS_RELAXED_ORDERING`, which perftest
    /// passes) are accepted and ignored, as rdma-core allows. NULL with length `SIZE_MAX` and
    /// `IBV_ACCESS_ON_DEMAND` registers the implicit ODP region (the whole address space,
    /// reached only through copies that cannot fault). NULL with `errno`: `EINVAL` for
    /// a bad PD, NULL address (but for implicit ODP) or bad flags; `EOPNOTSUPP` for an `iova` other than `addr`
    /// (not supported yet); `ENOMEM` when the key table is full.
    unsafe extern "C" fn ibv_reg_mr_iova2(pd: *mut ibv_pd, addr: *mut c_void, length: size_t, iova: u64, access: c_uint) -> *mut ibv_mr {
        catch(null_mut(), || {
            let Some(soft) = pd_of(pd) else { return fail(libc::EINVAL) };
            // NULL is the implicit ODP region's address (with length SIZE_MAX and
            // IBV_ACCESS_ON_DEMAND, which the key table checks); otherwise it is invalid.
            if addr.is_null() && length != size_t::MAX {
                return fail(libc::EINVAL);
            }
            if iova != addr as u64 {
                return fail(libc::EOPNOTSUPP);
            }
            let access = Access::from_bits_retain(access).difference(Access::OPTIONAL_RANGE);
            // SAFETY: the C caller promises what ibv_reg_mr requires: addr..addr+length stays
            // valid until ibv_dereg_mr, and it reads the memory only as a DMA target.
            let mr = match unsafe { soft.pd.reg_mr_raw(addr.cast(), length, access) } {
                Ok(mr) => mr,
                Err(e) => return fail(e.errno()),
            };
            publish_mr(pd, soft, mr)
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_dereg_mr(struct ibv_mr *)`: 0 once the keys are dead (accesses in progress
    /// finished), `EINVAL` for a pointer that is not a live MR, `EBUSY` while a memory window
    /// is bound to it (the MR then stays valid, as the man page says). An MR made by
    /// `ibv_import_mr` deregisters the MR it stands for.
    unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
        catch(libc::EIO, || {
            crate::verbs::import::dereg_imported(mr)
                .unwrap_or_else(|| dereg_with(mr, MemoryRegion::dereg))
        })
    }
}

/// `enum ibv_rereg_mr_flags`.
const REREG_CHANGE_TRANSLATION: c_int = 1 << 0;
const REREG_CHANGE_PD: c_int = 1 << 1;
const REREG_CHANGE_ACCESS: c_int = 1 << 2;
const REREG_FLAGS_SUPPORTED: c_int = (REREG_CHANGE_ACCESS << 1) - 1;
/// `enum ibv_rereg_mr_err_code`: bad input (the MR is unchanged) and a failed command (here
/// too the MR is unchanged and usable; rdma-core only promises less).
const REREG_ERR_INPUT: c_int = -1;
const REREG_ERR_CMD: c_int = -4;

export! { "IBVERBS_1.1";
    /// `int ibv_rereg_mr(struct ibv_mr *, int flags, struct ibv_pd *, void *addr,
    /// size_t length, int access)`: 0 with the MR's keys (and `pd`, `addr`, `length` as
    /// changed) updated; `IBV_REREG_MR_ERR_INPUT` with `errno = EINVAL` for bad flags, a
    /// translation given without `IBV_REREG_MR_CHANGE_TRANSLATION` (or missing with it), a
    /// dead MR or PD; `IBV_REREG_MR_ERR_CMD` with the errno of the refusal (`EBUSY` while a
    /// window is bound, `EINVAL` for bad access flags). On error the MR is unchanged.
    unsafe extern "C" fn ibv_rereg_mr(mr: *mut ibv_mr, flags: c_int, pd: *mut ibv_pd, addr: *mut c_void, length: size_t, access: c_int) -> c_int {
        catch(REREG_ERR_CMD, || {
            let input = |e| {
                set_errno(e);
                REREG_ERR_INPUT
            };
            let translation = flags & REREG_CHANGE_TRANSLATION != 0;
            if flags & !REREG_FLAGS_SUPPORTED != 0
                || translation != (!addr.is_null() && length != 0)
                || (!translation && (!addr.is_null() || length != 0))
            {
                return input(libc::EINVAL);
            }
            let new_pd = if flags & REREG_CHANGE_PD != 0 {
                match pd_of(pd) {
                    Some(p) => Some(p),
                    None => return input(libc::EINVAL),
                }
            } else {
                None
            };
            let access = (flags & REREG_CHANGE_ACCESS != 0)
                .then(|| Access::from_bits_retain(access as u32).difference(Access::OPTIONAL_RANGE));
            if !MRS.remove(mr) {
                return input(libc::EINVAL);
            }
            // SAFETY: `mr` was live, so it came from Box::into_raw of a SoftMr; removing it
            // from MRS makes this the only owner until it is inserted again below.
            let mut soft = unsafe { Box::from_raw(mr.cast::<SoftMr>()) };
            let r = if translation {
                // SAFETY: the C caller promises for the new range what ibv_reg_mr requires.
                unsafe {
                    soft.mr.rereg_translation(addr.cast(), length, new_pd.map(|p| &p.pd), access)
                }
            } else {
                soft.mr.rereg(new_pd.map(|p| &p.pd), access)
            };
            let code = match r {
                Ok(()) => {
                    soft.ibv.lkey = soft.mr.lkey();
                    soft.ibv.rkey = soft.mr.rkey();
                    soft.ibv.addr = soft.mr.addr() as *mut c_void;
                    soft.ibv.length = soft.mr.len();
                    if new_pd.is_some() {
                        soft.ibv.pd = pd;
                    }
                    0
                }
                Err(e) => {
                    set_errno(e.errno());
                    REREG_ERR_CMD
                }
            };
            MRS.insert(Box::into_raw(soft).cast::<ibv_mr>());
            code
        })
    }
}
