//! Endpoints (rdma-core 44 `librdmacm/cma.c`): `rdma_create_ep` makes an identifier from an
//! `rdma_getaddrinfo` answer (bound and listening if passive, resolved if active) with its QP,
//! in one synchronous call; `rdma_destroy_ep` undoes it.

use libc::c_int;

use super::abi::{rdma_addrinfo, rdma_cm_id};
use super::not_yet;
use crate::abi::objects::ibv_pd;
use crate::abi::qp_attr::ibv_qp_init_attr;
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
    /// struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)`: not implemented yet.
    unsafe extern "C" fn rdma_create_ep(
        id: *mut *mut rdma_cm_id,
        res: *mut rdma_addrinfo,
        pd: *mut ibv_pd,
        qp_init_attr: *mut ibv_qp_init_attr,
    ) -> c_int {
        let _ = (id, res, pd, qp_init_attr);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `void rdma_destroy_ep(struct rdma_cm_id *id)`: not implemented yet.
    unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
        let _ = id;
        not_yet(())
    }
}
