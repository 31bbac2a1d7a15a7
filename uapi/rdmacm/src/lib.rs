//! softrnic-rdmacm: a drop-in `librdmacm.so.1` for softrnic.
//!
//! Built as `libsoftrnic_rdmacm.so` with SONAME `librdmacm.so.1` and the version nodes of
//! rdma-core 44's `librdmacm.so.1` (`RDMACM_1.0` to `RDMACM_1.3`, `build.rs`), it exports every
//! symbol that library exports, with its version, so that unmodified programs linked against
//! rdma-core's (rping, ucmatose, udaddy, mckey, cmtime, rdma_server/rdma_client, perftest, which
//! Debian links with BIND_NOW) load when it is found first, beside softrnic's
//! `libibverbs.so.1` (`softrnic run` puts both in one directory first in `LD_LIBRARY_PATH`).
//!
//! * `forward`: the `rdma_*` calls. The connection manager lives in softrnic's
//!   `libibverbs.so.1` (one copy of the process's devices); each call is forwarded to its
//!   `softrnic_rdma_*` there, found once with `dlopen`/`dlvsym` (`lookup`). The list of those
//!   functions and their C signatures, `symbols.rs`, is shared with the ibverbs crate, which
//!   checks its implementations against it at compile time.
//! * `rsocket`: the rsocket calls, implemented here: rsockets are not supported on softrnic
//!   (`rsocket` fails with `EOPNOTSUPP`), and `rpoll`/`rselect`, which rdma-core's tools use on
//!   ordinary file descriptors such as the CM event channel's, are `poll(2)`/`select(2)`.

#![deny(missing_docs)]

mod export;
mod ffi;
mod forward;
mod lookup;
mod rsocket;
