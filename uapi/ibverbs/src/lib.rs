//! softrnic-ibverbs: the C ABI of softrnic, a drop-in `libibverbs.so.1`.
//!
//! Built as `libsoftrnic_ibverbs.so` with SONAME `libibverbs.so.1` and rdma-core 44's GNU
//! symbol versions (`build.rs`, `export.rs`). Already-compiled verbs programs load it instead
//! of rdma-core's from a directory holding it under the name `libibverbs.so.1`:
//!
//! ```sh
//! cargo build -p softrnic-ibverbs
//! mkdir -p /tmp/softrnic-lib && ln -sf "$PWD/target/debug/libsoftrnic_ibverbs.so" /tmp/softrnic-lib/libibverbs.so.1
//! LD_LIBRARY_PATH=/tmp/softrnic-lib ibv_devinfo -v
//! ```
//!
//! * [`abi`]: the `#[repr(C)]` structs of `<infiniband/verbs.h>`, checked against the header.
//! * `devices`: which devices a process sees (one per interface, `softrnic_<ifname>`;
//!   `SOFTRNIC_ADDR` picks one address) and the `ibv_device` objects.
//! * `context`: `ibv_open_device`'s `verbs_context` + `ibv_context`.
//! * `verbs`: the exported entry points (softrnic's extensions, `verbs::relaxed` and
//!   `verbs::descriptor`, with version `SOFTRNIC_1.0`, declared in `include/softrnic/ext.h`);
//!   `verbs::rdmacm` what the real `librdmacm.so.1` imports (perftest links it). Every
//!   verb rdma-core 44 exports is implemented; a new one not done yet would get a stub that
//!   fails cleanly (`ENOSYS`), since Debian's binaries bind every import at load time.
//!
//! * [`rdmacm`]: the connection manager of `librdmacm.so.1`, exported as `softrnic_rdma_*`
//!   (version `SOFTRNIC_RDMACM_PRIVATE`) for softrnic's own `librdmacm.so.1` (`uapi/rdmacm`),
//!   which forwards rdma-core's `rdma_*` names there; the structs of `<rdma/rdma_cma.h>` are
//!   [`rdmacm::abi`].
//!
//! perftest also links `libmlx5.so.1` and `libefa.so.1`: `standins/` builds minimal
//! stand-ins for them (see `standins/README.md`).

#![deny(missing_docs)]

#[allow(missing_docs)]
pub mod abi;
mod context;
mod devices;
mod export;
mod ffi;
mod live;
pub mod rdmacm;
mod verbs;
