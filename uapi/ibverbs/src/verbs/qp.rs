//! Queue pairs: `ibv_create_qp`, `ibv_query_qp`, `ibv_destroy_qp` (`ibv_modify_qp` is in
//! [`super::modify`], the post ops in [`super::post`]).
//!
//! A [`SoftQp`] is the C `ibv_qp` followed by the `softrnic_uapi` [`QueuePair`] (which holds
//! its CQs, so they cannot be destroyed first), the creation attributes, and the attributes
//! of the successful modifies, which `ibv_query_qp` reports. RC, UC and UD.

use std::ptr::null_mut;
use std::sync::Mutex;

use libc::c_int;
use softrnic_uapi::{QpCaps, QpInitAttr, QpType, QueuePair, Srq};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_pd, ibv_qp};
use crate::abi::qp_attr::{ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr};
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::async_event::count_ack;
use crate::verbs::cq::cq_of;
use crate::verbs::pd::pd_of;
use crate::verbs::qp_ex::QpEx;
use crate::verbs::srq::with_srq;

/// A queue pair.
#[repr(C)]
pub(crate) struct SoftQp {
    pub ibv: ibv_qp,
    /// The rest of the `ibv_qp_ex` (`verbs::qp_ex`).
    pub ex: QpEx,
    pub qp: QueuePair,
    /// `ibv_create_qp`'s attributes, capacities as granted.
    pub init: ibv_qp_init_attr,
    /// The attributes set by successful modifies (for `ibv_query_qp`).
    pub attr: Mutex<ibv_qp_attr>,
}

pub(crate) static QPS: Live = Live::new();

/// The QP at `qp`, if alive. Valid until `ibv_destroy_qp(qp)`, which the application must
/// not race with other uses of the QP.
pub(crate) fn qp_of<'a>(qp: *const ibv_qp) -> Option<&'a SoftQp> {
    // SAFETY: a live QP pointer is the `ibv` field, at offset 0, of a boxed SoftQp.
    QPS.contains(qp).then(|| unsafe { &*qp.cast::<SoftQp>() })
}

/// The `ibv_qp` of the live QP of context `ctx` numbered `qpn` (for async events).
pub(crate) fn qp_by_num(ctx: *const ibv_context, qpn: u32) -> Option<*mut ibv_qp> {
    let p = QPS.find(|p: *const ibv_qp| {
        // SAFETY: `find` passes live QP pointers only, under the set's lock, so the QP cannot
        // be freed meanwhile.
        unsafe { (*p).qp_num == qpn && (*p).context.cast_const() == ctx }
    });
    (!p.is_null()).then_some(p.cast_mut())
}

/// `ibv_ack_async_event` of an event of `qp`: counted if the QP is alive.
pub(crate) fn ack_event(qp: *mut ibv_qp) {
    if qp_of(qp).is_some() {
        // SAFETY: a live QP: its fields are valid; the application does not race the ack
        // with `ibv_destroy_qp`.
        unsafe {
            count_ack(
                &raw mut (*qp).mutex,
                &raw mut (*qp).cond,
                &raw mut (*qp).events_completed,
            )
        };
    }
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

fn caps(c: &ibv_qp_cap) -> QpCaps {
    QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

export! { "IBVERBS_1.1";
    /// `struct ibv_qp *ibv_create_qp(struct ibv_pd *, struct ibv_qp_init_attr *)`: an RC, UC
    /// or UD QP in RESET, with `init_attr->srq` one that takes its receives from that SRQ.
    /// NULL with `errno`: `EINVAL` for a bad PD, attributes, CQ or SRQ or capacities beyond
    /// the device's; `EOPNOTSUPP` for other QP types;
    /// `ENOMEM` beyond `max_qp`.
    unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
        catch(null_mut(), || {
            let Some(soft_pd) = pd_of(pd) else { return fail(libc::EINVAL) };
            if qp_init_attr.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_qp_init_attr.
            let init = unsafe { *qp_init_attr };
            let qp_type = match QpType::from_ibv(init.qp_type) {
                Ok(t) => t,
                Err(e) => return fail(e.errno()),
            };
            let send = cq_of(init.send_cq).and_then(|c| c.cq.as_ref());
            // An XRC INI QP has no receive queue, so needs no receive CQ.
            let recv = match (qp_type, init.recv_cq.is_null()) {
                (QpType::XrcSend, true) => send,
                _ => cq_of(init.recv_cq).and_then(|c| c.cq.as_ref()),
            };
            let (Some(send_cq), Some(recv_cq)) = (send, recv) else { return fail(libc::EINVAL) };
            let create = |srq: Option<&Srq>| {
                let attr = QpInitAttr {
                    send_cq,
                    recv_cq,
                    cap: caps(&init.cap),
                    qp_type,
                    sq_sig_all: init.sq_sig_all != 0,
                    srq,
                };
                soft_pd.pd.create_qp(&attr).map_err(|e| e.errno())
            };
            let created = if init.srq.is_null() {
                create(None)
            } else {
                with_srq(init.srq, |s| create(Some(s))).and_then(|r| r)
            };
            let qp = match created {
                Ok(qp) => qp,
                Err(e) => return fail(e),
            };
            let ibv = ibv_qp {
                // SAFETY: `pd` is live, so readable.
                context: unsafe { (*pd).context },
                qp_context: init.qp_context,
                pd,
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                srq: init.srq,
                handle: qp.qp_num(),
                qp_num: qp.qp_num(),
                state: softrnic_uapi::QpState::Reset.ibv(),
                qp_type: init.qp_type,
                // SAFETY (zeroed): all-zero pthread_mutex_t / pthread_cond_t are the static
                // initializers on glibc.
                mutex: unsafe { std::mem::zeroed() },
                // SAFETY: as above.
                cond: unsafe { std::mem::zeroed() },
                events_completed: 0,
            };
            let attr = ibv_qp_attr { cap: init.cap, port_num: 1, ..Default::default() };
            let soft = SoftQp { ibv, ex: QpEx::default(), qp, init, attr: Mutex::new(attr) };
            let p = Box::into_raw(Box::new(soft)).cast::<ibv_qp>();
            QPS.insert(p);
            p
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_query_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask,
    /// struct ibv_qp_init_attr *)`: the current state, `sq_draining`, the capacities, and the
    /// attributes the modifies set (all of them, whatever `attr_mask` asks). `EINVAL` for a
    /// bad QP or NULL output.
    unsafe extern "C" fn ibv_query_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int, init_attr: *mut ibv_qp_init_attr) -> c_int {
        let _ = attr_mask;
        catch(libc::EIO, || {
            let Some(soft) = qp_of(qp) else { return libc::EINVAL };
            if attr.is_null() || init_attr.is_null() {
                return libc::EINVAL;
            }
            let mut a = *soft.attr.lock().unwrap_or_else(|p| p.into_inner());
            let state = soft.qp.state().ibv();
            a.qp_state = state;
            a.cur_qp_state = state;
            a.sq_draining = u8::from(soft.qp.sq_draining());
            a.cap = soft.init.cap;
            // SAFETY: both non-NULL; the caller passes writable structs.
            unsafe {
                attr.write(a);
                init_attr.write(soft.init);
            }
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_destroy_qp(struct ibv_qp *)`: 0 (its CQs can then be destroyed), or `EINVAL`
    /// for a pointer that is not a live QP.
    unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
        catch(libc::EIO, || {
            if !QPS.remove(qp) {
                return libc::EINVAL;
            }
            // SAFETY: `qp` was live, so it came from Box::into_raw of a SoftQp; removing it
            // from QPS makes this the only release.
            drop(unsafe { Box::from_raw(qp.cast::<SoftQp>()) });
            0
        })
    }
}
