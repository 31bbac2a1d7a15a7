//! Tests of reregistration: each change alone, the keys kept for new rights or PD (which
//! the key then carries at once), new keys with the old ones dead for a new translation, and
//! every refusal leaving the region as it was.

use super::*;

const PD: PdHandle = PdHandle(1);
const OTHER_PD: PdHandle = PdHandle(2);
const QPN: u32 = 0x11;
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::MW_BIND);

/// A table with `buf` registered at iova 0x1000 with `access`; returns its key.
fn setup(buf: &mut [u8], access: Access) -> (MrTable, u32) {
    let t = MrTable::new(8, 5).unwrap();
    // SAFETY: every test keeps `buf` alive until after the table is dropped.
    let k = unsafe { t.register(PD, buf.as_mut_ptr(), buf.len(), 0x1000, access) }.unwrap();
    (t, k.lkey)
}

fn rereg(t: &MrTable, key: u32, change: Rereg) -> Result<MrKeys> {
    // SAFETY: the tests' new translations point at buffers that outlive the table.
    unsafe { t.reregister(key, change) }
}

fn remote_write(t: &MrTable, key: u32, pd: PdHandle, va: u64, byte: u8) -> bool {
    t.with_remote_write(key, pd, QPN, va, 1, |mut d| d.copy_from(&[byte]))
        .is_ok()
}

#[test]
fn new_access_keeps_the_keys_which_carry_the_new_rights_at_once() {
    let mut buf = [0u8; 64];
    let (t, key) = setup(&mut buf, RW);
    let change = Rereg {
        access: Some(Access::LOCAL_WRITE | Access::REMOTE_READ),
        ..Rereg::default()
    };
    let keys = rereg(&t, key, change).unwrap();
    assert_eq!((keys.lkey, keys.rkey), (key, key), "same keys");
    assert!(
        !remote_write(&t, key, PD, 0x1000, 1),
        "the write right is gone"
    );
    assert!(t.with_remote_read(key, PD, QPN, 0x1000, 4, |_| ()).is_ok());
    // Given back: the same key writes again.
    let change = Rereg {
        access: Some(RW),
        ..Rereg::default()
    };
    assert_eq!(rereg(&t, key, change).unwrap().rkey, key);
    assert!(remote_write(&t, key, PD, 0x1000, 5));
    drop(t);
    assert_eq!(buf[0], 5);
    assert!(buf[1..].iter().all(|&b| b == 0));
}

#[test]
fn new_pd_keeps_the_keys_and_the_old_pd_is_refused() {
    let mut buf = [0u8; 64];
    let (t, key) = setup(&mut buf, RW);
    let change = Rereg {
        pd: Some(OTHER_PD),
        ..Rereg::default()
    };
    assert_eq!(rereg(&t, key, change).unwrap().lkey, key);
    assert!(
        !remote_write(&t, key, PD, 0x1000, 1),
        "the old PD no longer"
    );
    assert!(t.with_local_read(key, PD, 0x1000, 4, |_| ()).is_err());
    assert!(remote_write(&t, key, OTHER_PD, 0x1000, 3));
    drop(t);
    assert_eq!(buf[0], 3);
}

#[test]
fn new_translation_gives_new_keys_and_the_old_ones_die() {
    let mut a = [0u8; 64];
    let mut b = [0u8; 64];
    let (t, old) = setup(&mut a, RW);
    let change = Rereg {
        translation: Some(Translation {
            addr: b.as_mut_ptr(),
            len: b.len(),
            iova: 0x1000,
        }),
        ..Rereg::default()
    };
    let new = rereg(&t, old, change).unwrap();
    assert_ne!(new.rkey, old, "new keys");
    assert_eq!(new.lkey, new.rkey);
    assert_eq!(t.index_of(new.rkey), t.index_of(old), "same index");
    // The same iova under the old key reaches nothing, under the new one the new memory.
    assert!(!remote_write(&t, old, PD, 0x1000, 1), "old key dead");
    assert!(t.with_local_read(old, PD, 0x1000, 4, |_| ()).is_err());
    assert!(remote_write(&t, new.rkey, PD, 0x1000, 2));
    drop(t);
    assert_eq!(a, [0u8; 64], "the old memory is untouched");
    assert_eq!(b[0], 2);
}

#[test]
fn new_pd_and_new_translation() {
    let mut a = [0u8; 64];
    let mut b = [0u8; 128];
    let (t, old) = setup(&mut a, RW);
    let new = rereg(
        &t,
        old,
        Rereg {
            pd: Some(OTHER_PD),
            translation: Some(Translation {
                addr: b.as_mut_ptr(),
                len: b.len(),
                iova: 0x8000,
            }),
            ..Rereg::default()
        },
    )
    .unwrap();
    assert!(
        !remote_write(&t, new.rkey, PD, 0x8000, 7),
        "the old PD no longer"
    );
    assert!(
        !remote_write(&t, new.rkey, OTHER_PD, 0x1000, 7),
        "the old range no longer"
    );
    assert!(remote_write(&t, new.rkey, OTHER_PD, 0x8000 + 127, 7));
    drop(t);
    assert_eq!(a, [0u8; 64], "the old memory is untouched");
    assert_eq!(b[127], 7);
}

#[test]
fn refusals_leave_the_region_as_it_was() {
    let mut buf = [0u8; 64];
    let (t, key) = setup(&mut buf, RW);
    let bad_access = Rereg {
        access: Some(Access::REMOTE_WRITE),
        ..Rereg::default()
    };
    assert!(matches!(
        rereg(&t, key, bad_access),
        Err(Error::InvalidArgument(_))
    ));
    let persist = Rereg {
        access: Some(RW | Access::FLUSH_PERSISTENT),
        ..Rereg::default()
    };
    assert!(matches!(
        rereg(&t, key, persist),
        Err(Error::NotSupported(_))
    ));
    let empty = Rereg {
        translation: Some(Translation {
            addr: buf.as_mut_ptr(),
            len: 0,
            iova: 0,
        }),
        ..Rereg::default()
    };
    assert!(matches!(
        rereg(&t, key, empty),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        rereg(&t, key ^ 1, Rereg::default()),
        Err(Error::InvalidArgument(_))
    ));
    // A bound window: EBUSY.
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    let bind = MwBind {
        mw_rkey: mw,
        rkey: mw.wrapping_add(1),
        mr_lkey: key,
        addr: 0x1000,
        length: 16,
        access: Access::REMOTE_WRITE,
    };
    t.bind_window(PD, QPN, &bind).unwrap();
    assert!(matches!(
        rereg(&t, key, Rereg::default()),
        Err(Error::Busy(_))
    ));
    // Unchanged after all of them: the key still writes.
    assert!(remote_write(&t, key, PD, 0x1000, 9));
    drop(t);
    assert_eq!(buf[0], 9);
}
