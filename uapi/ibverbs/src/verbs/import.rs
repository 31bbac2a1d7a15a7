//! Sharing a context's objects: `ibv_import_device`, `ibv_import_pd`, `ibv_unimport_pd`,
//! `ibv_import_mr`, `ibv_unimport_mr`, `ibv_import_dm`, `ibv_unimport_dm` (rdma-core 44
//! `libibverbs/device.c` and `verbs.c`; man pages `ibv_import_device(3)`, `ibv_import_pd(3)`,
//! `ibv_import_mr(3)`, `ibv_import_dm(3)`).
//!
//! With a kernel provider, importing opens a second `ibv_context` on the command file of a
//! first (its `cmd_fd`, dup'd or passed over a socket) and gives it `ibv_pd`s and `ibv_mr`s
//! for the kernel objects behind the first's handles (`ibv_pd.handle`, `ibv_mr.handle`). A
//! softrnic context's `cmd_fd` is a memory file of its own (see `context`), and its objects
//! live in this process's memory, so:
//! - `ibv_import_device` of a dup of the `cmd_fd` of a context open in this process opens a
//!   new `ibv_context` for the same softrnic context (objects of either work with the
//!   other's, as on one kernel command file), which owns the fd given (and closes it with
//!   `ibv_close_device`). An fd that is not open is `EINVAL` (rdma-core's answer to a bad fd);
//!   an open fd of no context of this process (a context of another process, passed over a
//!   socket, or any other file) is `EOPNOTSUPP`: another process's objects cannot be reached.
//! - `ibv_import_pd` gives the importing context an `ibv_pd` for the PD with that handle on
//!   the same device, `ibv_import_mr` an `ibv_mr` for the MR with that handle (same keys and
//!   length; `addr` NULL, as the kernel does not report it); either is `EINVAL` for a handle
//!   of no such object. Both stand for the same protection domain and keys as the originals.
//! - `ibv_unimport_pd` and `ibv_unimport_mr` free what the import made and leave the objects;
//!   `ibv_dealloc_pd` of an imported PD does the same (softrnic's PD lives while anything holds
//!   it), and `ibv_dereg_mr` of an imported MR deregisters the MR itself, as with the kernel.
//! - `ibv_import_dm` gives an `ibv_dm` for the device memory with that handle (the same
//!   memory), `ibv_unimport_dm` frees it; `ibv_free_dm` of an imported DM does the same.

use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::null_mut;

use libc::c_int;
use softrnic_uapi::MemoryRegion;

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_dm, ibv_mr, ibv_pd};
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::pd::{dereg_with, pd_of, publish_pd, SoftMr, SoftPd, MRS, PDS};

/// An `ibv_mr` made by `ibv_import_mr`: a view of the MR whose handle it has.
#[repr(C)]
pub(crate) struct ImportedMr {
    pub ibv: ibv_mr,
}

pub(crate) static IMPORTED_MRS: Live = Live::new();

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// The live MR (registered, not imported) with `handle` on the device of `context`, or NULL.
fn mr_by_handle(handle: u32, context: *const ibv_context) -> *const ibv_mr {
    MRS.find(|m: *const ibv_mr| {
        // SAFETY: a live MR pointer (the set's lock is held) is the `ibv` field of a boxed
        // SoftMr.
        let m = unsafe { &*m.cast::<SoftMr>() };
        m.ibv.handle == handle && same_device(m.ibv.context, context)
    })
}

/// Whether the live objects of contexts `a` and `b` are on the same device.
pub(crate) fn same_device(a: *const ibv_context, b: *const ibv_context) -> bool {
    match (context::lookup(a), context::lookup(b)) {
        (Some(a), Some(b)) => std::ptr::eq(a.dev, b.dev),
        _ => false,
    }
}

export! { "IBVERBS_1.10";
    /// `struct ibv_context *ibv_import_device(int cmd_fd)`: a new context on the device of the
    /// context whose `cmd_fd` this is a dup of; it owns `cmd_fd`. NULL with `errno` `EINVAL`
    /// for an fd that is not open, `EOPNOTSUPP` for one of no context of this process (see the
    /// module doc).
    unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
        catch(null_mut(), || {
            if context::file_id(cmd_fd).is_none() {
                return fail(libc::EINVAL);
            }
            let Some(first) = context::by_cmd_fd(cmd_fd).and_then(|c| context::lookup(c)) else {
                return fail(libc::EOPNOTSUPP);
            };
            let runtime = match first.runtime() {
                Ok(rt) => rt.clone(),
                Err(e) => return fail(e),
            };
            // SAFETY: the caller hands the open fd `cmd_fd` over to the new context.
            let owned = unsafe { OwnedFd::from_raw_fd(cmd_fd) };
            context::open_with(first.dev, owned, Some(runtime))
        })
    }
}

export! { "IBVERBS_1.10";
    /// `struct ibv_pd *ibv_import_pd(struct ibv_context *, uint32_t pd_handle)`: an `ibv_pd`
    /// of `context` for the PD `pd_handle` of its device. NULL with `errno` `EINVAL` for a bad
    /// context or a handle of no PD on the device.
    unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
        catch(null_mut(), || {
            if context::lookup(context).is_none() {
                return fail(libc::EINVAL);
            }
            let found = PDS.find(|p: *const ibv_pd| {
                // SAFETY: a live PD pointer (the set's lock is held) is the `ibv` field of a
                // boxed SoftPd.
                let s = unsafe { &*p.cast::<SoftPd>() };
                s.parent.is_none() && s.ibv.handle == pd_handle && same_device(s.ibv.context, context)
            });
            let Some(original) = pd_of(found) else { return fail(libc::EINVAL) };
            publish_pd(context, pd_handle, original.pd.clone(), None)
        })
    }
}

export! { "IBVERBS_1.10";
    /// `void ibv_unimport_pd(struct ibv_pd *)`: frees the `ibv_pd`; the PD stays for whoever
    /// else holds it. Nothing for a pointer that is no live PD.
    unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
        // SAFETY: ibv_dealloc_pd checks `pd` before using it.
        let _ = unsafe { crate::verbs::pd::ibv_dealloc_pd(pd) };
    }
}

export! { "IBVERBS_1.10";
    /// `struct ibv_mr *ibv_import_mr(struct ibv_pd *, uint32_t mr_handle)`: an `ibv_mr` on
    /// `pd` for the MR `mr_handle` of its device, with its keys and length. NULL with `errno`
    /// `EINVAL` for a bad PD or a handle of no MR on the device.
    unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
        catch(null_mut(), || {
            let Some(soft_pd) = pd_of(pd) else { return fail(libc::EINVAL) };
            let context = soft_pd.ibv.context;
            let found = mr_by_handle(mr_handle, context);
            if found.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: found under the set's lock, so live: the `ibv` field of a boxed SoftMr.
            let original = unsafe { &(*found.cast::<SoftMr>()).ibv };
            let ibv = ibv_mr {
                context,
                pd,
                addr: null_mut(),
                length: original.length,
                handle: mr_handle,
                lkey: original.lkey,
                rkey: original.rkey,
            };
            let p = Box::into_raw(Box::new(ImportedMr { ibv })).cast::<ibv_mr>();
            IMPORTED_MRS.insert(p);
            p
        })
    }
}

export! { "IBVERBS_1.10";
    /// `void ibv_unimport_mr(struct ibv_mr *)`: frees what `ibv_import_mr` made; the MR stays.
    /// Nothing for a pointer that is no imported MR.
    unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
        catch((), || {
            if IMPORTED_MRS.remove(mr) {
                // SAFETY: it was live, so it came from Box::into_raw of an ImportedMr; removing
                // it from the set makes this the only release.
                drop(unsafe { Box::from_raw(mr.cast::<ImportedMr>()) });
            }
        })
    }
}

/// `ibv_dereg_mr` of an imported MR: deregisters the MR it stands for, then frees it. `None`
/// if `mr` is no imported MR; else 0 or the errno of the deregistration (`EBUSY` with a window
/// bound: nothing is freed then).
pub(crate) fn dereg_imported(mr: *mut ibv_mr) -> Option<c_int> {
    if !IMPORTED_MRS.contains(mr) {
        return None;
    }
    // SAFETY: live, so the `ibv` field of a boxed ImportedMr.
    let (handle, context) = unsafe { ((*mr).handle, (*mr).context) };
    let original = mr_by_handle(handle, context);
    let rc = if original.is_null() {
        0
    } else {
        dereg_with(original.cast_mut(), MemoryRegion::dereg)
    };
    if rc == 0 {
        // SAFETY: as in ibv_unimport_mr.
        unsafe { ibv_unimport_mr(mr) };
    }
    Some(rc)
}

export! { "IBVERBS_1.13";
    /// `struct ibv_dm *ibv_import_dm(struct ibv_context *, uint32_t dm_handle)`: an `ibv_dm`
    /// of `context` for the device memory `dm_handle` of its device. NULL with `errno`
    /// `EINVAL` for a bad context or a handle of no device memory on the device.
    unsafe extern "C" fn ibv_import_dm(context: *mut ibv_context, dm_handle: u32) -> *mut ibv_dm {
        catch(null_mut(), || crate::verbs::dm::import(context, dm_handle))
    }
}

export! { "IBVERBS_1.13";
    /// `void ibv_unimport_dm(struct ibv_dm *)`: frees what `ibv_import_dm` made; the memory
    /// stays while the DM it stands for does.
    unsafe extern "C" fn ibv_unimport_dm(dm: *mut ibv_dm) {
        catch((), || crate::verbs::dm::unimport(dm))
    }
}
