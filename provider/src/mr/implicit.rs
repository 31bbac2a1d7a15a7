//! Implicit on-demand paging: one region over the whole address space, reached only through
//! copies that cannot fault.
//!
//! Read first: rdma-core `ibv_reg_mr(3)` ("implicit ODP": `addr` NULL, `length` `SIZE_MAX`,
//! `IBV_ACCESS_ON_DEMAND`), `ibv_advise_mr(3)`; the kernel's mlx5 `odp.c`
//! (`mlx5_ib_alloc_implicit_mr`), and `process_vm_readv(2)`.
//!
//! # The region
//!
//! An implicit region has iova 0, address 0 and length `usize::MAX`: every virtual address is
//! its own offset. Its keys work like any region's (PD, rights, the `REMOTE_*` rights it was
//! registered with), but its bounds say nothing about what is mapped: an address inside it may
//! be unmapped, or mapped without the protection an access needs. So the accessors never hand
//! the engine a slice of it. Each access goes through a bounce buffer instead:
//!
//! - a read copies the range in with `process_vm_readv(2)` on the own pid;
//! - a write first checks that the range is writable (`MADV_POPULATE_WRITE`, `pages.rs`, which
//!   also faults the pages in), copies it in, lets the closure change the copy, and copies it
//!   back with `process_vm_writev(2)` if it changed (a closure that only checks writes
//!   nothing).
//!
//! Both calls walk the page tables as the kernel's own `copy_from_user` does: a page that is
//! not mapped, or not readable (resp. writable), makes them fail with `EFAULT` (and
//! `process_vm_writev` honours write protection: it does not force writes as `ptrace` may).
//! No signal is ever raised. A failed copy is reported as [`AccessError::OutOfBounds`]: "the
//! range is not mapped with the protection the access needs" is what the range check of an
//! implicit region means. The engine then completes as for any range error
//! (`IBV_WC_LOC_PROT_ERR` locally, NAK Remote Access Error remotely).
//!
//! Ordinary regions keep their direct access (by pointer, `bytes.rs`): the only cost for them
//! is one test of a flag already in the cache line the access check reads.
//!
//! The bounce buffers are per thread and grow to the largest access seen (up to 1 MiB kept),
//! so the data path allocates only while they grow, or for a longer access. A pin (`pin.rs`) of an implicit region owns its copy,
//! since it outlives any call: one allocation per packet, for implicit regions only.

use std::cell::Cell;

use super::{pages, AccessError, Bytes, BytesMut};

thread_local! {
    /// The bounce buffer of reads and writes.
    static BOUNCE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    /// The untouched copy a write compares with, to skip writing back what did not change.
    static ORIGINAL: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Copies the `buf.len()` bytes at address `addr` of this process into `buf`, without ever
/// faulting.
///
/// # Errors
///
/// [`AccessError::OutOfBounds`] if a byte of the range is not mapped readable.
pub(super) fn copy_in(addr: usize, buf: &mut [u8]) -> Result<(), AccessError> {
    let mut done = 0;
    while done < buf.len() {
        let local = libc::iovec {
            iov_base: buf[done..].as_mut_ptr().cast(),
            iov_len: buf.len() - done,
        };
        let remote = libc::iovec {
            iov_base: addr.wrapping_add(done) as *mut libc::c_void,
            iov_len: buf.len() - done,
        };
        // SAFETY: `local` is our own writable buffer; the kernel checks `remote` against the
        // process's mappings and fails with EFAULT instead of faulting.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return Err(AccessError::OutOfBounds);
        }
        done += n as usize;
    }
    Ok(())
}

/// Copies `buf` to address `addr` of this process, without ever faulting. A failure may
/// leave a prefix of the range written (as a DMA that stops at a bad page).
///
/// # Errors
///
/// [`AccessError::OutOfBounds`] if a byte of the range is not mapped writable.
pub(super) fn copy_out(addr: usize, buf: &[u8]) -> Result<(), AccessError> {
    let mut done = 0;
    while done < buf.len() {
        let local = libc::iovec {
            iov_base: buf[done..].as_ptr() as *mut libc::c_void,
            iov_len: buf.len() - done,
        };
        let remote = libc::iovec {
            iov_base: addr.wrapping_add(done) as *mut libc::c_void,
            iov_len: buf.len() - done,
        };
        // SAFETY: `local` is only read; the kernel checks `remote` against the process's
        // mappings and their protection and fails with EFAULT instead of faulting.
        let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return Err(AccessError::OutOfBounds);
        }
        done += n as usize;
    }
    Ok(())
}

/// Takes this thread's buffer `which`, sized to `len` (an access nested inside a closure,
/// which the table forbids anyway, would find it empty and grow its own).
fn take(which: &'static std::thread::LocalKey<Cell<Vec<u8>>>, len: usize) -> Vec<u8> {
    let mut buf = which.with(Cell::take);
    buf.clear();
    buf.resize(len, 0);
    buf
}

/// The largest bounce buffer a thread keeps between accesses: a larger one (a long RDMA READ
/// checked in one piece) is freed rather than held for the thread's life.
const KEEP: usize = 1 << 20;

fn give_back(which: &'static std::thread::LocalKey<Cell<Vec<u8>>>, buf: Vec<u8>) {
    if buf.capacity() <= KEEP {
        which.with(|c| c.set(buf));
    }
}

/// Runs `f` on a copy of the `len` bytes at address `addr` (a checked offset of an implicit
/// region, which is the address itself).
///
/// # Errors
///
/// [`AccessError::OutOfBounds`] if the range is not mapped readable; `f` does not run.
pub(super) fn shared<R>(
    addr: usize,
    len: usize,
    f: impl FnOnce(Bytes<'_>) -> R,
) -> Result<R, AccessError> {
    let mut buf = take(&BOUNCE, len);
    let r = copy_in(addr, &mut buf).map(|()| f(Bytes::from_slice(&buf)));
    give_back(&BOUNCE, buf);
    r
}

/// Runs `f` on a copy of the `len` bytes at `addr` and stores what it changed.
///
/// # Errors
///
/// [`AccessError::OutOfBounds`] if the range is not mapped writable (then `f` does not run),
/// or if storing fails.
pub(super) fn exclusive<R>(
    addr: usize,
    len: usize,
    f: impl FnOnce(BytesMut<'_>) -> R,
) -> Result<R, AccessError> {
    if len > 0 {
        pages::fault_in(addr, len, true).map_err(|_| AccessError::OutOfBounds)?;
    }
    let mut buf = take(&BOUNCE, len);
    let mut original = take(&ORIGINAL, len);
    let r = copy_in(addr, &mut buf).and_then(|()| {
        original.copy_from_slice(&buf);
        let r = f(BytesMut::from_slice(&mut buf));
        if buf != original {
            copy_out(addr, &buf)?;
        }
        Ok(r)
    });
    give_back(&BOUNCE, buf);
    give_back(&ORIGINAL, original);
    r
}
