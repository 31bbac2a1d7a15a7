//! On-demand paging in the C ABI: the `verbs_context` op `advise_mr` that verbs.h's inline
//! `ibv_advise_mr(3)` calls. (ODP regions themselves need nothing here: `ibv_reg_mr*` pass
//! `IBV_ACCESS_ON_DEMAND` through, and `ibv_query_device_ex` reports the capabilities.)
//!
//! Returns 0 or an errno, as the man page says: `EINVAL` for a PD that is not alive, a NULL
//! `sg_list` with SGEs, or no SGE; the rest is the key table's (`provider/src/mr/odp.rs`).

use libc::{c_int, c_uint};
use softrnic_uapi::{Advice, AdviseFlags, Sge};

use crate::abi::objects::ibv_pd;
use crate::abi::wr::ibv_sge;
use crate::ffi::catch;
use crate::verbs::pd::pd_of;

/// `verbs_context.advise_mr`.
///
/// # Safety
/// `sg_list` is NULL or readable for `num_sge` elements.
pub(crate) unsafe extern "C" fn op_advise_mr(
    pd: *mut ibv_pd,
    advice: c_uint,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    catch(libc::EINVAL, || {
        let Some(soft) = pd_of(pd) else {
            return libc::EINVAL;
        };
        let Some(advice) = Advice::from_raw(advice) else {
            return libc::EOPNOTSUPP;
        };
        if sg_list.is_null() || num_sge == 0 {
            return libc::EINVAL;
        }
        // SAFETY: the caller's promise about sg_list and num_sge.
        let sges = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
        let sges: Vec<Sge> = sges
            .iter()
            .map(|s| Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .collect();
        match soft
            .pd
            .advise_mr(advice, AdviseFlags::from_bits_retain(flags), &sges)
        {
            Ok(()) => 0,
            Err(e) => e.errno(),
        }
    })
}
