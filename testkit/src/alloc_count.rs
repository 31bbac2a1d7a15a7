//! Counting a thread's heap allocations, for the tests that check a path allocates nothing
//! (or a constant few times, not per packet or per work request).
//!
//! A test binary installs [`CountingAlloc`] as its global allocator, then measures a closure
//! with [`allocations_in`]:
//!
//! ```
//! use softrnic_testkit::alloc_count::{allocations_in, CountingAlloc};
//!
//! #[global_allocator]
//! static GLOBAL: CountingAlloc = CountingAlloc;
//!
//! fn main() {
//!     let mut v = Vec::with_capacity(16);
//!     assert_eq!(allocations_in(|| v.push(1)), 0);
//!     assert_eq!(allocations_in(|| v.extend([0; 64])), 1);
//! }
//! ```
//!
//! Only the measuring thread's allocations count, and only while it measures: the test
//! harness's other threads allocate when they like. `alloc` and `realloc` count one each;
//! `dealloc` counts nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Whether this thread is inside [`allocations_in`].
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// This thread's allocations while counting.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting the allocations a thread makes inside [`allocations_in`].
pub struct CountingAlloc;

/// Counts one allocation if this thread is counting.
fn count() {
    // The thread locals are const-initialised and have no destructor, so reading them never
    // allocates; `try_with` because a thread being torn down may have none any more.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: forwards every call to the system allocator; counting touches only thread locals
// that allocate nothing.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` with this thread's allocations counted; returns how many it made. Counts nothing
/// unless [`CountingAlloc`] is the binary's global allocator.
pub fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    let was = COUNTING.with(|c| c.replace(true));
    f();
    COUNTING.with(|c| c.set(was));
    ALLOCS.with(Cell::get) - before
}
