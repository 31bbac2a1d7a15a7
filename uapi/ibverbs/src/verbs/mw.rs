//! Memory windows (IBTA 10.6.7): the ops `alloc_mw`, `bind_mw`, `dealloc_mw` of `ibv_context_ops`
//! that verbs.h's inline `ibv_alloc_mw`, `ibv_bind_mw` (type 1) and `ibv_dealloc_mw` call, and
//! the conversion of an `IBV_WR_BIND_MW` work request (type 2) for `post_send`.
//! (`IBV_WR_LOCAL_INV` and `IBV_WR_SEND_WITH_INV` need nothing here: their
//! `invalidate_rkey` is converted with the other WR fields.)
//!
//! rdma-core exports no `ibv_alloc_mw`/`ibv_bind_mw`/`ibv_dealloc_mw` symbol (they are
//! inline in verbs.h), so neither does softrnic: programs reach them through the ops.
//!
//! An `ibv_mw` is the first field of a boxed [`SoftMw`] holding the [`Mw`]. `mw->rkey` follows
//! the window's R_Key: `ibv_bind_mw` sets it to the new key, as does posting a type 2 bind
//! (to `bind_mw.rkey`, the consumer's 8 low bits on the window's index).
//!
//! Differences from rdma-core's providers, for now: `ibv_bind_mw` always asks for a
//! completion (`IBV_WC_BIND_MW`) whatever `mw_bind->send_flags` says, and unbinding a type 1
//! window (`length` 0) needs `bind_info.mr` (NULL is `EINVAL`).

use std::ops::Range;
use std::ptr::null_mut;

use libc::c_int;
use softrnic_uapi::{Access, MemoryRegion, Mw, MwType, SendFlags, SendWr};

use crate::abi::objects::{ibv_mw, ibv_pd, ibv_qp};
use crate::abi::wr::{ibv_mw_bind, ibv_mw_bind_info, ibv_send_wr};
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::pd::{mr_of, pd_of};
use crate::verbs::qp::qp_of;

/// A memory window.
#[repr(C)]
struct SoftMw {
    ibv: ibv_mw,
    mw: Mw,
}

pub(crate) static MWS: Live = Live::new();

/// The window at `mw`, if alive. Valid until `ibv_dealloc_mw(mw)`.
fn mw_of<'a>(mw: *const ibv_mw) -> Option<&'a SoftMw> {
    // SAFETY: a live MW pointer is the `ibv` field, at offset 0, of a boxed SoftMw.
    MWS.contains(mw).then(|| unsafe { &*mw.cast::<SoftMw>() })
}

/// Sets `mw->rkey` of the live window `mw`.
fn set_rkey(mw: *mut ibv_mw, rkey: u32) {
    // SAFETY: `mw` is live (checked by the callers), so it points to a boxed SoftMw's ibv_mw;
    // the field is written through the raw pointer, as the C side owns the struct's fields.
    unsafe { (*mw).rkey = rkey };
}

/// The MR and the byte range of it that `info` names (`addr`, `length` inside the MR).
fn region_and_range<'a>(
    info: &ibv_mw_bind_info,
) -> Result<(&'a MemoryRegion, Range<usize>), c_int> {
    let soft = mr_of(info.mr).ok_or(libc::EINVAL)?;
    let start = info.addr.checked_sub(soft.mr.addr()).ok_or(libc::EINVAL)?;
    let end = start.checked_add(info.length).ok_or(libc::EINVAL)?;
    let start = usize::try_from(start).map_err(|_| libc::EINVAL)?;
    let end = usize::try_from(end).map_err(|_| libc::EINVAL)?;
    Ok((&soft.mr, start..end))
}

/// `ibv_context_ops.alloc_mw`: a window of `type_` (`IBV_MW_TYPE_1` or `_2`); NULL with
/// `errno` `EINVAL` for a bad PD or type, `ENOMEM` when the key table is full.
pub(crate) unsafe extern "C" fn op_alloc_mw(pd: *mut ibv_pd, type_: u32) -> *mut ibv_mw {
    catch(null_mut(), || {
        let fail = |e| {
            set_errno(e);
            null_mut()
        };
        let Some(soft) = pd_of(pd) else {
            return fail(libc::EINVAL);
        };
        let mw_type = match type_ {
            1 => MwType::Type1,
            2 => MwType::Type2,
            _ => return fail(libc::EINVAL),
        };
        let mw = match soft.pd.alloc_mw(mw_type) {
            Ok(mw) => mw,
            Err(e) => return fail(e.errno()),
        };
        let ibv = ibv_mw {
            context: soft.ibv.context,
            pd,
            rkey: mw.rkey(),
            handle: mw.rkey() >> 8,
            type_,
        };
        let p = Box::into_raw(Box::new(SoftMw { ibv, mw })).cast::<ibv_mw>();
        MWS.insert(p);
        p
    })
}

/// `ibv_context_ops.bind_mw`: binds the type 1 window `mw` as `mw_bind` says, posting a
/// BIND_MW on `qp`, and sets `mw->rkey` to its new R_Key. 0, or `EINVAL` for a bad QP,
/// window, MR or range, a type 2 window, or what `ibv_post_send` refuses.
pub(crate) unsafe extern "C" fn op_bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    mw_bind: *mut ibv_mw_bind,
) -> c_int {
    catch(libc::EIO, || {
        let (Some(q), Some(w)) = (qp_of(qp), mw_of(mw)) else {
            return libc::EINVAL;
        };
        if mw_bind.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_mw_bind.
        let bind = unsafe { *mw_bind };
        let (mr, range) = match region_and_range(&bind.bind_info) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let access = Access::from_bits_retain(bind.bind_info.mw_access_flags);
        match q.qp.bind_mw(&w.mw, mr, range, access, bind.wr_id) {
            Ok(rkey) => {
                set_rkey(mw, rkey);
                0
            }
            Err(e) => e.errno(),
        }
    })
}

/// `ibv_context_ops.dealloc_mw`: unbinds the window if bound and frees it. 0, or `EINVAL`
/// for a pointer that is not a live window.
pub(crate) unsafe extern "C" fn op_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    catch(libc::EIO, || {
        if !MWS.remove(mw) {
            return libc::EINVAL;
        }
        // SAFETY: `mw` was live, so it came from Box::into_raw of a SoftMw; removing it from
        // MWS makes this the only release.
        let soft = unsafe { Box::from_raw(mw.cast::<SoftMw>()) };
        match soft.mw.dealloc() {
            Ok(()) => 0,
            Err(e) => e.errno(),
        }
    })
}

/// The softrnic form of an `IBV_WR_BIND_MW` work request `w` (see [`bind`]).
pub(crate) fn bind_wr(w: &ibv_send_wr, flags: SendFlags) -> Result<SendWr, c_int> {
    let b = w.bind_mw;
    bind(w.wr_id, b.mw, b.rkey, &b.bind_info, flags)
}

/// The softrnic form of a bind of the type 2 window `mw` to `info` with the new R_Key `rkey`
/// and `send_flags` `flags` (an `IBV_WR_BIND_MW` WR, or the builder's `ibv_wr_bind_mw`); sets
/// `mw->rkey` to the new key. `EINVAL` for a bad window, MR or range, or a type 1 window.
pub(crate) fn bind(
    wr_id: u64,
    mw: *mut ibv_mw,
    rkey: u32,
    info: &ibv_mw_bind_info,
    flags: SendFlags,
) -> Result<SendWr, c_int> {
    let soft = mw_of(mw).ok_or(libc::EINVAL)?;
    let (mr, range) = region_and_range(info)?;
    let access = Access::from_bits_retain(info.mw_access_flags);
    let wr = soft
        .mw
        .bind_wr(wr_id, rkey, mr, range, access)
        .map_err(|e| e.errno())?;
    set_rkey(mw, soft.mw.rkey());
    Ok(SendWr { flags, ..wr })
}
