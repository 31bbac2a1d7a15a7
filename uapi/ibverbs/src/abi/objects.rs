//! The verbs objects as the application sees them: `struct ibv_pd`, `ibv_td`,
//! `ibv_parent_domain_init_attr`, `ibv_mr`, `ibv_mw`, `ibv_ah`, `ibv_comp_channel`, `ibv_cq`,
//! `ibv_srq`, `ibv_qp`, the head of `ibv_qp_ex`, and `ibv_dm` with its `ibv_alloc_dm_attr`.
//!
//! The provider embeds each at the start of its own, larger object (as rdma-core's providers
//! do), so a pointer to one is a pointer to softrnic's state.

use libc::{c_int, c_void, pthread_cond_t, pthread_mutex_t, size_t};

use super::context::ibv_context;

/// `struct ibv_pd`.
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_td`.
#[repr(C)]
pub struct ibv_td {
    pub context: *mut ibv_context,
}

/// `struct ibv_td_init_attr`.
#[repr(C)]
pub struct ibv_td_init_attr {
    pub comp_mask: u32,
}

/// A parent domain's `alloc` callback.
pub type AllocFn =
    unsafe extern "C" fn(*mut ibv_pd, *mut c_void, size_t, size_t, u64) -> *mut c_void;
/// A parent domain's `free` callback.
pub type FreeFn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, *mut c_void, u64);

/// `struct ibv_parent_domain_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_parent_domain_init_attr {
    pub pd: *mut ibv_pd,
    pub td: *mut ibv_td,
    pub comp_mask: u32,
    pub alloc: Option<AllocFn>,
    pub free: Option<FreeFn>,
    pub pd_context: *mut c_void,
}

/// `enum ibv_parent_domain_init_attr_mask`.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
pub const IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;

/// `struct ibv_mr`.
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: size_t,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_mw`.
#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`.
    pub type_: u32,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_xrcd`: an XRC domain.
#[repr(C)]
pub struct ibv_xrcd {
    pub context: *mut ibv_context,
}

/// `struct ibv_xrcd_init_attr` (`ibv_open_xrcd`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_xrcd_init_attr {
    /// `IBV_XRCD_INIT_ATTR_*`: which of `fd` and `oflags` are valid.
    pub comp_mask: u32,
    /// The file the domain is tied to, or -1 for a private domain.
    pub fd: libc::c_int,
    /// `O_CREAT` and `O_EXCL`.
    pub oflags: libc::c_int,
}

/// `IBV_XRCD_INIT_ATTR_FD`.
pub const IBV_XRCD_INIT_ATTR_FD: u32 = 1 << 0;
/// `IBV_XRCD_INIT_ATTR_OFLAGS`.
pub const IBV_XRCD_INIT_ATTR_OFLAGS: u32 = 1 << 1;

/// `struct ibv_srq`.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    /// `enum ibv_qp_state`.
    pub state: u32,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_alloc_dm_attr`.
#[repr(C)]
pub struct ibv_alloc_dm_attr {
    pub length: size_t,
    pub log_align_req: u32,
    pub comp_mask: u32,
}

/// `int (*memcpy_to_dm)(struct ibv_dm *, uint64_t dm_offset, const void *host_addr,
/// size_t length)`.
pub type MemcpyToDmFn = unsafe extern "C" fn(*mut ibv_dm, u64, *const c_void, size_t) -> c_int;

/// `int (*memcpy_from_dm)(void *host_addr, struct ibv_dm *, uint64_t dm_offset,
/// size_t length)`.
pub type MemcpyFromDmFn = unsafe extern "C" fn(*mut c_void, *mut ibv_dm, u64, size_t) -> c_int;

/// `struct ibv_dm`: verbs.h's inline `ibv_memcpy_to_dm`/`ibv_memcpy_from_dm` call its
/// function pointers directly.
#[repr(C)]
pub struct ibv_dm {
    pub context: *mut ibv_context,
    pub memcpy_to_dm: Option<MemcpyToDmFn>,
    pub memcpy_from_dm: Option<MemcpyFromDmFn>,
    /// `enum ibv_dm_mask`: `IBV_DM_MASK_HANDLE` when `handle` is valid.
    pub comp_mask: u32,
    pub handle: u32,
}
