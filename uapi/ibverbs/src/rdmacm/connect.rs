//! Connections (rdma-core 44 `librdmacm/cma.c`): the active side's `rdma_connect` and
//! `rdma_establish`, the passive side's `rdma_listen`, `rdma_get_request`, `rdma_accept`,
//! `rdma_reject` and `rdma_reject_ece`, and `rdma_notify`, `rdma_disconnect`.

use libc::{c_int, c_void};

use super::abi::{ibv_event_type, rdma_cm_id, rdma_conn_param};
use super::not_yet;
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)`: not
    /// implemented yet.
    unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
        let _ = (id, conn_param);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_establish(struct rdma_cm_id *id)`: not implemented yet.
    unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
        let _ = id;
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_listen(struct rdma_cm_id *id, int backlog)`: not implemented yet.
    unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
        let _ = (id, backlog);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)`: not
    /// implemented yet.
    unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
        let _ = (listen, id);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)`: not
    /// implemented yet.
    unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
        let _ = (id, conn_param);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_reject(struct rdma_cm_id *id, const void *private_data,
    /// uint8_t private_data_len)`: not implemented yet.
    unsafe extern "C" fn rdma_reject(
        id: *mut rdma_cm_id,
        private_data: *const c_void,
        private_data_len: u8,
    ) -> c_int {
        let _ = (id, private_data, private_data_len);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
    /// uint8_t private_data_len)`: a reject whose reason is "ECE options not supported"
    /// (rdma-core: `IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED`); not implemented yet.
    unsafe extern "C" fn rdma_reject_ece(
        id: *mut rdma_cm_id,
        private_data: *const c_void,
        private_data_len: u8,
    ) -> c_int {
        let _ = (id, private_data, private_data_len);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)`: not implemented yet.
    unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: ibv_event_type) -> c_int {
        let _ = (id, event);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_disconnect(struct rdma_cm_id *id)`: not implemented yet.
    unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
        let _ = id;
        not_yet(-1)
    }
}
