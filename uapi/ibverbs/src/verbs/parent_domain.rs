//! Thread domains and parent domains: `ibv_alloc_td`, `ibv_dealloc_td`,
//! `ibv_alloc_parent_domain` (rdma-core 44 man pages `ibv_alloc_td(3)`,
//! `ibv_alloc_parent_domain(3)`).
//!
//! A thread domain is the application's promise that the objects made with it are used from
//! one thread at a time, which lets a hardware provider drop locks or give them a doorbell of
//! their own. softrnic's queues are always safe to share, so a thread domain changes nothing;
//! it is a real object all the same, counted, and refused (`EBUSY`) while a parent domain uses
//! it, as rdma-core's mlx5 provider does.
//!
//! A parent domain "is completely interchangeable with the `struct ibv_pd` used to create it":
//! it is an `ibv_pd` whose protection domain is that PD's, so every verb taking a PD (MRs,
//! QPs, SRQs, AHs, windows, an extended CQ's `parent_domain`) works on it and its objects
//! check keys against that PD. It may carry allocators (`IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`)
//! through which "provider memory allocations" are made: softrnic's queues are not memory a
//! device reads by DMA but the provider's own, so it makes no such allocation and never calls
//! them (nor keeps them, nor `pd_context`). `ibv_dealloc_pd` frees a parent domain; the PD it
//! holds refuses `ibv_dealloc_pd` with `EBUSY` until then.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use libc::c_int;

use crate::abi::context::ibv_context;
use crate::abi::objects::{
    ibv_parent_domain_init_attr, ibv_pd, ibv_td, ibv_td_init_attr,
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
};
use crate::context;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::pd::{pd_of, publish_pd};

/// A thread domain.
#[repr(C)]
pub(crate) struct SoftTd {
    pub ibv: ibv_td,
    /// The parent domains that use it.
    users: AtomicU32,
}

/// What makes a [`SoftPd`] a parent domain: the PD it stands for and what it was made with.
pub(crate) struct Parent {
    /// The PD whose protection domain this is (live while this parent domain is).
    pub pd: *mut ibv_pd,
    /// Its thread domain, or NULL.
    pub td: *mut ibv_td,
}

pub(crate) static TDS: Live = Live::new();

/// The thread domain at `td`, if alive.
fn td_of<'a>(td: *const ibv_td) -> Option<&'a SoftTd> {
    // SAFETY: a live TD pointer is the `ibv` field, at offset 0, of a boxed SoftTd.
    TDS.contains(td).then(|| unsafe { &*td.cast::<SoftTd>() })
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// `verbs_context.alloc_td`: a thread domain of `context`. NULL with `errno` `EINVAL` for a
/// bad context, a NULL `init_attr` or a `comp_mask` other than 0 (none is defined).
pub(crate) unsafe extern "C" fn op_alloc_td(
    context: *mut ibv_context,
    init_attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    catch(null_mut(), || {
        if context::lookup(context).is_none() || init_attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_td_init_attr.
        if unsafe { (*init_attr).comp_mask } != 0 {
            return fail(libc::EINVAL);
        }
        let soft = Box::new(SoftTd {
            ibv: ibv_td { context },
            users: AtomicU32::new(0),
        });
        let p = Box::into_raw(soft).cast::<ibv_td>();
        TDS.insert(p);
        p
    })
}

/// `verbs_context.dealloc_td`: 0; `EINVAL` for a pointer that is not a live thread domain,
/// `EBUSY` while a parent domain uses it.
pub(crate) unsafe extern "C" fn op_dealloc_td(td: *mut ibv_td) -> c_int {
    catch(libc::EIO, || {
        match td_of(td) {
            None => return libc::EINVAL,
            Some(t) if t.users.load(Ordering::Acquire) > 0 => return libc::EBUSY,
            Some(_) => {}
        }
        if !TDS.remove(td) {
            return libc::EINVAL;
        }
        // SAFETY: `td` was live, so it came from Box::into_raw of a SoftTd; removing it from
        // TDS makes this the only release.
        drop(unsafe { Box::from_raw(td.cast::<SoftTd>()) });
        0
    })
}

/// `verbs_context.alloc_parent_domain`: a parent domain of `attr->pd` on `context`. NULL with
/// `errno` `EINVAL` for a bad context, a NULL `attr`, a `pd` that is not a live PD of
/// `context` (or is itself a parent domain), a `td` that is not a live thread domain of
/// `context`, `comp_mask` bits beyond ALLOCATORS and PD_CONTEXT, or ALLOCATORS with a NULL
/// callback.
pub(crate) unsafe extern "C" fn op_alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    catch(null_mut(), || {
        if context::lookup(context).is_none() || attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_parent_domain_init_attr.
        let a = unsafe { *attr };
        let known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
        if a.comp_mask & !known != 0 {
            return fail(libc::EINVAL);
        }
        let allocators = a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS != 0;
        if allocators && (a.alloc.is_none() || a.free.is_none()) {
            return fail(libc::EINVAL);
        }
        let Some(under) = pd_of(a.pd) else {
            return fail(libc::EINVAL);
        };
        if under.ibv.context != context || under.parent.is_some() {
            return fail(libc::EINVAL);
        }
        let td = if a.td.is_null() {
            None
        } else {
            match td_of(a.td) {
                Some(t) if t.ibv.context == context => Some(t),
                _ => return fail(libc::EINVAL),
            }
        };
        let parent = Parent { pd: a.pd, td: a.td };
        under.parents.fetch_add(1, Ordering::AcqRel);
        if let Some(t) = td {
            t.users.fetch_add(1, Ordering::AcqRel);
        }
        publish_pd(context, under.ibv.handle, under.pd.clone(), Some(parent))
    })
}

/// Releases what the parent domain `parent` holds: its PD and thread domain (both live while
/// it is, which their deallocation's `EBUSY` ensures).
pub(crate) fn release(parent: &Parent) {
    if let Some(pd) = pd_of(parent.pd) {
        pd.parents.fetch_sub(1, Ordering::AcqRel);
    }
    if let Some(td) = td_of(parent.td) {
        td.users.fetch_sub(1, Ordering::AcqRel);
    }
}
