//! Faulting in the pages of a registration: softrnic's counterpart of the kernel's
//! `ib_umem_get` (`drivers/infiniband/core/umem.c`), which pins every page of a user MR when
//! `ibv_reg_mr` is called and fails with `EFAULT` when a page cannot be had.
//!
//! A hardware NIC reads and writes physical pages, so registration must find and pin them. The
//! engine reads and writes through the process's own mappings instead, so it pins nothing, but
//! it still owes the caller what pinning gives: a registration over memory that is not there,
//! or not writable when the region grants write rights, fails at once with `EFAULT`, instead of
//! the first remote access taking the process down with `SIGSEGV`. `madvise` with
//! `MADV_POPULATE_WRITE` (any of `LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_ATOMIC`) or
//! `MADV_POPULATE_READ` (Linux 5.14) does exactly that check, page by page, and faults the
//! pages in as `get_user_pages` does — writable, so copy-on-write is broken at registration and
//! the data path takes no first-touch fault.
//!
//! Like the kernel's, the check holds at registration: unmapping memory while it is registered
//! is the caller's error (the `unsafe` contract of [`super::MrTable::register`]). It costs a
//! system call and a walk over the pages (about 0.6 µs for 4 KiB, 30 µs for 1 MiB here), which
//! is what relaxed registration (`relaxed.rs`) saves when it takes a marked region back.
//!
//! On a kernel without `MADV_POPULATE_*` the check is skipped (the first call finds out).

use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{Error, Result};

/// `MADV_POPULATE_READ` and `MADV_POPULATE_WRITE` (Linux 5.14; `uapi/asm-generic/mman-common.h`).
const MADV_POPULATE_READ: libc::c_int = 22;
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Whether the kernel knows `MADV_POPULATE_*`: 0 not yet known, 1 yes, 2 no.
static SUPPORTED: AtomicU8 = AtomicU8::new(0);

/// The page size ranges are rounded out to.
pub(super) const PAGE: usize = 4096;

/// The pages around `addr..addr + len`: (first byte of the first page, length in bytes).
///
/// # Errors
///
/// `EINVAL` if the rounded range overflows or is longer than `isize::MAX`.
pub(super) fn page_range(addr: usize, len: usize) -> Result<(usize, usize)> {
    let start = addr & !(PAGE - 1);
    let end = addr
        .checked_add(len)
        .and_then(|e| e.checked_next_multiple_of(PAGE))
        .ok_or(Error::InvalidArgument("addr + length overflows"))?;
    let rounded = end - start;
    if rounded > isize::MAX as usize || (start as u64).checked_add(rounded as u64).is_none() {
        return Err(Error::InvalidArgument("addr + length overflows"));
    }
    Ok((start, rounded))
}

/// Checks that every page of `addr..addr + len` is mapped, readable and (with `writable`)
/// writable, and faults them in.
///
/// # Errors
///
/// `EFAULT` ([`Error::BadAddress`]) if a page is not mapped, lacks a permission the region
/// needs, or cannot be faulted in (a file mapping past its end).
pub(super) fn fault_in(addr: usize, len: usize, writable: bool) -> Result<()> {
    if len == 0 || !supported() {
        return Ok(());
    }
    let (start, rounded) = page_range(addr, len)?;
    let advice = if writable {
        MADV_POPULATE_WRITE
    } else {
        MADV_POPULATE_READ
    };
    loop {
        // SAFETY: `MADV_POPULATE_*` changes no mapping and no byte; it only faults pages in,
        // as touching them would, and reports instead of raising a signal.
        let r = unsafe { libc::madvise(start as *mut libc::c_void, rounded, advice) };
        if r == 0 {
            return Ok(());
        }
        return Err(match errno() {
            libc::EINTR => continue,
            libc::ENOMEM => Error::BadAddress("the memory region is not mapped"),
            libc::EINVAL if writable => {
                Error::BadAddress("the memory region is not writable (it grants write rights)")
            }
            libc::EINVAL => Error::BadAddress("the memory region is not readable"),
            _ => Error::BadAddress("the memory region cannot be faulted in"),
        });
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Whether the check is made: probes `MADV_POPULATE_READ` once, on a page of this
/// function's own stack.
pub(super) fn supported() -> bool {
    match SUPPORTED.load(Ordering::Relaxed) {
        1 => return true,
        2 => return false,
        _ => {}
    }
    let probe = [0u8; 1];
    let page = probe.as_ptr() as usize & !(PAGE - 1);
    // SAFETY: as in `fault_in`; the stack page is mapped and readable.
    let ok = unsafe { libc::madvise(page as *mut libc::c_void, PAGE, MADV_POPULATE_READ) } == 0;
    SUPPORTED.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(prot: libc::c_int) -> *mut u8 {
        // SAFETY: a fresh anonymous mapping of two pages.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    fn unmap(p: *mut u8) {
        // SAFETY: mapped by `map` with this length.
        assert_eq!(unsafe { libc::munmap(p.cast(), 2 * PAGE) }, 0);
    }

    fn efault(r: Result<()>) {
        assert!(
            matches!(r, Err(Error::BadAddress(_))),
            "expected EFAULT, got {r:?}"
        );
    }

    #[test]
    fn readable_and_writable_memory_passes() {
        let p = map(libc::PROT_READ | libc::PROT_WRITE);
        fault_in(p as usize + 100, PAGE, true).unwrap();
        fault_in(p as usize, 2 * PAGE, false).unwrap();
        unmap(p);
    }

    #[test]
    fn read_only_memory_passes_only_without_write_rights() {
        if !supported() {
            softrnic_testkit::skip(
                "read_only_memory_passes_only_without_write_rights",
                "this kernel has no MADV_POPULATE_READ",
            );
            return;
        }
        let p = map(libc::PROT_READ);
        fault_in(p as usize, PAGE, false).unwrap();
        efault(fault_in(p as usize, PAGE, true));
        unmap(p);
    }

    #[test]
    fn inaccessible_and_unmapped_memory_is_efault() {
        if !supported() {
            softrnic_testkit::skip(
                "inaccessible_and_unmapped_memory_is_efault",
                "this kernel has no MADV_POPULATE_READ",
            );
            return;
        }
        let p = map(libc::PROT_NONE);
        efault(fault_in(p as usize, PAGE, false));
        unmap(p);
        // Never mapped: below `vm.mmap_min_addr` (a page freed by `munmap` might be mapped
        // again by another test thread at once).
        efault(fault_in(PAGE, 1, false));
        // A range that starts accessible and runs into an inaccessible page.
        let q = map(libc::PROT_READ | libc::PROT_WRITE);
        // SAFETY: the second page of `q`'s mapping.
        assert_eq!(
            unsafe { libc::mprotect(q.add(PAGE).cast(), PAGE, libc::PROT_NONE) },
            0
        );
        efault(fault_in(q as usize, PAGE + 1, true));
        fault_in(q as usize, PAGE, true).unwrap();
        unmap(q);
    }
}
