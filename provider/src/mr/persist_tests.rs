//! Tests of `persist.rs`: the rights FLUSH and ATOMIC WRITE need, ATOMIC WRITE's alignment and
//! bounds, and selectivity level 1 (the whole region, never through a window).

use softrnic_wire::feth::{Selectivity, PLACEMENT_GLOBAL_VISIBILITY, PLACEMENT_PERSISTENCE};

use super::*;

const PD: PdHandle = PdHandle(1);
const GV: u8 = PLACEMENT_GLOBAL_VISIBILITY;
const PE: u8 = PLACEMENT_PERSISTENCE;

fn table_with(buf: &mut [u8], access: Access) -> (MrTable, u32, u64) {
    let t = MrTable::new(4, 3).unwrap();
    let va = buf.as_ptr() as u64;
    // SAFETY: every test keeps `buf` alive until after `t` is dropped.
    let k = unsafe { t.register(PD, buf.as_mut_ptr(), buf.len(), va, access) }.unwrap();
    (t, k.rkey, va)
}

#[test]
fn flush_rights_follow_the_placement_type() {
    assert_eq!(flush_rights(GV), Access::FLUSH_GLOBAL);
    assert_eq!(flush_rights(PE), Access::FLUSH_PERSISTENT);
    assert_eq!(
        flush_rights(GV | PE),
        Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT
    );
}

#[test]
fn flush_checks_rights_bounds_and_selectivity() {
    let mut buf = vec![0u8; 256];
    let (t, k, va) = table_with(&mut buf, Access::FLUSH_GLOBAL);
    let range = Selectivity::MemoryRange;
    assert_eq!(t.remote_flush(k, PD, 1, va, 256, GV, range), Ok(()));
    assert_eq!(
        t.remote_flush(k, PD, 1, va + 200, 100, GV, range),
        Err(FlushError::Access(AccessError::OutOfBounds))
    );
    assert_eq!(
        t.remote_flush(k, PD, 1, va, 8, PE, range),
        Err(FlushError::Access(AccessError::MissingRight(
            Access::FLUSH_PERSISTENT
        )))
    );
    // Level 1 ignores the RETH's range.
    let whole = Selectivity::MemoryRegion;
    assert_eq!(t.remote_flush(k, PD, 1, 0, 1 << 30, GV, whole), Ok(()));
    assert_eq!(
        t.remote_flush(k, PdHandle(2), 1, va, 8, GV, whole),
        Err(FlushError::Access(AccessError::PdMismatch))
    );
    assert!(t.remote_flush(k ^ 1, PD, 1, va, 8, GV, whole).is_err());
}

#[test]
fn atomic_write_needs_remote_write_alignment_and_bounds() {
    let mut buf = vec![0u8; 64];
    let (t, k, va) = table_with(&mut buf, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let v = 0x0102_0304_0506_0708u64.to_ne_bytes();
    assert_eq!(
        t.with_remote_atomic_write(k, PD, 1, va + 4, v),
        Err(AccessError::Misaligned)
    );
    assert_eq!(
        t.with_remote_atomic_write(k, PD, 1, va + 64, v),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(t.with_remote_atomic_write(k, PD, 1, va + 8, v), Ok(()));
    drop(t);
    assert_eq!(&buf[8..16], &v);
    assert!(buf[..8].iter().chain(&buf[16..]).all(|&b| b == 0));

    let mut buf = vec![0u8; 64];
    let (t, k, va) = table_with(&mut buf, Access::LOCAL_WRITE | Access::REMOTE_ATOMIC);
    assert_eq!(
        t.with_remote_atomic_write(k, PD, 1, va, v),
        Err(AccessError::MissingRight(Access::REMOTE_WRITE))
    );
}
