//! UD multicast: `ibv_attach_mcast`, `ibv_detach_mcast` (IBTA Vol. 1 10.5 and 11.3; rdma-core
//! `ibv_attach_mcast(3)`). The GID is the group's MGID — on RoCE v2 a multicast IP address,
//! IPv4-mapped `::ffff:224.0.0.0/100` or IPv6 `ff00::/8` (annex A17); the LID is ignored, as
//! RoCE has none. The work is [`softrnic_uapi::QueuePair::attach_mcast`]'s.

use libc::c_int;
use softrnic_uapi::Gid;

use crate::abi::attr::ibv_gid;
use crate::abi::objects::ibv_qp;
use crate::export::export;
use crate::ffi::catch;
use crate::verbs::qp::{qp_of, SoftQp};

/// Runs `f` on the live QP at `qp` with the GID at `gid`: its errno, 0 on success; `EINVAL`
/// for a pointer that is not a live QP or a NULL GID.
fn with_qp_gid(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    f: impl FnOnce(&SoftQp, &Gid) -> softrnic_uapi::Result<()>,
) -> c_int {
    catch(libc::EIO, || {
        let Some(q) = qp_of(qp) else {
            return libc::EINVAL;
        };
        if gid.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL, and the caller passes a valid `union ibv_gid`.
        let mgid = Gid::from_raw(unsafe { (*gid).raw });
        match f(q, &mgid) {
            Ok(()) => 0,
            Err(e) => e.errno(),
        }
    })
}

export! { "IBVERBS_1.1";
    /// `int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)`: 0
    /// (also when already attached); `EINVAL` for a QP that is not UD or a GID that is not
    /// multicast; `EOPNOTSUPP` where the device's transport has no multicast.
    unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
        let _ = lid;
        with_qp_gid(qp, gid, |q, mgid| q.qp.attach_mcast(mgid))
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)`: 0;
    /// `EINVAL` as `ibv_attach_mcast`, or for a group the QP is not attached to.
    unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
        let _ = lid;
        with_qp_gid(qp, gid, |q, mgid| q.qp.detach_mcast(mgid))
    }
}
