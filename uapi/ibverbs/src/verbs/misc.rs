//! Process-wide helpers: `ibv_read_sysfs_file` (rdma-core's `driver.h`; `ibv_devinfo` reads
//! `board_id` with it), `ibv_fork_init`, `ibv_is_fork_initialized`.

use std::ffi::CStr;
use std::io::Read;

use libc::{c_char, c_int, size_t};

use crate::export::export;
use crate::ffi::catch;

/// `IBV_FORK_UNNEEDED` (`enum ibv_fork_status`): softrnic pins no pages, so fork is safe.
const IBV_FORK_UNNEEDED: c_int = 2;

export! { "IBVERBS_1.0";
    /// `int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)`:
    /// reads `dir/file` into `buf` as rdma-core does (NUL-terminated, a trailing newline
    /// removed) and returns the length, or -1. softrnic devices have no sysfs directory, so
    /// for them this is -1 and `ibv_devinfo` prints no `board_id`.
    unsafe extern "C" fn ibv_read_sysfs_file(dir: *const c_char, file: *const c_char, buf: *mut c_char, size: size_t) -> c_int {
        catch(-1, || {
            if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
                return -1;
            }
            // SAFETY: the caller passes NUL-terminated strings.
            let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
            let path = format!("{}/{}", d.to_string_lossy(), f.to_string_lossy());
            let mut bytes = Vec::new();
            let Ok(file) = std::fs::File::open(path) else { return -1 };
            if file.take(size as u64 - 1).read_to_end(&mut bytes).is_err() {
                return -1;
            }
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
            }
            // SAFETY: bytes.len() < size, so bytes and the NUL fit in the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
                *buf.add(bytes.len()) = 0;
            }
            bytes.len() as c_int
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_fork_init(void)`: 0; nothing to prepare.
    unsafe extern "C" fn ibv_fork_init() -> c_int {
        0
    }
}

export! { "IBVERBS_1.13";
    /// `enum ibv_fork_status ibv_is_fork_initialized(void)`: `IBV_FORK_UNNEEDED`.
    unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
        IBV_FORK_UNNEEDED
    }
}
