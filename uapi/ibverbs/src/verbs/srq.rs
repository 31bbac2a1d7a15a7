//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq` and the op `post_srq_recv` that verbs.h's inline `ibv_post_srq_recv`
//! calls (IBTA 10.2.9; the semantics are `softrnic_uapi::Srq`'s).
//!
//! A [`SoftSrq`] is the C `ibv_srq` followed by the `softrnic_uapi` [`Srq`], behind a mutex
//! that `ibv_destroy_srq` empties: the NIC refuses to destroy an SRQ while a QP uses it
//! (`EBUSY`), and the SRQ must then stay alive, at the same address, for the application.
//! `ibv_create_qp` takes the SRQ through [`with_srq`].

use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard};

use libc::c_int;
use softrnic_uapi::{Srq, SrqAttr, SrqAttrMask};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_pd, ibv_srq};
use crate::abi::qp_attr::{ibv_srq_attr, ibv_srq_init_attr};
use crate::abi::wr::ibv_recv_wr;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::async_event::count_ack;
use crate::verbs::pd::pd_of;
use crate::verbs::post::{post_recv_chain, refuse};

/// A shared receive queue.
#[repr(C)]
pub(crate) struct SoftSrq {
    ibv: ibv_srq,
    /// SGEs per WR, as granted (fixed for the SRQ's life: `ibv_modify_srq` cannot change it).
    max_sge: u32,
    /// `None` only inside a successful `ibv_destroy_srq`.
    srq: Mutex<Option<Srq>>,
}

impl SoftSrq {
    fn lock(&self) -> MutexGuard<'_, Option<Srq>> {
        self.srq.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) static SRQS: Live = Live::new();

/// The SRQ at `srq`, if alive. Valid until `ibv_destroy_srq(srq)` succeeds, which the
/// application must not race with other uses of the SRQ.
fn srq_of<'a>(srq: *const ibv_srq) -> Option<&'a SoftSrq> {
    // SAFETY: a live SRQ pointer is the `ibv` field, at offset 0, of a boxed SoftSrq.
    SRQS.contains(srq)
        .then(|| unsafe { &*srq.cast::<SoftSrq>() })
}

/// Runs `f` with the live SRQ at `srq` (`EINVAL` if it is not one), holding it so that it
/// cannot be destroyed meanwhile.
pub(crate) fn with_srq<R>(srq: *const ibv_srq, f: impl FnOnce(&Srq) -> R) -> Result<R, c_int> {
    let soft = srq_of(srq).ok_or(libc::EINVAL)?;
    let guard = soft.lock();
    guard.as_ref().map(f).ok_or(libc::EINVAL)
}

/// The `ibv_srq` of the live SRQ of context `ctx` whose handle is `handle` (for async events).
pub(crate) fn srq_by_handle(ctx: *const ibv_context, handle: u32) -> Option<*mut ibv_srq> {
    let p = SRQS.find(|p: *const ibv_srq| {
        // SAFETY: `find` passes live SRQ pointers only, under the set's lock, so the SRQ
        // cannot be freed meanwhile.
        unsafe { (*p).handle == handle && (*p).context.cast_const() == ctx }
    });
    (!p.is_null()).then_some(p.cast_mut())
}

/// `ibv_ack_async_event` of an event of `srq`: counted if the SRQ is alive.
pub(crate) fn ack_event(srq: *mut ibv_srq) {
    if srq_of(srq).is_some() {
        // SAFETY: a live SRQ: its fields are valid; the application does not race the ack
        // with `ibv_destroy_srq`.
        unsafe {
            count_ack(
                &raw mut (*srq).mutex,
                &raw mut (*srq).cond,
                &raw mut (*srq).events_completed,
            )
        };
    }
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

fn to_attr(a: &ibv_srq_attr) -> SrqAttr {
    SrqAttr {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    }
}

export! { "IBVERBS_1.1";
    /// `struct ibv_srq *ibv_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *)`: the
    /// granted `max_wr` and `max_sge` are written back into `srq_init_attr->attr` (the limit
    /// is checked, not armed: `ibv_modify_srq` arms it). NULL with `errno`: `EINVAL` for a bad
    /// PD or attributes (`max_wr` 0 or above `max_srq_wr`, `max_sge` above `max_srq_sge`,
    /// `srq_limit` above `max_wr`), `ENOMEM` beyond `max_srq`.
    unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, srq_init_attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
        catch(null_mut(), || {
            let Some(soft_pd) = pd_of(pd) else { return fail(libc::EINVAL) };
            if srq_init_attr.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_srq_init_attr.
            let init = unsafe { &mut *srq_init_attr };
            let srq = match soft_pd.pd.create_srq(&to_attr(&init.attr)) {
                Ok(s) => s,
                Err(e) => return fail(e.errno()),
            };
            if let Ok(granted) = srq.query() {
                init.attr.max_wr = granted.max_wr;
                init.attr.max_sge = granted.max_sge;
            }
            publish(pd, init.srq_context, srq)
        })
    }
}

/// The `ibv_srq` of `srq`, just created in the live PD `pd`, now live.
pub(crate) fn publish(pd: *mut ibv_pd, srq_context: *mut libc::c_void, srq: Srq) -> *mut ibv_srq {
    let ibv = ibv_srq {
        // SAFETY: `pd` is live, so readable.
        context: unsafe { (*pd).context },
        srq_context,
        pd,
        handle: srq.handle(),
        // SAFETY (zeroed): all-zero pthread_mutex_t / pthread_cond_t are the static
        // initializers on glibc.
        mutex: unsafe { std::mem::zeroed() },
        // SAFETY: as above.
        cond: unsafe { std::mem::zeroed() },
        events_completed: 0,
    };
    let max_sge = srq.query().map_or(0, |a| a.max_sge);
    let p = Box::into_raw(Box::new(SoftSrq {
        ibv,
        max_sge,
        srq: Mutex::new(Some(srq)),
    }));
    let p = p.cast::<ibv_srq>();
    SRQS.insert(p);
    p
}

export! { "IBVERBS_1.1";
    /// `int ibv_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int attr_mask)`:
    /// `IBV_SRQ_MAX_WR` resizes (not below the WQEs posted), `IBV_SRQ_LIMIT` arms the limit
    /// (0 disarms). 0, or `EINVAL` for a bad SRQ, NULL `attr`, unknown mask bits or a bad value.
    unsafe extern "C" fn ibv_modify_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr, srq_attr_mask: c_int) -> c_int {
        catch(libc::EIO, || {
            if srq_attr.is_null() {
                return libc::EINVAL;
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_srq_attr.
            let attr = to_attr(unsafe { &*srq_attr });
            let mask = SrqAttrMask::from_bits_retain(srq_attr_mask as u32);
            match with_srq(srq, |s| s.modify(&attr, mask)) {
                Ok(Ok(())) => 0,
                Ok(Err(e)) => e.errno(),
                Err(e) => e,
            }
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_query_srq(struct ibv_srq *, struct ibv_srq_attr *)`: `max_wr`, `max_sge` and
    /// the armed limit (0 when not armed, or once reached). `EINVAL` for a bad SRQ or NULL
    /// `srq_attr`.
    unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
        catch(libc::EIO, || {
            if srq_attr.is_null() {
                return libc::EINVAL;
            }
            let a = match with_srq(srq, |s| s.query()) {
                Ok(Ok(a)) => a,
                Ok(Err(e)) => return e.errno(),
                Err(e) => return e,
            };
            let out = ibv_srq_attr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit };
            // SAFETY: non-NULL; the caller passes a writable ibv_srq_attr.
            unsafe { srq_attr.write(out) };
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_destroy_srq(struct ibv_srq *)`: 0; `EBUSY` while a QP uses it (the SRQ stays
    /// as it was); `EINVAL` for a pointer that is not a live SRQ.
    unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
        catch(libc::EIO, || {
            let Some(soft) = srq_of(srq) else { return libc::EINVAL };
            {
                let mut guard = soft.lock();
                let Some(s) = guard.take() else { return libc::EINVAL };
                if let Err((s, e)) = s.destroy() {
                    *guard = Some(s);
                    return e.errno();
                }
            }
            if !SRQS.remove(srq) {
                return libc::EINVAL;
            }
            // SAFETY: `srq` was live, so it came from Box::into_raw of a SoftSrq; removing it
            // from SRQS makes this the only release.
            drop(unsafe { Box::from_raw(srq.cast::<SoftSrq>()) });
            0
        })
    }
}

/// `ibv_context_ops.post_srq_recv`: 0, or the errno (`EINVAL` for a bad SRQ or WR, `ENOMEM`
/// when the SRQ holds `max_wr` WQEs) with `*bad_wr` the first WR not posted.
pub(crate) unsafe extern "C" fn op_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    catch(libc::EIO, || {
        let max_sge = srq_of(srq).map_or(0, |s| s.max_sge);
        let r = with_srq(srq, |s| {
            // SAFETY: the caller passes a valid chain and a NULL or writable bad_wr.
            unsafe { post_recv_chain(wr, bad_wr, max_sge, |wrs| s.post_recv(wrs)) }
        });
        // SAFETY: the caller passes NULL or a writable slot.
        r.unwrap_or_else(|_| unsafe { refuse(wr, bad_wr) })
    })
}
