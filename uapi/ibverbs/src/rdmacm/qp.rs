//! QPs and SRQs on an identifier (rdma-core 44 `librdmacm/cma.c`): `rdma_create_qp`,
//! `rdma_create_qp_ex`, `rdma_destroy_qp`, `rdma_init_qp_attr`, and `<rdma/rdma_verbs.h>`'s
//! `rdma_create_srq`, `rdma_create_srq_ex`, `rdma_destroy_srq`.
//!
//! As librdmacm: a QP without CQs gets a completion channel and a CQ for each queue
//! (`id->send_cq_channel`, `id->send_cq`, ...), destroyed with it; the PD, if none is given,
//! is the id's (`id->pd`, one per device); the QP starts in INIT (a UD QP in RTS), and the
//! connection moves it on.

use std::ptr::null_mut;
use std::sync::Arc;

use libc::c_int;
use softrnic_uapi::QpObserver;

use super::abi::{ibv_srq_init_attr_ex, rdma_cm_id};
use super::fail;
use super::state::SoftId;
use crate::abi::ex::{ibv_qp_init_attr_ex, IBV_QP_INIT_ATTR_PD};
use crate::abi::objects::{ibv_cq, ibv_pd, ibv_qp, ibv_srq};
use crate::abi::qp_attr::{ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr, ibv_srq_init_attr};
use crate::export::export_rdmacm;
use crate::ffi::catch;
use crate::verbs::{channel, cq, pd, qp, qp_ex, srq};

/// Checks that `pd` (or, if NULL, the id's own) is of the id's device: the PD to use.
fn pd_for(soft: &SoftId, pd: *mut ibv_pd) -> Result<*mut ibv_pd, c_int> {
    let pd = if pd.is_null() { soft.c.pd } else { pd };
    match pd::pd_of(pd) {
        Some(p) if !soft.c.verbs.is_null() && p.ibv.context == soft.c.verbs => Ok(pd),
        _ => Err(libc::EINVAL),
    }
}

/// Makes the CQs (each with its completion channel) a QP without them needs, as librdmacm's
/// `ucma_create_cqs`: `max_send_wr` and `max_recv_wr` entries (at least 1).
fn make_cqs(
    soft: &mut SoftId,
    send: &mut *mut ibv_cq,
    recv: &mut *mut ibv_cq,
    send_wr: u32,
    recv_wr: u32,
) -> Result<(), c_int> {
    let verbs = soft.c.verbs;
    let id = (soft as *mut SoftId).cast();
    let make = |entries: u32, ch: &mut *mut _, cq_out: &mut *mut ibv_cq| {
        // SAFETY: `verbs` is the library's open context.
        *ch = unsafe { channel::ibv_create_comp_channel(verbs) };
        if ch.is_null() {
            return Err(libc::ENOMEM);
        }
        let n = c_int::try_from(entries.max(1)).unwrap_or(c_int::MAX);
        // SAFETY: as above; `*ch` was just made.
        *cq_out = unsafe { cq::ibv_create_cq(verbs, n, id, *ch, 0) };
        if cq_out.is_null() {
            return Err(libc::ENOMEM);
        }
        Ok(())
    };
    if recv.is_null() {
        make(recv_wr, &mut soft.c.recv_cq_channel, &mut soft.c.recv_cq)?;
        soft.own_cqs = true;
        *recv = soft.c.recv_cq;
    }
    if send.is_null() {
        make(send_wr, &mut soft.c.send_cq_channel, &mut soft.c.send_cq)?;
        soft.own_cqs = true;
        *send = soft.c.send_cq;
    }
    Ok(())
}

/// Completes the program's QP attributes as librdmacm does: CQs (and their channels) for
/// the queues that have none, and the id's SRQ if the QP names none. On failure, what was
/// made is destroyed again.
fn complete_attrs(
    soft: &mut SoftId,
    send: &mut *mut ibv_cq,
    recv: &mut *mut ibv_cq,
    srq: &mut *mut ibv_srq,
    cap: &ibv_qp_cap,
) -> Result<(), c_int> {
    if let Err(e) = make_cqs(soft, send, recv, cap.max_send_wr, cap.max_recv_wr) {
        destroy_cqs(soft);
        return Err(e);
    }
    if srq.is_null() {
        *srq = soft.c.srq;
    }
    Ok(())
}

/// Destroys the CQs and channels `make_cqs` made.
fn destroy_cqs(soft: &mut SoftId) {
    if !std::mem::take(&mut soft.own_cqs) {
        return;
    }
    // SAFETY: the CQs and channels `make_cqs` made, which only the destroyed QP used.
    unsafe {
        for cq_ in [soft.c.send_cq, soft.c.recv_cq] {
            if !cq_.is_null() {
                cq::ibv_destroy_cq(cq_);
            }
        }
        for ch in [soft.c.send_cq_channel, soft.c.recv_cq_channel] {
            if !ch.is_null() {
                channel::ibv_destroy_comp_channel(ch);
            }
        }
    }
    soft.c.send_cq = null_mut();
    soft.c.recv_cq = null_mut();
    soft.c.send_cq_channel = null_mut();
    soft.c.recv_cq_channel = null_mut();
}

/// Makes the new QP `q` the id's: moved to INIT (UD: RTS) by the CM, `id->qp`.
fn adopt(soft: &mut SoftId, q: *mut ibv_qp) -> c_int {
    if q.is_null() {
        destroy_cqs(soft);
        return -1;
    }
    // The C QP keeps the attributes ibv_query_qp reports (udaddy's server reads its Q_Key
    // back): it hears of each change the connection manager makes.
    let c_qp = q as usize;
    let observer: QpObserver = Arc::new(move |a, mask| {
        crate::verbs::modify::remember_cm(c_qp as *mut ibv_qp, a, mask);
    });
    let attached = match qp::qp_of(q) {
        Some(s) => soft.id.attach_qp_observed(&s.qp, Some(observer)),
        None => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
    };
    if let Err(e) = attached {
        // SAFETY: the QP was just made and not handed out.
        unsafe { qp::ibv_destroy_qp(q) };
        destroy_cqs(soft);
        return fail(e.raw_os_error().unwrap_or(libc::EINVAL));
    }
    soft.c.qp = q;
    0
}

export_rdmacm! {
    /// `int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
    /// struct ibv_qp_init_attr *qp_init_attr)`: a QP for the id on `pd` (NULL: the id's),
    /// with CQs made if the attributes have none, in INIT (UD: RTS). -1 with `EINVAL` for a
    /// PD of another device or an id with no device yet; `ibv_create_qp`'s errors.
    unsafe extern "C" fn rdma_create_qp(
        id: *mut rdma_cm_id,
        pd_: *mut ibv_pd,
        qp_init_attr: *mut ibv_qp_init_attr,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            if qp_init_attr.is_null() || !soft.c.qp.is_null() {
                return fail(libc::EINVAL);
            }
            let pd_ = match pd_for(soft, pd_) {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            // SAFETY: non-NULL; the program passes a readable and writable struct.
            let attr = unsafe { &mut *qp_init_attr };
            let cap = attr.cap;
            if let Err(e) =
                complete_attrs(soft, &mut attr.send_cq, &mut attr.recv_cq, &mut attr.srq, &cap)
            {
                return fail(e);
            }
            // SAFETY: a live PD and the program's attributes, completed above.
            let q = unsafe { qp::ibv_create_qp(pd_, attr) };
            adopt(soft, q)
        })
    }
}

export_rdmacm! {
    /// `int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex
    /// *qp_init_attr)`: [`rdma_create_qp`] with the extended attributes (the PD, if not
    /// given, is the id's; `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` gives the QP its `ibv_qp_ex`).
    unsafe extern "C" fn rdma_create_qp_ex(
        id: *mut rdma_cm_id,
        qp_init_attr: *mut ibv_qp_init_attr_ex,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            if qp_init_attr.is_null() || !soft.c.qp.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the program passes a readable and writable struct.
            let attr = unsafe { &mut *qp_init_attr };
            let given = if attr.comp_mask & IBV_QP_INIT_ATTR_PD != 0 {
                attr.pd
            } else {
                null_mut()
            };
            match pd_for(soft, given) {
                Ok(p) => {
                    attr.pd = p;
                    attr.comp_mask |= IBV_QP_INIT_ATTR_PD;
                }
                Err(e) => return fail(e),
            }
            let cap = attr.cap;
            if let Err(e) =
                complete_attrs(soft, &mut attr.send_cq, &mut attr.recv_cq, &mut attr.srq, &cap)
            {
                return fail(e);
            }
            // SAFETY: the id's context and the program's attributes, completed above.
            let q = unsafe { qp_ex::op_create_qp_ex(soft.c.verbs, attr) };
            adopt(soft, q)
        })
    }
}

export_rdmacm! {
    /// `void rdma_destroy_qp(struct rdma_cm_id *id)`: destroys `id->qp`, and the CQs and
    /// channels `rdma_create_qp` made for it.
    unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
        catch((), || {
            let Some(soft) = SoftId::of(id) else { return };
            soft.id.detach_qp();
            let q = std::mem::replace(&mut soft.c.qp, null_mut());
            if !q.is_null() {
                // SAFETY: the id's QP, which the program gives up.
                unsafe { qp::ibv_destroy_qp(q) };
            }
            destroy_cqs(soft);
        })
    }
}

export_rdmacm! {
    /// `int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
    /// int *qp_attr_mask)`: the attributes (and mask) that move a QP to
    /// `qp_attr->qp_state` for this id. -1 with `EINVAL` for RTR or RTS before the
    /// connection's parameters are known.
    unsafe extern "C" fn rdma_init_qp_attr(
        id: *mut rdma_cm_id,
        qp_attr: *mut ibv_qp_attr,
        qp_attr_mask: *mut c_int,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            if qp_attr.is_null() || qp_attr_mask.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the program passes readable and writable structs.
            let (attr, mask) = unsafe { (&mut *qp_attr, &mut *qp_attr_mask) };
            let Ok(state) = softrnic_uapi::QpState::from_ibv(attr.qp_state) else {
                return fail(libc::EINVAL);
            };
            match soft.id.init_qp_attr(state) {
                Ok((a, m)) => {
                    crate::verbs::modify::from_qp_attr(&a, attr);
                    *mask = m.bits() as c_int;
                    0
                }
                Err(e) => fail(e.raw_os_error().unwrap_or(libc::EINVAL)),
            }
        })
    }
}

export_rdmacm! {
    /// `int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
    /// struct ibv_srq_init_attr *attr)`: an SRQ on `pd` (NULL: the id's) as `id->srq`, which
    /// the id's QP then takes (and a receive CQ, as librdmacm makes for it, when the QP is
    /// created without one).
    unsafe extern "C" fn rdma_create_srq(
        id: *mut rdma_cm_id,
        pd_: *mut ibv_pd,
        attr: *mut ibv_srq_init_attr,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            if attr.is_null() || !soft.c.srq.is_null() {
                return fail(libc::EINVAL);
            }
            let pd_ = match pd_for(soft, pd_) {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            // SAFETY: a live PD and the program's attributes.
            let s = unsafe { srq::ibv_create_srq(pd_, attr) };
            if s.is_null() {
                return -1;
            }
            soft.c.srq = s;
            0
        })
    }
}

export_rdmacm! {
    /// `int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)`:
    /// [`rdma_create_srq`] for a basic SRQ; other SRQ types (XRC, tag matching) are
    /// `EOPNOTSUPP`, as softrnic has none.
    unsafe extern "C" fn rdma_create_srq_ex(
        id: *mut rdma_cm_id,
        attr: *mut ibv_srq_init_attr_ex,
    ) -> c_int {
        catch(-1, || {
            if attr.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the program passes a readable struct.
            let a = unsafe { *attr };
            /// `IBV_SRQ_INIT_ATTR_TYPE` and `IBV_SRQ_INIT_ATTR_PD` (`enum ibv_srq_init_attr_mask`).
            const TYPE: u32 = 1 << 0;
            const PD: u32 = 1 << 1;
            if a.comp_mask & TYPE != 0 && a.srq_type != 0 {
                return fail(libc::EOPNOTSUPP);
            }
            let pd_ = if a.comp_mask & PD != 0 { a.pd } else { null_mut() };
            let mut basic = ibv_srq_init_attr {
                srq_context: a.srq_context,
                attr: a.attr,
            };
            // SAFETY: the same id; a struct made here.
            let r = unsafe { rdma_create_srq(id, pd_, &mut basic) };
            if r == 0 {
                // SAFETY: non-NULL, writable: the capacities granted, as ibv_create_srq_ex.
                unsafe { (*attr).attr = basic.attr };
            }
            r
        })
    }
}

export_rdmacm! {
    /// `void rdma_destroy_srq(struct rdma_cm_id *id)`: destroys `id->srq`.
    unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
        catch((), || {
            let Some(soft) = SoftId::of(id) else { return };
            let s = std::mem::replace(&mut soft.c.srq, null_mut());
            if !s.is_null() {
                // SAFETY: the id's SRQ, which the program gives up.
                unsafe { srq::ibv_destroy_srq(s) };
            }
        })
    }
}
