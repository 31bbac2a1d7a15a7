//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`. A [`SoftAh`] is the C `ibv_ah`
//! followed by the `softrnic_uapi` [`Ah`]; a UD send WR's `wr.ud.ah` is looked up here
//! ([`ud_dest`]). On RoCE the address vector must have a GRH (`is_global`): its destination
//! GID is the peer's address.

use std::ptr::null_mut;

use libc::c_int;
use softrnic_uapi::{Ah, UdDest};

use crate::abi::objects::{ibv_ah, ibv_pd};
use crate::abi::qp_attr::ibv_ah_attr;
use crate::abi::wr::ibv_send_wr_ud;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::modify::gid_to_ip;
use crate::verbs::pd::pd_of;

/// An address handle.
#[repr(C)]
pub(crate) struct SoftAh {
    pub ibv: ibv_ah,
    pub ah: Ah,
}

static AHS: Live = Live::new();

/// The AH at `ah`, if alive. Valid until `ibv_destroy_ah(ah)`.
fn ah_of<'a>(ah: *const ibv_ah) -> Option<&'a SoftAh> {
    // SAFETY: a live AH pointer is the `ibv` field, at offset 0, of a boxed SoftAh.
    AHS.contains(ah).then(|| unsafe { &*ah.cast::<SoftAh>() })
}

/// The destination of a UD send WR's `wr.ud`; `EINVAL` for a pointer that is not a live AH.
pub(crate) fn ud_dest(ud: &ibv_send_wr_ud) -> Result<UdDest, c_int> {
    let ah = ah_of(ud.ah).ok_or(libc::EINVAL)?;
    Ok(ah.ah.ud(ud.remote_qpn, ud.remote_qkey))
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

export! { "IBVERBS_1.1";
    /// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`: an address
    /// handle to `attr->grh.dgid`. NULL with `errno` `EINVAL` for a bad PD, a NULL `attr`, no
    /// GRH (`is_global` 0: RoCE needs one) or port other than 1.
    unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
        catch(null_mut(), || {
            let Some(soft_pd) = pd_of(pd) else { return fail(libc::EINVAL) };
            if attr.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_ah_attr.
            let a = unsafe { *attr };
            if a.is_global == 0 || a.port_num > 1 {
                return fail(libc::EINVAL);
            }
            let ah = match soft_pd.pd.create_ah(gid_to_ip(a.grh.dgid.raw)) {
                Ok(ah) => ah,
                Err(e) => return fail(e.errno()),
            };
            let ibv = ibv_ah { context: soft_pd.ibv.context, pd, handle: 0 };
            let p = Box::into_raw(Box::new(SoftAh { ibv, ah })).cast::<ibv_ah>();
            AHS.insert(p);
            p
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_destroy_ah(struct ibv_ah *)`: 0, or `EINVAL` for a pointer that is not a live
    /// AH. (Send WRs already posted through it keep its address.)
    unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
        catch(libc::EIO, || {
            if !AHS.remove(ah) {
                return libc::EINVAL;
            }
            // SAFETY: `ah` was live, so it came from Box::into_raw of a SoftAh; removing it
            // from AHS makes this the only release.
            drop(unsafe { Box::from_raw(ah.cast::<SoftAh>()) });
            0
        })
    }
}
