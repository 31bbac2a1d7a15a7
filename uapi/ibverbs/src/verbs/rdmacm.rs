//! The verbs that rdma-core's real `librdmacm.so.1` imports and nothing else here needs:
//! perftest links librdmacm (for `-R`), and with BIND_NOW every import must resolve for it to
//! load at all. (The vendor libraries perftest links, `libmlx5.so.1` and `libefa.so.1`, get
//! stand-ins instead: see `standins/README.md`.) The `ibv_copy_*_kern` conversions it imports
//! are in `marshall.rs`.
//!
//! ECE (enhanced connection establishment) is not supported.

use libc::{c_char, c_int, c_void};

use crate::abi::objects::ibv_qp;
use crate::export::export;
use crate::ffi::set_errno;

export! { "IBVERBS_1.0";
    /// `const char *ibv_get_sysfs_path(void)`: `"/sys"`, where rdma-core looks too.
    unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
        c"/sys".as_ptr()
    }
}

export! { "IBVERBS_1.10";
    /// `int ibv_query_ece(struct ibv_qp *, struct ibv_ece *)`: `EOPNOTSUPP`, as rdma-core
    /// answers for a device without ECE.
    unsafe extern "C" fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut c_void) -> c_int {
        let _ = (qp, ece);
        set_errno(libc::EOPNOTSUPP);
        libc::EOPNOTSUPP
    }
}

export! { "IBVERBS_1.10";
    /// `int ibv_set_ece(struct ibv_qp *, struct ibv_ece *)`: `EOPNOTSUPP` (see `ibv_query_ece`).
    unsafe extern "C" fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut c_void) -> c_int {
        let _ = (qp, ece);
        set_errno(libc::EOPNOTSUPP);
        libc::EOPNOTSUPP
    }
}
