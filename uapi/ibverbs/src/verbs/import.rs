//! Sharing objects between processes: `ibv_import_device`, `ibv_import_pd`,
//! `ibv_unimport_pd`, `ibv_import_mr`, `ibv_unimport_mr`, `ibv_import_dm`, `ibv_unimport_dm`
//! (rdma-core 44 `libibverbs/device.c` and `verbs.c`; man pages `ibv_import_device(3)`,
//! `ibv_import_pd(3)`, `ibv_import_mr(3)`, `ibv_import_dm(3)`).
//!
//! Importing hands a second process the kernel's objects of the first: the `cmd_fd` of an
//! open `/dev/infiniband/uverbsN` (dup'd or passed over a socket) and the kernel handles
//! (`ibv_pd.handle`, `ibv_mr.handle`, `ibv_dm.handle`) of objects created through it. A
//! softrnic device has no command file and its objects no kernel handles: they live in the
//! memory of the process that made them (`ibv_context.cmd_fd` is -1), so there is nothing
//! another process could import. Every import fails with `errno` `EOPNOTSUPP`, what rdma-core
//! answers for a provider without the import operation (`dummy_ops.c`), and what pyverbs'
//! tests (`test_shared_pd.py`) take as "not supported" and skip; the unimports, which
//! rdma-core turns into no-ops for such a provider, do nothing. (For `ibv_import_device`
//! rdma-core would first reject an fd that is no character device with `EINVAL` and one of
//! no known device with `ENODEV`; softrnic says `EOPNOTSUPP` for every fd, since no fd of any
//! kind can carry one of its contexts.)

use std::ptr::null_mut;

use libc::{c_int, c_void};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_mr, ibv_pd};
use crate::export::export;
use crate::ffi::set_errno;

/// NULL with `errno` `EOPNOTSUPP`: the answer of every import.
fn unsupported<T>() -> *mut T {
    set_errno(libc::EOPNOTSUPP);
    null_mut()
}

export! { "IBVERBS_1.10";
    /// `struct ibv_context *ibv_import_device(int cmd_fd)`: NULL with `errno` `EOPNOTSUPP`
    /// (see the module doc).
    unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
        let _ = cmd_fd;
        unsupported()
    }
}

export! { "IBVERBS_1.10";
    /// `struct ibv_pd *ibv_import_pd(struct ibv_context *, uint32_t pd_handle)`: NULL with
    /// `errno` `EOPNOTSUPP` (see the module doc).
    unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
        let _ = (context, pd_handle);
        unsupported()
    }
}

export! { "IBVERBS_1.10";
    /// `void ibv_unimport_pd(struct ibv_pd *)`: nothing; no PD is ever imported.
    unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
        let _ = pd;
    }
}

export! { "IBVERBS_1.10";
    /// `struct ibv_mr *ibv_import_mr(struct ibv_pd *, uint32_t mr_handle)`: NULL with `errno`
    /// `EOPNOTSUPP` (see the module doc).
    unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
        let _ = (pd, mr_handle);
        unsupported()
    }
}

export! { "IBVERBS_1.10";
    /// `void ibv_unimport_mr(struct ibv_mr *)`: nothing; no MR is ever imported.
    unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
        let _ = mr;
    }
}

export! { "IBVERBS_1.13";
    /// `struct ibv_dm *ibv_import_dm(struct ibv_context *, uint32_t dm_handle)`: NULL with
    /// `errno` `EOPNOTSUPP` (see the module doc; softrnic has no device memory either).
    unsafe extern "C" fn ibv_import_dm(context: *mut ibv_context, dm_handle: u32) -> *mut c_void {
        let _ = (context, dm_handle);
        unsupported()
    }
}

export! { "IBVERBS_1.13";
    /// `void ibv_unimport_dm(struct ibv_dm *)`: nothing; no DM is ever imported.
    unsafe extern "C" fn ibv_unimport_dm(dm: *mut c_void) {
        let _ = dm;
    }
}
