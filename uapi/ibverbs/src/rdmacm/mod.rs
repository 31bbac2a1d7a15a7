//! The connection manager of rdma-core's `librdmacm.so.1`, inside softrnic's `libibverbs.so.1`
//! so that a process has one copy of its devices whichever library it calls.
//!
//! Each `rdma_x` call of `<rdma/rdma_cma.h>` is implemented here as `softrnic_rdma_x`, version
//! `SOFTRNIC_RDMACM_PRIVATE` (`export_rdmacm!` of `crate::export`); softrnic's
//! `librdmacm.so.1` (the shim, crate `uapi/rdmacm`) exports rdma-core's names and forwards
//! each call here. The shim's list of functions and signatures, `uapi/rdmacm/src/symbols.rs`,
//! is checked against these functions at compile time (`signatures`).
//!
//! | module      | calls |
//! |-------------|-------|
//! | [`abi`]     | the structs and constants of `<rdma/rdma_cma.h>` |
//! | `events`    | `rdma_create_event_channel`, `rdma_destroy_event_channel`, `rdma_get_cm_event`, `rdma_ack_cm_event`, `rdma_event_str` |
//! | `ids`       | `rdma_create_id`, `rdma_destroy_id`, `rdma_migrate_id`, `rdma_set_option`, `rdma_bind_addr`, `rdma_resolve_addr`, `rdma_resolve_route`, `rdma_get_src_port`, `rdma_get_dst_port` |
//! | `connect`   | `rdma_connect`, `rdma_listen`, `rdma_get_request`, `rdma_accept`, `rdma_reject`, `rdma_reject_ece`, `rdma_notify`, `rdma_disconnect`, `rdma_establish` |
//! | `ece`       | `rdma_set_local_ece`, `rdma_get_remote_ece` |
//! | `qp`        | `rdma_create_qp`, `rdma_create_qp_ex`, `rdma_destroy_qp`, `rdma_init_qp_attr`, `rdma_create_srq`, `rdma_create_srq_ex`, `rdma_destroy_srq` |
//! | `ep`        | `rdma_create_ep`, `rdma_destroy_ep` |
//! | `multicast` | `rdma_join_multicast`, `rdma_join_multicast_ex`, `rdma_leave_multicast` |
//! | `addrinfo`  | `rdma_getaddrinfo`, `rdma_freeaddrinfo` |
//! | `devices`   | `rdma_get_devices`, `rdma_free_devices` |
//!
//! The stateful calls are thin: softrnic's rdma_cm (`softrnic_uapi::cm`) does the work, and
//! `state` keeps the C structs (`rdma_cm_id`, `rdma_event_channel`, `rdma_cm_event`) in step
//! with it; `source` gives it the devices (`id->verbs`) this library opens. ECE is not
//! supported (`EOPNOTSUPP`, as rxe).

#[allow(missing_docs)]
pub mod abi;
mod addrinfo;
mod connect;
mod devices;
mod ece;
mod ep;
mod events;
mod ids;
mod multicast;
mod qp;
mod signatures;
mod source;
mod state;

#[cfg(test)]
mod layout;

use crate::ffi::set_errno;

/// -1 with `errno = e`: the failure of an `int` call.
fn fail(e: libc::c_int) -> libc::c_int {
    set_errno(e);
    -1
}

/// NULL with `errno = e`: the failure of a call returning a pointer.
fn fail_null<T>(e: libc::c_int) -> *mut T {
    set_errno(e);
    std::ptr::null_mut()
}

/// 0, or -1 with the errno of `r`'s error.
fn status(r: std::io::Result<()>) -> libc::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}
