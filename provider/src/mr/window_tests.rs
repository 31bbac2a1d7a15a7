//! Tests of memory windows in the key table: allocation, the bind checks one by one, access
//! through a window (range, rights, QP, the region behind), invalidation, deallocation, and
//! deregistration of a region with windows bound.

use super::*;

const PD: PdHandle = PdHandle(1);
const QPN: u32 = 0x11;
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC)
    .union(Access::MW_BIND);
const WIN_ALL: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// A table with a 256-byte region of `access` at iova `0x1000`; returns its lkey.
fn setup(buf: &mut [u8], access: Access) -> (MrTable, u32) {
    let t = MrTable::new(8, 3).unwrap();
    // SAFETY: every test keeps `buf` alive until after the table is dropped.
    let k = unsafe { t.register(PD, buf.as_mut_ptr(), buf.len(), 0x1000, access) }.unwrap();
    (t, k.lkey)
}

fn bind(mw: u32, mr: u32, addr: u64, length: u64, access: Access) -> MwBind {
    MwBind {
        mw_rkey: mw,
        rkey: mw.wrapping_add(1),
        mr_lkey: mr,
        addr,
        length,
        access,
    }
}

fn einval(r: Result<u32>) {
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}

#[test]
fn unbound_window_key_reaches_nothing() {
    let mut buf = [0u8; 256];
    let (t, _) = setup(&mut buf, RW);
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    assert_eq!(
        t.with_remote_read(mw, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::Unbound)
    );
}

#[test]
fn type1_bind_gives_the_window_range_and_rights_only() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    let rkey = t
        .bind_window(PD, QPN, &bind(mw, mr, 0x1040, 64, Access::REMOTE_WRITE))
        .unwrap();
    assert_eq!(rkey >> 8, mw >> 8, "same index");
    assert_eq!(
        rkey & 0xff,
        mw.wrapping_add(1) & 0xff,
        "the consumer's key byte"
    );
    // The old key died with the bind.
    assert_eq!(
        t.with_remote_write(mw, PD, QPN, 0x1040, 1, |_| ()),
        Err(AccessError::KeyMismatch)
    );
    // Inside: reaches the region's bytes at 0x40.
    t.with_remote_write(rkey, PD, QPN, 0x1040, 4, |mut m| m.copy_from(b"wxyz"))
        .unwrap();
    t.with_remote_write(rkey, PD, 7, 0x107c, 4, |mut m| m.copy_from(b"end!"))
        .unwrap();
    // Range, rights, PD; a window key is no L_Key.
    for (va, len) in [(0x103f, 1), (0x1080, 1), (0x107d, 4), (0x1000, 256)] {
        assert_eq!(
            t.with_remote_write(rkey, PD, QPN, va, len, |_| ()),
            Err(AccessError::OutOfBounds),
            "{va:#x}+{len}"
        );
    }
    assert_eq!(
        t.with_remote_read(rkey, PD, QPN, 0x1040, 1, |_| ()),
        Err(AccessError::MissingRight(Access::REMOTE_READ))
    );
    assert_eq!(
        t.with_remote_atomic(rkey, PD, QPN, 0x1040, |v| v).map(drop),
        Err(AccessError::MissingRight(Access::REMOTE_ATOMIC))
    );
    assert_eq!(
        t.with_remote_write(rkey, PdHandle(2), QPN, 0x1040, 1, |_| ()),
        Err(AccessError::PdMismatch)
    );
    assert_eq!(
        t.with_local_read(rkey, PD, 0x1040, 1, |_| ()),
        Err(AccessError::NotRegistered)
    );
    drop(t);
    assert_eq!(&buf[0x40..0x44], b"wxyz");
    assert_eq!(&buf[0x7c..0x80], b"end!");
    assert!(buf[..0x40].iter().chain(&buf[0x80..]).all(|&b| b == 0));
}

#[test]
fn type1_rebind_and_zero_length_unbind() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    let k1 = t
        .bind_window(PD, QPN, &bind(mw, mr, 0x1000, 16, Access::REMOTE_READ))
        .unwrap();
    let k2 = t
        .bind_window(PD, QPN, &bind(k1, mr, 0x1010, 16, Access::REMOTE_READ))
        .unwrap();
    assert_eq!(
        t.with_remote_read(k1, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::KeyMismatch)
    );
    assert_eq!(t.with_remote_read(k2, PD, QPN, 0x1010, 1, |_| ()), Ok(()));
    assert_eq!(
        t.with_remote_read(k2, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::OutOfBounds)
    );
    // One window, counted once: deregistration is refused, then works after the unbind.
    assert!(matches!(t.deregister(mr), Err(Error::Busy(_))));
    let k3 = t
        .bind_window(PD, QPN, &bind(k2, 0, 0, 0, Access::empty()))
        .unwrap();
    assert_eq!(
        t.with_remote_read(k3, PD, QPN, 0x1010, 1, |_| ()),
        Err(AccessError::Unbound)
    );
    t.deregister(mr).unwrap();
}

#[test]
fn type1_cannot_be_invalidated_type2_can() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let w1 = t.alloc_window(PD, MwType::Type1).unwrap();
    let k1 = t
        .bind_window(PD, QPN, &bind(w1, mr, 0x1000, 8, WIN_ALL))
        .unwrap();
    assert!(t.invalidate(PD, k1, None).is_err(), "o10-37.2.26");
    let w2 = t.alloc_window(PD, MwType::Type2).unwrap();
    let k2 = t
        .bind_window(PD, QPN, &bind(w2, mr, 0x1000, 8, WIN_ALL))
        .unwrap();
    t.invalidate(PD, k2, None).unwrap();
    assert_eq!(
        t.with_remote_read(k2, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::Unbound)
    );
    assert!(t.invalidate(PD, k2, None).is_err(), "already invalid");
    // Regions of ibv_reg_mr cannot be invalidated.
    assert!(t.invalidate(PD, mr, None).is_err());
}

#[test]
fn type2_is_bound_to_its_qp() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let w = t.alloc_window(PD, MwType::Type2).unwrap();
    let k = t
        .bind_window(PD, QPN, &bind(w, mr, 0x1000, 8, WIN_ALL))
        .unwrap();
    assert!(t.with_remote_atomic(k, PD, QPN, 0x1000, |v| v).is_ok());
    assert_eq!(
        t.with_remote_atomic(k, PD, QPN + 1, 0x1000, |v| v)
            .map(drop),
        Err(AccessError::QpMismatch)
    );
    // Remote invalidation only from that QP.
    assert!(t.invalidate(PD, k, Some(QPN + 1)).is_err());
    t.invalidate(PD, k, Some(QPN)).unwrap();
}

#[test]
fn type2_bind_needs_an_unbound_window_and_a_length() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let w = t.alloc_window(PD, MwType::Type2).unwrap();
    einval(t.bind_window(PD, QPN, &bind(w, mr, 0x1000, 0, WIN_ALL)));
    let k = t
        .bind_window(PD, QPN, &bind(w, mr, 0x1000, 8, WIN_ALL))
        .unwrap();
    einval(t.bind_window(PD, QPN, &bind(k, mr, 0x1000, 8, WIN_ALL)));
    t.invalidate(PD, k, None).unwrap();
    t.bind_window(PD, QPN, &bind(k, mr, 0x1000, 8, WIN_ALL))
        .unwrap();
}

#[test]
fn bind_checks_the_region() {
    let mut a = [0u8; 256];
    let (t, mr) = setup(&mut a, RW);
    let mut b = [0u8; 64];
    let mut c = [0u8; 64];
    let mut d = [0u8; 64];
    // SAFETY: the buffers outlive the table.
    let (no_bind, read_only, zero_based) = unsafe {
        (
            t.register(
                PD,
                b.as_mut_ptr(),
                64,
                0x9000,
                Access::LOCAL_WRITE | Access::REMOTE_READ,
            )
            .unwrap()
            .lkey,
            t.register(
                PD,
                c.as_mut_ptr(),
                64,
                0xa000,
                Access::MW_BIND | Access::REMOTE_READ,
            )
            .unwrap()
            .lkey,
            t.register(PD, d.as_mut_ptr(), 64, 0, RW | Access::ZERO_BASED)
                .unwrap()
                .lkey,
        )
    };
    let w = t.alloc_window(PD, MwType::Type1).unwrap();
    einval(t.bind_window(PD, QPN, &bind(w, no_bind, 0x9000, 8, Access::REMOTE_READ)));
    einval(t.bind_window(
        PD,
        QPN,
        &bind(w, read_only, 0xa000, 8, Access::REMOTE_WRITE),
    ));
    einval(t.bind_window(
        PD,
        QPN,
        &bind(w, read_only, 0xa000, 8, Access::REMOTE_ATOMIC),
    ));
    einval(t.bind_window(PD, QPN, &bind(w, zero_based, 0, 8, Access::REMOTE_READ)));
    einval(t.bind_window(PD, QPN, &bind(w, mr, 0xfff, 8, WIN_ALL)));
    einval(t.bind_window(PD, QPN, &bind(w, mr, 0x10f9, 8, WIN_ALL)));
    einval(t.bind_window(PD, QPN, &bind(w, mr, u64::MAX, 2, WIN_ALL)));
    einval(t.bind_window(PD, QPN, &bind(w, mr, 0x1000, 8, Access::MW_BIND)));
    einval(t.bind_window(PD, QPN, &bind(w, mr, 0x1000, 8, Access::ZERO_BASED)));
    einval(t.bind_window(PdHandle(2), QPN, &bind(w, mr, 0x1000, 8, WIN_ALL)));
    einval(t.bind_window(PD, QPN, &bind(w ^ 1, mr, 0x1000, 8, WIN_ALL)));
    einval(t.bind_window(PD, QPN, &bind(mr, mr, 0x1000, 8, WIN_ALL)));
    einval(t.bind_window(PD, QPN, &bind(w, w, 0x1000, 8, WIN_ALL)));
    // A read-only window on a region without LOCAL_WRITE is fine.
    t.bind_window(
        PD,
        QPN,
        &bind(w, read_only, 0xa000, 64, Access::REMOTE_READ),
    )
    .unwrap();
    // None of the refusals counted a window: the other regions deregister.
    t.deregister(no_bind).unwrap();
    t.deregister(zero_based).unwrap();
    t.deregister(mr).unwrap();
    assert!(matches!(t.deregister(read_only), Err(Error::Busy(_))));
}

#[test]
fn local_write_in_a_bind_is_accepted_and_gives_nothing() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    let asked = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let rkey = t
        .bind_window(PD, QPN, &bind(mw, mr, 0x1000, 16, asked))
        .unwrap();
    t.with_remote_write(rkey, PD, QPN, 0x1000, 4, |mut m| m.copy_from(b"mw!!"))
        .unwrap();
    // The window's key is still no L_Key, and it gives no right it was not asked for.
    assert_eq!(
        t.with_local_write(rkey, PD, 0x1000, 1, |_| ()),
        Err(AccessError::NotRegistered)
    );
    assert_eq!(
        t.with_remote_read(rkey, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::MissingRight(Access::REMOTE_READ))
    );
    // LOCAL_WRITE alone binds a window that gives nothing.
    let none = t
        .bind_window(PD, QPN, &bind(rkey, mr, 0x1000, 16, Access::LOCAL_WRITE))
        .unwrap();
    assert_eq!(
        t.with_remote_write(none, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::MissingRight(Access::REMOTE_WRITE))
    );
    drop(t);
    assert_eq!(&buf[..4], b"mw!!");
    assert!(buf[4..].iter().all(|&b| b == 0));
}

#[test]
fn dealloc_unbinds_and_frees_the_index() {
    let mut buf = [0u8; 256];
    let (t, mr) = setup(&mut buf, RW);
    let w = t.alloc_window(PD, MwType::Type2).unwrap();
    let k = t
        .bind_window(PD, QPN, &bind(w, mr, 0x1000, 8, WIN_ALL))
        .unwrap();
    assert!(matches!(t.deregister(mr), Err(Error::Busy(_))));
    assert!(t.dealloc_window(PdHandle(2), k).is_err());
    assert!(t.dealloc_window(PD, mr).is_err(), "a region is no window");
    t.dealloc_window(PD, k).unwrap();
    assert!(t.dealloc_window(PD, k).is_err(), "twice");
    assert_eq!(
        t.with_remote_read(k, PD, QPN, 0x1000, 1, |_| ()),
        Err(AccessError::NotRegistered)
    );
    t.deregister(mr).unwrap();
}

#[test]
fn reads_pin_through_a_window() {
    let mut buf: Vec<u8> = (0..=255).collect();
    let (t, mr) = setup(&mut buf, RW);
    let w = t.alloc_window(PD, MwType::Type2).unwrap();
    let k = t
        .bind_window(PD, QPN, &bind(w, mr, 0x1010, 16, Access::REMOTE_READ))
        .unwrap();
    let why = PinFor::RemoteRead { qpn: QPN };
    let pin = t.try_pin_read(k, PD, why, 0x1012, 2).unwrap();
    assert_eq!(pin.bytes().to_vec(), [0x12, 0x13]);
    drop(pin);
    let pin = t.pin_read_blocking(k, PD, why, 0x1010, 16).unwrap();
    assert_eq!(pin.bytes().to_vec()[15], 0x1f);
    drop(pin);
    assert!(matches!(
        t.try_pin_read(k, PD, why, 0x100f, 2),
        Err(PinError::Access(AccessError::OutOfBounds))
    ));
    assert!(matches!(
        t.try_pin_read(k, PD, PinFor::RemoteRead { qpn: 9 }, 0x1010, 2),
        Err(PinError::Access(AccessError::QpMismatch))
    ));
    assert_eq!(
        t.pin_read_blocking(k, PD, PinFor::Local, 0x1010, 2)
            .unwrap_err(),
        AccessError::NotRegistered
    );
}
