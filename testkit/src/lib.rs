//! What softrnic's tests share. Every crate of the workspace may list it under
//! `[dev-dependencies]`: it depends on none of them.
//!
//! - [`mod@skip`]: a test that cannot run here says so where the reader sees it, and CI
//!   (`SOFTRNIC_NO_SKIP=1`) turns the skip into a failure.
//! - [`dropin`]: where the built drop-in libraries are, for tests that run unmodified
//!   programs on softrnic.
//! - [`alloc_count`]: a global allocator that counts a thread's allocations, for the tests
//!   that check a path allocates nothing.
//! - [`rlimit`]: the process's limit of open files, lowered to what a fresh machine has.

pub mod alloc_count;
pub mod dropin;
pub mod rlimit;
pub mod skip;

pub use skip::skip;
