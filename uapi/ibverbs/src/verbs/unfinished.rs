//! Entry points that unmodified programs import but softrnic's C ABI does not implement yet.
//! Debian links ibverbs-utils and perftest with BIND_NOW, so every symbol they import must
//! exist for them to load at all; these fail cleanly instead, as rdma-core documents for each
//! verb: NULL with `errno = ENOSYS` or an `ENOSYS` return value.
//!
//! Unfinished (next steps of issue 4):
//! * multicast (UD): `ibv_attach_mcast`, `ibv_detach_mcast`.

use libc::{c_int, c_void};

use crate::abi::objects::ibv_qp;
use crate::export::export;
use crate::ffi::set_errno;

/// `ENOSYS`, also left in `errno`.
fn enosys() -> c_int {
    set_errno(libc::ENOSYS);
    libc::ENOSYS
}

/// Stubs returning `ENOSYS` (the verbs that return an errno value).
macro_rules! errno_stubs {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        export! { $ver;
            /// Unfinished: returns `ENOSYS`.
            unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                $(let _ = $arg;)*
                enosys()
            }
        }
    )*};
}

errno_stubs! {
    "IBVERBS_1.1" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16);
    "IBVERBS_1.1" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16);
}
