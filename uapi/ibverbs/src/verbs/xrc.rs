//! XRC (IBTA annex A14; semantics in `softrnic_uapi::Xrcd` and `softrnic_provider::xrc`): the
//! `verbs_context` ops behind verbs.h's inline `ibv_open_xrcd(3)`, `ibv_close_xrcd`,
//! `ibv_create_srq_ex(3)` and `ibv_get_srq_num(3)`, and the XRC TGT QP of
//! `ibv_create_qp_ex(3)` (`IBV_QPT_XRC_RECV`). XRC INI QPs (`IBV_QPT_XRC_SEND`) are made by
//! `ibv_create_qp` like other QPs of a PD.
//!
//! An XRC domain opened with a file (`fd` not -1) is the process's domain of that file (its
//! device and inode): `O_CREAT` makes one if there is none, `O_EXCL` refuses an existing one,
//! and each open counts, closed by one `ibv_close_xrcd` each (as the kernel's
//! `ib_uverbs_open_xrcd`). Domains are not shared between processes.

use std::ptr::null_mut;
use std::sync::Mutex;

use libc::c_int;
use softrnic_uapi::{SrqAttr, Xrcd};

use crate::abi::context::ibv_context;
use crate::abi::ex::ibv_qp_init_attr_ex;
use crate::abi::objects::{
    ibv_qp, ibv_srq, ibv_xrcd, ibv_xrcd_init_attr, IBV_XRCD_INIT_ATTR_FD, IBV_XRCD_INIT_ATTR_OFLAGS,
};
use crate::abi::qp_attr::{ibv_qp_attr, ibv_qp_init_attr};
use crate::context;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::rdmacm::abi::ibv_srq_init_attr_ex;
use crate::verbs::cq::cq_of;
use crate::verbs::pd::pd_of;
use crate::verbs::qp::{SoftQp, QPS};
use crate::verbs::qp_ex::QpEx;
use crate::verbs::srq::{publish, with_srq};

/// `enum ibv_srq_init_attr_mask`.
const SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
const SRQ_INIT_ATTR_PD: u32 = 1 << 1;
const SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
const SRQ_INIT_ATTR_CQ: u32 = 1 << 3;
const SRQ_INIT_ATTR_TM: u32 = 1 << 4;
/// `enum ibv_srq_type`.
const IBV_SRQT_BASIC: u32 = 0;
const IBV_SRQT_XRC: u32 = 1;
/// `IBV_QP_INIT_ATTR_XRCD` (`enum ibv_qp_init_attr_mask`).
const QP_INIT_ATTR_XRCD: u32 = 1 << 1;

/// An XRC domain.
#[repr(C)]
pub(crate) struct SoftXrcd {
    ibv: ibv_xrcd,
    /// `None` only inside a successful close.
    xrcd: Mutex<Option<Xrcd>>,
    /// The file (device, inode) the domain is tied to, if any.
    file: Option<(u64, u64)>,
    /// Opens not yet closed (guarded by [`FILES`]).
    opens: std::cell::Cell<u32>,
}

// SAFETY: `opens` is only touched under the FILES lock; the rest is Sync.
unsafe impl Sync for SoftXrcd {}

pub(crate) static XRCDS: Live = Live::new();

/// The domains tied to files: (device, inode) and the domain's address. Its lock also
/// guards every domain's `opens`.
static FILES: Mutex<Vec<((u64, u64), usize)>> = Mutex::new(Vec::new());

fn files() -> std::sync::MutexGuard<'static, Vec<((u64, u64), usize)>> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// The domain at `xrcd`, if alive.
fn xrcd_of<'a>(xrcd: *const ibv_xrcd) -> Option<&'a SoftXrcd> {
    // SAFETY: a live XRCD pointer is the `ibv` field, at offset 0, of a boxed SoftXrcd.
    XRCDS
        .contains(xrcd)
        .then(|| unsafe { &*xrcd.cast::<SoftXrcd>() })
}

/// Runs `f` with the live domain at `xrcd` of context `ctx` (`EINVAL` otherwise).
fn with_xrcd<R>(
    xrcd: *const ibv_xrcd,
    ctx: *mut ibv_context,
    f: impl FnOnce(&Xrcd) -> R,
) -> Result<R, c_int> {
    let soft = xrcd_of(xrcd)
        .filter(|x| x.ibv.context == ctx)
        .ok_or(libc::EINVAL)?;
    let guard = soft.xrcd.lock().unwrap_or_else(|p| p.into_inner());
    guard.as_ref().map(f).ok_or(libc::EINVAL)
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// `verbs_context.open_xrcd`: `ibv_open_xrcd`. Both `IBV_XRCD_INIT_ATTR_FD` and `_OFLAGS`
/// must be given (rdma-core's `ibv_cmd_open_xrcd`). NULL with `errno`: `EINVAL` for a bad
/// context or attributes, no domain for the file without `O_CREAT` or one with `O_EXCL`;
/// `EBADF` for a bad `fd`; `EOPNOTSUPP` for unknown `comp_mask` bits.
pub(crate) unsafe extern "C" fn op_open_xrcd(
    context: *mut ibv_context,
    attr: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    catch(null_mut(), || {
        let Some(c) = context::lookup(context) else {
            return fail(libc::EINVAL);
        };
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_xrcd_init_attr.
        let a = unsafe { *attr };
        let both = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        if a.comp_mask & !both != 0 {
            return fail(libc::EOPNOTSUPP);
        }
        if a.comp_mask != both {
            return fail(libc::EINVAL);
        }
        let file = if a.fd == -1 {
            None
        } else {
            // SAFETY: fstat writes into the zeroed stat it is given.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstat(a.fd, &mut st) } != 0 {
                return fail(libc::EBADF);
            }
            Some((st.st_dev, st.st_ino))
        };
        let mut files = files();
        if let Some(key) = file {
            if let Some(&(_, p)) = files.iter().find(|(k, _)| *k == key) {
                if a.oflags & libc::O_EXCL != 0 {
                    return fail(libc::EINVAL);
                }
                // SAFETY: an entry of FILES is a live domain (removed before it is freed).
                let soft = unsafe { &*(p as *const SoftXrcd) };
                soft.opens.set(soft.opens.get() + 1);
                return p as *mut ibv_xrcd;
            }
            if a.oflags & libc::O_CREAT == 0 {
                return fail(libc::EINVAL);
            }
        }
        let xrcd = match c.runtime() {
            Ok(rt) => rt.open_xrcd(),
            Err(e) => return fail(e),
        };
        let soft = SoftXrcd {
            ibv: ibv_xrcd { context },
            xrcd: Mutex::new(Some(xrcd)),
            file,
            opens: std::cell::Cell::new(1),
        };
        let p = Box::into_raw(Box::new(soft)).cast::<ibv_xrcd>();
        if let Some(key) = file {
            files.push((key, p as usize));
        }
        XRCDS.insert(p);
        p
    })
}

/// `verbs_context.close_xrcd`: `ibv_close_xrcd`. 0, or `EINVAL` for a pointer that is not a
/// live domain, `EBUSY` while an XRC SRQ or QP belongs to it (the last open's close only).
pub(crate) unsafe extern "C" fn op_close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    catch(libc::EIO, || {
        let mut files = files();
        let Some(soft) = xrcd_of(xrcd) else {
            return libc::EINVAL;
        };
        if soft.opens.get() > 1 {
            soft.opens.set(soft.opens.get() - 1);
            return 0;
        }
        let mut guard = soft.xrcd.lock().unwrap_or_else(|p| p.into_inner());
        let Some(x) = guard.take() else {
            return libc::EINVAL;
        };
        if let Err((x, e)) = x.close() {
            *guard = Some(x);
            return e.errno();
        }
        drop(guard);
        if let Some(key) = soft.file {
            files.retain(|(k, _)| *k != key);
        }
        XRCDS.remove(xrcd);
        // SAFETY: `xrcd` was live, so it came from Box::into_raw of a SoftXrcd; removing it
        // from XRCDS (and FILES) makes this the only release.
        drop(unsafe { Box::from_raw(xrcd.cast::<SoftXrcd>()) });
        0
    })
}

/// `verbs_context.create_srq_ex`: `ibv_create_srq_ex` of a basic SRQ (as `ibv_create_srq`)
/// or an XRC SRQ (`IBV_SRQT_XRC`: PD, XRCD and CQ required). The granted `max_wr` and
/// `max_sge` are written back. NULL with `errno`: `EINVAL` for a missing or bad PD, XRCD or
/// CQ, or attributes as `ibv_create_srq`; `EOPNOTSUPP` for tag-matching SRQs and unknown
/// `comp_mask` bits.
pub(crate) unsafe extern "C" fn op_create_srq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    catch(null_mut(), || {
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a valid ibv_srq_init_attr_ex.
        let a = unsafe { &mut *attr };
        let known = SRQ_INIT_ATTR_TYPE | SRQ_INIT_ATTR_PD | SRQ_INIT_ATTR_XRCD | SRQ_INIT_ATTR_CQ;
        if a.comp_mask & !known != 0 || a.comp_mask & SRQ_INIT_ATTR_TM != 0 {
            return fail(libc::EOPNOTSUPP);
        }
        let srq_type = if a.comp_mask & SRQ_INIT_ATTR_TYPE != 0 {
            a.srq_type
        } else {
            IBV_SRQT_BASIC
        };
        let Some(pd) =
            pd_of(a.pd).filter(|p| a.comp_mask & SRQ_INIT_ATTR_PD != 0 && p.ibv.context == context)
        else {
            return fail(libc::EINVAL);
        };
        match srq_type {
            IBV_SRQT_BASIC => {
                // SAFETY: ibv_srq_init_attr_ex begins with the fields of ibv_srq_init_attr
                // (verbs.h's inline ibv_create_srq_ex makes the same cast).
                unsafe { crate::verbs::srq::ibv_create_srq(a.pd, attr.cast()) }
            }
            IBV_SRQT_XRC => {
                let needs = SRQ_INIT_ATTR_XRCD | SRQ_INIT_ATTR_CQ;
                let cq = cq_of(a.cq).and_then(|c| c.cq.as_ref());
                let (true, Some(cq)) = (a.comp_mask & needs == needs, cq) else {
                    return fail(libc::EINVAL);
                };
                let sattr = SrqAttr {
                    max_wr: a.attr.max_wr,
                    max_sge: a.attr.max_sge,
                    srq_limit: a.attr.srq_limit,
                };
                let xrcd = a.xrcd.cast::<ibv_xrcd>();
                let srq = match with_xrcd(xrcd, context, |x| pd.pd.create_xrc_srq(&sattr, x, cq)) {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return fail(e.errno()),
                    Err(e) => return fail(e),
                };
                if let Ok(granted) = srq.query() {
                    a.attr.max_wr = granted.max_wr;
                    a.attr.max_sge = granted.max_sge;
                }
                publish(a.pd, a.srq_context, srq)
            }
            _ => fail(libc::EOPNOTSUPP),
        }
    })
}

/// `verbs_context.get_srq_num`: `ibv_get_srq_num`, the number XRC requesters name the SRQ
/// by. 0, or `EINVAL` for a bad SRQ or NULL output.
pub(crate) unsafe extern "C" fn op_get_srq_num(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    catch(libc::EIO, || {
        if srq_num.is_null() {
            return libc::EINVAL;
        }
        match with_srq(srq, |s| s.number()) {
            Ok(n) => {
                // SAFETY: non-NULL; the caller passes a writable u32.
                unsafe { srq_num.write(n) };
                0
            }
            Err(e) => e,
        }
    })
}

/// `ibv_create_qp_ex` of an XRC TGT QP (`IBV_QPT_XRC_RECV`, `IBV_QP_INIT_ATTR_XRCD`
/// required): no PD, CQs, SRQ or queues. NULL with `errno` `EINVAL` for a missing or bad XRCD.
///
/// # Safety
/// `attr` is a readable `ibv_qp_init_attr_ex`.
pub(crate) unsafe fn create_recv_qp(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: forwarded from the caller.
    let a = unsafe { *attr };
    if a.comp_mask & QP_INIT_ATTR_XRCD == 0 {
        return fail(libc::EINVAL);
    }
    let qp = match with_xrcd(a.xrcd.cast(), context, Xrcd::create_recv_qp) {
        Ok(Ok(qp)) => qp,
        Ok(Err(e)) => return fail(e.errno()),
        Err(e) => return fail(e),
    };
    let init = ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: null_mut(),
        recv_cq: null_mut(),
        srq: null_mut(),
        cap: Default::default(),
        qp_type: a.qp_type,
        sq_sig_all: 0,
    };
    let ibv = ibv_qp {
        context,
        qp_context: a.qp_context,
        pd: null_mut(),
        send_cq: null_mut(),
        recv_cq: null_mut(),
        srq: null_mut(),
        handle: qp.qp_num(),
        qp_num: qp.qp_num(),
        state: softrnic_uapi::QpState::Reset.ibv(),
        qp_type: a.qp_type,
        // SAFETY (zeroed): all-zero pthread_mutex_t / pthread_cond_t are the static
        // initializers on glibc.
        mutex: unsafe { std::mem::zeroed() },
        // SAFETY: as above.
        cond: unsafe { std::mem::zeroed() },
        events_completed: 0,
    };
    let attr = ibv_qp_attr {
        port_num: 1,
        ..Default::default()
    };
    let soft = SoftQp {
        ibv,
        ex: QpEx::default(),
        qp,
        init,
        attr: Mutex::new(attr),
    };
    let p = Box::into_raw(Box::new(soft)).cast::<ibv_qp>();
    QPS.insert(p);
    p
}
