//! The compile-time check that every implementation has exactly the C signature the shim
//! forwards with: `uapi/rdmacm/src/symbols.rs`, the one list both crates are built from,
//! expanded here into one `const` per function, `softrnic_rdma_x`'s Rust function coerced to
//! the pointer type of its line. A function missing, an argument of another type or a
//! different return type fails the build.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_void, sockaddr};

use super::abi::{
    ibv_ece, ibv_event_type, ibv_srq_init_attr_ex, rdma_addrinfo, rdma_cm_event,
    rdma_cm_event_type, rdma_cm_id, rdma_cm_join_mc_attr_ex, rdma_conn_param, rdma_event_channel,
    rdma_port_space,
};
use super::addrinfo::*;
use super::connect::*;
use super::devices::*;
use super::ece::*;
use super::ep::*;
use super::events::*;
use super::ids::*;
use super::multicast::*;
use super::qp::*;
use crate::abi::context::ibv_context;
use crate::abi::ex::ibv_qp_init_attr_ex;
use crate::abi::objects::ibv_pd;
use crate::abi::qp_attr::{ibv_qp_attr, ibv_qp_init_attr, ibv_srq_init_attr};

/// One check per line of `symbols.rs` (the version is the shim's business).
macro_rules! rdmacm_functions {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {$(
        const _: unsafe extern "C" fn($($ty),*) $(-> $ret)? = $name;
    )*};
}

include!("../../../rdmacm/src/symbols.rs");
