//! The device and its port as verbs show them: the GID table (`ibv_query_gid`,
//! `ibv_query_gid_ex`, `ibv_query_gid_table`), and the device and port attributes
//! (`ibv_query_device`, `ibv_query_port`).
//!
//! Read first: IBTA vol. 1 chapter 4 (GIDs) and annex A17 (RoCE v2: GIDs are IP addresses);
//! rdma-core `libibverbs/verbs.h` (`union ibv_gid`, `enum ibv_gid_type`,
//! `struct ibv_gid_entry`, `struct ibv_device_attr`, `struct ibv_port_attr`); the kernel's
//! `drivers/infiniband/core/cache.c` (`make_default_gid`) and rxe's `rxe_param.h`, `rxe.c`.
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
//!
//! # Attributes
//!
//! [`DeviceAttr::softrnic`] and [`PortAttr::softrnic`] report softrnic's [`Limits`] with the
//! names and widths of the C structs. The node GUID is the EUI-64 of the MAC
//! ([`node_guid_from_mac`]), as rxe's. The active MTU is the largest IB MTU whose packets fit
//! in the netdev MTU ([`active_mtu_for_netdev_mtu`]: 1500 gives 1024, `lo`'s 65536 gives
//! 4096).

mod attr;
mod gid;
mod iface;
mod table;
#[cfg(test)]
mod tests;

pub use attr::{
    active_mtu_for_netdev_mtu, node_guid_from_mac, AtomicCap, DeviceAttr, DeviceCap, Limits,
    PortAttr, PortCap, PortState, LINK_LAYER_ETHERNET, LINK_LAYER_INFINIBAND,
    LINK_LAYER_UNSPECIFIED, MAX_HEADER_OVERHEAD, PHYS_STATE_LINK_UP, SPEED_SDR, WIDTH_1X,
};
pub use gid::{Gid, GidType};
pub use iface::{IfAddr, InterfaceInfo};
pub use table::{GidEntry, GidTable, GID_TBL_LEN, LOCAL_GID_INDEX};
