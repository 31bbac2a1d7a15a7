//! Tests of relaxed regions in the table: error paths, the window of vulnerability, page
//! rounding, pool pressure, and flush against concurrent accessors.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread;

use super::*;

const PD: PdHandle = PdHandle(1);
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);
const PAGE: usize = RELAXED_PAGE;

/// `pages` zeroed, page-aligned pages, freed on drop.
struct Pages {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the pages are only reached through the table in these tests.
unsafe impl Send for Pages {}
// SAFETY: as above.
unsafe impl Sync for Pages {}

impl Pages {
    fn new(pages: usize) -> Pages {
        let layout = Layout::from_size_align(pages * PAGE, PAGE).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Pages { ptr, layout }
    }

    fn at(&self, offset: usize) -> *mut u8 {
        // SAFETY: callers stay inside the allocation.
        unsafe { self.ptr.add(offset) }
    }

    fn va(&self, offset: usize) -> u64 {
        self.ptr as u64 + offset as u64
    }

    /// Reads the bytes directly (no region may be writing them: the test is single-threaded
    /// there, or the writer has stopped).
    fn bytes(&self) -> Vec<u8> {
        // SAFETY: the whole allocation, no concurrent writer.
        unsafe { core::slice::from_raw_parts(self.ptr, self.layout.size()).to_vec() }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Registers `len` bytes at `offset` of `pages` (which outlive the table in every test).
fn reg(t: &MrTable, pool: &RelaxedPool, p: &Pages, offset: usize, len: usize) -> Result<MrKeys> {
    // SAFETY: the pages outlive the table's use of them (declared before the table).
    unsafe { t.register_relaxed(pool, p.at(offset), len, RW) }
}

fn remote_write(
    t: &MrTable,
    key: u32,
    va: u64,
    data: &[u8],
) -> core::result::Result<(), AccessError> {
    t.with_remote_write(key, PD, 0x11, va, data.len(), |mut b| b.copy_from(data))
}

#[test]
fn error_paths() {
    let p = Pages::new(1);
    let t = MrTable::new(8, 1).unwrap();
    assert!(matches!(
        t.relaxed_pool(PD, 0, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(t.relaxed_pool(PD, 9, 1), Err(Error::NoMemory(_))));
    let pool = t.relaxed_pool(PD, 4, 1).unwrap();
    let einval = |r: Result<MrKeys>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // SAFETY (all calls): refused before any use of the memory.
    unsafe {
        einval(t.register_relaxed(&pool, p.ptr, 64, Access::REMOTE_WRITE));
        einval(t.register_relaxed(&pool, p.ptr, 64, Access::REMOTE_ATOMIC));
        einval(t.register_relaxed(&pool, p.ptr, 64, Access::from_bits_retain(1 << 19)));
        einval(t.register_relaxed(&pool, p.ptr, 64, RW | Access::ZERO_BASED));
        einval(t.register_relaxed(&pool, p.ptr, 0, RW));
        einval(t.register_relaxed(&pool, core::ptr::null_mut(), 64, RW));
        einval(t.register_relaxed(&pool, usize::MAX as *mut u8, 2, RW));
        einval(t.register_relaxed(&pool, (usize::MAX - 10) as *mut u8, 4, RW));
        assert!(matches!(
            t.register_relaxed(&pool, p.ptr, 64, RW | Access::FLUSH_PERSISTENT),
            Err(Error::NotSupported(_))
        ));
    }
    assert_eq!(pool.available(), 4, "refusals take no key");
    let k = reg(&t, &pool, &p, 0, 64).unwrap();
    // A relaxed key is not for `deregister`, a normal key not for `deregister_relaxed`.
    assert!(matches!(
        t.deregister(k.lkey),
        Err(Error::InvalidArgument(_))
    ));
    let other = t.relaxed_pool(PD, 1, 1).unwrap();
    assert!(matches!(
        t.deregister_relaxed(&other, k.lkey),
        Err(Error::InvalidArgument(_))
    ));
    // SAFETY: the pages outlive the table.
    let normal = unsafe { t.register(PD, p.ptr, 64, p.va(0), RW) }.unwrap();
    assert!(matches!(
        t.deregister_relaxed(&pool, normal.lkey),
        Err(Error::InvalidArgument(_))
    ));
    for bad in [0, 0xff, u32::MAX, k.lkey ^ 1] {
        assert!(matches!(
            t.deregister_relaxed(&pool, bad),
            Err(Error::InvalidArgument(_))
        ));
    }
    t.deregister_relaxed(&pool, k.lkey).unwrap();
    // Twice is EINVAL, before and after the flush.
    assert!(matches!(
        t.deregister_relaxed(&pool, k.lkey),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(t.flush_relaxed(&pool), 1);
    assert!(matches!(
        t.deregister_relaxed(&pool, k.lkey),
        Err(Error::InvalidArgument(_))
    ));
    // Release refuses a pool with live regions, then gives the keys back.
    let live = reg(&t, &other, &p, 0, 64).unwrap();
    assert!(matches!(
        t.release_relaxed_pool(&other),
        Err(Error::Busy(_))
    ));
    t.deregister_relaxed(&other, live.lkey).unwrap();
    t.release_relaxed_pool(&other).unwrap();
    assert!(matches!(
        reg(&t, &other, &p, 0, 64),
        Err(Error::NoMemory(_))
    ));
    t.deregister(normal.lkey).unwrap();
}

#[test]
fn keys_work_until_flush_and_never_after() {
    let p = Pages::new(1);
    let t = MrTable::new(8, 2).unwrap();
    let pool = t.relaxed_pool(PD, 2, 3).unwrap();
    let k = reg(&t, &pool, &p, 0, 64).unwrap();
    remote_write(&t, k.rkey, p.va(0), &[1; 8]).unwrap();
    t.deregister_relaxed(&pool, k.lkey).unwrap();
    assert_eq!(t.relaxed_marked(&pool), 1);
    // The window of vulnerability: the keys still work, remote and local.
    remote_write(&t, k.rkey, p.va(8), &[2; 8]).unwrap();
    t.with_local_read(k.lkey, PD, p.va(0), 16, |b| assert_eq!(b.to_vec()[8], 2))
        .unwrap();
    assert_eq!(t.flush_relaxed(&pool), 1);
    let before = p.bytes();
    assert_eq!(
        remote_write(&t, k.rkey, p.va(16), &[3; 8]),
        Err(AccessError::NotRegistered)
    );
    assert!(t.with_local_read(k.lkey, PD, p.va(0), 8, |_| ()).is_err());
    // After the index is reused the old key is stale.
    let k2 = reg(&t, &pool, &p, 0, 64).unwrap();
    let k3 = reg(&t, &pool, &p, 0, 64).unwrap();
    assert!(k2.lkey != k.lkey && k3.lkey != k.lkey);
    assert_eq!(
        remote_write(&t, k.rkey, p.va(16), &[3; 8]),
        Err(AccessError::KeyMismatch)
    );
    assert_eq!(p.bytes(), before, "no write through the flushed key");
}

#[test]
fn range_is_rounded_out_to_pages() {
    let p = Pages::new(3);
    let t = MrTable::new(8, 3).unwrap();
    let pool = t.relaxed_pool(PD, 2, 1).unwrap();
    // 100 bytes from offset PAGE + 10: the region is the whole middle page.
    let k = reg(&t, &pool, &p, PAGE + 10, 100).unwrap();
    remote_write(&t, k.rkey, p.va(PAGE + 110), &[7; 8]).unwrap(); // just past len
    remote_write(&t, k.rkey, p.va(PAGE), &[7; 1]).unwrap(); // page start, before addr
    remote_write(&t, k.rkey, p.va(2 * PAGE - 1), &[7; 1]).unwrap(); // last byte of the page
    let before = p.bytes();
    assert_eq!(
        remote_write(&t, k.rkey, p.va(2 * PAGE), &[9; 1]),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(
        remote_write(&t, k.rkey, p.va(PAGE - 1), &[9; 1]),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(
        remote_write(&t, k.rkey, p.va(2 * PAGE - 4), &[9; 8]),
        Err(AccessError::OutOfBounds)
    );
    assert_eq!(p.bytes(), before);
    // A range that ends exactly on a page boundary is not extended past it.
    let k = reg(&t, &pool, &p, 0, PAGE).unwrap();
    assert_eq!(
        remote_write(&t, k.rkey, p.va(PAGE), &[9; 1]),
        Err(AccessError::OutOfBounds)
    );
}

#[test]
fn exhausted_pool_is_eagain_until_flush_and_enomem_when_all_live() {
    // Each registration covers other pages, so none takes a marked region back.
    let p = Pages::new(3);
    let t = MrTable::new(8, 4).unwrap();
    // Threshold above the capacity: never flushes on its own.
    let pool = t.relaxed_pool(PD, 2, 3).unwrap();
    let a = reg(&t, &pool, &p, 0, 64).unwrap();
    let _b = reg(&t, &pool, &p, PAGE, 64).unwrap();
    assert!(matches!(
        reg(&t, &pool, &p, 2 * PAGE, 64),
        Err(Error::NoMemory(_))
    ));
    t.deregister_relaxed(&pool, a.lkey).unwrap();
    assert!(matches!(
        reg(&t, &pool, &p, 2 * PAGE, 64),
        Err(Error::TryAgain(_))
    ));
    assert!(matches!(
        reg(&t, &pool, &p, 2 * PAGE, 64).map_err(|e| e.errno()),
        Err(11)
    ));
    // Normal registrations do not dip into the pool, nor the pool into the table.
    assert_eq!(t.free_list().len(), 6);
    t.flush_relaxed(&pool);
    reg(&t, &pool, &p, 2 * PAGE, 64).unwrap();
}

#[test]
fn registering_the_pages_of_a_marked_region_takes_it_back() {
    let p = Pages::new(3);
    let t = MrTable::new(8, 7).unwrap();
    // One key only: a registration that took a new key would fail with EAGAIN.
    let pool = t.relaxed_pool(PD, 1, 2).unwrap();
    let a = reg(&t, &pool, &p, PAGE, 64).unwrap();
    t.deregister_relaxed(&pool, a.lkey).unwrap();
    assert_eq!(t.relaxed_marked(&pool), 1);
    // Other bytes of the same page, same rights: the same region, keys and all.
    let b = reg(&t, &pool, &p, PAGE + 100, 8).unwrap();
    assert_eq!(b, a);
    assert_eq!(t.relaxed_marked(&pool), 0);
    remote_write(&t, b.rkey, p.va(PAGE), &[5; 4]).unwrap();
    assert_eq!(&p.bytes()[PAGE..PAGE + 4], &[5; 4]);
    // Live again: deregistering it opens a new window, and a flush closes it.
    t.deregister_relaxed(&pool, b.lkey).unwrap();
    // Other rights or other pages: not the same region, and the only key is marked.
    // SAFETY: as in `reg`.
    let other_rights = unsafe { t.register_relaxed(&pool, p.at(PAGE), 64, Access::LOCAL_WRITE) };
    assert!(matches!(other_rights, Err(Error::TryAgain(_))));
    assert!(matches!(
        reg(&t, &pool, &p, PAGE, PAGE + 1),
        Err(Error::TryAgain(_))
    ));
    assert_eq!(t.flush_relaxed(&pool), 1);
    assert!(remote_write(&t, a.rkey, p.va(PAGE), &[6]).is_err());
    // After the flush nothing is taken back: a new key.
    let c = reg(&t, &pool, &p, PAGE, 64).unwrap();
    assert_ne!(c.rkey, a.rkey);
}

#[test]
fn a_live_region_over_the_same_pages_is_never_taken() {
    let p = Pages::new(1);
    let t = MrTable::new(8, 9).unwrap();
    let pool = t.relaxed_pool(PD, 2, 3).unwrap();
    let older = reg(&t, &pool, &p, 0, 64).unwrap();
    let newer = reg(&t, &pool, &p, 0, 64).unwrap();
    assert_ne!(older, newer);
    // The newer one is live: the older, marked one is taken back.
    t.deregister_relaxed(&pool, older.lkey).unwrap();
    assert_eq!(reg(&t, &pool, &p, 0, 64).unwrap(), older);
    // Both live now, and the pool has no other key.
    assert!(matches!(reg(&t, &pool, &p, 0, 64), Err(Error::NoMemory(_))));
    remote_write(&t, newer.rkey, p.va(8), &[3]).unwrap();
    remote_write(&t, older.rkey, p.va(9), &[4]).unwrap();
}

#[test]
fn relaxed_registration_of_memory_that_is_not_there_is_efault() {
    let t = MrTable::new(8, 8).unwrap();
    if !pages::supported() {
        softrnic_testkit::skip(
            "relaxed_registration_of_memory_that_is_not_there_is_efault",
            "this kernel has no MADV_POPULATE_READ (Linux 5.14), so no page check",
        );
        return;
    }
    let pool = t.relaxed_pool(PD, 2, 2).unwrap();
    // SAFETY: a fresh inaccessible anonymous mapping of one page.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: the registration must fail; nothing is registered.
    let r = unsafe { t.register_relaxed(&pool, p.cast(), 64, RW) };
    // SAFETY: mapped above.
    assert_eq!(unsafe { libc::munmap(p, PAGE) }, 0);
    assert_eq!(r.map_err(|e| e.errno()), Err(14));
    assert_eq!(pool.available(), 2);
}

#[test]
fn pool_pressure_flushes_a_batch_on_its_own() {
    // Registrations of the fifth page never take back one of the first four.
    let p = Pages::new(5);
    let t = MrTable::new(8, 5).unwrap();
    let pool = t.relaxed_pool(PD, 4, 2).unwrap();
    let keys: Vec<_> = (0..4)
        .map(|i| reg(&t, &pool, &p, i * PAGE, 64).unwrap())
        .collect();
    t.deregister_relaxed(&pool, keys[0].lkey).unwrap();
    assert!(matches!(
        reg(&t, &pool, &p, 4 * PAGE, 64),
        Err(Error::TryAgain(_))
    ));
    t.deregister_relaxed(&pool, keys[1].lkey).unwrap();
    // Two marked reach the threshold: the registration flushes both and succeeds.
    reg(&t, &pool, &p, 4 * PAGE, 64).unwrap();
    assert_eq!(t.relaxed_marked(&pool), 0);
    assert_eq!(pool.available(), 1);
    for (i, k) in keys[..2].iter().enumerate() {
        assert!(remote_write(&t, k.rkey, p.va(i * PAGE), &[1]).is_err());
    }
}

/// One thread writes through relaxed regions without pause; the main thread deregisters and
/// flushes them. After the flush returns, the memory is changed to a sentinel and must stay so.
#[test]
fn nothing_is_written_after_flush_returns() {
    const N: usize = 4;
    let p = Pages::new(N);
    let t = MrTable::new(16, 6).unwrap();
    let pool = t.relaxed_pool(PD, N, N + 1).unwrap();
    for round in 0..20u8 {
        let keys: Vec<_> = (0..N)
            .map(|i| reg(&t, &pool, &p, i * PAGE, PAGE).unwrap())
            .collect();
        let stop = AtomicBool::new(false);
        thread::scope(|s| {
            s.spawn(|| {
                let mut n = 0u64;
                while !stop.load(SeqCst) {
                    for (i, k) in keys.iter().enumerate() {
                        let _ = remote_write(
                            &t,
                            k.rkey,
                            p.va(i * PAGE),
                            &[round.wrapping_add(1); PAGE],
                        );
                    }
                    n += 1;
                }
                n
            });
            for k in &keys {
                t.deregister_relaxed(&pool, k.lkey).unwrap();
            }
            assert_eq!(t.flush_relaxed(&pool), N);
            // Nothing may write now: the sentinel must survive the writer's further attempts.
            // SAFETY: no key reaches these pages any more (the property under test).
            unsafe { core::ptr::write_bytes(p.ptr, 0xee, N * PAGE) };
            for _ in 0..1000 {
                thread::yield_now();
            }
            stop.store(true, SeqCst);
        });
        assert!(
            p.bytes().iter().all(|&b| b == 0xee),
            "round {round}: written after flush"
        );
    }
}

#[test]
fn concurrent_flushes_both_wait() {
    let p = Pages::new(1);
    let t = MrTable::new(8, 7).unwrap();
    let pool = t.relaxed_pool(PD, 4, 5).unwrap();
    for _ in 0..50 {
        let k = reg(&t, &pool, &p, 0, 64).unwrap();
        t.deregister_relaxed(&pool, k.lkey).unwrap();
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    t.flush_relaxed(&pool);
                    assert!(remote_write(&t, k.rkey, p.va(0), &[1]).is_err());
                });
            }
        });
    }
}
