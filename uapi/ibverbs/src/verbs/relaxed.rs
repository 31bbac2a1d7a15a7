//! Relaxed memory regions under their Solaris OFED names, in softrnic's version node
//! `SOFTRNIC_1.0` (declared in `include/softrnic/ext.h`), with Solaris' signatures
//! (`ibv_reg_mr_relaxed(3)`):
//!
//! ```c
//! struct ibv_mr *ibv_reg_mr_relaxed(struct ibv_pd *pd, void *addr, size_t length, int access);
//! int ibv_dereg_mr_relaxed(struct ibv_mr *mr);
//! int ibv_flush_relaxed_mr(struct ibv_pd *pd);
//! ```
//!
//! The regions are `softrnic_uapi`'s relaxed ones (its `relaxed.rs` and the provider's
//! `mr/relaxed.rs` say everything): keys from a per-PD pool, access extended to the 4 KiB
//! pages the range touches. **Window of vulnerability**: after `ibv_dereg_mr_relaxed`
//! returns, the region's keys still read and write its pages, locally and for peers, until an
//! `ibv_flush_relaxed_mr(pd)` (or a flush the provider makes on its own under pool pressure)
//! has returned; the program must keep those pages mapped until then. `ibv_dereg_mr` of a
//! relaxed region is `ibv_dereg_mr_relaxed`.

use std::ptr::null_mut;

use libc::{c_int, c_void, size_t};
use softrnic_uapi::{Access, MemoryRegion};

use crate::abi::objects::{ibv_mr, ibv_pd};
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::verbs::pd::{dereg_with, pd_of, publish_mr};

export! { "SOFTRNIC_1.0";
    /// `struct ibv_mr *ibv_reg_mr_relaxed(struct ibv_pd *, void *addr, size_t length,
    /// int access)`: NULL with `errno`: `EINVAL` for a bad PD, NULL address, zero length or
    /// bad flags; `EAGAIN` when the PD's pool is held by regions awaiting invalidation
    /// (`ibv_flush_relaxed_mr` and retry); `ENOMEM` when every key of the pool holds a live
    /// region or the device has no keys for a pool.
    unsafe extern "C" fn ibv_reg_mr_relaxed(pd: *mut ibv_pd, addr: *mut c_void, length: size_t, access: c_int) -> *mut ibv_mr {
        catch(null_mut(), || {
            let fail = |e| {
                set_errno(e);
                null_mut()
            };
            let Some(soft) = pd_of(pd) else { return fail(libc::EINVAL) };
            let access = Access::from_bits_retain(access as u32).difference(Access::OPTIONAL_RANGE);
            // SAFETY: the C caller promises what ibv_reg_mr_relaxed(3) requires: the pages
            // addr..addr+length touches stay mapped until a flush after the deregistration
            // (see the module comment), and are read only as a DMA target meanwhile.
            match unsafe { soft.pd.reg_mr_relaxed_raw(addr.cast(), length, access) } {
                Ok(mr) => publish_mr(pd, soft, mr),
                Err(e) => fail(e.errno()),
            }
        })
    }
}

export! { "SOFTRNIC_1.0";
    /// `int ibv_dereg_mr_relaxed(struct ibv_mr *)`: marks the region for invalidation and
    /// frees the `ibv_mr`; its keys work until the next flush of its PD. 0, `EINVAL` for a
    /// pointer that is not a live MR or a region not registered relaxed, `EBUSY` while a
    /// memory window is bound (the MR then stays valid in both cases).
    unsafe extern "C" fn ibv_dereg_mr_relaxed(mr: *mut ibv_mr) -> c_int {
        catch(libc::EIO, || dereg_with(mr, MemoryRegion::dereg_relaxed))
    }
}

export! { "SOFTRNIC_1.0";
    /// `int ibv_flush_relaxed_mr(struct ibv_pd *)`: invalidates every relaxed region of the
    /// PD deregistered so far; returns once none of their keys reaches memory. 0, or `EINVAL`
    /// for a pointer that is not a live PD.
    unsafe extern "C" fn ibv_flush_relaxed_mr(pd: *mut ibv_pd) -> c_int {
        catch(libc::EIO, || match pd_of(pd) {
            Some(soft) => {
                soft.pd.flush_relaxed_mr();
                0
            }
            None => libc::EINVAL,
        })
    }
}
