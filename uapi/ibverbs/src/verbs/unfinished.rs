//! Entry points that unmodified programs import but softrnic's C ABI does not implement yet.
//! Debian links ibverbs-utils and perftest with BIND_NOW, so every symbol they import must
//! exist for them to load at all; an unfinished verb is exported here as a stub that fails
//! cleanly, as rdma-core documents for each verb: NULL with `errno = ENOSYS` or an `ENOSYS`
//! return value.
//!
//! Unfinished: none. The last ones, UD multicast (`ibv_attach_mcast`, `ibv_detach_mcast`),
//! are in [`super::mcast`].
