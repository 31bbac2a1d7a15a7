//! The memory-region key table: L_Keys and R_Keys, and the only way the engine touches
//! registered memory.
//!
//! Read first: IBTA Vol. 1, 10.6 "Memory management" (memory regions, L_Key/R_Key, access
//! rights), C9-88 (zero-length RDMA needs no valid R_Key); rdma-core `ibv_reg_mr(3)`; the
//! kernel's rxe `rxe_mr.c` (`lookup_mr`, `mr_check_range`) and `rxe_pool.c`.
//!
//! # Keys
//!
//! A key is 32 bits. The low 8 bits are the "key" portion, the consumer's to change (a
//! window's bind takes the consumer's byte, IBTA 10.6.7, usually `ibv_inc_rkey` of the old
//! key; rxe's `rxe_reg_fast_mr` allows the same for a region); the channel adapter picks the
//! upper 24 (IBTA 10.6.3: registration returns the L_Key and R_Key). In a table of
//! `N = max_mr` slots with `I` = ceil(log2 N) index bits (`keys.rs`; at most 16, so
//! [`MAX_MR_LIMIT`] is 2^16):
//!
//! | bits | what |
//! |------|------|
//! | 0..8 | key byte: random for a new region or window; after a bind, the consumer's |
//! | 8..8+I | the slot's index - 1: the lookup is a shift, a mask and an array index, O(1) |
//! | 8+I..32 | random |
//!
//! No key has its upper 24 bits all zero (no key below `0x100` is valid).
//!
//! **What is random, from where.** The `32 - I` bits outside the index are a keyed
//! permutation of the slot's *generation*, which goes up by one with every key the slot hands
//! out: an 8-round Feistel network keyed by 288 bits of the ChaCha20 stream (`chacha.rs`) of
//! the seed given to [`MrTable::new`] (a key per round, and a tweak that gives each slot a
//! permutation of its own). So a slot's keys do not repeat until it has handed out
//! `2^(32 - I)` of them (65 536 for the device's 65 536 slots), and without the seed one key
//! of a slot does not tell the next. (A small-domain Feistel network of a mixing function is
//! a keyed permutation, not a proven cipher; the guesser it faces sees a few keys at most.)
//!
//! A new region or window takes a free slot chosen uniformly at random by the seed's
//! ChaCha20 stream, so its index says nothing of how many came before. The price: the slot
//! and its place in the free list are cold, where reuse in order walked memory in order
//! (about 0.3 µs more per registration and deregistration of a 65 536-slot table). The seed
//! is all a guesser lacks (no clock, no OS randomness in here): uapi draws it from the OS.
//!
//! **Expected guesses** for a guesser who knows this layout but not the seed, at the
//! device's `max_mr` of 65 536 (`I` = 16, 16 random bits beside the index):
//!
//! * knowing the index of a live region (from an earlier key of the slot): 2^16 values,
//!   (2^16 + 1) / 2 = 32 768 guesses on average (`keys_tests.rs` measures it);
//! * knowing nothing, against `L` live keys: a guess lands with probability `L / 2^32`,
//!   about `2^32 / (L + 1)` guesses without repeats (2^31 for one region; 65 536 for a full
//!   table, also measured);
//! * the guesses that found a key of the old layout (`index << 8 | key byte` with indices
//!   handed out from 1: indices 1 to 7 times 256 key bytes) find a given region with
//!   probability `7 / 2^16 * 2^-8`, about 4 in 10 million.
//!
//! A type 2 window's key byte is the consumer's choice, so its key has 8 random bits fewer.
//! A peer's guess that fails costs it its QP as well (NAK Remote Access Error puts the
//! requester in the error state).
//!
//! **lkey == rkey**, as in rxe (`rxe_mr_init`): one key per region. An rkey of a region
//! without remote rights is harmless: every remote access checks the right it needs.
//! Memory windows (`window.rs`) take their own keys from the same index space: a slot holds
//! a region or a window, and its tag's state says which.
//!
//! # Checks
//!
//! In order, the first failure reported as an [`AccessError`]: key index in range, slot
//! registered, key byte, state (not being deregistered), PD, access right (local read:
//! none; local write: `LOCAL_WRITE`; remote read/write/atomic: `REMOTE_READ` /
//! `REMOTE_WRITE` / `REMOTE_ATOMIC`), bounds (`va..va + len` inside `iova..iova + length`,
//! overflow refused), and for atomics 8-byte alignment of `va` (checked here, not by the
//! caller). The method called decides the right needed, so writable bytes never come
//! without a write right. The closures get the bytes as [`Bytes`] / [`BytesMut`] (`bytes.rs`),
//! reached by copies only, never as slices: the application may touch them meanwhile.
//!
//! # Pinning and deregistration
//!
//! Each slot has a tag (`key << 8 | state`, one `AtomicU64`) and a `RwLock` around the
//! registration. An accessor checks the tag (fast failure without locking), takes the lock
//! (shared to read, exclusive to write: writers of one region never alias), checks
//! everything again under the lock and runs its closure while holding it. No global lock is
//! taken on the access path; registration and deregistration lock the free list briefly.
//!
//! [`MrTable::deregister`] first swaps the tag from (key, valid) to (key, invalidating) in
//! one compare-and-swap, so new lookups fail at once; then it takes the exclusive lock, which
//! waits for every accessor already inside; then it frees the slot. After it returns no key
//! of the region reaches the memory. The closures must therefore not call back into the
//! table (a nested access to the same region would deadlock): copy through a buffer.
//!
//! Relaxed regions (`relaxed.rs`, Solaris OFED's `ibv_reg_mr_relaxed`) take their keys from a
//! per-PD pool and defer this invalidation to a flush: their keys stay usable between
//! [`MrTable::deregister_relaxed`] and [`MrTable::flush_relaxed`].
//!
//! Device memory (`device_memory.rs`, `ibv_reg_dm_mr`) registers through the same slots:
//! always zero-based, and zero bytes allowed.
//!
//! # Zero length
//!
//! Registering zero bytes is refused (`EINVAL`), as the kernel's `ib_umem_get` refuses a
//! range that covers no page (the only sound reading for softrnic, which pins no pages). A
//! zero-length *access* is checked like any other and may sit anywhere in
//! `iova..=iova + length`.

mod access;
mod bytes;
mod chacha;
mod check;
mod device_memory;
#[cfg(test)]
mod device_memory_tests;
mod implicit;
#[cfg(test)]
mod implicit_tests;
mod keys;
#[cfg(test)]
mod keys_tests;
mod odp;
#[cfg(test)]
mod odp_tests;
mod pages;
mod persist;
#[cfg(test)]
mod persist_tests;
mod pin;
mod relaxed;
mod relaxed_lists;
#[cfg(test)]
mod relaxed_tests;
mod rereg;
#[cfg(test)]
mod rereg_tests;
#[cfg(test)]
mod tests;
mod window;
#[cfg(test)]
mod window_tests;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use access::Access;
pub use bytes::{Bytes, BytesMut};
pub use check::AccessError;
use check::{
    check_entry, check_index, check_tag, tag, tag_key, tag_state, Entry, MemPtr, Op, State,
};
use keys::{FreeList, KeySource};
pub use odp::{
    Advice, AdviseError, AdviseFlags, OdpGeneralCaps, OdpTransportCap, OdpTransportCaps,
    ODP_GENERAL_CAPS, ODP_TRANSPORT_CAPS,
};
pub use persist::{flush_rights, FlushError};
pub use pin::{PinError, PinFor, ReadPin};
pub use relaxed::{RelaxedPool, RELAXED_PAGE};
pub use rereg::{Rereg, Translation};
use window::check_window;
pub use window::{MwBind, MwType};

use crate::error::{Error, Result};

/// A protection domain, as the key table sees it: an opaque number compared for equality.
/// (Will move to the PD module when it exists.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PdHandle(pub u32);

/// Who accesses memory: the PD of the QP, and its number (a type 2 window admits only the QP
/// it is bound to; 0 for local accesses, which never go through a window).
#[derive(Debug, Clone, Copy)]
struct Who {
    pd: PdHandle,
    qpn: u32,
}

impl Who {
    fn local(pd: PdHandle) -> Who {
        Who { pd, qpn: 0 }
    }
}

/// The keys of a registered memory region. `lkey == rkey` (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrKeys {
    /// The L_Key, for SGEs of local work requests.
    pub lkey: u32,
    /// The R_Key, for peers' RDMA READ/WRITE/atomics.
    pub rkey: u32,
}

/// The largest table: 16 index bits, so that at least 16 bits of every key are random.
pub const MAX_MR_LIMIT: u32 = 1 << 16;

/// One index of the table.
struct Slot {
    /// `key << 8 | state`; see [`check::tag`].
    tag: AtomicU64,
    /// The generation of the slot's next key (`keys.rs`); changed under the write lock.
    gen: AtomicU32,
    /// Memory windows bound to this region; deregistration is refused while non-zero.
    bound_windows: AtomicU32,
    /// The relaxed pool (`relaxed.rs`) that owns this index, 0 if none: such an index never
    /// goes back to the free list and [`MrTable::deregister`] refuses its keys.
    pool: AtomicU32,
    /// The registration; held while a closure touches the memory.
    entry: RwLock<Entry>,
}

/// The table of memory regions of one device: registration, checked access, deregistration.
///
/// `Send + Sync`: the engine thread and the API threads share it.
pub struct MrTable {
    slots: Box<[Slot]>,
    /// Free indices; a new key takes one at random.
    free: Mutex<FreeList>,
    /// The seed's keys (`keys.rs`).
    keys: KeySource,
}

/// What [`MrTable::resolve`] finds: the region's slot and key, the operation to check its
/// entry for, and the guard of the window the access went through, if any.
type Resolved<'a> = (&'a Slot, u32, Op, Option<RwLockReadGuard<'a, Entry>>);

fn read(lock: &RwLock<Entry>) -> RwLockReadGuard<'_, Entry> {
    // A panicking closure poisons nothing that matters: the entry is plain data.
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(lock: &RwLock<Entry>) -> RwLockWriteGuard<'_, Entry> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl MrTable {
    /// A table of `max_mr` regions (`ibv_device_attr.max_mr`), with keys drawn from `seed`
    /// (module doc: the seed is all an attacker lacks, so it should come from the OS).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `max_mr` is 0 or above [`MAX_MR_LIMIT`].
    pub fn new(max_mr: u32, seed: u64) -> Result<MrTable> {
        if max_mr == 0 || max_mr > MAX_MR_LIMIT {
            return Err(Error::InvalidArgument("max_mr must be in 1..=2^16"));
        }
        let slots = (1..=max_mr)
            .map(|_| Slot {
                tag: AtomicU64::new(tag(0, State::Free)),
                gen: AtomicU32::new(0),
                bound_windows: AtomicU32::new(0),
                pool: AtomicU32::new(0),
                entry: RwLock::new(Entry::EMPTY),
            })
            .collect();
        let keys = KeySource::new(seed);
        Ok(MrTable {
            slots,
            free: Mutex::new(FreeList::new(max_mr, keys.slot_stream())),
            keys,
        })
    }

    /// The next key of the slot at 1-based `index`; the caller holds the slot's write lock.
    fn next_key(&self, index: u32) -> u32 {
        let slot = &self.slots[index as usize - 1];
        let (key, gen) = self.keys.key(
            index as usize,
            slot.gen.load(Ordering::Relaxed),
            self.slots.len(),
        );
        slot.gen.store(gen, Ordering::Relaxed);
        key
    }

    /// The slot (1-based) that `key` names, whether or not it is registered: successive keys
    /// of one slot (a region's after a rereg, a window's after a bind) share it.
    pub fn index_of(&self, key: u32) -> usize {
        keys::split(key, self.slots.len()).0
    }

    /// The number of slots (`max_mr`).
    pub fn max_mr(&self) -> u32 {
        self.slots.len() as u32
    }

    fn free_list(&self) -> std::sync::MutexGuard<'_, FreeList> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `len` bytes at `addr` for `pd` (`ibv_reg_mr`): peers address them from
    /// `iova` (`ibv_reg_mr` passes `addr`; `ibv_reg_mr_iova` another value); with
    /// [`Access::ZERO_BASED`] the iova is 0 whatever `iova` says. Optional access bits are
    /// accepted and dropped. A null `addr` with `len` `usize::MAX` and iova 0 is the implicit
    /// ODP region ([`register_implicit`](Self::register_implicit)), which needs no memory.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be valid for reads and writes, from any thread, from this
    /// call until [`deregister`](Self::deregister) of the returned key has returned. While
    /// registered, the engine reads and writes it at any time (as a NIC's DMA would): the
    /// caller must not hold Rust references to it that assume exclusivity.
    ///
    /// # Errors
    ///
    /// - `EINVAL`: bad access flags (see [`Access::check_for_mr`]); `len` 0; `addr` null;
    ///   `addr + len` or `iova + len` overflows, or `len > isize::MAX`.
    /// - `EOPNOTSUPP`: `FLUSH_PERSISTENT`.
    /// - `EFAULT`: a page of the range is not mapped, or not writable while `LOCAL_WRITE` is
    ///   asked for (`pages.rs`, which also faults the pages in, as `ib_umem_get` pins them).
    /// - `ENOMEM`: the table is full.
    pub unsafe fn register(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys> {
        let access = access.check_for_mr()?;
        if addr.is_null() && len == usize::MAX && iova == 0 {
            return self.register_implicit(pd, access);
        }
        // SAFETY: the caller's contract is `register_checked`'s.
        unsafe { self.register_checked(pd, addr, len, iova, access, false) }
    }

    /// Registers the implicit ODP region of `pd` (`implicit.rs`): `ibv_reg_mr(pd, NULL,
    /// SIZE_MAX, IBV_ACCESS_ON_DEMAND | ..)`, the whole address space at iova 0. Safe: the
    /// table reaches its memory only through copies that cannot fault.
    ///
    /// # Errors
    ///
    /// - `EINVAL`: `access` lacks `ON_DEMAND` (an implicit region exists only with on-demand
    ///   paging), asks for `ZERO_BASED`, or is refused by [`Access::check_for_mr`].
    /// - `ENOMEM`: the table is full.
    pub fn register_implicit(&self, pd: PdHandle, access: Access) -> Result<MrKeys> {
        let access = access.check_for_mr()?;
        if !access.contains(Access::ON_DEMAND) {
            return Err(Error::InvalidArgument(
                "a region over the whole address space needs ON_DEMAND",
            ));
        }
        if access.contains(Access::ZERO_BASED) {
            return Err(Error::InvalidArgument(
                "an implicit region is not zero-based",
            ));
        }
        self.install_entry(Entry {
            pd,
            access,
            addr: MemPtr(core::ptr::null_mut()),
            len: usize::MAX,
            iova: 0,
            window: None,
            file_backed: false,
            implicit: true,
        })
    }

    /// [`register`](Self::register) after the access check; `file_backed` marks a mapped
    /// file (`persist.rs`).
    ///
    /// # Safety
    ///
    /// As [`register`](Self::register).
    unsafe fn register_checked(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
        file_backed: bool,
    ) -> Result<MrKeys> {
        if len == 0 {
            return Err(Error::InvalidArgument("zero-length memory region"));
        }
        if addr.is_null() {
            return Err(Error::InvalidArgument("null address"));
        }
        if len > isize::MAX as usize || (addr as usize).checked_add(len).is_none() {
            return Err(Error::InvalidArgument("addr + length overflows"));
        }
        let iova = if access.contains(Access::ZERO_BASED) {
            0
        } else {
            iova
        };
        if iova.checked_add(len as u64).is_none() {
            return Err(Error::InvalidArgument("iova + length overflows"));
        }
        pages::fault_in(addr as usize, len, access.contains(Access::LOCAL_WRITE))?;
        self.install(pd, addr, len, iova, access, file_backed)
    }

    /// Puts a checked registration into a free slot and makes its key valid.
    ///
    /// # Errors
    ///
    /// `ENOMEM`: the table is full.
    fn install(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
        file_backed: bool,
    ) -> Result<MrKeys> {
        self.install_entry(Entry {
            pd,
            access,
            addr: MemPtr(addr),
            len,
            iova,
            window: None,
            file_backed,
            implicit: false,
        })
    }

    /// Puts `new` into a free slot and makes its key valid.
    ///
    /// # Errors
    ///
    /// `ENOMEM`: the table is full.
    fn install_entry(&self, new: Entry) -> Result<MrKeys> {
        let index = self
            .free_list()
            .take()
            .ok_or(Error::NoMemory("max_mr reached"))?;
        let slot = &self.slots[index as usize - 1];
        let mut entry = write(&slot.entry);
        let key = self.next_key(index);
        *entry = new;
        slot.bound_windows.store(0, Ordering::Relaxed);
        slot.tag.store(tag(key, State::Valid), Ordering::Release);
        drop(entry);
        Ok(MrKeys {
            lkey: key,
            rkey: key,
        })
    }

    /// Deregisters the region of `key` (`ibv_dereg_mr`). Both its keys die at once; the call
    /// waits for accessors already inside the memory and returns when none is left.
    ///
    /// # Errors
    ///
    /// - `EINVAL`: `key` is not the key of a registered region (unknown, stale, or already
    ///   being deregistered), as `ibv_dereg_mr(3)` says for an invalid MR; or it is a relaxed
    ///   region's (use [`deregister_relaxed`](Self::deregister_relaxed)).
    /// - `EBUSY`: a memory window is bound to the region. (`ibv_dereg_mr(3)` says EBUSY; the
    ///   kernel's rxe answers EINVAL instead. softrnic follows the man page.)
    pub fn deregister(&self, key: u32) -> Result<()> {
        const INVALID: Error = Error::InvalidArgument("not a registered memory region");
        const BUSY: Error = Error::Busy("memory windows are bound to the memory region");
        let index = check_index(key, self.slots.len()).map_err(|_| INVALID)?;
        let slot = &self.slots[index - 1];
        let valid = tag(key, State::Valid);
        if slot.tag.load(Ordering::Acquire) != valid || slot.pool.load(Ordering::Acquire) != 0 {
            return Err(INVALID);
        }
        if slot.bound_windows.load(Ordering::SeqCst) != 0 {
            return Err(BUSY);
        }
        let invalidating = tag(key, State::Invalidating);
        if slot
            .tag
            .compare_exchange(valid, invalidating, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(INVALID);
        }
        // A bind may have raced in between; it re-checks the tag after counting itself, so
        // one of us sees the other (both sides use SeqCst).
        if slot.bound_windows.load(Ordering::SeqCst) != 0 {
            slot.tag.store(valid, Ordering::SeqCst);
            return Err(BUSY);
        }
        // Waits for every accessor inside a closure.
        let mut entry = write(&slot.entry);
        *entry = Entry::EMPTY;
        slot.tag.store(tag(key, State::Free), Ordering::Release);
        drop(entry);
        self.free_list().put(index as u32);
        Ok(())
    }

    /// Counts a memory window as bound to the region of `mr_key` (the bind has checked PD,
    /// `MW_BIND` and bounds).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `mr_key` is not a valid region's key.
    pub(crate) fn window_bound(&self, mr_key: u32) -> Result<()> {
        let index = check_index(mr_key, self.slots.len())
            .map_err(|_| Error::InvalidArgument("not a memory region key"))?;
        let slot = &self.slots[index - 1];
        slot.bound_windows.fetch_add(1, Ordering::SeqCst);
        if slot.tag.load(Ordering::SeqCst) != tag(mr_key, State::Valid) {
            slot.bound_windows.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::InvalidArgument("not a valid memory region"));
        }
        Ok(())
    }

    /// Undoes [`window_bound`](Self::window_bound).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `mr_key` is not the region's current key or no window is bound.
    pub(crate) fn window_unbound(&self, mr_key: u32) -> Result<()> {
        const INVALID: Error = Error::InvalidArgument("no window bound to this memory region");
        let index = check_index(mr_key, self.slots.len()).map_err(|_| INVALID)?;
        let slot = &self.slots[index - 1];
        if tag_key(slot.tag.load(Ordering::Acquire)) != mr_key {
            return Err(INVALID);
        }
        slot.bound_windows
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .map(drop)
            .map_err(|_| INVALID)
    }

    fn slot(&self, key: u32) -> core::result::Result<&Slot, AccessError> {
        let index = check_index(key, self.slots.len())?;
        let slot = &self.slots[index - 1];
        // Fast failure, without the lock; the full check below is the authority.
        check_tag(slot.tag.load(Ordering::Acquire), key)?;
        Ok(slot)
    }

    /// The checks of an access through `key` under the locks it takes: for a region, its
    /// entry's; for a window, the window's and then its region's (the window's read guard is
    /// returned, to be held as long as the region's). Returns the region's slot and key, the
    /// operation to check the region's entry for (`op` itself, or [`Op::BehindWindow`] when
    /// the window has checked the rights) and the window guard.
    fn resolve<'a>(
        &'a self,
        key: u32,
        who: Who,
        op: Op,
        va: u64,
        len: usize,
    ) -> core::result::Result<Resolved<'a>, AccessError> {
        let slot = self.slot(key)?;
        if tag_state(slot.tag.load(Ordering::Acquire)) != State::Bound {
            return Ok((slot, key, op, None));
        }
        let window = read(&slot.entry);
        let mr_key = check_window(
            slot.tag.load(Ordering::Acquire),
            &window,
            key,
            who.pd,
            who.qpn,
            op,
            va,
            len,
        )?;
        Ok((self.slot(mr_key)?, mr_key, Op::BehindWindow, Some(window)))
    }

    fn shared<R>(
        &self,
        key: u32,
        who: Who,
        op: Op,
        va: u64,
        len: usize,
        f: impl FnOnce(Bytes<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        self.shared_entry(key, who, op, va, len, |_, bytes| f(bytes))
    }

    /// [`shared`](Self::shared), with the entry of the region reached (for `persist.rs`).
    fn shared_entry<R>(
        &self,
        key: u32,
        who: Who,
        op: Op,
        va: u64,
        len: usize,
        f: impl FnOnce(&Entry, Bytes<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        let (slot, key, op, window) = self.resolve(key, who, op, va, len)?;
        let entry = read(&slot.entry);
        let offset = check_entry(
            slot.tag.load(Ordering::Acquire),
            &entry,
            key,
            who.pd,
            op,
            va,
            len,
        )?;
        if entry.implicit {
            let r = implicit::shared(offset, len, |bytes| f(&entry, bytes));
            drop(entry);
            drop(window);
            return r;
        }
        // SAFETY: the checks put `offset..offset + len` inside the registered range, which
        // `register`'s contract keeps valid while the slot is registered; the read lock
        // keeps it registered (deregistration needs the write lock) for as long as `f` runs.
        // `Bytes` reaches them by copies only: the application may write them meanwhile.
        let bytes = unsafe { Bytes::new(entry.addr.0.add(offset), len) };
        let r = f(&entry, bytes);
        drop(entry);
        drop(window);
        Ok(r)
    }

    fn exclusive<R>(
        &self,
        key: u32,
        who: Who,
        op: Op,
        va: u64,
        len: usize,
        f: impl FnOnce(BytesMut<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        let (slot, key, op, window) = self.resolve(key, who, op, va, len)?;
        let entry = write(&slot.entry);
        let offset = check_entry(
            slot.tag.load(Ordering::Acquire),
            &entry,
            key,
            who.pd,
            op,
            va,
            len,
        )?;
        if entry.implicit {
            let r = implicit::exclusive(offset, len, f);
            drop(entry);
            drop(window);
            return r;
        }
        // SAFETY: as in `shared`; the write lock makes `f` the only accessor of the region
        // through this table until it returns (writers of one region never overlap).
        let bytes = unsafe { BytesMut::new(entry.addr.0.add(offset), len) };
        let r = f(bytes);
        drop(entry);
        drop(window);
        Ok(r)
    }

    /// Reads `len` bytes at `va` through an lkey (the source of a SEND or RDMA WRITE).
    /// Needs no right. `f` runs with the region pinned and must not call into the table.
    ///
    /// # Errors
    ///
    /// The first failed check (module doc); the engine completes with `IBV_WC_LOC_PROT_ERR`.
    pub fn with_local_read<R>(
        &self,
        lkey: u32,
        pd: PdHandle,
        va: u64,
        len: usize,
        f: impl FnOnce(Bytes<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        self.shared(lkey, Who::local(pd), Op::LocalRead, va, len, f)
    }

    /// Writes `len` bytes at `va` through an lkey (a receive buffer, an RDMA READ's sink).
    /// Needs `LOCAL_WRITE`. `f` runs with the region pinned and must not call into the table.
    ///
    /// # Errors
    ///
    /// The first failed check (module doc); the engine completes with `IBV_WC_LOC_PROT_ERR`.
    pub fn with_local_write<R>(
        &self,
        lkey: u32,
        pd: PdHandle,
        va: u64,
        len: usize,
        f: impl FnOnce(BytesMut<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        self.exclusive(lkey, Who::local(pd), Op::LocalWrite, va, len, f)
    }

    /// Reads `len` bytes at `va` for a peer's RDMA READ. Needs `REMOTE_READ`. `f` runs with
    /// the region pinned and must not call into the table.
    ///
    /// # Errors
    ///
    /// The first failed check (module doc); the engine NAKs with Remote Access Error.
    pub fn with_remote_read<R>(
        &self,
        rkey: u32,
        pd: PdHandle,
        qpn: u32,
        va: u64,
        len: usize,
        f: impl FnOnce(Bytes<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        self.shared(rkey, Who { pd, qpn }, Op::RemoteRead, va, len, f)
    }

    /// Writes `len` bytes at `va` for a peer's RDMA WRITE. Needs `REMOTE_WRITE`. `f` runs
    /// with the region pinned and must not call into the table.
    ///
    /// # Errors
    ///
    /// The first failed check (module doc); the engine NAKs with Remote Access Error.
    pub fn with_remote_write<R>(
        &self,
        rkey: u32,
        pd: PdHandle,
        qpn: u32,
        va: u64,
        len: usize,
        f: impl FnOnce(BytesMut<'_>) -> R,
    ) -> core::result::Result<R, AccessError> {
        self.exclusive(rkey, Who { pd, qpn }, Op::RemoteWrite, va, len, f)
    }

    /// A peer's atomic (compare-and-swap, fetch-and-add) on the native-endian 64-bit word at
    /// `va`: `f` gets its value and gives the one to store; returns the original. Needs
    /// `REMOTE_ATOMIC` and an 8-byte aligned `va`. The exclusive pin makes the
    /// read-modify-write atomic against every other access through the table (atomicity
    /// against the host CPU is not promised: `IBV_ATOMIC_HCA`).
    ///
    /// # Errors
    ///
    /// The first failed check (module doc); the engine NAKs with Remote Access Error, or
    /// Invalid Request for [`AccessError::Misaligned`].
    pub fn with_remote_atomic(
        &self,
        rkey: u32,
        pd: PdHandle,
        qpn: u32,
        va: u64,
        f: impl FnOnce(u64) -> u64,
    ) -> core::result::Result<u64, AccessError> {
        self.exclusive(
            rkey,
            Who { pd, qpn },
            Op::RemoteAtomic,
            va,
            8,
            |mut word| word.update_u64(f),
        )
    }
}
