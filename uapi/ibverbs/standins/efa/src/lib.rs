//! A stand-in `libefa.so.1` for softrnic (see `../README.md`): every public function of
//! rdma-core's EFA provider library (`../symbols.txt`: the six `efadv_*` functions), each
//! answering "not supported", so that programs linked against it load without rdma-core's
//! EFA provider (which needs rdma-core's private libibverbs ABI): perftest, and pyverbs,
//! whose EFA module binds them when it is imported. `efadv_query_device` and
//! `efadv_query_ah` return `EOPNOTSUPP`, the others NULL with `errno = EOPNOTSUPP`.

include!("../../standin.rs");
include!(concat!(env!("OUT_DIR"), "/exports.rs"));
