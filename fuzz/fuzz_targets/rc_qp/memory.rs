//! The memory the `rc_qp` target exposes, and its shadow map: which bytes the QP may change.
//!
//! One page-aligned buffer of [`PAGES`] pages, filled with a known pattern before every input:
//!
//! | page | what                                                   | may change              |
//! |------|--------------------------------------------------------|-------------------------|
//! | 0    | guard, unregistered                                    | nothing                 |
//! | 1    | `W`: REMOTE_WRITE, REMOTE_READ, LOCAL_WRITE            | all of it               |
//! | 2    | `R`: REMOTE_READ only                                  | nothing                 |
//! | 3    | `A`: REMOTE_ATOMIC, LOCAL_WRITE, 4 bytes in from each end | its whole aligned words |
//! | 4    | `L`: LOCAL_WRITE, MW_BIND, no remote right             | see below               |
//! | 5    | `O`: every right, but another PD                       | nothing                 |
//! | 6    | guard, unregistered                                    | nothing                 |
//!
//! In `L`: the buffers of the posted receive WRs ([`RECV_SGES`]), the requester's READ
//! destination ([`READ_DEST`]) and atomic result ([`ATOMIC_RESULT`]), a type 2 window bound to
//! the QP with REMOTE_WRITE and REMOTE_READ ([`MW2`]), and a type 1 window with REMOTE_ATOMIC
//! ([`MW1`], its aligned words). The rest of `L` must not change.
//!
//! Every region's iova is `(index + 1) << 32` plus its offset in its page, so that iova and
//! address agree modulo 8 and an aligned VA is an aligned word of the buffer (IBTA 9.4.5: an
//! atomic's VA is 8-byte aligned).

use std::alloc::{alloc, Layout};
use std::ops::Range;
use std::sync::OnceLock;

pub const PAGE: usize = 4096;
pub const PAGES: usize = 7;
pub const LEN: usize = PAGES * PAGE;

/// A registered region: its bytes in the buffer, and its rights.
pub struct RegionSpec {
    pub bytes: Range<usize>,
    pub other_pd: bool,
    pub access: u32,
}

const LW: u32 = 1;
const RW: u32 = 1 << 1;
const RR: u32 = 1 << 2;
const RA: u32 = 1 << 3;
const BIND: u32 = 1 << 4;
const FLUSH: u32 = 1 << 8;

/// The regions, in registration order: `W`, `R`, `A`, `L`, `O`.
pub const REGIONS: [RegionSpec; 5] = [
    RegionSpec {
        bytes: PAGE..2 * PAGE,
        other_pd: false,
        access: LW | RW | RR | FLUSH,
    },
    RegionSpec {
        bytes: 2 * PAGE..3 * PAGE,
        other_pd: false,
        access: RR,
    },
    RegionSpec {
        bytes: 3 * PAGE + 4..4 * PAGE - 4,
        other_pd: false,
        access: LW | RA,
    },
    RegionSpec {
        bytes: L..L + PAGE,
        other_pd: false,
        access: LW | BIND,
    },
    RegionSpec {
        bytes: 5 * PAGE..6 * PAGE,
        other_pd: true,
        access: LW | RW | RR | RA,
    },
];

/// Index of `L` in [`REGIONS`].
pub const L_INDEX: usize = 3;
const L: usize = 4 * PAGE;
/// The two SGEs of every posted receive WR.
pub const RECV_SGES: [Range<usize>; 2] = [L..L + 0x200, L + 0x300..L + 0x340];
/// Where the requester's RDMA READ lands.
pub const READ_DEST: Range<usize> = L + 0x400..L + 0x600;
/// Where the requester's atomic returns the original value.
pub const ATOMIC_RESULT: Range<usize> = L + 0x600..L + 0x608;
/// The type 2 window (REMOTE_WRITE, REMOTE_READ).
pub const MW2: Range<usize> = L + 0x800..L + 0xc00;
/// The type 1 window (REMOTE_ATOMIC).
pub const MW1: Range<usize> = L + 0xc04..L + 0xd04;

/// The iova of buffer offset `at`, inside region `index`.
pub fn iova(index: usize, at: usize) -> u64 {
    ((index as u64 + 1) << 32) + (at % PAGE) as u64
}

/// The aligned 8-byte words wholly inside `r`.
fn words(r: &Range<usize>) -> Range<usize> {
    r.start.next_multiple_of(8)..r.end / 8 * 8
}

/// `true` for each byte the QP may change.
fn writable() -> Vec<bool> {
    let mut w = vec![false; LEN];
    let mut set = |r: Range<usize>| w[r].iter_mut().for_each(|b| *b = true);
    set(REGIONS[0].bytes.clone());
    set(words(&REGIONS[2].bytes));
    for r in RECV_SGES {
        set(r);
    }
    set(READ_DEST);
    set(ATOMIC_RESULT);
    set(MW2);
    set(words(&MW1));
    w
}

/// The buffer (allocated once, page-aligned, never freed), the pattern it starts each input
/// with, and the shadow map.
pub struct Memory {
    pub base: *mut u8,
    pattern: Vec<u8>,
    writable: Vec<bool>,
}

// SAFETY: the fuzzer runs inputs on one thread; the pointer is only used there.
unsafe impl Send for Memory {}
// SAFETY: as above.
unsafe impl Sync for Memory {}

impl Memory {
    pub fn get() -> &'static Memory {
        static M: OnceLock<Memory> = OnceLock::new();
        M.get_or_init(|| {
            // SAFETY: a non-zero size; the allocation is leaked on purpose.
            let base = unsafe { alloc(Layout::from_size_align(LEN, PAGE).unwrap()) };
            assert!(!base.is_null());
            let pattern = (0..LEN)
                .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 8) as u8 | 1)
                .collect();
            Memory {
                base,
                pattern,
                writable: writable(),
            }
        })
    }

    /// Puts the pattern back (no region is registered while this runs).
    pub fn reset(&self) {
        // SAFETY: `base` is valid for `LEN` bytes; nothing else accesses it now.
        unsafe { std::ptr::copy_nonoverlapping(self.pattern.as_ptr(), self.base, LEN) };
    }

    /// Prints how many bytes of each page changed.
    pub fn trace(&self) {
        // SAFETY: as in `check`.
        let now = unsafe { std::slice::from_raw_parts(self.base, LEN) };
        for (p, (a, b)) in now.chunks(PAGE).zip(self.pattern.chunks(PAGE)).enumerate() {
            let n = a.iter().zip(b).filter(|(x, y)| x != y).count();
            if n > 0 {
                eprintln!("page {p}: {n} bytes changed");
            }
        }
    }

    /// Panics at the first byte outside the writable set that is not the pattern's.
    pub fn check(&self) {
        // SAFETY: as in `reset`: the regions of the input are deregistered.
        let now = unsafe { std::slice::from_raw_parts(self.base, LEN) };
        if now == self.pattern {
            return;
        }
        for (i, (&b, &p)) in now.iter().zip(&self.pattern).enumerate() {
            assert!(
                b == p || self.writable[i],
                "byte {i:#x} (page {}, offset {:#x}) changed from {p:#04x} to {b:#04x} \
                 but is not writable",
                i / PAGE,
                i % PAGE
            );
        }
    }
}
