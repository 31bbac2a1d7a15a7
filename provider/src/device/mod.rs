//! The device and its port as verbs show them: the GID table (`ibv_query_gid`,
//! `ibv_query_gid_ex`, `ibv_query_gid_table`).
//!
//! Read first: IBTA vol. 1 chapter 4 (GIDs) and annex A17 (RoCE v2: GIDs are IP addresses);
//! rdma-core `libibverbs/verbs.h` (`union ibv_gid`, `enum ibv_gid_type`,
//! `struct ibv_gid_entry`); the kernel's `drivers/infiniband/core/cache.c` (`make_default_gid`)
//! and rxe's `rxe_param.h`.
//!
//! # One device, one address
//!
//! A softrnic device is bound to one local IP address and sends every packet from it. Its one
//! port (port 1) has the GID table of the interface that owns that address
//! ([`InterfaceInfo::for_address`]), laid out like kernel rxe's, all RoCE v2:
//!
//! * index 0: the IPv6 link-local GID of the interface's MAC, `fe80::` + modified EUI-64
//!   (the kernel's default GID; `fe80::200:ff:fe00:0` on `lo`);
//! * index 1: the device's address, IPv4-mapped if IPv4 — **the GID unmodified programs pick
//!   with `-g 1`**, so it must be the address the device sends from;
//! * then the interface's other addresses, without duplicates, up to [`GID_TBL_LEN`].

mod gid;
mod iface;
mod table;
#[cfg(test)]
mod tests;

pub use gid::{Gid, GidType};
pub use iface::{IfAddr, InterfaceInfo};
pub use table::{GidEntry, GidTable, GID_TBL_LEN, LOCAL_GID_INDEX};
