//! Completion queues: `ibv_create_cq`, `ibv_resize_cq`, `ibv_destroy_cq`, and the ops
//! `poll_cq` and `req_notify_cq` that verbs.h's inline `ibv_poll_cq` / `ibv_req_notify_cq`
//! call.
//!
//! A [`SoftCq`] is the C `ibv_cq` followed by the `softrnic_uapi` [`Cq`]; QPs hold the CQ
//! inside the uapi object, so `ibv_destroy_cq` is `EBUSY` while a QP uses it. A CQ created
//! with a completion channel ([`super::channel`]) signals it once per `req_notify_cq`.

use std::ptr::null_mut;

use libc::{c_int, c_void};
use softrnic_uapi::{Cq, WcOpcode, WcStatus, WorkCompletion};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_comp_channel, ibv_cq};
use crate::abi::wr::ibv_wc;
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::channel::{channel_of, count_cq};
use crate::verbs::cq_ex::CqEx;

/// A completion queue. `cq` is `None` only inside `ibv_destroy_cq`.
#[repr(C)]
pub(crate) struct SoftCq {
    pub ibv: ibv_cq,
    /// The rest of the `ibv_cq_ex` (`verbs::cq_ex`); no ops for `ibv_create_cq`'s CQs.
    pub ex: CqEx,
    pub cq: Option<Cq>,
}

/// Counts `cq`'s channel, if it has one, in or out of the channel's `refcnt`.
fn count_channel(cq: &ibv_cq, delta: c_int) {
    if let Some(ch) = channel_of(cq.channel) {
        count_cq(ch, delta);
    }
}

pub(crate) static CQS: Live = Live::new();

/// The CQ at `cq`, if alive. Valid until `ibv_destroy_cq(cq)`, which the application must
/// not race with other uses of the CQ.
pub(crate) fn cq_of<'a>(cq: *const ibv_cq) -> Option<&'a SoftCq> {
    // SAFETY: a live CQ pointer is the `ibv` field, at offset 0, of a boxed SoftCq.
    CQS.contains(cq).then(|| unsafe { &*cq.cast::<SoftCq>() })
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

export! { "IBVERBS_1.1";
    /// `struct ibv_cq *ibv_create_cq(struct ibv_context *, int cqe, void *cq_context,
    /// struct ibv_comp_channel *, int comp_vector)`: NULL with `errno` `EINVAL` for a bad
    /// context or channel, `cqe` out of 1..=max_cqe or a `comp_vector` other than 0; or the
    /// errno of starting the device.
    unsafe extern "C" fn ibv_create_cq(context: *mut ibv_context, cqe: c_int, cq_context: *mut c_void, channel: *mut ibv_comp_channel, comp_vector: c_int) -> *mut ibv_cq {
        catch(null_mut(), || create(context, cqe, cq_context, channel, comp_vector, CqEx::default()))
    }
}

/// `ibv_create_cq` with the extended part `ex` (`verbs::cq_ex`); NULL with `errno` as there.
pub(crate) fn create(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
    ex: CqEx,
) -> *mut ibv_cq {
    let Some(c) = context::lookup(context) else {
        return fail(libc::EINVAL);
    };
    let events = match channel_of(channel) {
        Some(ch) => Some(ch.events.clone()),
        None if channel.is_null() => None,
        None => return fail(libc::EINVAL),
    };
    if comp_vector != 0 || cqe <= 0 {
        return fail(libc::EINVAL);
    }
    let rt = match c.runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let cq = match rt.create_cq(cqe as usize) {
        Ok(cq) => cq,
        Err(e) => return fail(e.errno()),
    };
    let ibv = ibv_cq {
        context,
        channel,
        cq_context,
        handle: cq.handle(),
        cqe,
        // SAFETY (zeroed): all-zero pthread_mutex_t / pthread_cond_t are the static
        // initializers on glibc.
        mutex: unsafe { std::mem::zeroed() },
        // SAFETY: as above.
        cond: unsafe { std::mem::zeroed() },
        comp_events_completed: 0,
        async_events_completed: 0,
    };
    let soft = Box::into_raw(Box::new(SoftCq {
        ibv,
        ex,
        cq: Some(cq),
    }));
    let p = soft.cast::<ibv_cq>();
    if let Some(events) = events {
        let addr = p as usize;
        // SAFETY: just allocated, not yet shared.
        let soft = unsafe { &*soft };
        if let Some(cq) = &soft.cq {
            cq.set_notifier(move || events.signal(addr as *mut ibv_cq));
        }
        count_channel(&soft.ibv, 1);
    }
    CQS.insert(p);
    p
}

export! { "IBVERBS_1.1";
    /// `int ibv_resize_cq(struct ibv_cq *, int cqe)` (`ibv_resize_cq(3)`): 0, with `cq->cqe`
    /// set to the new size; `EINVAL` for a pointer that is not a live CQ, `cqe` out of
    /// 1..=max_cqe, or fewer than the completions in the CQ (which is then unchanged).
    /// rdma-core's calls the provider's `resize_cq` op, as this does.
    unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
        // SAFETY: the caller's arguments, passed on as they came.
        unsafe { op_resize_cq(cq, cqe) }
    }
}

/// `ibv_context_ops._compat_resize_cq`, the provider's `resize_cq`: `ibv_resize_cq` above.
pub(crate) unsafe extern "C" fn op_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    catch(libc::EIO, || {
        let Some(inner) = cq_of(cq).and_then(|c| c.cq.as_ref()) else {
            return libc::EINVAL;
        };
        let Ok(cqe) = usize::try_from(cqe) else {
            return libc::EINVAL;
        };
        match inner.resize(cqe) {
            Ok(n) => {
                // SAFETY: `cq` is live (checked above); the application does not race a
                // resize with other uses of `cqe`, as with rdma-core's providers.
                unsafe { (*cq).cqe = n as c_int };
                0
            }
            Err(e) => e.errno(),
        }
    })
}

export! { "IBVERBS_1.1";
    /// `int ibv_destroy_cq(struct ibv_cq *)`: 0; `EBUSY` while a QP uses the CQ (which then
    /// stays valid); `EINVAL` for a pointer that is not a live CQ.
    unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
        catch(libc::EIO, || {
            if !CQS.contains(cq) {
                return libc::EINVAL;
            }
            // SAFETY: `cq` is live, so it is the start of a boxed SoftCq; the application does
            // not use it concurrently with its destruction.
            let soft = unsafe { &mut *cq.cast::<SoftCq>() };
            let Some(inner) = soft.cq.take() else { return libc::EINVAL };
            if let Err((inner, e)) = inner.destroy() {
                soft.cq = Some(inner);
                return e.errno();
            }
            CQS.remove(cq);
            count_channel(&soft.ibv, -1);
            // SAFETY: live until just now, from Box::into_raw; removed from CQS, so this is
            // the only release.
            drop(unsafe { Box::from_raw(cq.cast::<SoftCq>()) });
            0
        })
    }
}

/// A completion as `struct ibv_wc`: every field as verbs defines it (`imm_data` in network
/// byte order, as it was on the wire; `invalidated_rkey` in host order).
pub(crate) fn to_ibv_wc(wc: &WorkCompletion) -> ibv_wc {
    let imm = if wc.wc_flags.contains(softrnic_uapi::WcFlags::WITH_IMM) {
        wc.imm_data_or_inv_rkey.to_be()
    } else {
        wc.imm_data_or_inv_rkey
    };
    ibv_wc {
        wr_id: wc.wr_id,
        status: wc.status as u32,
        opcode: wc.opcode as u32,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        imm_data: imm,
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: wc.wc_flags.bits(),
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// `ibv_context_ops.poll_cq`: up to `num_entries` completions into `wc`, the number written;
/// -1 for a bad CQ, a NULL array, or an overflowed CQ.
pub(crate) unsafe extern "C" fn op_poll_cq(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    catch(-1, || {
        let Some(soft) = cq_of(cq) else { return -1 };
        let Some(cq) = soft.cq.as_ref() else {
            return -1;
        };
        if num_entries <= 0 {
            return 0;
        }
        if wc.is_null() {
            return -1;
        }
        let want = num_entries as usize;
        // A scratch array as small as the call allows: a busy poller asks for one or two,
        // and would otherwise initialise sixteen on every empty poll.
        // SAFETY: the caller passes an array of num_entries ibv_wc.
        unsafe {
            if want <= 2 {
                drain::<2>(cq, wc, want)
            } else {
                drain::<16>(cq, wc, want)
            }
        }
    })
}

/// Moves up to `want` completions of `cq` into `wc` through a scratch array of `N`; the
/// number written, or -1 if the CQ fails before any.
///
/// # Safety
/// `wc` points to an array of at least `want` `ibv_wc`.
unsafe fn drain<const N: usize>(cq: &Cq, wc: *mut ibv_wc, want: usize) -> c_int {
    let mut buf = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); N];
    let mut done = 0usize;
    while done < want {
        let n = match cq.poll(&mut buf[..(want - done).min(N)]) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(_) => return -1,
        };
        for w in &buf[..n] {
            // SAFETY: the caller's array holds `want` entries; done < want.
            unsafe { wc.add(done).write(to_ibv_wc(w)) };
            done += 1;
        }
        if n < N {
            break;
        }
    }
    done as c_int
}

/// `ibv_context_ops.req_notify_cq`: arms a live CQ (its next completion signals its channel,
/// if it has one; "solicited only" is treated as "next") and returns 0, else `EINVAL`.
pub(crate) unsafe extern "C" fn op_req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    catch(libc::EIO, || match cq_of(cq).and_then(|c| c.cq.as_ref()) {
        Some(c) => {
            c.req_notify();
            0
        }
        None => libc::EINVAL,
    })
}

#[cfg(test)]
mod test {
    use super::*;
    use softrnic_uapi::WcFlags;

    #[test]
    fn immediate_data_goes_back_to_network_order() {
        let mut w = WorkCompletion::error(7, WcStatus::Success, WcOpcode::Recv, 0x11);
        w.imm_data_or_inv_rkey = 0x0102_0304;
        w.wc_flags = WcFlags::WITH_IMM;
        w.byte_len = 64;
        w.src_qp = 0x22;
        let c = to_ibv_wc(&w);
        assert_eq!(c.imm_data.to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!((c.wr_id, c.status, c.opcode, c.wc_flags), (7, 0, 128, 2));
        assert_eq!((c.byte_len, c.qp_num, c.src_qp), (64, 0x11, 0x22));
        w.wc_flags = WcFlags::WITH_INV;
        assert_eq!(
            to_ibv_wc(&w).imm_data,
            0x0102_0304,
            "invalidated_rkey: host order"
        );
    }
}
