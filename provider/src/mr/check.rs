//! The ordered access check (in the manner of rxe's `lookup_mr` + `mr_check_range`), kept
//! pure so that every step is tested on its own.

use core::fmt;

use super::{Access, PdHandle};

/// Why the key table refused an access. The variants are in check order: an access that
/// fails several checks reports the first.
///
/// How the engine reports them (as rxe does):
///
/// | access | error | outcome |
/// |--------|-------|---------|
/// | local (an SGE's lkey) | any | completion `IBV_WC_LOC_PROT_ERR` |
/// | remote (an rkey in RETH/AtomicETH) | [`Misaligned`](Self::Misaligned) | NAK Invalid Request → peer's `IBV_WC_REM_INV_REQ_ERR` |
/// | remote | any other | NAK Remote Access Error → peer's `IBV_WC_REM_ACCESS_ERR` |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessError {
    /// 1. The key's index field is beyond the table, or its upper 24 bits are all zero
    ///    (reserved: no key below `0x100` is valid).
    BadIndex,
    /// 2. No memory region is registered at the key's index.
    NotRegistered,
    /// 3. The key's 8-bit key part is not the current one: a stale key of an earlier
    ///    registration of the index.
    KeyMismatch,
    /// 4. The region is being deregistered: its keys are dead.
    Invalidated,
    /// 4. The key names a memory window that is not bound (never bound, unbound by a
    ///    zero-length type 1 bind, or invalidated): its R_Key reaches nothing.
    Unbound,
    /// 5. The region belongs to another protection domain than the QP.
    PdMismatch,
    /// 5. A type 2 window is bound to another QP than the one the access arrived on (IBTA
    ///    10.6.7.2.2: a type 2A window is associated with the QP that bound it).
    QpMismatch,
    /// 6. The region lacks a right the operation needs (the `Access` it needs).
    MissingRight(Access),
    /// 7. `va..va + len` is not inside the region, or `va + len` overflows.
    OutOfBounds,
    /// 8. An atomic's `va` is not 8-byte aligned (atomics work on naturally aligned 64-bit
    ///    words; rxe answers a misaligned one with NAK Invalid Request).
    Misaligned,
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessError::BadIndex => write!(f, "key index out of range"),
            AccessError::NotRegistered => write!(f, "no memory region at the key's index"),
            AccessError::KeyMismatch => write!(f, "stale key (key byte mismatch)"),
            AccessError::Invalidated => write!(f, "memory region is being deregistered"),
            AccessError::Unbound => write!(f, "memory window not bound"),
            AccessError::PdMismatch => write!(f, "protection domain mismatch"),
            AccessError::QpMismatch => write!(f, "type 2 memory window bound to another QP"),
            AccessError::MissingRight(a) => write!(f, "memory region lacks {a:?}"),
            AccessError::OutOfBounds => write!(f, "access outside the memory region"),
            AccessError::Misaligned => write!(f, "atomic address not 8-byte aligned"),
        }
    }
}

impl std::error::Error for AccessError {}

/// What the engine wants to do with the memory; decides the right it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Read through an lkey (a SEND's or RDMA WRITE's source): always allowed.
    LocalRead,
    /// Write through an lkey (a receive buffer, an RDMA READ's sink): `LOCAL_WRITE`.
    LocalWrite,
    /// A peer's RDMA READ: `REMOTE_READ`.
    RemoteRead,
    /// A peer's RDMA WRITE: `REMOTE_WRITE`.
    RemoteWrite,
    /// A peer's compare-and-swap or fetch-and-add: `REMOTE_ATOMIC`, 8-byte aligned.
    RemoteAtomic,
    /// A peer's ATOMIC WRITE (IBTA 1.5): `REMOTE_WRITE` (as rxe's `check_rkey`), 8-byte
    /// aligned.
    RemoteAtomicWrite,
    /// A peer's FLUSH (IBTA 1.5): `FLUSH_GLOBAL` and/or `FLUSH_PERSISTENT`, as its placement
    /// type asks (the `Access` carried).
    RemoteFlush(Access),
    /// The region behind a bound memory window, for an access the window's own check allowed:
    /// no right of the region's is needed (the bind checked the window's rights against the
    /// region's, IBTA C10-74), only its key, state, PD and bounds.
    BehindWindow,
}

impl Op {
    pub(super) fn needed(self) -> Access {
        match self {
            Op::LocalRead => Access::empty(),
            Op::LocalWrite => Access::LOCAL_WRITE,
            Op::RemoteRead => Access::REMOTE_READ,
            Op::RemoteWrite => Access::REMOTE_WRITE,
            Op::RemoteAtomic => Access::REMOTE_ATOMIC,
            Op::RemoteAtomicWrite => Access::REMOTE_WRITE,
            Op::RemoteFlush(needed) => needed,
            Op::BehindWindow => Access::empty(),
        }
    }
}

/// The life of a slot. Stored in the low byte of the slot's tag, beside its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum State {
    /// No region; the tag keeps the last key so that the next one differs.
    Free = 0,
    /// Registered; its keys work.
    Valid = 1,
    /// Deregistration has begun: keys are dead, accessors already inside may finish.
    Invalidating = 2,
    /// A relaxed region (`relaxed.rs`) deregistered by the application but not yet
    /// invalidated; keys still work until the deferred invalidation is flushed.
    Deferred = 3,
    /// A memory window, allocated and not bound: its R_Key reaches nothing.
    Unbound = 4,
    /// A memory window bound to a region: its R_Key works within the window.
    Bound = 5,
}

/// A slot's tag: `key << 8 | state`, one atomic word so that a compare-and-swap on it checks
/// key and state together (no ABA between a stale deregistration and a new registration).
pub(super) const fn tag(key: u32, state: State) -> u64 {
    (key as u64) << 8 | state as u64
}

/// The key of a tag.
pub(super) const fn tag_key(tag: u64) -> u32 {
    (tag >> 8) as u32
}

pub(super) fn tag_state(tag: u64) -> State {
    match tag as u8 {
        0 => State::Free,
        1 => State::Valid,
        2 => State::Invalidating,
        3 => State::Deferred,
        4 => State::Unbound,
        _ => State::Bound,
    }
}

/// The start of registered memory. Only dereferenced under the slot's lock, after the checks.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemPtr(pub *mut u8);

// SAFETY: the pointer is only dereferenced through `MrTable`'s checked accessors, while the
// slot lock pins the registration, and `MrTable::register`'s contract makes the memory valid
// (for any thread) until deregistration returns.
unsafe impl Send for MemPtr {}
// SAFETY: as above; shared access is through `&[u8]` under a read lock, mutable access
// through `&mut [u8]` under the write lock.
unsafe impl Sync for MemPtr {}

/// What a slot's lock protects: the registration's attributes. For a memory window, `pd` is
/// the window's, and `access`, `iova` and `len` are those of its binding (`addr` is unused).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub pd: PdHandle,
    pub access: Access,
    pub addr: MemPtr,
    pub len: usize,
    pub iova: u64,
    /// `Some` for a memory window: what a region has no use for.
    pub window: Option<WindowEntry>,
    /// The region maps a file (`persist.rs`): a persistence FLUSH `msync`s it.
    pub file_backed: bool,
    /// An implicit ODP region (`implicit.rs`): the whole address space, reached only through
    /// copies that cannot fault, never through slices.
    pub implicit: bool,
}

/// The part of a slot's entry only a memory window has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WindowEntry {
    pub mw_type: super::MwType,
    /// The key of the region it is bound to (when the tag says `Bound`).
    pub mr_key: u32,
    /// The QP a type 2 window is bound to (when bound).
    pub qpn: u32,
}

impl Entry {
    /// The entry of a free slot.
    pub const EMPTY: Entry = Entry {
        pd: PdHandle(0),
        access: Access::empty(),
        addr: MemPtr(core::ptr::null_mut()),
        len: 0,
        iova: 0,
        window: None,
        file_backed: false,
        implicit: false,
    };
}

/// Step 1: the slot index (1-based) of `key`, if it names one of `slots` slots (`keys.rs`
/// has the layout). A key whose upper 24 bits are zero names none.
pub(super) fn check_index(key: u32, slots: usize) -> Result<usize, AccessError> {
    let (index, reserved) = super::keys::split(key, slots);
    if reserved || index > slots {
        return Err(AccessError::BadIndex);
    }
    Ok(index)
}

/// Steps 2 to 4, on the tag alone: what a lookup can reject before taking the slot lock.
pub(super) fn check_tag(tag: u64, key: u32) -> Result<(), AccessError> {
    let state = tag_state(tag);
    if state == State::Free {
        return Err(AccessError::NotRegistered);
    }
    if tag_key(tag) != key {
        return Err(AccessError::KeyMismatch);
    }
    match state {
        State::Valid | State::Deferred | State::Bound => Ok(()),
        State::Invalidating | State::Free => Err(AccessError::Invalidated),
        State::Unbound => Err(AccessError::Unbound),
    }
}

/// Steps 2 to 8, under the slot lock: returns the byte offset of `va` in the region.
///
/// A zero-length access passes every check but the bounds one accepts any `va` in
/// `iova..=iova + len` (an empty range may sit at the end); the closure then gets an empty
/// slice. (IBTA C9-88 lets a zero-length RDMA READ/WRITE carry any R_Key and VA: the engine
/// should not consult the table for them at all, as rxe's `check_rkey` does not.)
pub(super) fn check_entry(
    tag: u64,
    entry: &Entry,
    key: u32,
    pd: PdHandle,
    op: Op,
    va: u64,
    len: usize,
) -> Result<usize, AccessError> {
    check_tag(tag, key)?;
    if entry.window.is_some() {
        // A window's key is an R_Key only, and reaches memory only through `check_window`.
        return Err(AccessError::NotRegistered);
    }
    if entry.pd != pd {
        return Err(AccessError::PdMismatch);
    }
    let needed = op.needed();
    if !entry.access.contains(needed) {
        return Err(AccessError::MissingRight(needed));
    }
    check_range(entry, op, va, len)?;
    Ok((va - entry.iova) as usize)
}

/// Steps 7 and 8: `va..va + len` inside `entry`'s range, atomics aligned.
pub(super) fn check_range(entry: &Entry, op: Op, va: u64, len: usize) -> Result<(), AccessError> {
    let end = u64::try_from(len)
        .ok()
        .and_then(|len| va.checked_add(len))
        .ok_or(AccessError::OutOfBounds)?;
    // `iova + entry.len` cannot overflow: `register` refuses such regions.
    if va < entry.iova || end > entry.iova + entry.len as u64 {
        return Err(AccessError::OutOfBounds);
    }
    if matches!(op, Op::RemoteAtomic | Op::RemoteAtomicWrite) && va % 8 != 0 {
        return Err(AccessError::Misaligned);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: u32 = 5 << 8 | 0x3c;
    const PD: PdHandle = PdHandle(7);
    const IOVA: u64 = 0x1000;
    const LEN: usize = 64;

    fn entry(access: Access) -> Entry {
        Entry {
            pd: PD,
            access,
            addr: MemPtr(core::ptr::null_mut()),
            len: LEN,
            iova: IOVA,
            window: None,
            file_backed: false,
            implicit: false,
        }
    }

    fn all() -> Access {
        Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
    }

    fn ok(op: Op, va: u64, len: usize) -> Result<usize, AccessError> {
        check_entry(tag(KEY, State::Valid), &entry(all()), KEY, PD, op, va, len)
    }

    #[test]
    fn index_zero_and_beyond_table_are_bad() {
        // 10 slots: a 4-bit index field holding index - 1, random bits above it.
        assert_eq!(check_index(0x0000_00ff, 10), Err(AccessError::BadIndex));
        assert_eq!(check_index(10 << 8, 10), Err(AccessError::BadIndex));
        assert_eq!(check_index(u32::MAX, 10), Err(AccessError::BadIndex));
        assert_eq!(check_index(1 << 12, 10), Ok(1));
        assert_eq!(check_index(0xabc0_0000 | 9 << 8 | 0xff, 10), Ok(10));
    }

    #[test]
    fn free_slot_is_not_registered_even_with_its_last_key() {
        let e = check_entry(
            tag(KEY, State::Free),
            &Entry::EMPTY,
            KEY,
            PD,
            Op::LocalRead,
            0,
            0,
        );
        assert_eq!(e, Err(AccessError::NotRegistered));
    }

    #[test]
    fn wrong_key_byte_is_a_mismatch() {
        let t = tag(KEY, State::Valid);
        for wrong in [KEY ^ 1, KEY ^ 0x80, KEY & !0xff] {
            let e = check_entry(t, &entry(all()), wrong, PD, Op::LocalRead, IOVA, 1);
            assert_eq!(e, Err(AccessError::KeyMismatch), "{wrong:#x}");
        }
    }

    #[test]
    fn invalidating_is_dead_deferred_still_works() {
        let e = check_entry(
            tag(KEY, State::Invalidating),
            &entry(all()),
            KEY,
            PD,
            Op::LocalRead,
            IOVA,
            1,
        );
        assert_eq!(e, Err(AccessError::Invalidated));
        let e = check_entry(
            tag(KEY, State::Deferred),
            &entry(all()),
            KEY,
            PD,
            Op::LocalRead,
            IOVA,
            1,
        );
        assert_eq!(e, Ok(0));
    }

    #[test]
    fn wrong_pd_is_refused() {
        let e = check_entry(
            tag(KEY, State::Valid),
            &entry(all()),
            KEY,
            PdHandle(8),
            Op::LocalRead,
            IOVA,
            1,
        );
        assert_eq!(e, Err(AccessError::PdMismatch));
    }

    #[test]
    fn each_op_needs_its_right() {
        let cases = [
            (Op::LocalWrite, Access::LOCAL_WRITE),
            (Op::RemoteRead, Access::REMOTE_READ),
            (Op::RemoteWrite, Access::REMOTE_WRITE),
            (Op::RemoteAtomic, Access::REMOTE_ATOMIC),
        ];
        for (op, right) in cases {
            let without = entry(all().difference(right));
            let e = check_entry(tag(KEY, State::Valid), &without, KEY, PD, op, IOVA, 8);
            assert_eq!(e, Err(AccessError::MissingRight(right)), "{op:?}");
            let only = entry(right);
            assert_eq!(
                check_entry(tag(KEY, State::Valid), &only, KEY, PD, op, IOVA, 8),
                Ok(0)
            );
        }
        // Local read needs nothing.
        let none = entry(Access::empty());
        assert_eq!(
            check_entry(
                tag(KEY, State::Valid),
                &none,
                KEY,
                PD,
                Op::LocalRead,
                IOVA,
                8
            ),
            Ok(0)
        );
        // A remote read right does not give local write, nor the reverse.
        let ro = entry(Access::REMOTE_READ);
        let e = check_entry(
            tag(KEY, State::Valid),
            &ro,
            KEY,
            PD,
            Op::LocalWrite,
            IOVA,
            8,
        );
        assert_eq!(e, Err(AccessError::MissingRight(Access::LOCAL_WRITE)));
    }

    #[test]
    fn bounds_at_both_ends() {
        assert_eq!(ok(Op::LocalRead, IOVA, LEN), Ok(0));
        assert_eq!(ok(Op::LocalRead, IOVA + 10, LEN - 10), Ok(10));
        assert_eq!(
            ok(Op::LocalRead, IOVA - 1, 1),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::LocalRead, IOVA - 1, 2),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::LocalRead, IOVA, LEN + 1),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::LocalRead, IOVA + LEN as u64 - 1, 2),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::LocalRead, IOVA + LEN as u64, 1),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(ok(Op::LocalRead, 0, 1), Err(AccessError::OutOfBounds));
    }

    #[test]
    fn va_plus_len_overflow_is_out_of_bounds() {
        assert_eq!(
            ok(Op::LocalRead, u64::MAX, 2),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::LocalRead, IOVA, usize::MAX),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::RemoteWrite, u64::MAX - 3, 8),
            Err(AccessError::OutOfBounds)
        );
    }

    #[test]
    fn zero_length_is_inside_up_to_the_end() {
        assert_eq!(ok(Op::RemoteWrite, IOVA, 0), Ok(0));
        assert_eq!(ok(Op::RemoteWrite, IOVA + LEN as u64, 0), Ok(LEN));
        assert_eq!(
            ok(Op::RemoteWrite, IOVA + LEN as u64 + 1, 0),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::RemoteWrite, IOVA - 1, 0),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            ok(Op::RemoteWrite, u64::MAX, 0),
            Err(AccessError::OutOfBounds)
        );
        // The key, PD and rights are still checked.
        let e = check_entry(
            tag(KEY, State::Valid),
            &entry(all()),
            KEY ^ 1,
            PD,
            Op::LocalRead,
            IOVA,
            0,
        );
        assert_eq!(e, Err(AccessError::KeyMismatch));
    }

    #[test]
    fn atomics_must_be_aligned() {
        for va in [IOVA + 1, IOVA + 4, IOVA + 7] {
            assert_eq!(ok(Op::RemoteAtomic, va, 8), Err(AccessError::Misaligned));
        }
        assert_eq!(ok(Op::RemoteAtomic, IOVA + 8, 8), Ok(8));
        // Only atomics: an unaligned RDMA WRITE is fine.
        assert_eq!(ok(Op::RemoteWrite, IOVA + 1, 8), Ok(1));
        // Bounds come first.
        assert_eq!(
            ok(Op::RemoteAtomic, IOVA + LEN as u64 - 4, 8),
            Err(AccessError::OutOfBounds)
        );
    }

    #[test]
    fn first_failing_check_is_reported() {
        // Wrong key byte, wrong PD, no rights, out of bounds: the key wins.
        let none = entry(Access::empty());
        let e = check_entry(
            tag(KEY, State::Valid),
            &none,
            KEY ^ 1,
            PdHandle(9),
            Op::RemoteWrite,
            0,
            1,
        );
        assert_eq!(e, Err(AccessError::KeyMismatch));
        // Then the PD, then the right, then the bounds.
        let e = check_entry(
            tag(KEY, State::Valid),
            &none,
            KEY,
            PdHandle(9),
            Op::RemoteWrite,
            0,
            1,
        );
        assert_eq!(e, Err(AccessError::PdMismatch));
        let e = check_entry(
            tag(KEY, State::Valid),
            &none,
            KEY,
            PD,
            Op::RemoteWrite,
            0,
            1,
        );
        assert_eq!(e, Err(AccessError::MissingRight(Access::REMOTE_WRITE)));
        // Invalidating beats PD.
        let e = check_entry(
            tag(KEY, State::Invalidating),
            &none,
            KEY,
            PdHandle(9),
            Op::LocalRead,
            0,
            1,
        );
        assert_eq!(e, Err(AccessError::Invalidated));
    }

    #[test]
    fn tag_round_trips() {
        for s in [
            State::Free,
            State::Valid,
            State::Invalidating,
            State::Deferred,
            State::Unbound,
            State::Bound,
        ] {
            let t = tag(0xffff_ffff, s);
            assert_eq!((tag_key(t), tag_state(t)), (0xffff_ffff, s));
        }
    }
}
