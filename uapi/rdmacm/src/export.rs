//! Exporting a C entry point under rdma-core's versioned name, as `uapi/ibverbs/src/export.rs`
//! does for `libibverbs.so.1`.
//!
//! `export! { "RDMACM_1.1"; unsafe extern "C" fn rdma_x(..) -> T { .. } }` defines the Rust
//! function, emits it as the symbol `__softrnic_rdma_x`, and aliases that with
//! `.symver __softrnic_rdma_x, rdma_x@@RDMACM_1.1`: the library exports `rdma_x` with version
//! `RDMACM_1.1` as its default, as rdma-core's `librdmacm.so.1` does, which is what programs
//! linked against rdma-core ask for (`build.rs` defines the nodes). The alias is left out of
//! unit-test builds, whose executables have no version nodes.
//!
//! Every body must catch panics itself ([`crate::ffi::catch`]): none may cross into C.

include!("../../ibverbs/src/export_versioned.rs");

pub(crate) use export;
