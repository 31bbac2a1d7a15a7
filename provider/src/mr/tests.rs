//! Tests of the table: registration, key reuse, checked access, deregistration, concurrency.
//! The check order itself is tested case by case in `check.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::check::{tag, State};
use super::*;

const PD: PdHandle = PdHandle(1);
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

fn buffer(len: usize) -> Box<[u8]> {
    (0..len).map(|i| i as u8).collect()
}

/// Registers `buf` with iova = its address, as `ibv_reg_mr` does.
fn reg(table: &MrTable, buf: &mut [u8], access: Access) -> Result<MrKeys> {
    // SAFETY: every test keeps its buffer alive until after the table is dropped or the
    // region deregistered.
    unsafe { table.register(PD, buf.as_mut_ptr(), buf.len(), buf.as_ptr() as u64, access) }
}

/// Memory that is not mapped, or lacks the permission the rights need, is refused with
/// `EFAULT` (as `ib_umem_get` refuses it), and takes nothing from the table.
#[test]
fn register_refuses_memory_that_is_not_there() {
    const PAGE: usize = 4096;
    let t = MrTable::new(2, 9).unwrap();
    if !pages::supported() {
        softrnic_testkit::skip(
            "register_refuses_memory_that_is_not_there",
            "this kernel has no MADV_POPULATE_READ (Linux 5.14), so no page check",
        );
        return;
    }
    // SAFETY: a fresh anonymous read-only mapping of two pages.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    }
    .cast::<u8>();
    assert_ne!(p.cast(), libc::MAP_FAILED);
    let errno = |r: Result<MrKeys>| r.map_err(|e| e.errno()).err();
    // SAFETY (all calls): the region is refused, or deregistered before the unmapping.
    unsafe {
        // Read-only memory: fine for a region without write rights, not for one with them.
        let k = t
            .register(PD, p, 64, p as u64, Access::REMOTE_READ)
            .unwrap();
        t.deregister(k.lkey).unwrap();
        assert_eq!(
            errno(t.register(PD, p, 64, p as u64, Access::LOCAL_WRITE)),
            Some(14)
        );
        // Half accessible: the second page is not.
        assert_eq!(libc::mprotect(p.add(PAGE).cast(), PAGE, libc::PROT_NONE), 0);
        assert_eq!(
            errno(t.register(PD, p, PAGE + 1, p as u64, Access::empty())),
            Some(14)
        );
        assert_eq!(libc::munmap(p.cast(), 2 * PAGE), 0);
        // Never mapped: below `vm.mmap_min_addr` (unmapped pages may be mapped again by
        // another test thread at once).
        let low = PAGE as *mut u8;
        assert_eq!(
            errno(t.register(PD, low, 64, low as u64, Access::empty())),
            Some(14)
        );
    }
    // Both indices are still free.
    let mut buf = buffer(64);
    reg(&t, &mut buf, RW).unwrap();
    reg(&t, &mut buf, RW).unwrap();
}

#[test]
fn table_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<MrTable>();
}

#[test]
fn new_checks_max_mr() {
    assert!(matches!(MrTable::new(0, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        MrTable::new(MAX_MR_LIMIT + 1, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(MrTable::new(3, 1).unwrap().max_mr(), 3);
}

#[test]
fn register_error_paths() {
    let t = MrTable::new(4, 7).unwrap();
    let mut buf = buffer(64);
    let p = buf.as_mut_ptr();
    let einval = |r: Result<MrKeys>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // SAFETY (all calls): either refused before any use, or `buf` outlives `t`.
    unsafe {
        einval(t.register(PD, p, 0, p as u64, RW));
        einval(t.register(PD, core::ptr::null_mut(), 64, 0, RW));
        einval(t.register(PD, usize::MAX as *mut u8, 2, 0, RW));
        einval(t.register(PD, p, isize::MAX as usize + 1, 0, RW));
        einval(t.register(PD, p, 64, u64::MAX - 10, RW));
        einval(t.register(PD, p, 64, p as u64, Access::REMOTE_WRITE));
        einval(t.register(
            PD,
            p,
            64,
            p as u64,
            Access::REMOTE_ATOMIC | Access::REMOTE_READ,
        ));
        einval(t.register(
            PD,
            p,
            64,
            p as u64,
            Access::LOCAL_WRITE | Access::from_bits_retain(1 << 10),
        ));
        einval(t.register(PD, p, 64, p as u64, Access::from_bits_retain(1 << 31)));
        let e = t
            .register(PD, p, 64, p as u64, Access::FLUSH_PERSISTENT)
            .unwrap_err();
        assert_eq!(e.errno(), 95);
        // Nothing was taken from the table by the failures.
        for _ in 0..4 {
            t.register(
                PD,
                p,
                64,
                p as u64,
                Access::LOCAL_WRITE | Access::from_bits_retain(1 << 25),
            )
            .unwrap();
        }
    }
}

#[test]
fn full_table_is_enomem_until_a_deregistration() {
    let t = MrTable::new(2, 0).unwrap();
    let mut buf = buffer(16);
    let a = reg(&t, &mut buf, RW).unwrap();
    let b = reg(&t, &mut buf, RW).unwrap();
    assert_ne!(t.index_of(a.lkey), t.index_of(b.lkey));
    let e = reg(&t, &mut buf, RW).unwrap_err();
    assert!(matches!(e, Error::NoMemory(_)));
    assert_eq!(e.errno(), 12);
    t.deregister(a.lkey).unwrap();
    let c = reg(&t, &mut buf, RW).unwrap();
    assert_eq!(t.index_of(c.lkey), t.index_of(a.lkey));
    assert_ne!(c.lkey, a.lkey);
}

#[test]
fn keys_are_lkey_eq_rkey_with_nonzero_index() {
    let t = MrTable::new(8, 42).unwrap();
    let mut buf = buffer(16);
    for access in [Access::empty(), Access::REMOTE_READ, RW] {
        let k = reg(&t, &mut buf, access).unwrap();
        assert_eq!(k.lkey, k.rkey);
        assert!((1..=8).contains(&t.index_of(k.lkey)));
        assert!(k.lkey >= 0x100);
    }
}

#[test]
fn same_seed_same_keys_other_seed_other_keys() {
    let keys = |seed| {
        let t = MrTable::new(16, seed).unwrap();
        let mut buf = buffer(8);
        (0..16)
            .map(|_| reg(&t, &mut buf, RW).unwrap().lkey)
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(1), keys(1));
    assert_ne!(keys(1), keys(2));
}

#[test]
fn reused_index_never_accepts_an_old_key() {
    let t = MrTable::new(1, 0xdead_beef).unwrap();
    let mut buf = buffer(32);
    let va = buf.as_ptr() as u64;
    let mut old: Vec<u32> = Vec::new();
    for _ in 0..255 {
        let k = reg(&t, &mut buf, RW).unwrap();
        assert_eq!(t.index_of(k.lkey), 1);
        assert!(!old.contains(&k.lkey), "key {:#x} came back", k.lkey);
        assert_eq!(
            t.with_local_read(k.lkey, PD, va, 1, |b| b.to_vec()[0]),
            Ok(0)
        );
        for &stale in &old {
            assert_eq!(
                t.with_local_read(stale, PD, va, 1, |_| ()),
                Err(AccessError::KeyMismatch)
            );
            assert_eq!(
                t.with_remote_write(stale, PD, 1, va, 1, |_| ()),
                Err(AccessError::KeyMismatch)
            );
            assert!(matches!(
                t.deregister(stale),
                Err(Error::InvalidArgument(_))
            ));
        }
        t.deregister(k.lkey).unwrap();
        assert_eq!(
            t.with_local_read(k.lkey, PD, va, 1, |_| ()),
            Err(AccessError::NotRegistered)
        );
        old.push(k.lkey);
    }
}

#[test]
fn freed_indices_are_reused() {
    let t = MrTable::new(3, 5).unwrap();
    let mut buf = buffer(8);
    let [a, b, _c] = [(); 3].map(|_| reg(&t, &mut buf, RW).unwrap());
    t.deregister(b.lkey).unwrap();
    t.deregister(a.lkey).unwrap();
    let mut again = [(); 2].map(|_| t.index_of(reg(&t, &mut buf, RW).unwrap().lkey));
    again.sort();
    let mut freed = [t.index_of(a.lkey), t.index_of(b.lkey)];
    freed.sort();
    assert_eq!(again, freed);
}

/// A new region takes a free index at random, so its index tells nothing of how many
/// regions came before: each of 8 indices, 800 registrations, comes 100 times on average.
#[test]
fn a_new_region_takes_a_free_index_at_random() {
    let t = MrTable::new(8, 77).unwrap();
    let mut buf = buffer(8);
    let mut count = [0u32; 8];
    for _ in 0..800 {
        let k = reg(&t, &mut buf, RW).unwrap();
        count[t.index_of(k.lkey) - 1] += 1;
        t.deregister(k.lkey).unwrap();
    }
    // 100 ± 5 standard deviations (sqrt(800 · 1/8 · 7/8) ≈ 9.4).
    assert!(count.iter().all(|&c| (53..=147).contains(&c)), "{count:?}");
}

#[test]
fn accesses_reach_the_right_bytes() {
    let t = MrTable::new(4, 3).unwrap();
    let mut buf = buffer(64);
    let p = buf.as_mut_ptr();
    // SAFETY: `buf` outlives `t`.
    let k = unsafe { t.register(PD, p, 64, 0x10_0000, RW) }.unwrap();
    t.with_remote_write(k.rkey, PD, 1, 0x10_0010, 4, |mut m| m.copy_from(b"abcd"))
        .unwrap();
    let got = t
        .with_local_read(k.lkey, PD, 0x10_000e, 8, |b| b.to_vec())
        .unwrap();
    assert_eq!(got, [14, 15, b'a', b'b', b'c', b'd', 20, 21]);
    t.with_local_write(k.lkey, PD, 0x10_003f, 1, |mut m| m.copy_from(&[0xff]))
        .unwrap();
    assert_eq!(
        t.with_remote_read(k.rkey, PD, 1, 0x10_003f, 1, |b| b.to_vec()[0]),
        Ok(0xff)
    );
    t.with_remote_atomic(k.rkey, PD, 1, 0x10_0020, |v| (u64::from_le(v) + 1).to_le())
        .unwrap();
    drop(t);
    assert_eq!(&buf[0x10..0x14], b"abcd");
    assert_eq!(buf[0x20], 0x21);
    assert_eq!(buf[0x3f], 0xff);
}

#[test]
fn zero_based_region_is_addressed_from_zero() {
    let t = MrTable::new(2, 3).unwrap();
    let mut buf = buffer(16);
    let k = reg(&t, &mut buf, RW | Access::ZERO_BASED).unwrap();
    assert_eq!(
        t.with_remote_read(k.rkey, PD, 1, 0, 2, |b| b.to_vec()),
        Ok(vec![0, 1])
    );
    assert_eq!(
        t.with_remote_read(k.rkey, PD, 1, 15, 1, |b| b.to_vec()[0]),
        Ok(15)
    );
    let addr = buf.as_ptr() as u64;
    assert_eq!(
        t.with_remote_read(k.rkey, PD, 1, addr, 1, |_| ()),
        Err(AccessError::OutOfBounds)
    );
}

#[test]
fn every_check_through_the_table() {
    let t = MrTable::new(4, 9).unwrap();
    let mut buf = buffer(32);
    let va = buf.as_ptr() as u64;
    let k = reg(&t, &mut buf, Access::LOCAL_WRITE).unwrap();
    let ro = reg(&t, &mut buf, Access::empty()).unwrap();
    let nop = |_: Bytes<'_>| ();
    let nop_mut = |_: BytesMut<'_>| ();
    assert_eq!(
        t.with_local_read(0x7f, PD, va, 1, nop),
        Err(AccessError::BadIndex)
    );
    // 4 slots: a 2-bit index field; every value names a slot, so only the reserved keys
    // (upper 24 bits zero) are bad indices.
    assert_eq!(
        t.with_local_read(0, PD, va, 1, nop),
        Err(AccessError::BadIndex)
    );
    let free = (1..=4)
        .find(|&i| i != t.index_of(k.lkey) && i != t.index_of(ro.lkey))
        .unwrap();
    let free_key = keys::compose(free, 0x5a5a, 4);
    assert_eq!(
        t.with_local_read(free_key, PD, va, 1, nop),
        Err(AccessError::NotRegistered)
    );
    assert_eq!(
        t.with_local_read(k.lkey ^ 0x40, PD, va, 1, nop),
        Err(AccessError::KeyMismatch)
    );
    assert_eq!(
        t.with_local_read(k.lkey, PdHandle(2), va, 1, nop),
        Err(AccessError::PdMismatch)
    );
    let denied = |r| assert!(matches!(r, Err(AccessError::MissingRight(_))), "{r:?}");
    denied(t.with_local_write(ro.lkey, PD, va, 1, nop_mut));
    denied(t.with_remote_read(k.rkey, PD, 1, va, 1, nop));
    denied(t.with_remote_write(k.rkey, PD, 1, va, 1, nop_mut));
    denied(t.with_remote_atomic(k.rkey, PD, 1, va, |v| v).map(drop));
    assert_eq!(t.with_local_read(ro.lkey, PD, va, 32, nop), Ok(()));
    assert_eq!(
        t.with_local_write(k.lkey, PD, va - 1, 1, nop_mut),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(
        t.with_local_write(k.lkey, PD, va + 31, 2, nop_mut),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(
        t.with_local_read(k.lkey, PD, va, usize::MAX, nop),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(
        t.with_local_read(k.lkey, PD, va + 32, 0, |b| b.len()),
        Ok(0)
    );
    assert_eq!(
        t.with_local_read(k.lkey, PD, va + 33, 0, nop),
        Err(AccessError::OutOfBounds)
    );
    // Being deregistered: forced here; the concurrent tests reach it for real.
    let slot = &t.slots[t.index_of(k.lkey) - 1];
    slot.tag.store(tag(k.lkey, State::Invalidating), SeqCst);
    assert_eq!(
        t.with_local_read(k.lkey, PD, va, 1, nop),
        Err(AccessError::Invalidated)
    );
    slot.tag.store(tag(k.lkey, State::Valid), SeqCst);
}

#[test]
fn atomics_need_alignment_here() {
    let t = MrTable::new(1, 9).unwrap();
    let mut buf = vec![0u8; 32];
    // SAFETY: `buf` outlives `t`.
    let k = unsafe { t.register(PD, buf.as_mut_ptr(), 32, 0x1000, RW) }.unwrap();
    assert_eq!(
        t.with_remote_atomic(k.rkey, PD, 1, 0x1004, |v| v),
        Err(AccessError::Misaligned)
    );
    assert_eq!(t.with_remote_atomic(k.rkey, PD, 1, 0x1018, |v| v), Ok(0));
    assert_eq!(
        t.with_remote_atomic(k.rkey, PD, 1, 0x1020, |v| v),
        Err(AccessError::OutOfBounds)
    );
}

#[test]
fn deregister_unknown_stale_or_twice_is_einval() {
    let t = MrTable::new(2, 1).unwrap();
    let mut buf = buffer(8);
    let k = reg(&t, &mut buf, RW).unwrap();
    for bad in [0, 0xff, 3 << 8, k.lkey ^ 1] {
        let e = t.deregister(bad).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.errno() == 22,
            "{bad:#x}"
        );
    }
    t.deregister(k.lkey).unwrap();
    assert!(matches!(
        t.deregister(k.lkey),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn deregister_with_a_bound_window_is_ebusy() {
    let t = MrTable::new(2, 1).unwrap();
    let mut buf = buffer(8);
    let va = buf.as_ptr() as u64;
    let k = reg(&t, &mut buf, RW | Access::MW_BIND).unwrap();
    t.window_bound(k.lkey).unwrap();
    t.window_bound(k.lkey).unwrap();
    let e = t.deregister(k.lkey).unwrap_err();
    assert!(matches!(e, Error::Busy(_)) && e.errno() == 16);
    // The refused deregistration left the region working.
    assert_eq!(
        t.with_remote_read(k.rkey, PD, 1, va, 1, |b| b.to_vec()[0]),
        Ok(0)
    );
    t.window_unbound(k.lkey).unwrap();
    assert!(matches!(t.deregister(k.lkey), Err(Error::Busy(_))));
    t.window_unbound(k.lkey).unwrap();
    assert!(t.window_unbound(k.lkey).is_err());
    t.deregister(k.lkey).unwrap();
    assert!(matches!(
        t.window_bound(k.lkey),
        Err(Error::InvalidArgument(_))
    ));
    let k2 = reg(&t, &mut buf, RW).unwrap();
    assert_eq!(
        t.slots[t.index_of(k2.lkey) - 1].bound_windows.load(SeqCst),
        0
    );
}

#[test]
fn a_panicking_closure_does_not_break_the_table() {
    let t = MrTable::new(1, 1).unwrap();
    let mut buf = buffer(8);
    let va = buf.as_ptr() as u64;
    let k = reg(&t, &mut buf, RW).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        t.with_remote_write(k.rkey, PD, 1, va, 1, |_| panic!("closure panics"))
    }));
    assert!(r.is_err());
    assert_eq!(
        t.with_local_read(k.lkey, PD, va, 1, |b| b.to_vec()[0]),
        Ok(0)
    );
    t.deregister(k.lkey).unwrap();
}

#[test]
fn deregister_kills_new_lookups_then_waits_for_the_one_inside() {
    let t = MrTable::new(1, 1).unwrap();
    let mut buf = buffer(16);
    let va = buf.as_ptr() as u64;
    let k = reg(&t, &mut buf, RW).unwrap();
    let left = AtomicBool::new(false);
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        // Owned here, so a failing assertion drops it and frees the pinned reader.
        let release_tx = release_tx;
        let t = &t;
        let left = &left;
        s.spawn(move || {
            t.with_remote_read(k.rkey, PD, 1, va, 16, |_| {
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                left.store(true, SeqCst);
            })
            .unwrap();
        });
        entered_rx.recv().unwrap();
        let dereg = s.spawn(move || {
            t.deregister(k.lkey).unwrap();
            assert!(
                left.load(SeqCst),
                "deregister returned while a closure was inside"
            );
        });
        let slot = &t.slots[0];
        while slot.tag.load(SeqCst) != tag(k.lkey, State::Invalidating) && !dereg.is_finished() {
            thread::yield_now();
        }
        // New lookups fail at once (they do not queue behind the deregistration).
        assert_eq!(
            t.with_remote_read(k.rkey, PD, 1, va, 1, |_| ()),
            Err(AccessError::Invalidated)
        );
        assert_eq!(
            t.with_local_write(k.lkey, PD, va, 1, |_| ()),
            Err(AccessError::Invalidated)
        );
        thread::sleep(Duration::from_millis(20));
        assert!(!dereg.is_finished());
        release_tx.send(()).unwrap();
        dereg.join().unwrap();
    });
}

#[test]
fn no_closure_runs_after_deregister_returns() {
    for round in 0..40 {
        let table = MrTable::new(2, round).unwrap();
        // The shadow buffer outlives the region: after deregistration it is ours again and
        // must stay exactly as we leave it.
        let mut shadow = vec![0u8; 256].into_boxed_slice();
        let addr = shadow.as_mut_ptr();
        let va = addr as u64;
        // SAFETY: `shadow` outlives the region (it is deregistered inside the scope).
        let k = unsafe { table.register(PD, addr, 256, va, RW) }.unwrap();
        let deregistered = AtomicBool::new(false);
        let late = AtomicUsize::new(0);
        let successes = AtomicUsize::new(0);
        thread::scope(|s| {
            let writer = || {
                let mut failures = 0;
                while failures < 200 {
                    let r = table.with_remote_write(k.rkey, PD, 1, va, 256, |mut m| {
                        late.fetch_add(deregistered.load(SeqCst) as usize, SeqCst);
                        m.copy_from(&[0x5a; 256]);
                        thread::yield_now();
                        late.fetch_add(deregistered.load(SeqCst) as usize, SeqCst);
                    });
                    match r {
                        Ok(()) => _ = successes.fetch_add(1, SeqCst),
                        Err(AccessError::Invalidated | AccessError::NotRegistered) => failures += 1,
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
            };
            let reader = || {
                for _ in 0..2000 {
                    let r = table.with_local_read(k.lkey, PD, va, 256, |b| {
                        late.fetch_add(deregistered.load(SeqCst) as usize, SeqCst);
                        b.to_vec()[0]
                    });
                    if r.is_err() {
                        break;
                    }
                }
            };
            s.spawn(writer);
            s.spawn(writer);
            s.spawn(reader);
            while successes.load(SeqCst) < 20 {
                thread::yield_now();
            }
            table.deregister(k.lkey).unwrap();
            deregistered.store(true, SeqCst);
            // SAFETY: deregistration returned, so the table no longer touches the bytes.
            unsafe { core::ptr::write_bytes(addr, 0xee, 256) };
        });
        assert_eq!(
            late.load(SeqCst),
            0,
            "round {round}: a closure ran after deregister"
        );
        assert!(
            shadow.iter().all(|&b| b == 0xee),
            "round {round}: memory written after deregister"
        );
    }
}
