//! The extended CQ and QP: `struct ibv_cq_ex`, `ibv_cq_init_attr_ex`, `ibv_poll_cq_attr`,
//! `ibv_qp_ex`, `ibv_qp_init_attr_ex`, `ibv_data_buf`, and the flags their verbs take.
//!
//! `ibv_cq_ex` starts with exactly the fields of `ibv_cq` (verbs.h's `ibv_cq_ex_to_cq` is a
//! cast), and `ibv_qp_ex` with an `ibv_qp`. softrnic keeps the part after that head, the
//! "tail" ([`ibv_cq_ex_tail`], [`ibv_qp_ex_tail`]), as a field right after its `ibv_cq` /
//! `ibv_qp`, so one object is both; [`ibv_cq_ex`] and [`ibv_qp_ex`] are the whole C structs,
//! head and tail, for the layout test and the casts.

use libc::{c_uint, c_void, size_t};

use super::objects::{ibv_cq, ibv_mw, ibv_pd, ibv_qp};
use super::qp_attr::ibv_qp_cap;
use super::wr::{ibv_mw_bind_info, ibv_sge};
use super::OpaqueFn;

/// `IBV_WC_EX_WITH_BYTE_LEN` (`enum ibv_create_cq_wc_flags`).
pub const IBV_WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
/// `IBV_WC_EX_WITH_IMM`.
pub const IBV_WC_EX_WITH_IMM: u64 = 1 << 1;
/// `IBV_WC_EX_WITH_QP_NUM`.
pub const IBV_WC_EX_WITH_QP_NUM: u64 = 1 << 2;
/// `IBV_WC_EX_WITH_SRC_QP`.
pub const IBV_WC_EX_WITH_SRC_QP: u64 = 1 << 3;
/// `IBV_WC_EX_WITH_SLID`.
pub const IBV_WC_EX_WITH_SLID: u64 = 1 << 4;
/// `IBV_WC_EX_WITH_SL`.
pub const IBV_WC_EX_WITH_SL: u64 = 1 << 5;
/// `IBV_WC_EX_WITH_DLID_PATH_BITS`.
pub const IBV_WC_EX_WITH_DLID_PATH_BITS: u64 = 1 << 6;
/// `IBV_WC_STANDARD_FLAGS`: the seven above.
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;

/// `IBV_CQ_INIT_ATTR_MASK_FLAGS` (`enum ibv_cq_init_attr_mask`).
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
/// `IBV_CQ_INIT_ATTR_MASK_PD`.
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (`enum ibv_create_cq_attr_flags`).
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;

/// `IBV_QP_INIT_ATTR_PD` (`enum ibv_qp_init_attr_mask`).
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `IBV_QP_EX_WITH_RDMA_WRITE` (`enum ibv_qp_create_send_ops_flags`).
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
/// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
/// `IBV_QP_EX_WITH_SEND`.
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
/// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
/// `IBV_QP_EX_WITH_RDMA_READ`.
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
/// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
/// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// `int (*start_poll)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *)`.
pub type StartPollFn = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> i32;
/// `int (*next_poll)(struct ibv_cq_ex *)`.
pub type NextPollFn = unsafe extern "C" fn(*mut ibv_cq_ex) -> i32;
/// `void (*end_poll)(struct ibv_cq_ex *)`.
pub type EndPollFn = unsafe extern "C" fn(*mut ibv_cq_ex);
/// `T (*read_*)(struct ibv_cq_ex *)`.
pub type ReadFn<T> = unsafe extern "C" fn(*mut ibv_cq_ex) -> T;

/// The fields of `struct ibv_cq_ex` after its `ibv_cq` head (`async_events_completed`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_cq_ex_tail {
    pub comp_mask: u32,
    /// `enum ibv_wc_status` of the current completion.
    pub status: c_uint,
    /// `wr_id` of the current completion.
    pub wr_id: u64,
    pub start_poll: Option<StartPollFn>,
    pub next_poll: Option<NextPollFn>,
    pub end_poll: Option<EndPollFn>,
    /// Returns `enum ibv_wc_opcode`.
    pub read_opcode: Option<ReadFn<c_uint>>,
    pub read_vendor_err: Option<ReadFn<u32>>,
    pub read_byte_len: Option<ReadFn<u32>>,
    /// Returns `__be32`.
    pub read_imm_data: Option<ReadFn<u32>>,
    pub read_qp_num: Option<ReadFn<u32>>,
    pub read_src_qp: Option<ReadFn<u32>>,
    pub read_wc_flags: Option<ReadFn<c_uint>>,
    pub read_slid: Option<ReadFn<u32>>,
    pub read_sl: Option<ReadFn<u8>>,
    pub read_dlid_path_bits: Option<ReadFn<u8>>,
    pub read_completion_ts: OpaqueFn,
    pub read_cvlan: OpaqueFn,
    pub read_flow_tag: OpaqueFn,
    pub read_tm_info: OpaqueFn,
    pub read_completion_wallclock_ns: OpaqueFn,
}

/// `struct ibv_cq_ex`: an `ibv_cq` and the extended polling ops.
#[repr(C)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub ex: ibv_cq_ex_tail,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut super::objects::ibv_comp_channel,
    pub comp_vector: u32,
    /// `enum ibv_create_cq_wc_flags`.
    pub wc_flags: u64,
    /// `enum ibv_cq_init_attr_mask`.
    pub comp_mask: u32,
    /// `enum ibv_create_cq_attr_flags`.
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `struct ibv_data_buf`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: size_t,
}

/// `struct ibv_rx_hash_conf` (part of `ibv_qp_init_attr_ex`; unused by softrnic).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `ibv_qp_init_attr`'s fields, then the extended ones.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut super::objects::ibv_srq,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: c_uint,
    pub sq_sig_all: i32,
    /// `enum ibv_qp_init_attr_mask`.
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *`.
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    /// `struct ibv_rwq_ind_table *`.
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    /// `enum ibv_qp_create_send_ops_flags`.
    pub send_ops_flags: u64,
}

/// `struct ibv_qp_ex *` as the `wr_*` ops receive it.
type Q = *mut ibv_qp_ex;

/// The fields of `struct ibv_qp_ex` after its `ibv_qp` head (`qp_base`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_ex_tail {
    pub comp_mask: u64,
    /// The `wr_id` the next `wr_<opcode>` call takes.
    pub wr_id: u64,
    /// The `enum ibv_send_flags` the next `wr_<opcode>` call takes.
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(Q, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(Q, u32, u64, u64)>,
    pub wr_bind_mw: Option<unsafe extern "C" fn(Q, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(Q, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(Q, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(Q, u32, u64)>,
    /// The immediate data is `__be32`.
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(Q, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(Q)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(Q, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(Q, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(Q, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(Q, *mut super::objects::ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(Q, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(Q, *mut c_void, size_t)>,
    pub wr_set_inline_data_list: Option<unsafe extern "C" fn(Q, size_t, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(Q, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(Q, size_t, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(Q)>,
    pub wr_complete: Option<unsafe extern "C" fn(Q) -> i32>,
    pub wr_abort: Option<unsafe extern "C" fn(Q)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(Q, u32, u64, *const c_void)>,
}

/// `struct ibv_qp_ex`: an `ibv_qp` and the work-request builder.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub ex: ibv_qp_ex_tail,
}
