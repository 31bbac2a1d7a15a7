//! Tests of on-demand paging: the capabilities, and `ibv_advise_mr`'s checks and errnos one
//! by one (`ibv_advise_mr(3)`), its paging with and without the flush flag.

use super::*;
use crate::wr::Sge;

const PD: PdHandle = PdHandle(1);
const PAGE: usize = 4096;
const ODP_RW: Access = Access::LOCAL_WRITE.union(Access::ON_DEMAND);

/// Two anonymous pages, read-write.
struct Pages(*mut u8);

impl Pages {
    fn new() -> Pages {
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Pages(p.cast())
    }

    fn addr(&self) -> u64 {
        self.0 as u64
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: mapped in `new`, unmapped once.
        unsafe { libc::munmap(self.0.cast(), 2 * PAGE) };
    }
}

/// A table with the two pages registered for `PD` with `access`; returns its lkey.
fn setup(pages: &Pages, access: Access) -> (MrTable, u32) {
    let t = MrTable::new(8, 5).unwrap();
    // SAFETY: every test drops the table before the pages.
    let k = unsafe { t.register(PD, pages.0, 2 * PAGE, pages.addr(), access) }.unwrap();
    (t, k.lkey)
}

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

fn errno(r: core::result::Result<(), AdviseError>) -> i32 {
    r.map_or_else(AdviseError::errno, |()| 0)
}

#[test]
fn caps_report_explicit_odp_for_every_operation_of_each_transport() {
    assert_eq!(ODP_GENERAL_CAPS.bits(), 0x3);
    assert_eq!(ODP_TRANSPORT_CAPS.rc.bits(), 0x3f);
    assert!(!ODP_TRANSPORT_CAPS
        .uc
        .intersects(OdpTransportCap::READ | OdpTransportCap::ATOMIC));
    assert!(!ODP_TRANSPORT_CAPS.ud.contains(OdpTransportCap::WRITE));
    assert!(ODP_TRANSPORT_CAPS.ud.contains(OdpTransportCap::SEND));
}

#[test]
fn advice_values_are_the_c_enum() {
    assert_eq!(Advice::from_raw(0), Some(Advice::Prefetch));
    assert_eq!(Advice::from_raw(1), Some(Advice::PrefetchWrite));
    assert_eq!(Advice::from_raw(2), Some(Advice::PrefetchNoFault));
    assert_eq!(Advice::from_raw(3), None);
    assert_eq!(AdviseError::NotSupported.errno(), libc::EOPNOTSUPP);
}

#[test]
fn every_advice_succeeds_on_an_odp_region_with_and_without_flush() {
    let p = Pages::new();
    let (t, lkey) = setup(&p, ODP_RW);
    let whole = [sge(p.addr(), 2 * PAGE as u32, lkey)];
    let parts = [
        sge(p.addr(), 10, lkey),
        sge(p.addr() + PAGE as u64 + 7, 100, lkey),
    ];
    for advice in [
        Advice::Prefetch,
        Advice::PrefetchWrite,
        Advice::PrefetchNoFault,
    ] {
        for flags in [AdviseFlags::empty(), AdviseFlags::FLUSH] {
            assert_eq!(t.advise(PD, advice, flags, &whole), Ok(()));
            assert_eq!(t.advise(PD, advice, flags, &parts), Ok(()));
        }
    }
    // A zero-length SGE at the end of the region is inside it.
    let end = [sge(p.addr() + 2 * PAGE as u64, 0, lkey)];
    assert_eq!(
        t.advise(PD, Advice::Prefetch, AdviseFlags::FLUSH, &end),
        Ok(())
    );
}

#[test]
fn unknown_flags_and_an_empty_list_are_einval() {
    let p = Pages::new();
    let (t, lkey) = setup(&p, ODP_RW);
    let one = [sge(p.addr(), 8, lkey)];
    assert_eq!(
        errno(t.advise(PD, Advice::Prefetch, AdviseFlags::from_bits_retain(2), &one)),
        libc::EINVAL
    );
    assert_eq!(
        errno(t.advise(PD, Advice::Prefetch, AdviseFlags::empty(), &[])),
        libc::EINVAL
    );
}

#[test]
fn bad_lkeys_and_ranges_outside_the_region_are_efault() {
    let p = Pages::new();
    let (t, lkey) = setup(&p, ODP_RW);
    let a = p.addr();
    for bad in [
        sge(a, 8, 0),                          // index 0 is reserved
        sge(a, 8, lkey ^ 1),                   // stale key byte
        sge(a, 8, lkey ^ 0x100),               // another slot: a free one
        sge(a - 1, 8, lkey),                   // starts before the region
        sge(a + 2 * PAGE as u64 - 4, 8, lkey), // runs past its end
    ] {
        let r = t.advise(PD, Advice::Prefetch, AdviseFlags::FLUSH, &[bad]);
        assert_eq!(errno(r), libc::EFAULT, "{bad:?}");
    }
    // One bad SGE fails the whole list.
    let list = [sge(a, 8, lkey), sge(a, 8, lkey ^ 1)];
    assert_eq!(
        errno(t.advise(PD, Advice::Prefetch, AdviseFlags::empty(), &list)),
        libc::EFAULT
    );
    t.deregister(lkey).unwrap();
    let r = t.advise(
        PD,
        Advice::Prefetch,
        AdviseFlags::empty(),
        &[sge(a, 8, lkey)],
    );
    assert_eq!(errno(r), libc::EFAULT);
}

#[test]
fn another_pd_and_prefetch_write_of_a_read_only_region_are_eperm() {
    let p = Pages::new();
    let (t, lkey) = setup(&p, ODP_RW);
    let one = [sge(p.addr(), 8, lkey)];
    let r = t.advise(PdHandle(2), Advice::Prefetch, AdviseFlags::empty(), &one);
    assert_eq!(errno(r), libc::EPERM);
    drop(t);
    let (t, lkey) = setup(&p, Access::ON_DEMAND | Access::REMOTE_READ);
    let one = [sge(p.addr(), 8, lkey)];
    assert_eq!(
        errno(t.advise(PD, Advice::PrefetchWrite, AdviseFlags::empty(), &one)),
        libc::EPERM
    );
    assert_eq!(
        t.advise(PD, Advice::Prefetch, AdviseFlags::FLUSH, &one),
        Ok(())
    );
}

#[test]
fn a_region_without_on_demand_is_enoent() {
    let p = Pages::new();
    let (t, lkey) = setup(&p, Access::LOCAL_WRITE);
    let one = [sge(p.addr(), 8, lkey)];
    for advice in [
        Advice::Prefetch,
        Advice::PrefetchWrite,
        Advice::PrefetchNoFault,
    ] {
        assert_eq!(
            errno(t.advise(PD, advice, AdviseFlags::empty(), &one)),
            libc::ENOENT
        );
    }
}

#[test]
fn a_memory_window_key_is_einval() {
    let p = Pages::new();
    let (t, _) = setup(&p, ODP_RW | Access::MW_BIND);
    let mw = t.alloc_window(PD, MwType::Type1).unwrap();
    let r = t.advise(
        PD,
        Advice::Prefetch,
        AdviseFlags::empty(),
        &[sge(p.addr(), 8, mw)],
    );
    assert_eq!(errno(r), libc::EINVAL);
}

/// Pages that lose their write permission after registration: a flushed write prefetch
/// reports `EFAULT` (and raises no signal); an unflushed one is best effort and succeeds, as
/// does a read prefetch or one that faults nothing in.
#[test]
fn pages_that_cannot_be_had_fail_only_a_flushed_prefetch() {
    if !pages::supported() {
        softrnic_testkit::skip(
            "pages_that_cannot_be_had_fail_only_a_flushed_prefetch",
            "this kernel has no MADV_POPULATE_READ (Linux 5.14)",
        );
        return;
    }
    let p = Pages::new();
    let (t, lkey) = setup(&p, ODP_RW);
    // SAFETY: only the protection of our own second page changes; nothing reads it.
    let r = unsafe { libc::mprotect(p.0.add(PAGE).cast(), PAGE, libc::PROT_READ) };
    assert_eq!(r, 0);
    let whole = [sge(p.addr(), 2 * PAGE as u32, lkey)];
    let flushed = t.advise(PD, Advice::PrefetchWrite, AdviseFlags::FLUSH, &whole);
    assert_eq!(errno(flushed), libc::EFAULT);
    assert_eq!(
        t.advise(PD, Advice::PrefetchWrite, AdviseFlags::empty(), &whole),
        Ok(())
    );
    assert_eq!(
        t.advise(PD, Advice::Prefetch, AdviseFlags::FLUSH, &whole),
        Ok(())
    );
    let r = t.advise(PD, Advice::PrefetchNoFault, AdviseFlags::FLUSH, &whole);
    assert_eq!(r, Ok(()));
    // The first page is still writable: a write prefetch of it alone succeeds.
    let first = [sge(p.addr(), PAGE as u32, lkey)];
    assert_eq!(
        t.advise(PD, Advice::PrefetchWrite, AdviseFlags::FLUSH, &first),
        Ok(())
    );
}
