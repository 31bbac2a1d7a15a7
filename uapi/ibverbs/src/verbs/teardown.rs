//! What `ibv_close_device` does to the objects a context still has: it destroys them, as the
//! kernel's uverbs does when a context's file is closed (every QP, MR, CQ, ... of that file
//! goes, whatever the process still holds). After it, no QP of the context answers a peer
//! and no key of its MRs reaches memory, so the program may free its buffers; a pointer to
//! one of the objects it still holds gets `EINVAL` (rdma-core leaves those structures
//! allocated, and using them is undefined; here the lookup of every verb refuses them).
//!
//! The order is the reverse of dependence: QPs first (they use CQs, SRQs, MRs, PDs), then
//! windows (bound to MRs), MRs (relaxed ones flushed with their PD, so their keys die too),
//! device memories (once their MRs are gone),
//! SRQs, CQs, AHs, PDs, and completion channels last (CQs use them). The objects of other
//! contexts of the device are left alone.

use std::os::raw::c_int;

use super::{ah, channel, cq, dm, import, mw, parent_domain, pd, qp, relaxed, srq, xrc};
use crate::abi::context::ibv_context;
use crate::abi::objects::{
    ibv_ah, ibv_comp_channel, ibv_cq, ibv_dm, ibv_mr, ibv_mw, ibv_pd, ibv_qp, ibv_srq, ibv_td,
    ibv_xrcd,
};
use crate::live::Live;

/// Destroys every object of `ctx` still alive (see the module comment).
///
/// # Safety
/// `ctx` is an open context; no other thread uses its objects meanwhile (the caller of
/// `ibv_close_device` promises that it does not race with it).
pub(crate) unsafe fn destroy_all(ctx: *mut ibv_context) {
    // SAFETY (every call below): each pointer is a live object of its kind, found in its set
    // (so its `context` field may be read), and each destroy verb is given it once.
    unsafe {
        destroy(
            &qp::QPS,
            ctx,
            |p: *mut ibv_qp| (*p).context,
            |p| qp::ibv_destroy_qp(p),
        );
        destroy(
            &mw::MWS,
            ctx,
            |p: *mut ibv_mw| (*p).context,
            |p| mw::op_dealloc_mw(p),
        );
        destroy(
            &import::IMPORTED_MRS,
            ctx,
            |p: *mut ibv_mr| (*p).context,
            |p| {
                import::ibv_unimport_mr(p);
                0
            },
        );
        destroy(
            &pd::MRS,
            ctx,
            |p: *mut ibv_mr| (*p).context,
            |p| pd::ibv_dereg_mr(p),
        );
        destroy(
            &dm::DMS,
            ctx,
            |p: *mut ibv_dm| (*p).context,
            |p| dm::op_free_dm(p),
        );
        destroy(
            &srq::SRQS,
            ctx,
            |p: *mut ibv_srq| (*p).context,
            |p| srq::ibv_destroy_srq(p),
        );
        destroy(
            &xrc::XRCDS,
            ctx,
            |p: *mut ibv_xrcd| (*p).context,
            |p| xrc::op_close_xrcd(p),
        );
        destroy(
            &cq::CQS,
            ctx,
            |p: *mut ibv_cq| (*p).context,
            |p| cq::ibv_destroy_cq(p),
        );
        destroy(
            &ah::AHS,
            ctx,
            |p: *mut ibv_ah| (*p).context,
            |p| ah::ibv_destroy_ah(p),
        );
        // Parent domains first: a PD refuses while one holds it.
        for parents in [true, false] {
            destroy(
                &pd::PDS,
                ctx,
                |p: *mut ibv_pd| (*p).context,
                |p| {
                    if pd::pd_of(p).is_some_and(|s| s.parent.is_some()) != parents {
                        return 0;
                    }
                    relaxed::ibv_flush_relaxed_mr(p);
                    pd::ibv_dealloc_pd(p)
                },
            );
        }
        destroy(
            &parent_domain::TDS,
            ctx,
            |p: *mut ibv_td| (*p).context,
            |p| parent_domain::op_dealloc_td(p),
        );
        destroy(
            &channel::CHANNELS,
            ctx,
            |p: *mut ibv_comp_channel| (*p).context,
            |p| channel::ibv_destroy_comp_channel(p),
        );
    }
}

/// Runs `verb` on every object of `set` whose `context_of` is `ctx`. One that refuses (which
/// the order above leaves no reason for) stays alive, and holds what it holds.
///
/// # Safety
/// As [`destroy_all`]; `context_of` reads the context of a live object of `set`.
unsafe fn destroy<T>(
    set: &Live,
    ctx: *mut ibv_context,
    context_of: impl Fn(*mut T) -> *mut ibv_context,
    verb: impl Fn(*mut T) -> c_int,
) {
    for p in set.all(|p: *const T| context_of(p.cast_mut()) == ctx) {
        let _ = verb(p.cast_mut());
    }
}
