//! Memory windows (IBTA Vol. 1, 10.6.7 "Memory windows"; rdma-core `ibv_alloc_mw(3)`,
//! `ibv_bind_mw(3)`; the kernel's rxe `rxe_mw.c`).
//!
//! A window is a slot of the key table, like a region, so its R_Key comes from the same index
//! space. It gives peers access to a range of a region it is *bound* to, with its own rights:
//!
//! * **Type 1** (`ibv_alloc_mw` + `ibv_bind_mw`): associated with its PD. Each bind makes a new
//!   R_Key (the consumer's `ibv_inc_rkey`); a zero-length bind unbinds it. It cannot be
//!   invalidated (o10-37.2.26), only rebound or deallocated.
//! * **Type 2** (bound by an `IBV_WR_BIND_MW` work request): associated with the QP that bound
//!   it (type 2A: C10-72 wants the QP in the window's PD, and remote accesses must arrive on
//!   that QP). The consumer picks the key byte of the new R_Key. It must be unbound to be
//!   bound (o10-37.2.30), a zero-length bind is refused (o10-37.2.40), and `IBV_WR_LOCAL_INV`
//!   or a peer's SEND with Invalidate unbinds it.
//!
//! # Bind checks (in order; the first failure is `EINVAL`)
//!
//! The window's key (its current R_Key) names a window of the binder's PD; its state suits its
//! type (above); the access asked is only remote read/write/atomic (`LOCAL_WRITE` is accepted
//! and dropped: a window has no L_Key; `ZERO_BASED` windows are not supported: refused as
//! o10-36.2.2 does for type 1); for a non-zero length, `mr_lkey`
//! names a registered region of the same PD with `MW_BIND` (C10-73), not zero-based (as
//! rxe), with `LOCAL_WRITE` if the window gives remote write or atomic (C10-74), and the range
//! inside the region (C10-75).
//!
//! # Access through a window
//!
//! The window's own check (key, state, PD, QP for type 2, its rights, its range, atomic
//! alignment), then the region's (key, state, PD, its range; no right of its own, see
//! [`Op::BehindWindow`]). The accessor holds the window's read lock, then the region's lock
//! (window before region, everywhere): binding, invalidation and deallocation take the
//! window's write lock, so they wait for accesses inside the window, and a region cannot be
//! deregistered while a window is bound to it (`EBUSY`), so the region outlives every access
//! through its windows.

use std::sync::atomic::Ordering;

use super::check::{
    check_index, check_range, check_tag, tag, tag_key, tag_state, Entry, MemPtr, Op, State,
    WindowEntry,
};
use super::{read, write, Access, AccessError, MrTable, PdHandle};
use crate::error::{Error, Result};

/// The type of a memory window (`enum ibv_mw_type`: `IBV_MW_TYPE_1` = 1, `IBV_MW_TYPE_2` = 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MwType {
    /// Bound by `ibv_bind_mw`, associated with the PD.
    Type1 = 1,
    /// Bound by a BIND_MW work request, associated with the QP that bound it (type 2A).
    Type2 = 2,
}

/// A bind (`struct ibv_mw_bind` / the `bind_mw` member of `ibv_send_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MwBind {
    /// The window's current R_Key (`mw->rkey`).
    pub mw_rkey: u32,
    /// The R_Key the window gets: its low 8 bits are the new key byte (`ibv_inc_rkey`).
    pub rkey: u32,
    /// The L_Key of the region (`bind_info.mr`); unused for a zero-length (type 1) unbind.
    pub mr_lkey: u32,
    /// Start of the window in the region's address space (`bind_info.addr`).
    pub addr: u64,
    /// Length in bytes (`bind_info.length`); 0 unbinds a type 1 window.
    pub length: u64,
    /// The window's rights (`bind_info.mw_access_flags`): remote read, write, atomic.
    pub access: Access,
}

/// The rights a window may give.
const WINDOW_RIGHTS: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// The flags a bind may carry beyond the window's rights: `LOCAL_WRITE`, which consumers
/// often pass along with `REMOTE_WRITE` as they do for a region (rxe and mlx5 accept it). A
/// window has no L_Key, so a local right gives nothing and is dropped.
const IGNORED_LOCAL: Access = Access::LOCAL_WRITE;

const NOT_A_WINDOW: Error = Error::InvalidArgument("not a memory window of this PD");

impl MrTable {
    /// Allocates a memory window of `mw_type` for `pd` (`ibv_alloc_mw`); returns its R_Key,
    /// which reaches nothing until the window is bound.
    ///
    /// # Errors
    /// `ENOMEM` when the table (regions and windows together) is full.
    pub fn alloc_window(&self, pd: PdHandle, mw_type: MwType) -> Result<u32> {
        let index = self.free_list().take().ok_or(Error::NoMemory(
            "max_mr reached (windows share the key table)",
        ))?;
        let slot = &self.slots[index as usize - 1];
        let mut entry = write(&slot.entry);
        let key = self.next_key(index);
        *entry = Entry {
            pd,
            window: Some(WindowEntry {
                mw_type,
                mr_key: 0,
                qpn: 0,
            }),
            ..Entry::EMPTY
        };
        slot.tag.store(tag(key, State::Unbound), Ordering::Release);
        Ok(key)
    }

    /// The slot at `key`'s index (the caller checks that it holds a window of its PD).
    fn window_slot(&self, key: u32) -> Result<&super::Slot> {
        let index = check_index(key, self.slots.len()).map_err(|_| NOT_A_WINDOW)?;
        Ok(&self.slots[index - 1])
    }

    /// Deallocates the window at `rkey`'s index (`ibv_dealloc_mw`), unbinding it first. The
    /// window is named by its index only: its key byte may have changed by a bind the caller
    /// posted. Waits for accesses inside the window.
    ///
    /// # Errors
    /// `EINVAL` if no window of `pd` is at that index.
    pub fn dealloc_window(&self, pd: PdHandle, rkey: u32) -> Result<()> {
        let index = check_index(rkey, self.slots.len()).map_err(|_| NOT_A_WINDOW)?;
        let slot = &self.slots[index - 1];
        let mut entry = write(&slot.entry);
        let t = slot.tag.load(Ordering::Acquire);
        if entry.window.is_none() || entry.pd != pd || tag_state(t) == State::Free {
            return Err(NOT_A_WINDOW);
        }
        self.release_binding(t, &mut entry);
        *entry = Entry::EMPTY;
        slot.tag
            .store(tag(tag_key(t), State::Free), Ordering::Release);
        drop(entry);
        self.free_list().put(index as u32);
        Ok(())
    }

    /// If the window of tag `t` is bound, forgets the binding (the region's count goes down).
    fn release_binding(&self, t: u64, entry: &mut Entry) {
        if tag_state(t) != State::Bound {
            return;
        }
        if let Some(w) = &mut entry.window {
            // Cannot fail: a bound window keeps its region registered.
            let _ = self.window_unbound(w.mr_key);
            w.mr_key = 0;
            w.qpn = 0;
        }
        entry.access = Access::empty();
        entry.iova = 0;
        entry.len = 0;
    }

    /// Binds the window `bind.mw_rkey` for a QP of `pd` numbered `qpn` (`ibv_bind_mw`, or an
    /// `IBV_WR_BIND_MW` work request executed on that QP's send queue). Returns the window's
    /// new R_Key. The checks are the module doc's.
    ///
    /// # Errors
    /// `EINVAL` for the first failed check; the window is then unchanged.
    pub fn bind_window(&self, pd: PdHandle, qpn: u32, bind: &MwBind) -> Result<u32> {
        let slot = self.window_slot(bind.mw_rkey)?;
        let mut entry = write(&slot.entry);
        let t = slot.tag.load(Ordering::Acquire);
        let Some(w) = entry.window else {
            return Err(NOT_A_WINDOW);
        };
        if tag_key(t) != bind.mw_rkey || entry.pd != pd || tag_state(t) == State::Free {
            return Err(NOT_A_WINDOW);
        }
        if !WINDOW_RIGHTS.union(IGNORED_LOCAL).contains(bind.access) {
            return Err(Error::InvalidArgument(
                "a window's rights are remote read, write and atomic (zero-based windows are not supported)",
            ));
        }
        if w.mw_type == MwType::Type2 {
            if tag_state(t) != State::Unbound {
                return Err(Error::InvalidArgument(
                    "a type 2 window must be unbound to be bound (o10-37.2.30)",
                ));
            }
            if bind.length == 0 {
                return Err(Error::InvalidArgument(
                    "a type 2 window cannot be bound with length 0 (o10-37.2.40)",
                ));
            }
        }
        let new_key = bind.mw_rkey & !0xff | bind.rkey & 0xff;
        if bind.length == 0 {
            // Type 1: a zero-length bind unbinds (ibv_bind_mw(3)), with a new R_Key.
            self.release_binding(t, &mut entry);
            slot.tag
                .store(tag(new_key, State::Unbound), Ordering::Release);
            return Ok(new_key);
        }
        self.check_bind_region(pd, bind)?;
        // Counted before the old binding is released, so a rebind to the same region never
        // lets its count touch zero.
        self.window_bound(bind.mr_lkey)?;
        self.release_binding(t, &mut entry);
        *entry = Entry {
            pd,
            access: bind.access.intersection(WINDOW_RIGHTS),
            addr: MemPtr(core::ptr::null_mut()),
            len: bind.length as usize,
            iova: bind.addr,
            window: Some(WindowEntry {
                mw_type: w.mw_type,
                mr_key: bind.mr_lkey,
                qpn: if w.mw_type == MwType::Type2 { qpn } else { 0 },
            }),
            file_backed: false,
            implicit: false,
        };
        slot.tag
            .store(tag(new_key, State::Bound), Ordering::Release);
        Ok(new_key)
    }

    /// The region checks of a bind (C10-73, C10-74, C10-75), under the region's read lock.
    fn check_bind_region(&self, pd: PdHandle, bind: &MwBind) -> Result<()> {
        const NOT_A_REGION: Error =
            Error::InvalidArgument("not a registered memory region of the PD");
        let index = check_index(bind.mr_lkey, self.slots.len()).map_err(|_| NOT_A_REGION)?;
        let slot = &self.slots[index - 1];
        // Before locking: the caller holds the window's lock, and `mr_lkey` may name it.
        if slot.tag.load(Ordering::Acquire) != tag(bind.mr_lkey, State::Valid) {
            return Err(NOT_A_REGION);
        }
        let entry = read(&slot.entry);
        let t = slot.tag.load(Ordering::Acquire);
        if tag(bind.mr_lkey, State::Valid) != t || entry.window.is_some() || entry.pd != pd {
            return Err(NOT_A_REGION);
        }
        if !entry.access.contains(Access::MW_BIND) {
            return Err(Error::InvalidArgument(
                "the memory region lacks MW_BIND access (C10-73)",
            ));
        }
        if entry.access.contains(Access::ZERO_BASED) {
            return Err(Error::InvalidArgument(
                "windows cannot be bound to a zero-based memory region",
            ));
        }
        if bind
            .access
            .intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !entry.access.contains(Access::LOCAL_WRITE)
        {
            return Err(Error::InvalidArgument(
                "a writable window needs LOCAL_WRITE on the memory region (C10-74)",
            ));
        }
        let inside = usize::try_from(bind.length)
            .is_ok_and(|len| check_range(&entry, Op::BehindWindow, bind.addr, len).is_ok());
        if !inside {
            return Err(Error::InvalidArgument(
                "the window is not inside the memory region (C10-75)",
            ));
        }
        Ok(())
    }

    /// Invalidates the type 2 window `rkey` (`IBV_WR_LOCAL_INV` posted on a QP of `pd`, or a
    /// SEND with Invalidate arriving on QP `remote_qpn`, which must be the one the window is
    /// bound to). Waits for accesses inside the window.
    ///
    /// softrnic has no memory regions that can be invalidated (IBTA's fast-registered
    /// regions; a region of `ibv_reg_mr` cannot be, as rxe's `rxe_invalidate_mr` refuses
    /// `IB_MR_TYPE_USER`), so a region's key is refused.
    ///
    /// # Errors
    /// `EINVAL`: `rkey` is not the R_Key of a bound type 2 window of `pd` (a region's key, a
    /// type 1 window (o10-37.2.26), an unbound or stale one), or the QP is not the window's.
    pub fn invalidate(&self, pd: PdHandle, rkey: u32, remote_qpn: Option<u32>) -> Result<()> {
        const INVALID: Error = Error::InvalidArgument("not the R_Key of a bound type 2 window");
        let slot = self.window_slot(rkey)?;
        let mut entry = write(&slot.entry);
        let t = slot.tag.load(Ordering::Acquire);
        let Some(w) = entry.window else {
            return Err(INVALID);
        };
        if t != tag(rkey, State::Bound) || w.mw_type != MwType::Type2 || entry.pd != pd {
            return Err(INVALID);
        }
        if remote_qpn.is_some_and(|qpn| qpn != w.qpn) {
            return Err(Error::InvalidArgument("the window is bound to another QP"));
        }
        self.release_binding(t, &mut entry);
        slot.tag.store(tag(rkey, State::Unbound), Ordering::Release);
        Ok(())
    }
}

/// The window's own check (see the module doc): returns the key of the region behind it.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_window(
    tag: u64,
    entry: &Entry,
    key: u32,
    pd: PdHandle,
    qpn: u32,
    op: Op,
    va: u64,
    len: usize,
) -> core::result::Result<u32, AccessError> {
    check_tag(tag, key)?;
    let Some(w) = entry.window else {
        return Err(AccessError::NotRegistered);
    };
    if !matches!(op, Op::RemoteRead | Op::RemoteWrite | Op::RemoteAtomic) {
        return Err(AccessError::NotRegistered); // a window has no L_Key
    }
    if entry.pd != pd {
        return Err(AccessError::PdMismatch);
    }
    if w.mw_type == MwType::Type2 && w.qpn != qpn {
        return Err(AccessError::QpMismatch);
    }
    let needed = op.needed();
    if !entry.access.contains(needed) {
        return Err(AccessError::MissingRight(needed));
    }
    check_range(entry, op, va, len)?;
    Ok(w.mr_key)
}
