//! Tests of implicit ODP: the copies that cannot fault (an unmapped page and a read-only page
//! give an error, not a signal; a mapped range copies exactly), and the region's accessors.

use super::implicit::{copy_in, copy_out};
use super::*;
use crate::wr::Sge;

const PD: PdHandle = PdHandle(1);
const PAGE: usize = 4096;
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC)
    .union(Access::ON_DEMAND);

/// Three anonymous pages: read-write, then unmapped, then read-only.
struct Pages(*mut u8);

impl Pages {
    fn new() -> Pages {
        // SAFETY: a fresh anonymous mapping; the unmap and mprotect act on parts of it only.
        unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                3 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let p: *mut u8 = p.cast();
            for i in 0..PAGE {
                *p.add(i) = i as u8;
                *p.add(2 * PAGE + i) = 0x5a;
            }
            assert_eq!(libc::munmap(p.add(PAGE).cast(), PAGE), 0);
            assert_eq!(
                libc::mprotect(p.add(2 * PAGE).cast(), PAGE, libc::PROT_READ),
                0
            );
            Pages(p)
        }
    }

    fn rw(&self) -> usize {
        self.0 as usize
    }

    fn hole(&self) -> usize {
        self.0 as usize + PAGE
    }

    fn ro(&self) -> usize {
        self.0 as usize + 2 * PAGE
    }

    /// The byte at `addr` (in the read-write or read-only page).
    fn byte(&self, addr: usize) -> u8 {
        // SAFETY: the caller names a mapped, readable byte of ours.
        unsafe { *(addr as *const u8) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: mapped in `new`; the hole is unmapped already, which munmap allows.
        unsafe { libc::munmap(self.0.cast(), 3 * PAGE) };
    }
}

#[test]
fn a_mapped_range_copies_exactly() {
    let p = Pages::new();
    let mut buf = [0u8; 100];
    copy_in(p.rw() + 10, &mut buf).unwrap();
    assert!(buf.iter().enumerate().all(|(i, &b)| b == (i + 10) as u8));
    copy_out(p.rw() + 20, &[0xee; 5]).unwrap();
    assert_eq!(p.byte(p.rw() + 19), 19);
    assert!((20..25).all(|i| p.byte(p.rw() + i) == 0xee));
    assert_eq!(p.byte(p.rw() + 25), 25);
    copy_in(p.ro() + PAGE - 4, &mut buf[..4]).unwrap();
    assert_eq!(buf[..4], [0x5a; 4]);
}

#[test]
fn an_unmapped_page_is_an_error_not_a_signal() {
    let p = Pages::new();
    let mut buf = [0u8; 16];
    assert_eq!(copy_in(p.hole(), &mut buf), Err(AccessError::OutOfBounds));
    assert_eq!(copy_out(p.hole(), &buf), Err(AccessError::OutOfBounds));
    // A range that runs off the mapped page into the hole.
    let mut big = [0u8; 32];
    assert!(copy_in(p.hole() - 16, &mut big).is_err());
    assert!(copy_in(0, &mut buf).is_err());
    assert!(copy_in(usize::MAX - 8, &mut buf[..8]).is_err());
}

#[test]
fn a_read_only_page_refuses_writes() {
    let p = Pages::new();
    assert_eq!(copy_out(p.ro(), &[1; 8]), Err(AccessError::OutOfBounds));
    assert_eq!(p.byte(p.ro()), 0x5a);
}

fn implicit(access: Access) -> (MrTable, u32) {
    let t = MrTable::new(8, 9).unwrap();
    // SAFETY: an implicit registration lends no memory.
    let k = unsafe { t.register(PD, core::ptr::null_mut(), usize::MAX, 0, access) }.unwrap();
    assert_eq!(k.lkey, k.rkey);
    (t, k.lkey)
}

#[test]
fn registration_needs_on_demand_and_sets_no_bounds() {
    let t = MrTable::new(8, 9).unwrap();
    for bad in [Access::LOCAL_WRITE, ALL | Access::ZERO_BASED] {
        // SAFETY: refused before any memory is named.
        let r = unsafe { t.register(PD, core::ptr::null_mut(), usize::MAX, 0, bad) };
        assert_eq!(r.unwrap_err().errno(), 22, "{bad:?}");
    }
    // SAFETY: as above.
    let r = unsafe { t.register(PD, core::ptr::null_mut(), 4096, 0, ALL) };
    assert_eq!(r.unwrap_err().errno(), 22);
    let (t, key) = implicit(ALL);
    let change = Rereg {
        translation: None,
        pd: None,
        access: Some(Access::ON_DEMAND),
    };
    // SAFETY: no new translation is given.
    let r = unsafe { t.reregister(key, change) };
    assert_eq!(r.unwrap_err().errno(), 95);
    t.deregister(key).unwrap();
}

#[test]
fn accessors_copy_through_the_mapping_and_fail_on_holes() {
    let p = Pages::new();
    let (t, key) = implicit(ALL);
    let va = p.rw() as u64;
    let got = t
        .with_local_read(key, PD, va + 1, 3, |b| b.to_vec())
        .unwrap();
    assert_eq!(got, [1, 2, 3]);
    t.with_remote_write(key, PD, 0, va + 100, 4, |mut d| d.copy_from(b"abcd"))
        .unwrap();
    assert_eq!(p.byte(p.rw() + 100), b'a');
    assert_eq!(p.byte(p.rw() + 103), b'd');
    let old = t
        .with_remote_atomic(key, PD, 0, va + 8, |_| u64::from_ne_bytes([9; 8]))
        .unwrap();
    assert_eq!(old.to_ne_bytes(), [8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(p.byte(p.rw() + 8), 9);
    // Holes and read-only memory: errors, the closure never runs, no byte changes.
    let hole = p.hole() as u64;
    assert_eq!(
        t.with_local_read(key, PD, hole, 8, |_| unreachable!()),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(
        t.with_remote_write(key, PD, 0, p.ro() as u64, 8, |_| unreachable!()),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(p.byte(p.ro()), 0x5a);
    // A check that writes nothing of a writable range passes and changes nothing.
    t.with_local_write(key, PD, va, 64, |_| ()).unwrap();
    assert_eq!(p.byte(p.rw() + 1), 1);
    // Pins hold a copy.
    let pin = t
        .pin_read_blocking(key, PD, PinFor::Local, va + 200, 4)
        .unwrap();
    assert_eq!(pin.bytes().to_vec(), [200, 201, 202, 203]);
    drop(pin);
    assert!(t.try_pin_read(key, PD, PinFor::Local, hole, 4).is_err());
    t.deregister(key).unwrap();
}

#[test]
fn remote_access_needs_the_registered_rights() {
    let p = Pages::new();
    let (t, key) = implicit(Access::ON_DEMAND | Access::LOCAL_WRITE);
    let va = p.rw() as u64;
    assert_eq!(
        t.with_remote_read(key, PD, 0, va, 4, |_| ()),
        Err(AccessError::MissingRight(Access::REMOTE_READ))
    );
    assert_eq!(
        t.with_local_read(key, PdHandle(2), va, 4, |_| ()),
        Err(AccessError::PdMismatch)
    );
}

#[test]
fn advise_prefetches_any_mapped_range_and_fails_holes_with_flush() {
    let p = Pages::new();
    let (t, key) = implicit(ALL);
    let sge = |addr: usize, length: u32| Sge {
        addr: addr as u64,
        length,
        lkey: key,
    };
    t.advise(
        PD,
        Advice::PrefetchWrite,
        AdviseFlags::FLUSH,
        &[sge(p.rw(), 4096)],
    )
    .unwrap();
    t.advise(PD, Advice::Prefetch, AdviseFlags::FLUSH, &[sge(p.ro(), 64)])
        .unwrap();
    let e = t.advise(
        PD,
        Advice::Prefetch,
        AdviseFlags::FLUSH,
        &[sge(p.hole(), 64)],
    );
    assert_eq!(e, Err(AdviseError::Fault));
    t.advise(
        PD,
        Advice::Prefetch,
        AdviseFlags::empty(),
        &[sge(p.hole(), 64)],
    )
    .unwrap();
}
