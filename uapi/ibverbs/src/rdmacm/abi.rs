//! `#[repr(C)]` mirrors of rdma-core 44's `<rdma/rdma_cma.h>`, written from the header with
//! the same names, field order and widths, in the conventions of [`crate::abi`]: C enums are
//! `c_uint` (the C compiler stores an enum with no negative value as `unsigned int`), `__be16`
//! is `u16` holding big-endian bytes, and anonymous C unions are fields named after their first
//! member. Also the structs of other headers that only these calls use: `ibv_ece`,
//! `ibv_srq_init_attr_ex` and `ibv_tm_cap` (`<infiniband/verbs.h>`), `ibv_sa_path_rec`
//! (`<infiniband/sa.h>`) and `sockaddr_ib` (`<infiniband/ib.h>`, the `AF_IB` addresses of
//! `rdma_getaddrinfo`). The `layout` test compares every offset and size with the C compiler's.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uint, c_void, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage};
use libc::{size_t, socklen_t};

use crate::abi::attr::ibv_gid;
use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_comp_channel, ibv_cq, ibv_pd, ibv_qp, ibv_srq};
use crate::abi::qp_attr::{ibv_ah_attr, ibv_srq_attr};

/// `enum rdma_cm_event_type`: what an event reports.
pub type rdma_cm_event_type = c_uint;
pub const RDMA_CM_EVENT_ADDR_RESOLVED: rdma_cm_event_type = 0;
pub const RDMA_CM_EVENT_ADDR_ERROR: rdma_cm_event_type = 1;
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: rdma_cm_event_type = 2;
pub const RDMA_CM_EVENT_ROUTE_ERROR: rdma_cm_event_type = 3;
pub const RDMA_CM_EVENT_CONNECT_REQUEST: rdma_cm_event_type = 4;
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: rdma_cm_event_type = 5;
pub const RDMA_CM_EVENT_CONNECT_ERROR: rdma_cm_event_type = 6;
pub const RDMA_CM_EVENT_UNREACHABLE: rdma_cm_event_type = 7;
pub const RDMA_CM_EVENT_REJECTED: rdma_cm_event_type = 8;
pub const RDMA_CM_EVENT_ESTABLISHED: rdma_cm_event_type = 9;
pub const RDMA_CM_EVENT_DISCONNECTED: rdma_cm_event_type = 10;
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: rdma_cm_event_type = 11;
pub const RDMA_CM_EVENT_MULTICAST_JOIN: rdma_cm_event_type = 12;
pub const RDMA_CM_EVENT_MULTICAST_ERROR: rdma_cm_event_type = 13;
pub const RDMA_CM_EVENT_ADDR_CHANGE: rdma_cm_event_type = 14;
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: rdma_cm_event_type = 15;

/// `enum rdma_port_space`: the port spaces of the IB CM service ID, `(ps << 16) | port`.
pub type rdma_port_space = c_uint;
pub const RDMA_PS_IPOIB: rdma_port_space = 0x0002;
pub const RDMA_PS_TCP: rdma_port_space = 0x0106;
pub const RDMA_PS_UDP: rdma_port_space = 0x0111;
pub const RDMA_PS_IB: rdma_port_space = 0x013F;

/// The port-space bits of a service ID.
pub const RDMA_IB_IP_PS_MASK: u64 = 0xFFFF_FFFF_FFFF_0000;
/// The port bits of a service ID.
pub const RDMA_IB_IP_PORT_MASK: u64 = 0x0000_0000_0000_FFFF;
/// The service IDs of `RDMA_PS_TCP`, `RDMA_PS_UDP` and `RDMA_PS_IB`, port 0.
pub const RDMA_IB_IP_PS_TCP: u64 = 0x0000_0000_0106_0000;
pub const RDMA_IB_IP_PS_UDP: u64 = 0x0000_0000_0111_0000;
pub const RDMA_IB_PS_IB: u64 = 0x0000_0000_013F_0000;

/// The Q_Key of UD QPs of `RDMA_PS_UDP` ids.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// `struct rdma_ib_addr`: the GIDs and P_Key of a resolved address.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// `__be16`.
    pub pkey: u16,
}

/// The anonymous unions of `struct rdma_addr`: one address as `sockaddr`, `sockaddr_in`,
/// `sockaddr_in6` or `sockaddr_storage` (C: `src_addr`/`src_sin`/`src_sin6`/`src_storage`, and
/// the same with `dst_`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_sockaddr {
    pub addr: sockaddr,
    pub sin: sockaddr_in,
    pub sin6: sockaddr_in6,
    pub storage: sockaddr_storage,
}

/// The union `addr` of `struct rdma_addr`. It has one member, so a struct has its layout and
/// reads without `unsafe`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rdma_addr_addr {
    pub ibaddr: rdma_ib_addr,
}

/// `struct rdma_addr`: the id's source and destination addresses and GIDs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    /// C: the anonymous union `src_addr`, `src_sin`, `src_sin6`, `src_storage`.
    pub src_addr: rdma_sockaddr,
    /// C: the anonymous union `dst_addr`, `dst_sin`, `dst_sin6`, `dst_storage`.
    pub dst_addr: rdma_sockaddr,
    pub addr: rdma_addr_addr,
}

/// `struct rdma_route`: the addresses and the path records of a resolved route.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`: `fd` is what programs poll for events.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`: the application's view of a connection manager identifier.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: rdma_port_space,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    /// `enum ibv_qp_type`.
    pub qp_type: c_uint,
}

/// `RDMA_MAX_RESP_RES`: `responder_resources` asking for the device's maximum.
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
/// `RDMA_MAX_INIT_DEPTH`: `initiator_depth` asking for the device's maximum.
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// `struct rdma_conn_param`: what `rdma_connect`/`rdma_accept` take and connection events
/// report.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    /// Ignored when accepting.
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    /// This and `qp_num` are ignored if the id has a QP.
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`: what UD (`RDMA_PS_UDP`, `RDMA_PS_IPOIB`) and multicast events report.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The union `param` of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

/// `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: rdma_cm_event_type,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `RAI_PASSIVE`: an address to listen on (`getaddrinfo`'s `AI_PASSIVE`).
pub const RAI_PASSIVE: c_int = 0x0000_0001;
/// `RAI_NUMERICHOST`: the node is a numeric address (`AI_NUMERICHOST`).
pub const RAI_NUMERICHOST: c_int = 0x0000_0002;
/// `RAI_NOROUTE`: do not resolve a route.
pub const RAI_NOROUTE: c_int = 0x0000_0004;
/// `RAI_FAMILY`: `ai_family` of the hints is the family wanted (with `AF_IB`).
pub const RAI_FAMILY: c_int = 0x0000_0008;

/// `struct rdma_addrinfo`: the answer of `rdma_getaddrinfo`, a list.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    /// `enum ibv_qp_type`.
    pub ai_qp_type: c_int,
    /// `enum rdma_port_space`.
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut sockaddr,
    pub ai_dst_addr: *mut sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: size_t,
    pub ai_route: *mut c_void,
    pub ai_connect_len: size_t,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `enum rdma_cm_join_mc_attr_mask`: the valid fields of `rdma_cm_join_mc_attr_ex`.
pub const RDMA_CM_JOIN_MC_ATTR_ADDRESS: u32 = 1 << 0;
pub const RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS: u32 = 1 << 1;
pub const RDMA_CM_JOIN_MC_ATTR_RESERVED: u32 = 1 << 2;

/// `enum rdma_cm_mc_join_flags`.
pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: u32 = 0;
pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u32 = 1;
pub const RDMA_MC_JOIN_FLAG_RESERVED: u32 = 2;

/// `struct rdma_cm_join_mc_attr_ex` (`rdma_join_multicast_ex`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_cm_join_mc_attr_ex {
    /// `enum rdma_cm_join_mc_attr_mask` bits.
    pub comp_mask: u32,
    /// An `enum rdma_cm_mc_join_flags`.
    pub join_flags: u32,
    pub addr: *mut sockaddr,
}

/// `rdma_set_option` levels.
pub const RDMA_OPTION_ID: c_int = 0;
pub const RDMA_OPTION_IB: c_int = 1;

/// `RDMA_OPTION_ID` options: type of service (`uint8_t`, RFC 2474), `~SO_REUSEADDR` (`int`),
/// `~IPV6_V6ONLY` (`int`), the ACK timeout (`uint8_t`).
pub const RDMA_OPTION_ID_TOS: c_int = 0;
pub const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
pub const RDMA_OPTION_ID_AFONLY: c_int = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;

/// `RDMA_OPTION_IB` option: path records (`struct ibv_path_data[]`).
pub const RDMA_OPTION_IB_PATH: c_int = 1;

// From <infiniband/verbs.h>: what the rdma_* calls take beyond `crate::abi`.

/// `enum ibv_event_type` (`rdma_notify`).
pub type ibv_event_type = c_uint;

/// `enum ibv_qp_type` values that `rdma_getaddrinfo` maps to socket types.
pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UC: c_int = 3;
pub const IBV_QPT_UD: c_int = 4;
pub const IBV_QPT_XRC_SEND: c_int = 9;
pub const IBV_QPT_XRC_RECV: c_int = 10;

/// `struct ibv_ece`: enhanced connection establishment options.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_ece {
    /// The IEEE OUI of the vendor.
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

/// `struct ibv_tm_cap` (tag matching, in `ibv_srq_init_attr_ex`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex` (`rdma_create_srq_ex`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    /// `enum ibv_srq_type`.
    pub srq_type: c_uint,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *`.
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

// From <infiniband/sa.h>.

/// `struct ibv_sa_path_rec`: a path record (`rdma_route.path_rec`), fields in network order
/// where the header says `__be`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    /// `__be16`.
    pub dlid: u16,
    /// `__be16`.
    pub slid: u16,
    pub raw_traffic: c_int,
    /// `__be32`.
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    /// `__be16`.
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

// From <infiniband/ib.h>.

/// `AF_IB`: InfiniBand addresses (a GID and a service ID).
pub const AF_IB: c_int = 27;

/// `struct ib_addr`: a GID. C: the union `ib_u` of `uib_addr8[16]`, `uib_addr16[8]`,
/// `uib_addr32[4]` and `uib_addr64[2]` (hence the 8-byte alignment).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default)]
pub struct ib_addr {
    /// C: `ib_u.uib_addr8`.
    pub ib_u: [u8; 16],
}

/// `struct sockaddr_ib`: an `AF_IB` address.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sockaddr_ib {
    /// `AF_IB`.
    pub sib_family: u16,
    /// `__be16`.
    pub sib_pkey: u16,
    /// `__be32`.
    pub sib_flowinfo: u32,
    pub sib_addr: ib_addr,
    /// `__be64`: the service ID, `(port space << 16) | port`.
    pub sib_sid: u64,
    /// `__be64`.
    pub sib_sid_mask: u64,
    pub sib_scope_id: u64,
}
