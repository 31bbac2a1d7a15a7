//! The device and the open device: `struct ibv_device`, `struct ibv_context_ops`,
//! `struct ibv_context` and the extended `struct verbs_context` that sits immediately before
//! `ibv_context` in memory.
//!
//! verbs.h's inline functions find the `verbs_context` of a context only when
//! `ibv_context.abi_compat == (void *)UINTPTR_MAX` ([`VERBS_ABI_IS_EXTENDED`]), and trust the op
//! at offset `o` only when `verbs_context.sz >= sizeof(struct verbs_context) - o`; a NULL op
//! means "not supported" (the inline code returns `EOPNOTSUPP` or NULL with that errno). The
//! ops of `ibv_context_ops` are called without a NULL check.

use libc::{c_char, c_int, c_void, pthread_mutex_t, size_t};

use super::attr::{ibv_device_attr, ibv_device_attr_ex, ibv_port_attr, ibv_query_device_ex_input};
use super::objects::{ibv_cq, ibv_mw, ibv_pd, ibv_qp, ibv_srq};
use super::wr::{ibv_mw_bind, ibv_recv_wr, ibv_send_wr, ibv_wc};
use super::OpaqueFn;

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;
/// `__VERBS_ABI_IS_EXTENDED`: the `abi_compat` value that tells inline code a `verbs_context`
/// precedes the `ibv_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `IBV_NODE_CA`: a channel adapter (`enum ibv_node_type`).
pub const IBV_NODE_CA: c_int = 1;
/// `IBV_TRANSPORT_IB` (`enum ibv_transport_type`): RoCE devices report InfiniBand transport.
pub const IBV_TRANSPORT_IB: c_int = 0;

/// `struct _ibv_device_ops`: obsolete, never used.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct _ibv_device_ops {
    pub _dummy1: OpaqueFn,
    pub _dummy2: OpaqueFn,
}

/// `struct ibv_device`: an entry of the list `ibv_get_device_list` returns.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    /// `enum ibv_node_type`.
    pub node_type: c_int,
    /// `enum ibv_transport_type`.
    pub transport_type: c_int,
    /// The (kernel) device name, what `ibv_get_device_name` returns.
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    /// The uverbs device name.
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    /// The uverbs class device in sysfs.
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    /// The infiniband class device in sysfs.
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// `int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *)`.
pub type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
/// `int (*req_notify_cq)(struct ibv_cq *, int)`.
pub type ReqNotifyCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
/// `int (*resize_cq)(struct ibv_cq *, int cqe)`.
pub type ResizeCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
/// `int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **)`.
pub type PostSendFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
/// `int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **)`.
pub type PostRecvFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
/// `int (*post_srq_recv)(struct ibv_srq *, struct ibv_recv_wr *, struct ibv_recv_wr **)`.
pub type PostSrqRecvFn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
/// `struct ibv_mw *(*alloc_mw)(struct ibv_pd *, enum ibv_mw_type)`.
pub type AllocMwFn = unsafe extern "C" fn(*mut ibv_pd, u32) -> *mut ibv_mw;
/// `int (*bind_mw)(struct ibv_qp *, struct ibv_mw *, struct ibv_mw_bind *)`.
pub type BindMwFn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;
/// `int (*dealloc_mw)(struct ibv_mw *)`.
pub type DeallocMwFn = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
/// `int (*_compat_query_device)(struct ibv_context *, struct ibv_device_attr *)`.
pub type CompatQueryDeviceFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;

/// `struct ibv_context_ops`: the data-path ops verbs.h's inline functions call directly.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_context_ops {
    pub _compat_query_device: Option<CompatQueryDeviceFn>,
    pub _compat_query_port: OpaqueFn,
    pub _compat_alloc_pd: OpaqueFn,
    pub _compat_dealloc_pd: OpaqueFn,
    pub _compat_reg_mr: OpaqueFn,
    pub _compat_rereg_mr: OpaqueFn,
    pub _compat_dereg_mr: OpaqueFn,
    pub alloc_mw: Option<AllocMwFn>,
    pub bind_mw: Option<BindMwFn>,
    pub dealloc_mw: Option<DeallocMwFn>,
    pub _compat_create_cq: OpaqueFn,
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyCqFn>,
    pub _compat_cq_event: OpaqueFn,
    pub _compat_resize_cq: Option<ResizeCqFn>,
    pub _compat_destroy_cq: OpaqueFn,
    pub _compat_create_srq: OpaqueFn,
    pub _compat_modify_srq: OpaqueFn,
    pub _compat_query_srq: OpaqueFn,
    pub _compat_destroy_srq: OpaqueFn,
    pub post_srq_recv: Option<PostSrqRecvFn>,
    pub _compat_create_qp: OpaqueFn,
    pub _compat_query_qp: OpaqueFn,
    pub _compat_modify_qp: OpaqueFn,
    pub _compat_destroy_qp: OpaqueFn,
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    pub _compat_create_ah: OpaqueFn,
    pub _compat_destroy_ah: OpaqueFn,
    pub _compat_attach_mcast: OpaqueFn,
    pub _compat_detach_mcast: OpaqueFn,
    pub _compat_async_event: OpaqueFn,
}

/// `struct ibv_context`: an open device.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    /// [`VERBS_ABI_IS_EXTENDED`] for softrnic contexts.
    pub abi_compat: *mut c_void,
}

/// `int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *, size_t)`.
pub type QueryPortFn =
    unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, size_t) -> c_int;
/// `int (*query_device_ex)(struct ibv_context *, const struct ibv_query_device_ex_input *,
/// struct ibv_device_attr_ex *, size_t)`.
pub type QueryDeviceExFn = unsafe extern "C" fn(
    *mut ibv_context,
    *const ibv_query_device_ex_input,
    *mut ibv_device_attr_ex,
    size_t,
) -> c_int;

/// `int (*advise_mr)(struct ibv_pd *, enum ibv_advise_mr_advice, uint32_t, struct ibv_sge *,
/// uint32_t)`.
pub type AdviseMrFn = unsafe extern "C" fn(
    *mut super::objects::ibv_pd,
    libc::c_uint,
    u32,
    *mut super::wr::ibv_sge,
    u32,
) -> c_int;

/// `struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *)`.
pub type CreateCqExFn = unsafe extern "C" fn(
    *mut ibv_context,
    *mut super::ex::ibv_cq_init_attr_ex,
) -> *mut super::ex::ibv_cq_ex;

/// `int (*get_srq_num)(struct ibv_srq *, uint32_t *)`.
pub type GetSrqNumFn = unsafe extern "C" fn(*mut super::objects::ibv_srq, *mut u32) -> c_int;

/// `struct ibv_srq *(*create_srq_ex)(struct ibv_context *, struct ibv_srq_init_attr_ex *)`.
pub type CreateSrqExFn = unsafe extern "C" fn(
    *mut ibv_context,
    *mut crate::rdmacm::abi::ibv_srq_init_attr_ex,
) -> *mut super::objects::ibv_srq;

/// `struct ibv_xrcd *(*open_xrcd)(struct ibv_context *, struct ibv_xrcd_init_attr *)`.
pub type OpenXrcdFn = unsafe extern "C" fn(
    *mut ibv_context,
    *mut super::objects::ibv_xrcd_init_attr,
) -> *mut super::objects::ibv_xrcd;

/// `int (*close_xrcd)(struct ibv_xrcd *)`.
pub type CloseXrcdFn = unsafe extern "C" fn(*mut super::objects::ibv_xrcd) -> c_int;

/// `struct ibv_qp *(*create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *)`.
pub type CreateQpExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut super::ex::ibv_qp_init_attr_ex) -> *mut ibv_qp;

/// `struct ibv_pd *(*alloc_parent_domain)(struct ibv_context *,
/// struct ibv_parent_domain_init_attr *)`.
pub type AllocParentDomainFn = unsafe extern "C" fn(
    *mut ibv_context,
    *mut super::objects::ibv_parent_domain_init_attr,
) -> *mut ibv_pd;

/// `int (*dealloc_td)(struct ibv_td *)`.
pub type DeallocTdFn = unsafe extern "C" fn(*mut super::objects::ibv_td) -> c_int;

/// `struct ibv_td *(*alloc_td)(struct ibv_context *, struct ibv_td_init_attr *)`.
pub type AllocTdFn = unsafe extern "C" fn(
    *mut ibv_context,
    *mut super::objects::ibv_td_init_attr,
) -> *mut super::objects::ibv_td;

/// `struct ibv_dm *(*alloc_dm)(struct ibv_context *, struct ibv_alloc_dm_attr *)`.
pub type AllocDmFn = unsafe extern "C" fn(
    *mut ibv_context,
    *mut super::objects::ibv_alloc_dm_attr,
) -> *mut super::objects::ibv_dm;

/// `int (*free_dm)(struct ibv_dm *)`.
pub type FreeDmFn = unsafe extern "C" fn(*mut super::objects::ibv_dm) -> c_int;

/// `struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *, struct ibv_dm *, uint64_t dm_offset,
/// size_t length, unsigned int access)`.
pub type RegDmMrFn = unsafe extern "C" fn(
    *mut ibv_pd,
    *mut super::objects::ibv_dm,
    u64,
    size_t,
    libc::c_uint,
) -> *mut super::objects::ibv_mr;

/// `struct verbs_context` of rdma-core 44 (648 bytes): the extended ops, growing towards lower
/// addresses, then `sz` and the `ibv_context` itself as the last field.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<QueryPortFn>,
    pub advise_mr: Option<AdviseMrFn>,
    pub alloc_null_mr: OpaqueFn,
    pub read_counters: OpaqueFn,
    pub attach_counters_point_flow: OpaqueFn,
    pub create_counters: OpaqueFn,
    pub destroy_counters: OpaqueFn,
    pub reg_dm_mr: Option<RegDmMrFn>,
    pub alloc_dm: Option<AllocDmFn>,
    pub free_dm: Option<FreeDmFn>,
    pub modify_flow_action_esp: OpaqueFn,
    pub destroy_flow_action: OpaqueFn,
    pub create_flow_action_esp: OpaqueFn,
    pub modify_qp_rate_limit: OpaqueFn,
    pub alloc_parent_domain: Option<AllocParentDomainFn>,
    pub dealloc_td: Option<DeallocTdFn>,
    pub alloc_td: Option<AllocTdFn>,
    pub modify_cq: OpaqueFn,
    pub post_srq_ops: OpaqueFn,
    pub destroy_rwq_ind_table: OpaqueFn,
    pub create_rwq_ind_table: OpaqueFn,
    pub destroy_wq: OpaqueFn,
    pub modify_wq: OpaqueFn,
    pub create_wq: OpaqueFn,
    pub query_rt_values: OpaqueFn,
    pub create_cq_ex: Option<CreateCqExFn>,
    /// `struct verbs_ex_private *`: rdma-core's own; NULL here.
    pub priv_: *mut c_void,
    pub query_device_ex: Option<QueryDeviceExFn>,
    pub ibv_destroy_flow: OpaqueFn,
    pub ABI_placeholder2: OpaqueFn,
    pub ibv_create_flow: OpaqueFn,
    pub ABI_placeholder1: OpaqueFn,
    pub open_qp: OpaqueFn,
    pub create_qp_ex: Option<CreateQpExFn>,
    pub get_srq_num: Option<GetSrqNumFn>,
    pub create_srq_ex: Option<CreateSrqExFn>,
    pub open_xrcd: Option<OpenXrcdFn>,
    pub close_xrcd: Option<CloseXrcdFn>,
    pub _ABI_placeholder3: u64,
    /// `sizeof(struct verbs_context)` for softrnic: every op above is trusted.
    pub sz: size_t,
    pub context: ibv_context,
}
