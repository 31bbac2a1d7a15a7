//! Tests of reregistration: each change alone, new keys with the old ones dead, and every
//! refusal leaving the region as it was.

use super::*;

const PD: PdHandle = PdHandle(1);
const OTHER_PD: PdHandle = PdHandle(2);
const QPN: u32 = 0x11;
const RW: Access = Access(
    Access::LOCAL_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0 | Access::MW_BIND.0,
);

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
    t.with_remote_write(key, pd, QPN, va, 1, |d| d[0] = byte)
        .is_ok()
}

#[test]
fn new_access_gives_new_keys_and_the_old_ones_die() {
    let mut buf = [0u8; 64];
    let (t, old) = setup(&mut buf, RW);
    let change = Rereg {
        access: Some(Access::LOCAL_WRITE | Access::REMOTE_READ),
        ..Rereg::default()
    };
    let new = rereg(&t, old, change).unwrap();
    assert_ne!(new.rkey, old, "new keys");
    assert_eq!(new.rkey >> 8, old >> 8, "same index");
    assert!(
        !remote_write(&t, new.rkey, PD, 0x1000, 1),
        "the write right is gone"
    );
    assert!(t
        .with_remote_read(new.rkey, PD, QPN, 0x1000, 4, |_| ())
        .is_ok());
    assert!(
        t.with_local_read(old, PD, 0x1000, 4, |_| ()).is_err(),
        "old key dead"
    );
    drop(t);
    assert_eq!(buf, [0u8; 64], "nothing written");
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
