//! A stand-in `libefa.so.1` for softrnic (see `../README.md`): the `efadv_*` functions
//! perftest imports, each "not supported", so that perftest loads without rdma-core's EFA
//! provider (which needs rdma-core's private libibverbs ABI). `efadv_query_device` returns
//! `EOPNOTSUPP`; `efadv_create_qp_ex` NULL with `errno = EOPNOTSUPP`.

#![allow(clippy::missing_safety_doc)]

include!("../../standin.rs");

unsupported! {
    "EFA_1.1" fn efadv_query_device(ibvctx: *mut libc::c_void, attr: *mut libc::c_void, inlen: u32) -> int;
    "EFA_1.1" fn efadv_create_qp_ex(ibvctx: *mut libc::c_void, attr_ex: *mut libc::c_void, efa_attr: *mut libc::c_void, inlen: u32) -> ptr;
}
