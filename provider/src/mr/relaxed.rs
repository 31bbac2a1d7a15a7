//! Relaxed memory regions, after Solaris OFED's `ibv_reg_mr_relaxed(3)`,
//! `ibv_dereg_mr_relaxed(3)` and `ibv_flush_relaxed_mr(3)`: registration and deregistration
//! that are cheap because invalidation is deferred and batched.
//!
//! # What is implemented
//!
//! A [`RelaxedPool`] belongs to one PD and holds `capacity` key indices taken from the table's
//! free list once, when it is made ([`MrTable::relaxed_pool`]). Those indices never go back to
//! the free list while the pool lives, and [`MrTable::deregister`] refuses their keys (`EINVAL`).
//!
//! * [`MrTable::register_relaxed`] pops an index from the pool (the pool's own short lock, never
//!   the table's free list) and installs the region there. The registered range is **rounded
//!   out to 4 KiB pages** ([`RELAXED_PAGE`]): the region covers
//!   `addr & !0xfff .. (addr + len).next_multiple_of(0x1000)`, and its keys reach every byte of
//!   those pages (so the caller must be able to lend the whole pages). The iova is the address
//!   of the first byte of the first page, so peers address the memory by its virtual address as
//!   with `ibv_reg_mr`; `ZERO_BASED` is refused (`EINVAL`). The pages are checked and faulted
//!   in as for a normal region (`pages.rs`, `EFAULT`).
//! * [`MrTable::deregister_relaxed`] only *marks* the region: its tag goes from valid to
//!   deferred in one compare-and-swap. Nothing waits, and no lock is taken: the tag is the
//!   mark.
//! * **Taking a marked region back** (the cache of an FMR pool, as Linux's old `ib_fmr_pool`
//!   had it): a registration that covers exactly the pages of a marked region, with exactly its
//!   rights, makes that region valid again (deferred → valid, one compare-and-swap that a
//!   racing flush may win instead) and returns its keys: no new key, no page check, no system
//!   call. The pool finds the region by its pages in its lists (`relaxed_lists.rs`). Nothing
//!   becomes reachable that was not: the marked region's keys never stopped working (the
//!   window of vulnerability below), and they reach the same bytes with the same rights. This
//!   makes a loop of registrations of the same buffers, the common case relaxed regions are
//!   for, cost a lock and a hash lookup.
//! * [`MrTable::flush_relaxed`] looks at the tag of every key of the pool and invalidates each
//!   marked region exactly as [`MrTable::deregister`] does (tag deferred → invalidating by
//!   compare-and-swap, then the slot's exclusive lock, which waits for every accessor inside)
//!   and returns its index to the pool. Its cost grows with the pool's capacity, not with the
//!   number of marked regions. Concurrent flushes are serialised, so a flush never returns
//!   while a region marked before it began is still being invalidated by another.
//! * Pool pressure: when a registration finds no free index and at least `flush_threshold`
//!   regions are marked, it flushes them itself (one batch) and takes an index. With fewer
//!   marked regions it fails with `EAGAIN` (the caller may flush and retry); with none marked
//!   (every index holds a live region) with `ENOMEM`.
//!
//! # The window of vulnerability
//!
//! From the moment [`MrTable::deregister_relaxed`] returns until the moment the next
//! [`MrTable::flush_relaxed`] of the pool (or an automatic batch flush that takes the region)
//! returns, **the region's keys keep working exactly as before** — lkey and rkey, every right
//! it was registered with, over its whole page-rounded range: a peer's RDMA READ, WRITE or
//! atomic and a local SGE may read or write the memory during that time, and such an access
//! completes successfully. (Only new memory-window binds are refused at once.) When the
//! invalidation of a region begins, new accesses through its keys fail at once (Remote Access
//! Error for a peer); accesses already inside finish first. After `flush_relaxed` returns, no
//! access through any key of any region marked before the flush began can touch memory any
//! more, now or later: the memory may be freed. A caller that frees the memory of a relaxed
//! region before a flush has covered it lets the NIC write freed memory (and a registration
//! that takes the region back trusts the page check made when it was first registered). A
//! region taken back is live again; its next deregistration opens a new window.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::check::{check_index, tag, tag_key, tag_state, Entry, MemPtr, State};
use super::relaxed_lists::{Lists, Pages};
use super::{pages, write, Access, MrKeys, MrTable, PdHandle};
use crate::error::{Error, Result};

/// The last pool id handed out, process-wide so that a pool of one table never matches the
/// slots of another.
static POOL_IDS: AtomicU32 = AtomicU32::new(0);

/// The page size the range of a relaxed region is rounded out to.
pub const RELAXED_PAGE: usize = pages::PAGE;

/// The pre-allocated keys of one PD's relaxed regions (see the module doc).
pub struct RelaxedPool {
    /// Non-zero; stored in the slots it owns.
    id: u32,
    /// The table index at each position (`relaxed_lists.rs`).
    indices: Box<[u32]>,
    pd: PdHandle,
    flush_threshold: usize,
    lists: Mutex<Lists>,
    /// Held for the whole of a flush.
    flushing: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RelaxedPool {
    /// The PD the pool's regions belong to.
    pub fn pd(&self) -> PdHandle {
        self.pd
    }

    /// How many indices are free for a registration now.
    pub fn available(&self) -> usize {
        lock(&self.lists).free()
    }
}

impl MrTable {
    /// A pool of `capacity` keys for the relaxed regions of `pd`, taken from the free list now.
    /// A registration that finds the pool empty flushes on its own when at least
    /// `flush_threshold` regions are marked (0 behaves as 1; above `capacity`, never).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `capacity` is 0; `ENOMEM` if the table has fewer free indices.
    pub fn relaxed_pool(
        &self,
        pd: PdHandle,
        capacity: usize,
        flush_threshold: usize,
    ) -> Result<RelaxedPool> {
        if capacity == 0 {
            return Err(Error::InvalidArgument("empty relaxed pool"));
        }
        let id = POOL_IDS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if id == 0 {
            return Err(Error::NoMemory("relaxed pool ids exhausted"));
        }
        let mut free = self.free_list();
        if free.len() < capacity {
            return Err(Error::NoMemory("not enough free keys for the relaxed pool"));
        }
        let taken: Vec<u32> = (0..capacity).filter_map(|_| free.take()).collect();
        drop(free);
        for &index in &taken {
            self.slots[index as usize - 1]
                .pool
                .store(id, Ordering::Release);
        }
        Ok(RelaxedPool {
            id,
            pd,
            flush_threshold: flush_threshold.max(1),
            lists: Mutex::new(Lists::new(taken.len())),
            indices: taken.into_boxed_slice(),
            flushing: Mutex::new(()),
        })
    }

    /// `ibv_reg_mr_relaxed`: registers the pages around `addr..addr + len` for the pool's PD
    /// with a key from the pool, or takes back a marked region of exactly those pages and
    /// rights (module doc).
    ///
    /// # Safety
    ///
    /// As [`register`](Self::register), for the whole page-rounded range, and until a
    /// [`flush_relaxed`](Self::flush_relaxed) that follows
    /// [`deregister_relaxed`](Self::deregister_relaxed) of the key has returned.
    ///
    /// # Errors
    ///
    /// - `EINVAL`: bad access flags (as `ibv_reg_mr`), `ZERO_BASED`, `len` 0, `addr` null,
    ///   overflow; the pool belongs to another table.
    /// - `EOPNOTSUPP`: `FLUSH_PERSISTENT`.
    /// - `EFAULT`: a page is not mapped, or not writable with `LOCAL_WRITE` (`pages.rs`).
    /// - `EAGAIN`: no free key and some are held by regions awaiting invalidation (fewer than
    ///   the pool's flush threshold): flush and retry.
    /// - `ENOMEM`: every key of the pool holds a live region.
    pub unsafe fn register_relaxed(
        &self,
        pool: &RelaxedPool,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MrKeys> {
        let access = access.check_for_mr()?;
        if access.contains(Access::ZERO_BASED) {
            return Err(Error::InvalidArgument("zero-based relaxed regions"));
        }
        if len == 0 {
            return Err(Error::InvalidArgument("zero-length memory region"));
        }
        if addr.is_null() {
            return Err(Error::InvalidArgument("null address"));
        }
        let (start, rounded) = pages::page_range(addr as usize, len)?;
        let pages = Pages {
            start,
            len: rounded,
            access: access.bits(),
        };
        if let Some(keys) = self.take_back(pool, pages) {
            return Ok(keys);
        }
        pages::fault_in(start, rounded, access.contains(Access::LOCAL_WRITE))?;
        let pos = self.pool_take(pool, pages)?;
        let index = pool.indices[pos as usize];
        let Some(slot) = self.slots.get(index as usize - 1) else {
            lock(&pool.lists).put_back(pos);
            return Err(Error::InvalidArgument("relaxed pool of another table"));
        };
        if slot.pool.load(Ordering::Acquire) != pool.id {
            lock(&pool.lists).put_back(pos);
            return Err(Error::InvalidArgument("relaxed pool of another table"));
        }
        let mut entry = write(&slot.entry);
        let key = self.next_key(index);
        *entry = Entry {
            pd: pool.pd,
            access,
            // Same allocation as `addr` (the caller lends the whole pages).
            addr: MemPtr(addr.wrapping_sub(addr as usize - start)),
            len: rounded,
            iova: start as u64,
            window: None,
            file_backed: false,
            implicit: false,
        };
        slot.bound_windows.store(0, Ordering::Relaxed);
        slot.tag.store(tag(key, State::Valid), Ordering::Release);
        drop(entry);
        Ok(MrKeys {
            lkey: key,
            rkey: key,
        })
    }

    /// The keys of a marked region of the pool that covers exactly `pages`, made valid again
    /// (see the module doc), or `None`.
    fn take_back(&self, pool: &RelaxedPool, pages: Pages) -> Option<MrKeys> {
        let lists = lock(&pool.lists);
        // Each region over these pages, newest first: deferred → valid, unless it is live or
        // a flush took it first (deferred → invalidating).
        for pos in lists.find(pages) {
            let slot = &self.slots[pool.indices[pos as usize] as usize - 1];
            let t = slot.tag.load(Ordering::Acquire);
            if tag_state(t) != State::Deferred {
                continue;
            }
            let key = tag_key(t);
            let valid = tag(key, State::Valid);
            if slot
                .tag
                .compare_exchange(t, valid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Some(MrKeys {
                    lkey: key,
                    rkey: key,
                });
            }
        }
        None
    }

    /// How many regions of `pool` are deregistered and wait for a flush (their tags say
    /// deferred).
    pub fn relaxed_marked(&self, pool: &RelaxedPool) -> usize {
        pool.indices
            .iter()
            .filter(|&&index| {
                let t = self.slots[index as usize - 1].tag.load(Ordering::Acquire);
                tag_state(t) == State::Deferred
            })
            .count()
    }

    /// A free position of the pool for a region that covers `pages`, flushing a batch under
    /// pressure.
    fn pool_take(&self, pool: &RelaxedPool, pages: Pages) -> Result<u32> {
        for _ in 0..2 {
            let mut lists = lock(&pool.lists);
            if let Some(pos) = lists.take(pages) {
                return Ok(pos);
            }
            drop(lists);
            let marked = self.relaxed_marked(pool);
            if marked == 0 {
                return Err(Error::NoMemory("every key of the relaxed pool is in use"));
            }
            if marked < pool.flush_threshold {
                return Err(Error::TryAgain(
                    "relaxed pool exhausted by regions awaiting invalidation",
                ));
            }
            self.flush_relaxed(pool);
        }
        Err(Error::TryAgain(
            "relaxed pool exhausted by regions awaiting invalidation",
        ))
    }

    /// `ibv_dereg_mr_relaxed`: marks the region of `key` for invalidation and returns at once.
    /// Its keys keep working until a flush covers it (see the module doc's window of
    /// vulnerability).
    ///
    /// # Errors
    ///
    /// - `EINVAL`: `key` is not the key of a live relaxed region of this pool.
    /// - `EBUSY`: a memory window is bound to the region.
    pub fn deregister_relaxed(&self, pool: &RelaxedPool, key: u32) -> Result<()> {
        const INVALID: Error = Error::InvalidArgument("not a registered relaxed memory region");
        const BUSY: Error = Error::Busy("memory windows are bound to the memory region");
        let index = check_index(key, self.slots.len()).map_err(|_| INVALID)?;
        let slot = &self.slots[index - 1];
        if slot.pool.load(Ordering::Acquire) != pool.id {
            return Err(INVALID);
        }
        let valid = tag(key, State::Valid);
        if slot.bound_windows.load(Ordering::SeqCst) != 0 {
            return Err(BUSY);
        }
        if slot
            .tag
            .compare_exchange(
                valid,
                tag(key, State::Deferred),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_err()
        {
            return Err(INVALID);
        }
        // A bind may have raced in (as in `deregister`).
        if slot.bound_windows.load(Ordering::SeqCst) != 0 {
            slot.tag.store(valid, Ordering::SeqCst);
            return Err(BUSY);
        }
        Ok(())
    }

    /// `ibv_flush_relaxed_mr`: invalidates every region of the pool marked by
    /// [`deregister_relaxed`](Self::deregister_relaxed) and returns when no key of any of them
    /// reaches memory (each waits for the accessors already inside it). Returns how many it
    /// invalidated (possibly 0: another flush may have taken them, and this one waited for it).
    pub fn flush_relaxed(&self, pool: &RelaxedPool) -> usize {
        let _flushing = lock(&pool.flushing);
        let mut freed = 0;
        for (pos, &index) in pool.indices.iter().enumerate() {
            let Some(slot) = self.slots.get(index as usize - 1) else {
                continue;
            };
            let t = slot.tag.load(Ordering::Acquire);
            if slot.pool.load(Ordering::Acquire) != pool.id || tag_state(t) != State::Deferred {
                continue;
            }
            let key = tag_key(t);
            let invalidating = tag(key, State::Invalidating);
            if slot
                .tag
                .compare_exchange(t, invalidating, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                continue;
            }
            // Waits for every accessor inside a closure.
            let mut entry = write(&slot.entry);
            *entry = Entry::EMPTY;
            slot.tag.store(tag(key, State::Free), Ordering::Release);
            drop(entry);
            lock(&pool.lists).put_back(pos as u32);
            freed += 1;
        }
        freed
    }

    /// Gives the pool's keys back to the table after flushing it.
    ///
    /// # Errors
    ///
    /// `EBUSY` if relaxed regions of the pool are still registered (not deregistered).
    pub fn release_relaxed_pool(&self, pool: &RelaxedPool) -> Result<()> {
        self.flush_relaxed(pool);
        if !lock(&pool.lists).release() {
            return Err(Error::Busy("relaxed memory regions are still registered"));
        }
        let mut ours = Vec::with_capacity(pool.indices.len());
        for &index in pool.indices.iter() {
            if let Some(slot) = self.slots.get(index as usize - 1) {
                if slot.pool.load(Ordering::Acquire) == pool.id {
                    slot.pool.store(0, Ordering::Release);
                    ours.push(index);
                }
            }
        }
        self.free_list().extend(ours);
        Ok(())
    }
}
