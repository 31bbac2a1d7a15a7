//! Helpers of the C boundary: errno, the value each C return type reports an error with, and
//! catching panics.

use std::panic::{catch_unwind, AssertUnwindSafe};

use libc::c_int;

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The value a C function of this return type returns on error (`errno` says why): -1 for
/// `int`, `ssize_t` and `off_t`, `(size_t)-1` for `size_t` (`riowrite`), NULL for pointers, 0
/// for a port (`rdma_get_src_port`), nothing for `void`.
pub(crate) trait Failure {
    /// The error value.
    fn failure() -> Self;
}

impl Failure for c_int {
    fn failure() -> Self {
        -1
    }
}

impl Failure for isize {
    fn failure() -> Self {
        -1
    }
}

impl Failure for i64 {
    fn failure() -> Self {
        -1
    }
}

impl Failure for usize {
    fn failure() -> Self {
        usize::MAX
    }
}

impl Failure for u16 {
    fn failure() -> Self {
        0
    }
}

impl<T> Failure for *mut T {
    fn failure() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> Failure for *const T {
    fn failure() -> Self {
        std::ptr::null()
    }
}

impl Failure for () {
    fn failure() -> Self {}
}

/// Runs `f`, turning a panic into the error value with `errno = EIO`: no panic may unwind into
/// C. (A panic is a softrnic bug; the default hook has already printed it.)
pub(crate) fn catch<R: Failure>(f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_errno(libc::EIO);
        R::failure()
    })
}
