//! The exported C entry points, by theme, each with rdma-core 44's symbol version.

pub(crate) mod ah;
pub(crate) mod async_event;
pub(crate) mod channel;
pub(crate) mod cq;
pub(crate) mod cq_ex;
pub(crate) mod descriptor;
pub(crate) mod device;
pub(crate) mod mcast;
pub(crate) mod misc;
pub(crate) mod modify;
pub(crate) mod mw;
pub(crate) mod pd;
pub(crate) mod post;
pub(crate) mod qp;
pub(crate) mod qp_ex;
pub(crate) mod query;
pub(crate) mod rdmacm;
pub(crate) mod relaxed;
pub(crate) mod srq;
pub(crate) mod strings;
pub(crate) mod teardown;
