//! Multicast (rdma-core 44 `librdmacm/cma.c`): `rdma_join_multicast`, `rdma_join_multicast_ex`
//! (RDMACM_1.1: join flags, send-only full member), `rdma_leave_multicast`. softrnic's
//! rdma_cm does the join (`softrnic_uapi::cm::CmId::join_multicast`): the id's QP is attached
//! to the group unless the join is send-only, and `RDMA_CM_EVENT_MULTICAST_JOIN` carries the
//! group's address vector, QPN 0xFFFFFF, the Q_Key, and the join's context as
//! `param.ud.private_data`.

use libc::{c_int, c_void, sockaddr};
use softrnic_uapi::cm::JoinKind;

use super::abi::{
    rdma_cm_id, rdma_cm_join_mc_attr_ex, RDMA_CM_JOIN_MC_ATTR_ADDRESS,
    RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, RDMA_CM_JOIN_MC_ATTR_RESERVED, RDMA_MC_JOIN_FLAG_FULLMEMBER,
    RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
};
use super::ids::finish;
use super::state::{from_sockaddr, SoftId};
use super::{fail, status};
use crate::export::export_rdmacm;
use crate::ffi::catch;

/// The join of `id` to the group at `addr`: -1 with `EINVAL` for a NULL id or address, or an
/// address of a family other than IPv4 and IPv6 (as librdmacm's `ucma_addrlen` finds no
/// length for it); else the join's outcome.
fn join(id: *mut rdma_cm_id, addr: *const sockaddr, kind: JoinKind, context: *mut c_void) -> c_int {
    let Some(soft) = SoftId::of(id) else {
        return fail(libc::EINVAL);
    };
    let Ok(group) = from_sockaddr(addr) else {
        return fail(libc::EINVAL);
    };
    let r = soft.id.join_multicast(group, kind, context as usize);
    finish(soft, r)
}

export_rdmacm! {
    /// `int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)`:
    /// joins as a full member; `RDMA_CM_EVENT_MULTICAST_JOIN` follows (a synchronous id waits
    /// for it). -1 with `EINVAL` for an id that is not UD or not bound to a device, or an
    /// address that is not a multicast one of the device's family.
    unsafe extern "C" fn rdma_join_multicast(
        id: *mut rdma_cm_id,
        addr: *mut sockaddr,
        context: *mut c_void,
    ) -> c_int {
        catch(-1, || join(id, addr, JoinKind::FullMember, context))
    }
}

export_rdmacm! {
    /// `int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex
    /// *mc_join_attr, void *context)`: as `rdma_join_multicast`, with the join flags; a
    /// send-only full member's QP is not attached. -1 with `ENOTSUP` for an unknown
    /// `comp_mask` bit, `EINVAL` without the address or the flags, or for unknown flags (the
    /// order of rdma-core's checks).
    unsafe extern "C" fn rdma_join_multicast_ex(
        id: *mut rdma_cm_id,
        mc_join_attr: *mut rdma_cm_join_mc_attr_ex,
        context: *mut c_void,
    ) -> c_int {
        catch(-1, || {
            if mc_join_attr.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the program passes a readable struct.
            let attr = unsafe { *mc_join_attr };
            if attr.comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED {
                return fail(libc::ENOTSUP);
            }
            if attr.comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS == 0
                || attr.comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS == 0
            {
                return fail(libc::EINVAL);
            }
            let kind = match attr.join_flags {
                RDMA_MC_JOIN_FLAG_FULLMEMBER => JoinKind::FullMember,
                RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER => JoinKind::SendOnlyFullMember,
                _ => return fail(libc::EINVAL),
            };
            join(id, attr.addr, kind, context)
        })
    }
}

export_rdmacm! {
    /// `int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)`: leaves the
    /// group joined with the same address, detaching the id's QP. -1 with `EADDRNOTAVAIL` if
    /// the id did not join it, `EINVAL` for a NULL id or address.
    unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let Ok(group) = from_sockaddr(addr) else { return fail(libc::EINVAL) };
            status(soft.id.leave_multicast(group))
        })
    }
}
