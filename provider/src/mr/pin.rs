//! Pins: read access to registered memory that outlives a closure, so that the driver can
//! hand payload straight from registered memory to `sendmmsg` (a batch of packets, each
//! pinning its own pieces), with no intermediate copy.
//!
//! A pin lends its bytes as [`Bytes`] (pointer and length), never as a slice: the application
//! may write its registered memory while the NIC sends from it, and a `&[u8]` would assert
//! that it does not (`bytes.rs`). So the send path reads registered memory only through raw
//! pointers: the kernel takes it by address (iovecs), the other transports copy it, and the
//! ICRC reads it through the pointer.
//!
//! A pin holds the slot's read lock, exactly as [`MrTable::with_local_read`] does while its
//! closure runs: deregistration waits until every pin of the region is dropped. Pinning only
//! *tries* the lock ([`PinError::WouldBlock`]): a thread that already holds pins must never
//! block on a read lock, since a deregistration waiting for the write lock would make that a
//! deadlock. On `WouldBlock` the caller sends what it has, drops its pins, and pins again with
//! [`MrTable::pin_read_blocking`].

use std::sync::{PoisonError, RwLockReadGuard, TryLockError};

use super::check::{check_entry, Entry, Op};
use super::{AccessError, Bytes, MrTable, PdHandle};

/// Registered bytes pinned for reading. Deregistration of the region waits until it is dropped
/// (and so do binding, invalidating or deallocating the window it was pinned through).
pub struct ReadPin<'a> {
    // Field order is drop order: the region's guard before the window's.
    _guard: RwLockReadGuard<'a, Entry>,
    _window: Option<RwLockReadGuard<'a, Entry>>,
    ptr: *const u8,
    len: usize,
    /// For an implicit region (`implicit.rs`), the copy `ptr` points into; empty otherwise.
    _copy: Vec<u8>,
}

impl core::fmt::Debug for ReadPin<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ReadPin({} bytes)", self.len)
    }
}

impl ReadPin<'_> {
    /// The pinned bytes, for as long as the pin is borrowed.
    pub fn bytes(&self) -> Bytes<'_> {
        // SAFETY: `ptr..ptr + len` passed the checks under the read lock this pin holds; the
        // registration stays valid until it drops. For an implicit region it points into
        // `_copy`, whose heap buffer moves with the pin and is never written while it lives.
        unsafe { Bytes::new(self.ptr, self.len) }
    }

    /// The number of pinned bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes are pinned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Why a pin failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinError {
    /// The access check failed: the key is dead, out of bounds, lacks the right, ...
    Access(AccessError),
    /// The region is locked for writing or a deregistration is waiting: release every pin you
    /// hold, then use [`MrTable::pin_read_blocking`].
    WouldBlock,
}

/// Whose right a pin uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinFor {
    /// The local QP's own buffer (an SGE's lkey): needs no right.
    Local,
    /// A peer's RDMA READ (an rkey) arriving on QP `qpn`: needs `REMOTE_READ`.
    RemoteRead {
        /// The QP the READ arrived on (a type 2 window admits only its own).
        qpn: u32,
    },
}

impl PinFor {
    fn op(self) -> Op {
        match self {
            PinFor::Local => Op::LocalRead,
            PinFor::RemoteRead { .. } => Op::RemoteRead,
        }
    }

    fn qpn(self) -> u32 {
        match self {
            PinFor::Local => 0,
            PinFor::RemoteRead { qpn } => qpn,
        }
    }
}

fn try_read(slot: &super::Slot) -> Result<RwLockReadGuard<'_, Entry>, PinError> {
    match slot.entry.try_read() {
        Ok(g) => Ok(g),
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(PinError::WouldBlock),
    }
}

fn read(slot: &super::Slot) -> RwLockReadGuard<'_, Entry> {
    slot.entry.read().unwrap_or_else(PoisonError::into_inner)
}

impl MrTable {
    /// Pins `len` bytes at `va` of the region of `key` for reading, if its lock is free.
    ///
    /// # Errors
    ///
    /// [`PinError::Access`] for a failed check (as the `with_*` accessors),
    /// [`PinError::WouldBlock`] if taking the lock would wait.
    pub fn try_pin_read(
        &self,
        key: u32,
        pd: PdHandle,
        why: PinFor,
        va: u64,
        len: usize,
    ) -> Result<ReadPin<'_>, PinError> {
        let slot = self.slot(key).map_err(PinError::Access)?;
        if !self.is_bound_window(slot) {
            let guard = try_read(slot)?;
            return self.finish_pin(slot, guard, None, key, pd, why, va, len);
        }
        let window = try_read(slot)?;
        let mr_key = self.check_pinned_window(slot, &window, key, pd, why, va, len)?;
        let mr = self.slot(mr_key).map_err(PinError::Access)?;
        let guard = try_read(mr)?;
        self.finish_pin(mr, guard, Some(window), mr_key, pd, why, va, len)
    }

    fn is_bound_window(&self, slot: &super::Slot) -> bool {
        let tag = slot.tag.load(std::sync::atomic::Ordering::Acquire);
        super::check::tag_state(tag) == super::check::State::Bound
    }

    #[allow(clippy::too_many_arguments)]
    fn check_pinned_window(
        &self,
        slot: &super::Slot,
        window: &Entry,
        key: u32,
        pd: PdHandle,
        why: PinFor,
        va: u64,
        len: usize,
    ) -> Result<u32, PinError> {
        let tag = slot.tag.load(std::sync::atomic::Ordering::Acquire);
        super::window::check_window(tag, window, key, pd, why.qpn(), why.op(), va, len)
            .map_err(PinError::Access)
    }

    /// Pins like [`MrTable::try_pin_read`], waiting for the lock. Call it only while holding
    /// no other pin.
    ///
    /// # Errors
    ///
    /// The first failed check (module doc of [`crate::mr`]).
    pub fn pin_read_blocking(
        &self,
        key: u32,
        pd: PdHandle,
        why: PinFor,
        va: u64,
        len: usize,
    ) -> Result<ReadPin<'_>, AccessError> {
        let access = |e| match e {
            PinError::Access(a) => a,
            PinError::WouldBlock => unreachable!("the locks are held"),
        };
        let slot = self.slot(key)?;
        if !self.is_bound_window(slot) {
            let guard = read(slot);
            return self
                .finish_pin(slot, guard, None, key, pd, why, va, len)
                .map_err(access);
        }
        let window = read(slot);
        let mr_key = self
            .check_pinned_window(slot, &window, key, pd, why, va, len)
            .map_err(access)?;
        let mr = self.slot(mr_key)?;
        let guard = read(mr);
        self.finish_pin(mr, guard, Some(window), mr_key, pd, why, va, len)
            .map_err(access)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_pin<'a>(
        &'a self,
        slot: &'a super::Slot,
        guard: RwLockReadGuard<'a, Entry>,
        window: Option<RwLockReadGuard<'a, Entry>>,
        key: u32,
        pd: PdHandle,
        why: PinFor,
        va: u64,
        len: usize,
    ) -> Result<ReadPin<'a>, PinError> {
        let tag = slot.tag.load(std::sync::atomic::Ordering::Acquire);
        let op = if window.is_some() {
            Op::BehindWindow
        } else {
            why.op()
        };
        let offset = check_entry(tag, &guard, key, pd, op, va, len).map_err(PinError::Access)?;
        if guard.implicit {
            // No slice of an implicit region: the pin holds a copy that could not fault.
            let mut copy = vec![0; len];
            super::implicit::copy_in(offset, &mut copy).map_err(PinError::Access)?;
            return Ok(ReadPin {
                _guard: guard,
                _window: window,
                ptr: copy.as_ptr(),
                len,
                _copy: copy,
            });
        }
        // SAFETY: offset..offset + len is inside the registration (checked above).
        let ptr = unsafe { guard.addr.0.add(offset) } as *const u8;
        Ok(ReadPin {
            _guard: guard,
            _window: window,
            ptr,
            len,
            _copy: Vec::new(),
        })
    }
}
