//! QPs and SRQs on an identifier (rdma-core 44 `librdmacm/cma.c`): `rdma_create_qp`,
//! `rdma_create_qp_ex`, `rdma_destroy_qp`, `rdma_init_qp_attr`, and `<rdma/rdma_verbs.h>`'s
//! `rdma_create_srq`, `rdma_create_srq_ex`, `rdma_destroy_srq`.

use libc::c_int;

use super::abi::{ibv_srq_init_attr_ex, rdma_cm_id};
use super::not_yet;
use crate::abi::ex::ibv_qp_init_attr_ex;
use crate::abi::objects::ibv_pd;
use crate::abi::qp_attr::{ibv_qp_attr, ibv_qp_init_attr, ibv_srq_init_attr};
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
    /// struct ibv_qp_init_attr *qp_init_attr)`: not implemented yet.
    unsafe extern "C" fn rdma_create_qp(
        id: *mut rdma_cm_id,
        pd: *mut ibv_pd,
        qp_init_attr: *mut ibv_qp_init_attr,
    ) -> c_int {
        let _ = (id, pd, qp_init_attr);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex
    /// *qp_init_attr)`: not implemented yet.
    unsafe extern "C" fn rdma_create_qp_ex(
        id: *mut rdma_cm_id,
        qp_init_attr: *mut ibv_qp_init_attr_ex,
    ) -> c_int {
        let _ = (id, qp_init_attr);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `void rdma_destroy_qp(struct rdma_cm_id *id)`: not implemented yet.
    unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
        let _ = id;
        not_yet(())
    }
}

export_rdmacm! {
    /// `int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
    /// int *qp_attr_mask)`: not implemented yet.
    unsafe extern "C" fn rdma_init_qp_attr(
        id: *mut rdma_cm_id,
        qp_attr: *mut ibv_qp_attr,
        qp_attr_mask: *mut c_int,
    ) -> c_int {
        let _ = (id, qp_attr, qp_attr_mask);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
    /// struct ibv_srq_init_attr *attr)`: not implemented yet.
    unsafe extern "C" fn rdma_create_srq(
        id: *mut rdma_cm_id,
        pd: *mut ibv_pd,
        attr: *mut ibv_srq_init_attr,
    ) -> c_int {
        let _ = (id, pd, attr);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)`: not
    /// implemented yet.
    unsafe extern "C" fn rdma_create_srq_ex(
        id: *mut rdma_cm_id,
        attr: *mut ibv_srq_init_attr_ex,
    ) -> c_int {
        let _ = (id, attr);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `void rdma_destroy_srq(struct rdma_cm_id *id)`: not implemented yet.
    unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
        let _ = id;
        not_yet(())
    }
}
