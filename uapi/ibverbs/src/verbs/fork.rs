//! `ibv_dontfork_range` and `ibv_dofork_range` (rdma-core 44 `libibverbs/memory.c`, man page
//! `ibv_fork_init(3)`); `ibv_fork_init` and `ibv_is_fork_initialized` are in `misc.rs`.
//!
//! rdma-core marks the pages of every registered region `MADV_DONTFORK` once `ibv_fork_init`
//! has run, because a hardware NIC DMAs to the physical pages the region was pinned to: after
//! a `fork()`, copy-on-write would give the parent new pages the NIC no longer sees. A
//! software NIC pins nothing. softrnic reaches registered memory through the process's own
//! virtual addresses, so after a `fork()` it writes to whatever pages the parent's addresses
//! map, copied or not, and the child keeps an ordinary copy it may even read. There is nothing
//! to protect: both functions succeed and change nothing, which is also what rdma-core's do
//! when `ibv_fork_init` was not called (and what `ibv_is_fork_initialized`'s
//! `IBV_FORK_UNNEEDED` says).

use libc::{c_int, c_void, size_t};

use crate::export::export;

export! { "IBVERBS_1.1";
    /// `int ibv_dontfork_range(void *base, size_t size)`: 0; the range stays as it is (see
    /// the module doc).
    unsafe extern "C" fn ibv_dontfork_range(base: *mut c_void, size: size_t) -> c_int {
        let _ = (base, size);
        0
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_dofork_range(void *base, size_t size)`: 0; the range stays as it is (see the
    /// module doc).
    unsafe extern "C" fn ibv_dofork_range(base: *mut c_void, size: size_t) -> c_int {
        let _ = (base, size);
        0
    }
}
