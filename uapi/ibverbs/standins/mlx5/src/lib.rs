//! A stand-in `libmlx5.so.1` for softrnic (see `../README.md`): every public function of
//! rdma-core's mlx5 provider library (`../symbols.txt`: the `mlx5dv_*` API, 128 names, one
//! of them also under its compatibility version), each answering "not supported", so that
//! programs linked against it load without rdma-core's mlx5 provider (which needs rdma-core's
//! private libibverbs ABI): perftest, and pyverbs, whose mlx5 module binds them all when it
//! is imported. By return type: pointers NULL with `errno = EOPNOTSUPP`, ints `EOPNOTSUPP`,
//! `mlx5dv_is_supported` false, `mlx5dv_devx_get_event` -1... see `unsupported!`.

include!("../../standin.rs");
include!(concat!(env!("OUT_DIR"), "/exports.rs"));
