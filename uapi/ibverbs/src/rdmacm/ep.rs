//! Endpoints (rdma-core 44 `librdmacm/cma.c`): `rdma_create_ep` makes a synchronous
//! identifier from an `rdma_getaddrinfo` answer (bound if passive, with the QP attributes
//! kept for the ids `rdma_get_request` hands out; resolved if active, with its QP), in one
//! call; `rdma_destroy_ep` undoes it.

use std::ptr::null_mut;

use libc::c_int;
use softrnic_uapi::cm::CmId;

use super::abi::{rdma_addrinfo, rdma_cm_id, RAI_PASSIVE};
use super::state::{port_space, qp_type, SoftId};
use super::{fail, ids, qp, source};
use crate::abi::objects::ibv_pd;
use crate::abi::qp_attr::ibv_qp_init_attr;
use crate::export::export_rdmacm;
use crate::ffi::catch;

export_rdmacm! {
    /// `int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
    /// struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)`: a synchronous id of
    /// `res`'s port space and QP type; passive (`RAI_PASSIVE`): bound to `res->ai_src_addr`,
    /// `pd` and `qp_init_attr` kept for the requests; active: the address and route of
    /// `res->ai_dst_addr` resolved, and a QP made with `qp_init_attr` if given. -1 with the
    /// errno of the step that failed (the id is then destroyed).
    unsafe extern "C" fn rdma_create_ep(
        id: *mut *mut rdma_cm_id,
        res: *mut rdma_addrinfo,
        pd: *mut ibv_pd,
        qp_init_attr: *mut ibv_qp_init_attr,
    ) -> c_int {
        catch(-1, || {
            source::install();
            if id.is_null() || res.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the program passes an answer of rdma_getaddrinfo.
            let r = unsafe { &*res };
            let Ok(ps) = u32::try_from(r.ai_port_space).map_err(|_| ()).and_then(|p| port_space(p).map_err(|_| ())) else {
                return fail(libc::EINVAL);
            };
            let Ok(qpt) = qp_type(r.ai_qp_type) else { return fail(libc::EINVAL) };
            let cm = match CmId::with_qp_type(None, ps, qpt) {
                Ok(c) => c,
                Err(e) => return fail(e.raw_os_error().unwrap_or(libc::ENOMEM)),
            };
            let new = SoftId::publish(cm, null_mut(), null_mut());
            // SAFETY: `new` is a live id made here; the addresses are the answer's.
            let done = unsafe {
                if r.ai_flags & RAI_PASSIVE != 0 {
                    passive(new, r, pd, qp_init_attr)
                } else {
                    active(new, r, pd, qp_init_attr)
                }
            };
            if done != 0 {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
                // SAFETY: our own id, not handed out.
                unsafe { rdma_destroy_ep(new) };
                return fail(errno);
            }
            // SAFETY: non-NULL; the program passes a writable pointer.
            unsafe { *id = new };
            0
        })
    }
}

/// A passive endpoint: bound, with `pd` as its PD and the QP attributes kept.
///
/// # Safety
/// `id` is live; `r`'s addresses are readable.
unsafe fn passive(
    id: *mut rdma_cm_id,
    r: &rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    if !r.ai_src_addr.is_null() {
        // SAFETY: as the caller promises.
        if unsafe { ids::rdma_bind_addr(id, r.ai_src_addr) } != 0 {
            return -1;
        }
    }
    let Some(soft) = SoftId::of(id) else {
        return fail(libc::EINVAL);
    };
    if !pd.is_null() {
        soft.c.pd = pd;
    }
    if !attr.is_null() {
        // SAFETY: non-NULL; the program passes a readable struct.
        let mut a = unsafe { *attr };
        a.qp_type = r.ai_qp_type as u32;
        soft.ep_qp_attr = Some(a);
    }
    0
}

/// An active endpoint: address and route resolved, and a QP if asked for.
///
/// # Safety
/// `id` is live; `r`'s addresses are readable.
unsafe fn active(
    id: *mut rdma_cm_id,
    r: &rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        if ids::rdma_resolve_addr(id, r.ai_src_addr, r.ai_dst_addr, 2000) != 0
            || ids::rdma_resolve_route(id, 2000) != 0
        {
            return -1;
        }
        if !attr.is_null() {
            (*attr).qp_type = r.ai_qp_type as u32;
            return qp::rdma_create_qp(id, pd, attr);
        }
    }
    0
}

export_rdmacm! {
    /// `void rdma_destroy_ep(struct rdma_cm_id *id)`: destroys the id's QP and SRQ, then
    /// the id.
    unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
        catch((), || {
            // SAFETY: the program gives the endpoint up.
            unsafe {
                qp::rdma_destroy_qp(id);
                qp::rdma_destroy_srq(id);
                ids::rdma_destroy_id(id);
            }
        })
    }
}
