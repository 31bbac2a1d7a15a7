//! Multicast (rdma-core 44 `librdmacm/cma.c`): `rdma_join_multicast`, `rdma_join_multicast_ex`
//! (RDMACM_1.1: join flags, send-only full member), `rdma_leave_multicast`.

use libc::{c_int, c_void, sockaddr};

use super::abi::{rdma_cm_id, rdma_cm_join_mc_attr_ex};
use super::not_yet;
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)`:
    /// not implemented yet.
    unsafe extern "C" fn rdma_join_multicast(
        id: *mut rdma_cm_id,
        addr: *mut sockaddr,
        context: *mut c_void,
    ) -> c_int {
        let _ = (id, addr, context);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex
    /// *mc_join_attr, void *context)`: not implemented yet.
    unsafe extern "C" fn rdma_join_multicast_ex(
        id: *mut rdma_cm_id,
        mc_join_attr: *mut rdma_cm_join_mc_attr_ex,
        context: *mut c_void,
    ) -> c_int {
        let _ = (id, mc_join_attr, context);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)`: not
    /// implemented yet.
    unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
        let _ = (id, addr);
        not_yet(-1)
    }
}
