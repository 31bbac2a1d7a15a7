//! Connections (rdma-core 44 `librdmacm/cma.c`): the active side's `rdma_connect` and
//! `rdma_establish`, the passive side's `rdma_listen`, `rdma_get_request`, `rdma_accept`,
//! `rdma_reject` and `rdma_reject_ece`, and `rdma_notify`, `rdma_disconnect`. The QP of the
//! id is moved through its states by softrnic's rdma_cm (`softrnic_uapi::cm`) as librdmacm
//! moves it: RTR and RTS before the REP is sent or the RTU is, ERROR at disconnect.

use libc::{c_int, c_void};
use softrnic_uapi::cm::ConnParam;

use super::abi::{ibv_event_type, rdma_cm_id, rdma_conn_param};
use super::ids::finish;
use super::state::SoftId;
use super::{fail, status};
use crate::export::export_rdmacm;
use crate::ffi::catch;

/// The program's `rdma_conn_param`, or `None` for NULL.
fn conn_param(p: *const rdma_conn_param) -> Option<ConnParam> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL; the program passes a readable struct, whose private data is
    // `private_data_len` readable bytes when not NULL.
    let c = unsafe { *p };
    let private_data = if c.private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: as above.
        unsafe {
            std::slice::from_raw_parts(c.private_data.cast::<u8>(), c.private_data_len.into())
        }
        .to_vec()
    };
    Some(ConnParam {
        private_data,
        responder_resources: c.responder_resources,
        initiator_depth: c.initiator_depth,
        flow_control: c.flow_control,
        retry_count: c.retry_count,
        rnr_retry_count: c.rnr_retry_count,
        srq: c.srq,
        qp_num: c.qp_num,
    })
}

/// `len` bytes at `data` (none for NULL).
fn bytes(data: *const c_void, len: u8) -> Vec<u8> {
    if data.is_null() {
        return Vec::new();
    }
    // SAFETY: non-NULL; the program passes `len` readable bytes.
    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len.into()) }.to_vec()
}

export_rdmacm! {
    /// `int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)`: the
    /// REQ (a SIDR_REQ for UD) to the resolved destination; NULL `conn_param` offers 7
    /// retries of each kind and no READ resources. A synchronous id waits for the outcome:
    /// -1 with `ECONNREFUSED` if rejected, `ETIMEDOUT` if the peer never answered. -1 with
    /// `EINVAL` before the route is resolved or for more than 56 bytes of private data.
    unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param_: *mut rdma_conn_param) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let param = conn_param(conn_param_).unwrap_or_else(ConnParam::none);
            let r = soft.id.connect(&param);
            finish(soft, r)
        })
    }
}

export_rdmacm! {
    /// `int rdma_establish(struct rdma_cm_id *id)`: after `RDMA_CM_EVENT_CONNECT_RESPONSE`
    /// (the id had no QP at the REP), its QP (if it has one now) to RTR and RTS, and the RTU.
    unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            status(soft.id.establish())
        })
    }
}

export_rdmacm! {
    /// `int rdma_listen(struct rdma_cm_id *id, int backlog)`: connection requests to the
    /// bound address and port (of every device, for a wildcard) come as
    /// `RDMA_CM_EVENT_CONNECT_REQUEST`; `backlog` <= 0 means the most. -1 with `EADDRINUSE`
    /// if an id of any process of the host listens there already.
    unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let r = soft.id.listen(backlog);
            soft.refresh();
            status(r)
        })
    }
}

export_rdmacm! {
    /// `int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)`: waits for
    /// the next connection request of a synchronous listener; the new id holds the request
    /// event in `id->event` (its private data), and gets a QP when the listener was made by
    /// `rdma_create_ep` with QP attributes. -1 with `EINVAL` for an id that is not a
    /// synchronous listener.
    unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
        catch(-1, || {
            let Some(l) = SoftId::of(listen) else { return fail(libc::EINVAL) };
            if id.is_null() {
                return fail(libc::EINVAL);
            }
            let ev = match l.id.get_request() {
                Ok(e) => e,
                Err(e) => return fail(e.raw_os_error().unwrap_or(libc::EIO)),
            };
            let (qp_attr, pd) = (l.ep_qp_attr, l.c.pd);
            let child = super::state::SoftEvent::new(ev);
            let child_id = child.c.id;
            let Some(soft) = SoftId::of(child_id) else { return fail(libc::EIO) };
            soft.keep_soft_event(child);
            if let Some(mut attr) = qp_attr {
                // SAFETY: a live id, a PD of its device (or NULL for the id's own), and a
                // copy of the listener's attributes.
                let r = unsafe { super::qp::rdma_create_qp(child_id, pd, &mut attr) };
                if r != 0 {
                    // SAFETY: our own id, created just now and not handed out.
                    unsafe { super::ids::rdma_destroy_id(child_id) };
                    return -1;
                }
            }
            // SAFETY: non-NULL; the program passes a writable pointer.
            unsafe { *id = child_id };
            0
        })
    }
}

export_rdmacm! {
    /// `int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)`: accepts
    /// the connection request the id was made for: its QP to RTR and RTS, then the REP (at
    /// most 196 bytes of private data; 0xFF resources: as many as the device and the peer
    /// allow); UD: the SIDR_REP with the QP's number and `RDMA_UDP_QKEY`. A synchronous RC
    /// id waits for `ESTABLISHED`.
    unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param_: *mut rdma_conn_param) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let param = conn_param(conn_param_);
            let r = soft.id.accept(param.as_ref());
            finish(soft, r)
        })
    }
}

export_rdmacm! {
    /// `int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t
    /// private_data_len)`: REJ reason 28 (consumer defined) with at most 148 bytes of private
    /// data; UD: SIDR_REP status 2 (rejected).
    unsafe extern "C" fn rdma_reject(
        id: *mut rdma_cm_id,
        private_data: *const c_void,
        private_data_len: u8,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            status(soft.id.reject(&bytes(private_data, private_data_len)))
        })
    }
}

export_rdmacm! {
    /// `int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t
    /// private_data_len)`: softrnic has no ECE (as rxe), so this is `rdma_reject`.
    unsafe extern "C" fn rdma_reject_ece(
        id: *mut rdma_cm_id,
        private_data: *const c_void,
        private_data_len: u8,
    ) -> c_int {
        // SAFETY: the same arguments, as the program gave them.
        unsafe { rdma_reject(id, private_data, private_data_len) }
    }
}

export_rdmacm! {
    /// `int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)`: 0: the passive
    /// side's connection is established by the RTU, or by the first packet its QP receives,
    /// which softrnic's QP reports itself.
    unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: ibv_event_type) -> c_int {
        let _ = event;
        catch(-1, || match SoftId::of(id) {
            Some(soft) => {
                soft.id.notify();
                0
            }
            None => fail(libc::EINVAL),
        })
    }
}

export_rdmacm! {
    /// `int rdma_disconnect(struct rdma_cm_id *id)`: the QP to ERROR (its work requests
    /// flush), then the DREQ, or the DREP if the peer's DREQ came first; `DISCONNECTED`
    /// follows. A synchronous id waits for it, then holds it in `id->event`, as librdmacm's.
    /// -1 with `EINVAL` if the id is not connected.
    unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let r = soft.id.disconnect();
            finish(soft, r)
        })
    }
}
