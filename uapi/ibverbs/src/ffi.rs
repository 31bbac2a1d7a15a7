//! Helpers of the C boundary: errno, catching panics, copying a struct into a caller's buffer
//! of a given size, C strings.

use std::panic::{catch_unwind, AssertUnwindSafe};

use libc::{c_char, c_int};

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f`, turning a panic into `on_panic` with `errno = EIO`: no panic may unwind into C.
/// (A panic is a softrnic bug; the default hook has already printed it.)
pub(crate) fn catch<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// Writes `src` into the `len` bytes at `dst` as a C verb that takes the size of its output
/// struct does: the first `min(len, size_of::<T>())` bytes of `src`, zeros after them.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes.
pub(crate) unsafe fn copy_sized<T: Copy>(src: &T, dst: *mut u8, len: usize) {
    let n = len.min(size_of::<T>());
    // SAFETY: `src` is a whole T, so its first n <= size_of::<T>() bytes are readable; the
    // caller promises `dst` has `len` >= n writable bytes; a Rust value and a caller buffer
    // do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping((src as *const T).cast::<u8>(), dst, n);
        std::ptr::write_bytes(dst.add(n), 0, len - n);
    }
}

/// `text` as a fixed C `char` array, truncated to leave a NUL.
pub(crate) fn c_chars<const N: usize>(text: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (d, s) in out.iter_mut().zip(text.bytes().take(N - 1)) {
        *d = s as c_char;
    }
    out
}
