//! The devices the connection manager uses (rdma-core 44 `librdmacm/cma.c`): `rdma_get_devices`
//! lists an open `ibv_context` per device, the ones `id->verbs` point to, which stay open for
//! the life of the process; `rdma_free_devices` frees the array only.

use libc::c_int;

use super::not_yet;
use crate::abi::context::ibv_context;
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `struct ibv_context **rdma_get_devices(int *num_devices)`: not implemented yet; as
    /// rdma-core on failure, `*num_devices` (if given) is 0.
    unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
        // SAFETY: the caller passes NULL or an int to write.
        if let Some(n) = unsafe { num_devices.as_mut() } {
            *n = 0;
        }
        not_yet(std::ptr::null_mut())
    }
}

export_rdmacm! {
    /// `void rdma_free_devices(struct ibv_context **list)`: not implemented yet.
    unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
        let _ = list;
        not_yet(())
    }
}
