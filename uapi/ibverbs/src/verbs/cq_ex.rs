//! Extended CQs: the `verbs_context.create_cq_ex` op that verbs.h's inline `ibv_create_cq_ex`
//! calls, and the `ibv_cq_ex` polling ops (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`,
//! `ibv_wc_read_*`).
//!
//! Every CQ is a [`SoftCq`](super::cq::SoftCq): its `ibv_cq` is followed by a [`CqEx`], whose
//! first field is the tail of `struct ibv_cq_ex`, so the same object is an `ibv_cq` (poll_cq,
//! `ibv_destroy_cq`: `ibv_cq_ex_to_cq` is a cast) and an `ibv_cq_ex`. A CQ made by
//! `ibv_create_cq` has no extended ops. The polling ops take one completion at a time from the
//! softrnic CQ into `current`; `status` and `wr_id` are in the `ibv_cq_ex` itself, the rest is
//! read through the `read_*` ops the creation's `wc_flags` asked for (the others are NULL, as
//! in rdma-core).

use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::Mutex;

use libc::{c_int, c_uint};
use softrnic_uapi::{WcOpcode, WcStatus, WorkCompletion};

use crate::abi::context::ibv_context;
use crate::abi::ex::*;
use crate::abi::objects::ibv_cq;
use crate::abi::wr::ibv_wc;
use crate::ffi::{catch, set_errno};
use crate::verbs::cq::{cq_of, create, to_ibv_wc, SoftCq};
use crate::verbs::pd::pd_of;

/// The `wc_flags` softrnic's extended CQs report: the standard ones (`SLID`, `SL`,
/// `DLID_PATH_BITS` are 0 on RoCE, as in `ibv_wc`). Timestamps, CVLAN, flow tags and tag
/// matching are `EOPNOTSUPP`.
const SUPPORTED_WC_FLAGS: u64 = IBV_WC_STANDARD_FLAGS;

/// The extended part of a CQ, right after its `ibv_cq`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CqEx {
    /// The C fields of `ibv_cq_ex` after the `ibv_cq` head; `status` and `wr_id` change
    /// under the application's eyes, hence the cell.
    pub c: UnsafeCell<ibv_cq_ex_tail>,
    /// The completion `start_poll`/`next_poll` took last.
    current: Mutex<ibv_wc>,
}

impl CqEx {
    /// The ops for a CQ created with `wc_flags`.
    fn new(wc_flags: u64) -> CqEx {
        let has = |f: u64| wc_flags & f != 0;
        let c = ibv_cq_ex_tail {
            start_poll: Some(start_poll),
            next_poll: Some(next_poll),
            end_poll: Some(end_poll),
            read_opcode: Some(read_opcode),
            read_vendor_err: Some(read_vendor_err),
            read_wc_flags: Some(read_wc_flags),
            read_byte_len: has(IBV_WC_EX_WITH_BYTE_LEN).then_some(read_byte_len as ReadFn<u32>),
            read_imm_data: has(IBV_WC_EX_WITH_IMM).then_some(read_imm_data as ReadFn<u32>),
            read_qp_num: has(IBV_WC_EX_WITH_QP_NUM).then_some(read_qp_num as ReadFn<u32>),
            read_src_qp: has(IBV_WC_EX_WITH_SRC_QP).then_some(read_src_qp as ReadFn<u32>),
            read_slid: has(IBV_WC_EX_WITH_SLID).then_some(read_slid as ReadFn<u32>),
            read_sl: has(IBV_WC_EX_WITH_SL).then_some(read_zero_u8 as ReadFn<u8>),
            read_dlid_path_bits: has(IBV_WC_EX_WITH_DLID_PATH_BITS)
                .then_some(read_zero_u8 as ReadFn<u8>),
            ..Default::default()
        };
        CqEx {
            c: UnsafeCell::new(c),
            current: Mutex::new(ibv_wc::default()),
        }
    }
}

// SAFETY: `c` is written only by `create_cq_ex` before the CQ is published and by
// `take_one`, which verbs forbids to race with other polling of the same CQ (the only readers
// of `status`/`wr_id`); `current` is behind its mutex.
unsafe impl Sync for CqEx {}

/// The CQ whose `ibv_cq_ex` is `cq`, if alive.
fn soft_of<'a>(cq: *mut ibv_cq_ex) -> Option<&'a SoftCq> {
    cq_of(cq.cast::<ibv_cq>())
}

/// Takes the next completion of `cq` into `current` and the `status`/`wr_id` fields: 0,
/// `ENOENT` if there is none, `EINVAL` for a bad CQ, or the CQ's error (overrun).
///
/// # Safety
/// `cq` must be NULL or point to memory the caller may read (checked against the live CQs
/// before any access).
unsafe fn take_one(cq: *mut ibv_cq_ex) -> c_int {
    let Some(soft) = soft_of(cq) else {
        return libc::EINVAL;
    };
    let Some(inner) = soft.cq.as_ref() else {
        return libc::EINVAL;
    };
    let mut one = [WorkCompletion::error(
        0,
        WcStatus::Success,
        WcOpcode::Send,
        0,
    )];
    match inner.poll(&mut one) {
        Ok(0) => libc::ENOENT,
        Ok(_) => {
            let wc = to_ibv_wc(&one[0]);
            *soft.ex.current.lock().unwrap_or_else(|p| p.into_inner()) = wc;
            // SAFETY: the cell of a live CQ, which is the `ex` of its ibv_cq_ex
            // (`layout_of_the_soft_cq_is_an_ibv_cq_ex`); the application polls a CQ from one
            // thread at a time, as verbs requires of the extended polling.
            unsafe {
                let c = &mut *soft.ex.c.get();
                c.status = wc.status;
                c.wr_id = wc.wr_id;
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// `ibv_cq_ex.start_poll`: the first completion (see [`take_one`]); `attr` must be NULL or
/// have `comp_mask` 0 (`EINVAL` otherwise).
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    catch(libc::EIO, || {
        // SAFETY: the caller passes NULL or a readable attr.
        if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
            return libc::EINVAL;
        }
        // SAFETY: checked against the live CQs first.
        unsafe { take_one(cq) }
    })
}

/// `ibv_cq_ex.next_poll`: the next completion (see [`take_one`]).
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: checked against the live CQs first.
    catch(libc::EIO, || unsafe { take_one(cq) })
}

/// `ibv_cq_ex.end_poll`: nothing to release (every completion was taken whole).
unsafe extern "C" fn end_poll(_cq: *mut ibv_cq_ex) {}

/// `f` of the current completion of `cq`, or 0 for a bad CQ.
fn read<T: Default>(cq: *mut ibv_cq_ex, f: impl FnOnce(&ibv_wc) -> T) -> T {
    catch(T::default(), || match soft_of(cq) {
        Some(soft) => f(&soft.ex.current.lock().unwrap_or_else(|p| p.into_inner())),
        None => T::default(),
    })
}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> c_uint {
    read(cq, |w| w.opcode)
}
unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.vendor_err)
}
unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.byte_len)
}
/// Network byte order, as in `ibv_wc.imm_data`.
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.imm_data)
}
unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.qp_num)
}
unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.src_qp)
}
unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint {
    read(cq, |w| w.wc_flags)
}
unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| u32::from(w.slid))
}
/// `read_sl`, `read_dlid_path_bits`: 0 on RoCE.
unsafe extern "C" fn read_zero_u8(_cq: *mut ibv_cq_ex) -> u8 {
    0
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// `verbs_context.create_cq_ex`: a CQ as `ibv_create_cq` makes it, with the polling ops of
/// `attr->wc_flags`. NULL with `errno`: `EINVAL` for a bad context, channel, `cqe` or NULL
/// `attr`, or an `IBV_CQ_INIT_ATTR_MASK_PD` whose `parent_domain` is no parent domain of
/// `context`; `EOPNOTSUPP` for `wc_flags` beyond the standard ones or creation flags other
/// than `SINGLE_THREADED`.
pub(crate) unsafe extern "C" fn op_create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    catch(null_mut(), || {
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_cq_init_attr_ex.
        let a = unsafe { *attr };
        if a.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
            return fail(libc::EOPNOTSUPP);
        }
        if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
            return fail(libc::EINVAL);
        }
        // The CQ may name a parent domain whose allocators the provider would use for its
        // memory; softrnic makes no such allocation (see `parent_domain`), so it is only
        // checked: a parent domain of this context, nothing else.
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0
            && !pd_of(a.parent_domain)
                .is_some_and(|p| p.parent.is_some() && p.ibv.context == context)
        {
            return fail(libc::EINVAL);
        }
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
            && a.flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
        {
            return fail(libc::EOPNOTSUPP);
        }
        let Ok(cqe) = c_int::try_from(a.cqe) else {
            return fail(libc::EINVAL);
        };
        let comp_vector = c_int::try_from(a.comp_vector).unwrap_or(-1);
        create(
            context,
            cqe,
            a.cq_context,
            a.channel,
            comp_vector,
            CqEx::new(a.wc_flags),
        )
        .cast::<ibv_cq_ex>()
    })
}

#[cfg(test)]
mod test {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layout_of_the_soft_cq_is_an_ibv_cq_ex() {
        assert_eq!(
            offset_of!(SoftCq, ex) + offset_of!(CqEx, c),
            offset_of!(ibv_cq_ex, ex)
        );
        assert_eq!(offset_of!(SoftCq, ibv), offset_of!(ibv_cq_ex, cq));
    }

    #[test]
    fn unrequested_reads_are_null() {
        let mut ex = CqEx::new(IBV_WC_EX_WITH_BYTE_LEN);
        let c = ex.c.get_mut();
        assert!(c.read_byte_len.is_some() && c.start_poll.is_some());
        assert!(c.read_imm_data.is_none() && c.read_completion_ts.is_none());
    }
}
