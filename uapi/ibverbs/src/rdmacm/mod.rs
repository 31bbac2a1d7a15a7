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
//! Done: the calls that need no connection state, `rdma_event_str`, `rdma_get_src_port`,
//! `rdma_get_dst_port`, `rdma_getaddrinfo`, `rdma_freeaddrinfo`, and the ECE calls (not
//! supported). Every other call is still a stub failing with `errno = ENOSYS` (`not_yet`).

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

#[cfg(test)]
mod layout;

use crate::ffi::set_errno;

/// What a call not implemented yet does: `errno = ENOSYS`, and `fail`, the error value of its
/// C return type (-1 for `int`, NULL for a pointer, `()` for `void`).
fn not_yet<T>(fail: T) -> T {
    set_errno(libc::ENOSYS);
    fail
}
