//! `#[repr(C)]` mirrors of the structs of rdma-core 44's `<infiniband/verbs.h>`, written from
//! the header with the same names, field order and widths (C `int` is `c_int`, enums are
//! `c_uint`/`c_int`, `__be64` is `u64` holding big-endian bytes). Anonymous C unions are fields
//! named after their first member; the `layout` test compares every offset and size with what
//! the C compiler gives for the installed header.
//!
//! | module      | structs                                                                 |
//! |-------------|-------------------------------------------------------------------------|
//! | [`attr`]    | `ibv_gid`, `ibv_gid_entry`, `ibv_device_attr(_ex)` and its caps, `ibv_port_attr` |
//! | [`context`] | `ibv_device`, `ibv_context_ops`, `ibv_context`, `verbs_context`          |
//! | [`objects`] | `ibv_pd`, `ibv_mr`, `ibv_mw`, `ibv_ah`, `ibv_comp_channel`, `ibv_cq`, `ibv_srq`, `ibv_qp` |
//! | [`wr`]      | `ibv_sge`, `ibv_send_wr`, `ibv_recv_wr`, `ibv_wc`, `ibv_mw_bind(_info)`  |
//! | [`ex`]      | `ibv_cq_ex`, `ibv_cq_init_attr_ex`, `ibv_poll_cq_attr`, `ibv_qp_ex`, `ibv_qp_init_attr_ex`, `ibv_data_buf` |
//! | [`qp_attr`] | `ibv_global_route`, `ibv_ah_attr`, `ibv_qp_cap`, `ibv_qp_init_attr`, `ibv_qp_attr`, `ibv_srq_attr`, `ibv_srq_init_attr`, `ibv_async_event` |

#![allow(non_camel_case_types, non_snake_case)]

pub mod attr;
pub mod context;
pub mod ex;
pub mod objects;
pub mod qp_attr;
pub mod wr;

#[cfg(test)]
pub(crate) mod layout;

/// `void *(*)(void)`: the type rdma-core gives the function pointers it keeps only for ABI
/// compatibility (`_compat_*`, placeholders) and the ones softrnic leaves NULL.
pub type OpaqueFn = Option<unsafe extern "C" fn()>;
