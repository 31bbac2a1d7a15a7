//! Enhanced connection establishment (ECE, rdma-core 44 `librdmacm/cma.c`):
//! `rdma_set_local_ece` and `rdma_get_remote_ece`. softrnic's QPs have no ECE options
//! (`ibv_query_ece` answers `EOPNOTSUPP`, `crate::verbs::rdmacm`), so both fail with
//! `errno = EOPNOTSUPP` once their arguments pass rdma-core's checks (`EINVAL` otherwise).
//! `rdma_reject_ece` is a reject (`connect`).

use libc::c_int;

use super::abi::{ibv_ece, rdma_cm_id};
use crate::export::export_rdmacm;
use crate::ffi::set_errno;

/// -1 with `errno = e`.
fn fail(e: c_int) -> c_int {
    set_errno(e);
    -1
}

export_rdmacm! {
    /// `int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)`: `EINVAL` for a
    /// NULL id or ECE, an id with a QP already, a vendor ID 0 or a non-zero `comp_mask` (as
    /// rdma-core checks); else `EOPNOTSUPP`.
    unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
        // SAFETY: the caller passes NULL or live objects.
        let (id, ece) = unsafe { (id.as_ref(), ece.as_ref()) };
        match (id, ece) {
            (Some(id), Some(ece)) if id.qp.is_null() && ece.vendor_id != 0 && ece.comp_mask == 0 => {
                fail(libc::EOPNOTSUPP)
            }
            _ => fail(libc::EINVAL),
        }
    }
}

export_rdmacm! {
    /// `int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)`: `EINVAL` for a
    /// NULL id or ECE or an id with a QP already (as rdma-core checks); else `EOPNOTSUPP`.
    unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
        // SAFETY: the caller passes NULL or live objects.
        let (id, ece) = unsafe { (id.as_ref(), ece.as_ref()) };
        match (id, ece) {
            (Some(id), Some(_)) if id.qp.is_null() => fail(libc::EOPNOTSUPP),
            _ => fail(libc::EINVAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> c_int {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn ece_is_not_supported_and_bad_arguments_are_einval() {
        // SAFETY: all-zero is a valid rdma_cm_id (integers, pointers, unions of them).
        let mut id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
        let mut ece = ibv_ece {
            vendor_id: 0x02c9,
            options: 1,
            comp_mask: 0,
        };
        let (pid, pece): (*mut rdma_cm_id, *mut ibv_ece) = (&mut *id, &mut ece);
        // SAFETY: live objects or NULL.
        unsafe {
            assert_eq!(rdma_set_local_ece(pid, pece), -1);
            assert_eq!(errno(), libc::EOPNOTSUPP);
            assert_eq!(rdma_get_remote_ece(pid, pece), -1);
            assert_eq!(errno(), libc::EOPNOTSUPP);

            assert_eq!(rdma_set_local_ece(std::ptr::null_mut(), pece), -1);
            assert_eq!(errno(), libc::EINVAL);
            assert_eq!(rdma_get_remote_ece(pid, std::ptr::null_mut()), -1);
            assert_eq!(errno(), libc::EINVAL);
            (*pece).vendor_id = 0;
            assert_eq!(rdma_set_local_ece(pid, pece), -1);
            assert_eq!(errno(), libc::EINVAL, "vendor ID 0");
        }
    }
}
