//! Reregistration of a memory region (IBTA 10.6.3.7 "Reregister Memory Region";
//! `ibv_rereg_mr(3)`): change a region's translation (address, length, iova), its PD and/or
//! its access rights in place, keeping its index.
//!
//! The change is made like a deregistration: the tag goes to "invalidating" (new lookups fail
//! at once), the exclusive lock waits for accessors already inside, the entry changes, and the
//! tag comes back valid. Every access checks the key's entry as it is then, so from that
//! moment none uses the old rights, PD or range.
//!
//! The keys (`ibv_rereg_mr` reports them in `mr->lkey`/`rkey`; the man page lets it reuse
//! resources "where possible"):
//!
//! * **A change of rights or PD only keeps them**, as rxe (`rxe_rereg_user_mr`) and mlx5 (a
//!   UMR on the same mkey) do: a peer that holds the R_Key sees the new rights at once (a
//!   right taken away fails, a right given works), with no key to exchange again.
//! * **A new translation gives new keys**: the slot's next key (same index, the next
//!   generation's random bits, `mr` module doc), so the old L_Key and R_Key die exactly as at
//!   deregistration. A work request
//!   still carrying an old key completes in error rather than reaching whatever memory the
//!   new translation has at its old address.
//!
//! Refused, with the region left as it was: a key that is not a valid normal region's
//! (`EINVAL`; relaxed regions have their own life cycle), bound memory windows (`EBUSY`: a
//! window's range was checked against the old translation and rights), bad new access flags
//! or translation (`EINVAL`), persistence rights on anything but a mapped file
//! (`EOPNOTSUPP`), new memory that is not mapped or not writable as the rights need
//! (`EFAULT`, `pages.rs`). A new translation is anonymous memory: it is no longer file-backed.

use std::sync::atomic::Ordering;

use super::check::{check_index, tag, MemPtr, State};
use super::{pages, read, write, Access, MrKeys, MrTable, PdHandle};
use crate::error::{Error, Result};

/// What [`MrTable::reregister`] changes (`IBV_REREG_MR_CHANGE_*`); `None` keeps it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rereg {
    /// `IBV_REREG_MR_CHANGE_TRANSLATION`: the new address, length and iova.
    pub translation: Option<Translation>,
    /// `IBV_REREG_MR_CHANGE_PD`.
    pub pd: Option<PdHandle>,
    /// `IBV_REREG_MR_CHANGE_ACCESS`.
    pub access: Option<Access>,
}

/// A region's memory: `len` bytes at `addr`, addressed by peers from `iova`.
#[derive(Debug, Clone, Copy)]
pub struct Translation {
    /// First byte.
    pub addr: *mut u8,
    /// Length in bytes.
    pub len: usize,
    /// The address peers use for the first byte.
    pub iova: u64,
}

impl MrTable {
    /// Changes the region of `key` as `change` says and returns its keys: the same unless the
    /// translation changes (module doc).
    ///
    /// # Safety
    ///
    /// With a new translation: as [`register`](Self::register), for the new memory, until
    /// the region is deregistered or reregistered again. (The old memory is no longer
    /// reached once this returns.)
    ///
    /// # Errors
    ///
    /// See the module comment; on any error the region is unchanged and its keys still work.
    pub unsafe fn reregister(&self, key: u32, change: Rereg) -> Result<MrKeys> {
        const INVALID: Error = Error::InvalidArgument("not a registered memory region");
        let index = check_index(key, self.slots.len()).map_err(|_| INVALID)?;
        let slot = &self.slots[index - 1];
        let valid = tag(key, State::Valid);
        if slot.tag.load(Ordering::Acquire) != valid || slot.pool.load(Ordering::Acquire) != 0 {
            return Err(INVALID);
        }
        if read(&slot.entry).implicit {
            // Its translation is the whole address space; mlx5 refuses to change it too.
            return Err(Error::NotSupported("reregistering an implicit ODP region"));
        }
        let access = change.access.map(Access::check_for_mr).transpose()?;
        if let Some(t) = change.translation {
            check_translation(t, access.unwrap_or(Access::empty()))?;
        }
        self.fault_in_changed(slot, change, access)?;
        if slot.bound_windows.load(Ordering::SeqCst) != 0 {
            return Err(Error::Busy("memory windows are bound to the memory region"));
        }
        let invalidating = tag(key, State::Invalidating);
        if slot
            .tag
            .compare_exchange(valid, invalidating, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(INVALID);
        }
        if slot.bound_windows.load(Ordering::SeqCst) != 0 {
            slot.tag.store(valid, Ordering::SeqCst);
            return Err(Error::Busy("memory windows are bound to the memory region"));
        }
        // Waits for every accessor inside a closure.
        let mut entry = write(&slot.entry);
        let file_backed = entry.file_backed && change.translation.is_none();
        let new_access = access.unwrap_or(entry.access);
        if new_access.contains(Access::FLUSH_PERSISTENT) && !file_backed {
            slot.tag.store(valid, Ordering::SeqCst);
            return Err(Error::NotSupported(
                "persistence is for regions that map a file",
            ));
        }
        entry.access = new_access;
        entry.file_backed = file_backed;
        if let Some(pd) = change.pd {
            entry.pd = pd;
        }
        if let Some(t) = change.translation {
            entry.addr = MemPtr(t.addr);
            entry.len = t.len;
            entry.iova = if new_access.contains(Access::ZERO_BASED) {
                0
            } else {
                t.iova
            };
        }
        let new_key = if change.translation.is_some() {
            self.next_key(index as u32)
        } else {
            key
        };
        slot.tag
            .store(tag(new_key, State::Valid), Ordering::Release);
        drop(entry);
        Ok(MrKeys {
            lkey: new_key,
            rkey: new_key,
        })
    }
}

impl MrTable {
    /// Faults in the pages the region will cover (`pages.rs`): a new translation, or the old
    /// one when the new access makes it writable.
    fn fault_in_changed(
        &self,
        slot: &super::Slot,
        change: Rereg,
        access: Option<Access>,
    ) -> Result<()> {
        let (addr, len, old) = {
            let e = read(&slot.entry);
            (e.addr.0 as usize, e.len, e.access)
        };
        let new = access.unwrap_or(old);
        let writable = new.contains(Access::LOCAL_WRITE);
        match change.translation {
            Some(t) => pages::fault_in(t.addr as usize, t.len, writable),
            None if writable && !old.contains(Access::LOCAL_WRITE) => {
                pages::fault_in(addr, len, true)
            }
            None => Ok(()),
        }
    }
}

/// The checks [`MrTable::register`] makes of a new range.
fn check_translation(t: Translation, access: Access) -> Result<()> {
    if t.len == 0 {
        return Err(Error::InvalidArgument("zero-length memory region"));
    }
    if t.addr.is_null() {
        return Err(Error::InvalidArgument("null address"));
    }
    if t.len > isize::MAX as usize || (t.addr as usize).checked_add(t.len).is_none() {
        return Err(Error::InvalidArgument("addr + length overflows"));
    }
    let iova = if access.contains(Access::ZERO_BASED) {
        0
    } else {
        t.iova
    };
    if iova.checked_add(t.len as u64).is_none() {
        return Err(Error::InvalidArgument("iova + length overflows"));
    }
    Ok(())
}
