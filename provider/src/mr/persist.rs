//! What the key table does for IBTA 1.5's FLUSH and ATOMIC WRITE (IBTA Vol. 1 release 1.5,
//! 9.4.7 "FLUSH" and 9.4.8 "ATOMIC WRITE"; kernel rxe's `process_flush` and
//! `atomic_write_reply` in `rxe_resp.c`), and file-backed regions.
//!
//! * **File-backed regions** ([`MrTable::register_file`]): memory that maps a file (the
//!   caller's `mmap(MAP_SHARED)`). Only they may carry `FLUSH_PERSISTENT`: they are the only
//!   memory softrnic can make durable.
//! * **FLUSH** ([`MrTable::remote_flush`]): the R_Key is checked like any remote access, with
//!   the rights the placement type asks for (global visibility: `FLUSH_GLOBAL`; persistence:
//!   `FLUSH_PERSISTENT`; both: both), over the RETH's range (selectivity level 0) or the whole
//!   region (selectivity level 1, which skips the range check, as rxe does). Then, under the
//!   region's shared lock (every earlier WRITE through the table has finished):
//!   - global visibility is a sequentially consistent fence: softrnic's writes are plain CPU
//!     stores, visible to every thread once the fence has run;
//!   - persistence `msync(MS_SYNC)`s the pages of the range, and the call returns only when
//!     the kernel says they are on the file's storage.
//!
//!   **Where the syscall happens**: here, in the key table, called by the responder *before*
//!   it queues the FLUSH's response. The RC engine stays sans-IO in the sense that it opens
//!   nothing and reads no clock; like every access to registered memory, the `msync` is the
//!   table's business. A FLUSH is therefore answered only after its data is durable, and the
//!   engine thread waits for the `msync` (a FLUSH is rare and explicit; nothing else of that
//!   engine runs meanwhile). A failed `msync` is a [`FlushError::Sync`]: the responder answers
//!   NAK Remote Operational Error.
//! * **ATOMIC WRITE** ([`MrTable::with_remote_atomic_write`]): `REMOTE_WRITE` (rxe's
//!   `check_rkey` asks for it), 8-byte aligned `va` (else [`AccessError::Misaligned`]: NAK
//!   Invalid Request, as rxe's `RESPST_ERR_MISALIGNED_ATOMIC`); the 8 bytes are stored under
//!   the region's exclusive lock, as one aligned 64-bit store when the host address is aligned.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use softrnic_wire::feth::{Selectivity, PLACEMENT_GLOBAL_VISIBILITY, PLACEMENT_PERSISTENCE};

use super::check::{check_entry, tag_state, Entry, Op, State};
use super::{read, Access, AccessError, Bytes, MrKeys, MrTable, PdHandle, Who};
use crate::error::Result;

/// Why a FLUSH failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushError {
    /// The access check refused it: NAK Remote Access Error.
    Access(AccessError),
    /// `msync` failed with this errno: NAK Remote Operational Error.
    Sync(i32),
}

impl From<AccessError> for FlushError {
    fn from(e: AccessError) -> FlushError {
        FlushError::Access(e)
    }
}

/// The rights a FLUSH of `placement` (PlacementType bits) needs.
pub fn flush_rights(placement: u8) -> Access {
    let mut needed = Access::empty();
    if placement & PLACEMENT_GLOBAL_VISIBILITY != 0 {
        needed |= Access::FLUSH_GLOBAL;
    }
    if placement & PLACEMENT_PERSISTENCE != 0 {
        needed |= Access::FLUSH_PERSISTENT;
    }
    needed
}

impl MrTable {
    /// Registers `len` bytes at `addr` that map a file, as [`register`](Self::register) does,
    /// but `FLUSH_PERSISTENT` is allowed: a persistence FLUSH of the region `msync`s it.
    ///
    /// # Safety
    ///
    /// As [`register`](Self::register); moreover `addr..addr + len` must be a shared mapping
    /// of a file (`msync` on it must be meaningful) for as long as it is registered.
    ///
    /// # Errors
    ///
    /// As [`register`](Self::register), but `FLUSH_PERSISTENT` is no error.
    pub unsafe fn register_file(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys> {
        let access = access.check_for_file_mr()?;
        // SAFETY: the caller's contract.
        unsafe { self.register_checked(pd, addr, len, iova, access, true) }
    }

    /// A peer's FLUSH (module doc): checks `rkey` for the rights of `placement` over
    /// `va..va + len` (or the whole region, for [`Selectivity::MemoryRegion`]), then makes
    /// the range globally visible and/or persistent. Returns when done.
    ///
    /// Selectivity level 1 names a region's own R_Key; through a memory window's R_Key it is
    /// refused ([`AccessError::NotRegistered`]): a window is a range, not a region.
    ///
    /// # Errors
    ///
    /// The first failed access check, or `msync`'s errno (module doc).
    #[allow(clippy::too_many_arguments)]
    pub fn remote_flush(
        &self,
        rkey: u32,
        pd: PdHandle,
        qpn: u32,
        va: u64,
        len: usize,
        placement: u8,
        selectivity: Selectivity,
    ) -> core::result::Result<(), FlushError> {
        let op = Op::RemoteFlush(flush_rights(placement));
        let persist = placement & PLACEMENT_PERSISTENCE != 0;
        match selectivity {
            Selectivity::MemoryRange => {
                self.shared_entry(rkey, Who { pd, qpn }, op, va, len, |entry, bytes| {
                    place(entry, bytes, persist)
                })?
            }
            Selectivity::MemoryRegion => {
                let slot = self.slot(rkey)?;
                let t = slot.tag.load(Ordering::Acquire);
                if tag_state(t) == State::Bound {
                    return Err(AccessError::NotRegistered.into());
                }
                let entry = read(&slot.entry);
                let t = slot.tag.load(Ordering::Acquire);
                let (iova, n) = (entry.iova, entry.len);
                let offset = check_entry(t, &entry, rkey, pd, op, iova, n)?;
                if entry.implicit {
                    // The whole address space: never file-backed, so only visibility.
                    return place(&entry, Bytes::from_slice(&[]), persist);
                }
                // SAFETY: as in `shared`: the checked range is the registered one, kept
                // valid and registered by the read lock.
                let bytes = unsafe { Bytes::new(entry.addr.0.add(offset), n) };
                place(&entry, bytes, persist)
            }
        }
    }

    /// Stores `value` at `va` for a peer's ATOMIC WRITE (module doc). Needs `REMOTE_WRITE` and
    /// an 8-byte aligned `va`.
    ///
    /// # Errors
    ///
    /// The first failed check: the engine NAKs with Remote Access Error, or Invalid Request
    /// for [`AccessError::Misaligned`].
    pub fn with_remote_atomic_write(
        &self,
        rkey: u32,
        pd: PdHandle,
        qpn: u32,
        va: u64,
        value: [u8; 8],
    ) -> core::result::Result<(), AccessError> {
        self.exclusive(
            rkey,
            Who { pd, qpn },
            Op::RemoteAtomicWrite,
            va,
            8,
            |mut bytes| {
                let p = bytes.as_mut_ptr();
                if p as usize % 8 == 0 {
                    // SAFETY: `bytes` is 8 bytes, exclusively ours under the write lock, and
                    // aligned for an `AtomicU64`.
                    let word = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
                    word.store(u64::from_ne_bytes(value), Ordering::Release);
                } else {
                    bytes.copy_from(&value);
                }
            },
        )
    }
}

/// Makes `bytes` (inside `entry`'s region) globally visible, and durable with `persist`.
fn place(entry: &Entry, bytes: Bytes<'_>, persist: bool) -> core::result::Result<(), FlushError> {
    fence(Ordering::SeqCst);
    if !persist {
        return Ok(());
    }
    if !entry.file_backed {
        // Unreachable through the checks (only file-backed regions get FLUSH_PERSISTENT), but
        // a region behind a window is not checked for it: refuse rather than pretend.
        return Err(AccessError::MissingRight(Access::FLUSH_PERSISTENT).into());
    }
    if bytes.is_empty() {
        return Ok(());
    }
    msync(bytes)
}

/// `msync(MS_SYNC)` of the pages holding `bytes`.
fn msync(bytes: Bytes<'_>) -> core::result::Result<(), FlushError> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096);
    let start = bytes.as_ptr() as usize;
    let aligned = start - start % page;
    let len = bytes.len() + (start - aligned);
    // SAFETY: the pages hold registered memory, mapped for the registration's life (the
    // caller holds the region's lock); msync reads no Rust-visible memory.
    let rc = unsafe { libc::msync(aligned as *mut libc::c_void, len, libc::MS_SYNC) };
    if rc == 0 {
        Ok(())
    } else {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        Err(FlushError::Sync(errno))
    }
}
