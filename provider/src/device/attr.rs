//! `ibv_query_device` and `ibv_query_port`: the device and port attributes softrnic reports,
//! and the limits behind them.
//!
//! Field names and integer widths follow rdma-core's `struct ibv_device_attr` and
//! `struct ibv_port_attr` (`libibverbs/verbs.h`): C `int` is `i32`, `unsigned int` and
//! `uint32_t` are `u32`, and so on; the C enums become Rust enums with the same values.

use softrnic_wire::frame::{IPV6_HEADER_LEN, UDP_HEADER_LEN};
use softrnic_wire::icrc::ICRC_LEN;
use softrnic_wire::{bth, immdt, reth};

use super::gid::eui64_from_mac;
use crate::qp_state::Mtu;

/// `enum ibv_port_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum PortState {
    /// `IBV_PORT_NOP`.
    Nop = 0,
    /// `IBV_PORT_DOWN`.
    Down = 1,
    /// `IBV_PORT_INIT`.
    Init = 2,
    /// `IBV_PORT_ARMED`.
    Armed = 3,
    /// `IBV_PORT_ACTIVE`: the only state a softrnic port is in while its device exists.
    Active = 4,
    /// `IBV_PORT_ACTIVE_DEFER`.
    ActiveDefer = 5,
}

/// `enum ibv_atomic_cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum AtomicCap {
    /// `IBV_ATOMIC_NONE`: no atomics.
    None = 0,
    /// `IBV_ATOMIC_HCA`: atomics are atomic among the operations of this device (softrnic's
    /// responder serialises them); not against the CPU or other devices.
    Hca = 1,
    /// `IBV_ATOMIC_GLOB`: atomic against everything.
    Glob = 2,
}

/// `IBV_LINK_LAYER_UNSPECIFIED`.
pub const LINK_LAYER_UNSPECIFIED: u8 = 0;
/// `IBV_LINK_LAYER_INFINIBAND`.
pub const LINK_LAYER_INFINIBAND: u8 = 1;
/// `IBV_LINK_LAYER_ETHERNET`: RoCE.
pub const LINK_LAYER_ETHERNET: u8 = 2;

bitflags::bitflags! {
    /// `enum ibv_device_cap_flags` bits (`ibv_device_attr.device_cap_flags`), the ones softrnic
    /// sets or deliberately leaves out.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DeviceCap: u32 {
        /// `IBV_DEVICE_BAD_PKEY_CNTR`: not set, there is no P_Key violation counter.
        const BAD_PKEY_CNTR = 1 << 1;
        /// `IBV_DEVICE_BAD_QKEY_CNTR`: not set, there is no Q_Key violation counter.
        const BAD_QKEY_CNTR = 1 << 2;
        /// `IBV_DEVICE_CURR_QP_STATE_MOD`: `ibv_modify_qp` takes `IBV_QP_CUR_STATE` (see
        /// `qp_state::check_modify`). Set.
        const CURR_QP_STATE_MOD = 1 << 7;
        /// `IBV_DEVICE_PORT_ACTIVE_EVENT`: not set, softrnic raises no port events.
        const PORT_ACTIVE_EVENT = 1 << 10;
        /// `IBV_DEVICE_SYS_IMAGE_GUID`: `sys_image_guid` is meaningful. Set.
        const SYS_IMAGE_GUID = 1 << 11;
        /// `IBV_DEVICE_RC_RNR_NAK_GEN`: the RC responder answers a SEND that finds no receive
        /// posted with an RNR NAK (rather than dropping it). Set.
        const RC_RNR_NAK_GEN = 1 << 12;
        /// `IBV_DEVICE_SRQ_RESIZE`: `ibv_modify_srq` may change `max_wr` (`srq::Srq::modify`).
        /// Set, as in rxe.
        const SRQ_RESIZE = 1 << 13;
        /// `IBV_DEVICE_MEM_WINDOW`: not set until memory windows exist (`max_mw` is 0).
        const MEM_WINDOW = 1 << 17;
        /// `IBV_DEVICE_XRC`: XRC domains, SRQs and QPs (`crate::xrc`). Set.
        const XRC = 1 << 20;
        /// `IBV_DEVICE_MEM_MGT_EXTENSIONS` (fast registration, local invalidate): not set yet.
        const MEM_MGT_EXTENSIONS = 1 << 21;
    }
}

impl DeviceCap {
    /// What softrnic reports. Kernel rxe (`RXE_DEVICE_CAP_FLAGS`, `rxe_param.h`) also sets
    /// BAD_PKEY_CNTR, BAD_QKEY_CNTR, AUTO_PATH_MIG, CHANGE_PHY_PORT, UD_AV_PORT_ENFORCE,
    /// PORT_ACTIVE_EVENT and MEM_MGT_EXTENSIONS; softrnic sets a flag only for what it does.
    pub const SOFTRNIC: DeviceCap = DeviceCap::CURR_QP_STATE_MOD
        .union(DeviceCap::SYS_IMAGE_GUID)
        .union(DeviceCap::RC_RNR_NAK_GEN)
        .union(DeviceCap::SRQ_RESIZE)
        .union(DeviceCap::XRC);
}

bitflags::bitflags! {
    /// `enum ibv_port_cap_flags` bits (`ibv_port_attr.port_cap_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct PortCap: u32 {
        /// `IBV_PORT_CM_SUP`: connection management (CM MADs on QP1). Not set: `wire` has the
        /// CM formats but no QP1 answers them yet (rxe sets it, having the kernel's CM).
        const CM_SUP = 1 << 16;
        /// `IBV_PORT_IP_BASED_GIDS`: the GIDs are IP addresses (RoCE v2). Set, as RoCE NICs do.
        const IP_BASED_GIDS = 1 << 26;
    }
}

impl PortCap {
    /// What softrnic reports: only what it does.
    pub const SOFTRNIC: PortCap = PortCap::IP_BASED_GIDS;
}

/// `IB_PORT_PHYS_STATE_LINK_UP` (`ibv_port_attr.phys_state`).
pub const PHYS_STATE_LINK_UP: u8 = 5;
/// `IB_WIDTH_1X` (`ibv_port_attr.active_width`).
pub const WIDTH_1X: u8 = 1;
/// `IBV_SPEED_SDR`, 2.5 Gb/s per lane (`ibv_port_attr.active_speed`).
pub const SPEED_SDR: u8 = 1;

/// Bytes around a full-MTU payload in the largest softrnic packet, outside the Ethernet
/// header: IPv6 (40) + UDP (8) + BTH (12) + XRCETH (4) + RETH (16) + ImmDt (4) + ICRC (4) =
/// 88, for `XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE` over IPv6 (no payload-carrying opcode has more
/// extension headers; the test `overhead_covers_every_opcode` checks this against the opcode
/// table).
///
/// Kernel rxe, which has no XRC, subtracts `RXE_MAX_HDR_LENGTH` = 80 (`rxe_hdr.h`) instead,
/// which leaves too few bytes for the largest packets when the netdev MTU is within 8 bytes
/// above a threshold (1104..=1111 gives rxe 1024 but softrnic 512). softrnic sends with DF
/// and never fragments, so it keeps every packet within the MTU.
pub const MAX_HEADER_OVERHEAD: u32 = (IPV6_HEADER_LEN
    + UDP_HEADER_LEN
    + bth::HEADER_LEN
    + softrnic_wire::xrceth::HEADER_LEN
    + reth::HEADER_LEN
    + immdt::HEADER_LEN
    + ICRC_LEN) as u32;

/// The port's active MTU on a netdev of MTU `netdev_mtu`: the largest IB MTU that fits in
/// `netdev_mtu - MAX_HEADER_OVERHEAD`, at most 4096 (RoCE's largest), and 256 when not even
/// that fits (as kernel rxe's `rxe_set_mtu()` falls back to `IB_MTU_256`).
///
/// | netdev MTU     | active MTU |
/// |----------------|------------|
/// | 1500 (Ethernet)| 1024       |
/// | 1400           | 1024       |
/// | 1000           | 512        |
/// | 9000 (jumbo)   | 4096       |
/// | 65536 (`lo`)   | 4096       |
///
/// This is the rule of rxe's `eth_mtu_int_to_enum()` (`rxe_param.h`) with 88 bytes of headers
/// instead of 80 (see [`MAX_HEADER_OVERHEAD`]).
pub fn active_mtu_for_netdev_mtu(netdev_mtu: u32) -> Mtu {
    let room = netdev_mtu.saturating_sub(MAX_HEADER_OVERHEAD);
    Mtu::ALL
        .into_iter()
        .rev()
        .find(|m| m.bytes() <= room)
        .unwrap_or(Mtu::Mtu256)
}

/// The node GUID of a device on an interface with MAC `mac`: the modified EUI-64 of the MAC
/// (`addrconf_addr_eui48()`), as kernel rxe sets `node_guid` (`rxe_register_device()`) and
/// `sys_image_guid` (`rxe_init_device_param()`). The value is the GUID's 8 bytes read
/// big-endian (the C ABI's `__be64` holds `guid.to_be()`).
///
/// Every loopback device gets `0x0200_00ff_fe00_0000`, since `lo`'s MAC is all zero; that is
/// harmless while the GUID only names the device to its own host.
pub fn node_guid_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes(eui64_from_mac(mac))
}

/// softrnic's limits: what one device can hold. [`DeviceAttr::softrnic`] reports them; the
/// tables that create objects refuse to go past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits;

impl Limits {
    /// Queue pairs per device.
    pub const MAX_QP: i32 = 1024;
    /// Work requests per send or receive queue.
    pub const MAX_QP_WR: i32 = 16384;
    /// Scatter/gather elements per send or receive work request.
    pub const MAX_SGE: i32 = 32;
    /// Scatter elements per RDMA READ work request.
    pub const MAX_SGE_RD: i32 = 32;
    /// Completion queues per device.
    pub const MAX_CQ: i32 = 1024;
    /// Entries per completion queue (2^18 - 1). perftest sizes its CQ as its send queue depth
    /// times its QPs (128 x 1024 for `ib_write_bw -q 1024`): 65535 refused `-q 512`. A CQ's
    /// ring is allocated at creation, at most 16 MiB.
    pub const MAX_CQE: i32 = (1 << 18) - 1;
    /// Memory regions per device (the key table's slots).
    pub const MAX_MR: i32 = 65536;
    /// Protection domains per device.
    pub const MAX_PD: i32 = 1024;
    /// RDMA READ/atomic requests a QP accepts outstanding as responder
    /// (`max_dest_rd_atomic` ≤ this), as rxe's `RXE_MAX_QP_RD_ATOM`.
    pub const MAX_QP_RD_ATOM: i32 = 128;
    /// RDMA READ/atomic requests a QP may have outstanding as initiator (`max_rd_atomic` ≤
    /// this), as rxe's `RXE_MAX_QP_INIT_RD_ATOM`.
    pub const MAX_QP_INIT_RD_ATOM: i32 = 128;
    /// Responder resources of the whole device: every QP at its maximum.
    pub const MAX_RES_RD_ATOM: i32 = Limits::MAX_QP * Limits::MAX_QP_RD_ATOM;
    /// Shared receive queues per device (the NIC's SRQ table refuses more with `ENOMEM`).
    pub const MAX_SRQ: i32 = 1024;
    /// Work requests per shared receive queue.
    pub const MAX_SRQ_WR: i32 = 16384;
    /// Scatter elements per shared-receive-queue work request.
    pub const MAX_SRQ_SGE: i32 = 32;
    /// Memory windows per device: none until memory windows are implemented.
    pub const MAX_MW: i32 = 0;
    /// Address handles per device: none until UD brings `ibv_create_ah`.
    pub const MAX_AH: i32 = 0;
    /// Largest memory region: anything addressable, as rxe's `RXE_MAX_MR_SIZE` (`-1ull`).
    pub const MAX_MR_SIZE: u64 = u64::MAX;
    /// Largest message: 2^31 bytes, the IBTA's limit, as rxe's `RXE_PORT_MAX_MSG_SZ` since the
    /// kernel fix "RDMA/rxe: Fix mismatched max_msg_sz" (it said 0x800000 before).
    pub const MAX_MSG_SZ: u32 = 1 << 31;
    /// Local CA ACK delay, the exponent n of `4.096 µs × 2^n`: 15 (about 134 ms), as rxe's
    /// `RXE_LOCAL_CA_ACK_DELAY`.
    pub const LOCAL_CA_ACK_DELAY: u8 = 15;
    /// P_Key table length: one entry, the default P_Key 0xFFFF (as RoCE NICs; rxe now also
    /// has 1).
    pub const PKEY_TBL_LEN: u16 = 1;
    /// Page sizes an MR may use: 4 KiB and up (bit n = 2^n bytes), as rxe's
    /// `RXE_PAGE_SIZE_CAP`. softrnic pins no pages, so any size does.
    pub const PAGE_SIZE_CAP: u64 = 0xffff_f000;
}

/// `struct ibv_device_attr`: what `ibv_query_device` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Firmware version text (`char fw_ver[64]`): softrnic's version.
    pub fw_ver: String,
    /// Node GUID (`__be64`; see [`node_guid_from_mac`] for the byte order).
    pub node_guid: u64,
    /// System image GUID (`__be64`).
    pub sys_image_guid: u64,
    /// Largest memory region in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes, bit n for 2^n bytes.
    pub page_size_cap: u64,
    /// IEEE OUI of the vendor.
    pub vendor_id: u32,
    /// Vendor part number.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Queue pairs.
    pub max_qp: i32,
    /// Work requests per queue.
    pub max_qp_wr: i32,
    /// `enum ibv_device_cap_flags` bits.
    pub device_cap_flags: DeviceCap,
    /// SGEs per work request.
    pub max_sge: i32,
    /// SGEs per RDMA READ.
    pub max_sge_rd: i32,
    /// Completion queues.
    pub max_cq: i32,
    /// Entries per completion queue.
    pub max_cqe: i32,
    /// Memory regions.
    pub max_mr: i32,
    /// Protection domains.
    pub max_pd: i32,
    /// Outstanding RDMA READ/atomic per QP as responder.
    pub max_qp_rd_atom: i32,
    /// Same per EE context (RD, unsupported): 0.
    pub max_ee_rd_atom: i32,
    /// RDMA READ/atomic responder resources of the device.
    pub max_res_rd_atom: i32,
    /// Outstanding RDMA READ/atomic per QP as initiator.
    pub max_qp_init_rd_atom: i32,
    /// Same per EE context (RD, unsupported): 0.
    pub max_ee_init_rd_atom: i32,
    /// Atomicity guarantee.
    pub atomic_cap: AtomicCap,
    /// EE contexts (RD, unsupported): 0.
    pub max_ee: i32,
    /// RD domains (unsupported): 0.
    pub max_rdd: i32,
    /// Memory windows.
    pub max_mw: i32,
    /// Raw IPv6 QPs (unsupported): 0.
    pub max_raw_ipv6_qp: i32,
    /// Raw Ethertype QPs (unsupported): 0.
    pub max_raw_ethy_qp: i32,
    /// Multicast groups (unsupported): 0.
    pub max_mcast_grp: i32,
    /// QPs per multicast group: 0.
    pub max_mcast_qp_attach: i32,
    /// QP attachments to multicast groups in all: 0.
    pub max_total_mcast_qp_attach: i32,
    /// Address handles.
    pub max_ah: i32,
    /// FMRs (obsolete): 0.
    pub max_fmr: i32,
    /// Remaps per FMR (obsolete): 0.
    pub max_map_per_fmr: i32,
    /// Shared receive queues.
    pub max_srq: i32,
    /// Work requests per SRQ.
    pub max_srq_wr: i32,
    /// SGEs per SRQ work request.
    pub max_srq_sge: i32,
    /// P_Keys per port.
    pub max_pkeys: u16,
    /// Local CA ACK delay exponent.
    pub local_ca_ack_delay: u8,
    /// Ports: 1.
    pub phys_port_cnt: u8,
}

impl DeviceAttr {
    /// The attributes of a softrnic device with node GUID `node_guid` (see
    /// [`node_guid_from_mac`]); `sys_image_guid` is the same GUID, as in rxe.
    pub fn softrnic(node_guid: u64) -> DeviceAttr {
        DeviceAttr {
            fw_ver: env!("CARGO_PKG_VERSION").to_owned(),
            node_guid,
            sys_image_guid: node_guid,
            max_mr_size: Limits::MAX_MR_SIZE,
            page_size_cap: Limits::PAGE_SIZE_CAP,
            // As rxe's RXE_VENDOR_ID ("IBTA v1.4 A3.3.1 VENDOR INFORMATION section").
            vendor_id: 0x00ff_ffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: Limits::MAX_QP,
            max_qp_wr: Limits::MAX_QP_WR,
            device_cap_flags: DeviceCap::SOFTRNIC,
            max_sge: Limits::MAX_SGE,
            max_sge_rd: Limits::MAX_SGE_RD,
            max_cq: Limits::MAX_CQ,
            max_cqe: Limits::MAX_CQE,
            max_mr: Limits::MAX_MR,
            max_pd: Limits::MAX_PD,
            max_qp_rd_atom: Limits::MAX_QP_RD_ATOM,
            max_ee_rd_atom: 0,
            max_res_rd_atom: Limits::MAX_RES_RD_ATOM,
            max_qp_init_rd_atom: Limits::MAX_QP_INIT_RD_ATOM,
            max_ee_init_rd_atom: 0,
            atomic_cap: AtomicCap::Hca,
            max_ee: 0,
            max_rdd: 0,
            max_mw: Limits::MAX_MW,
            max_raw_ipv6_qp: 0,
            max_raw_ethy_qp: 0,
            max_mcast_grp: 0,
            max_mcast_qp_attach: 0,
            max_total_mcast_qp_attach: 0,
            max_ah: Limits::MAX_AH,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: Limits::MAX_SRQ,
            max_srq_wr: Limits::MAX_SRQ_WR,
            max_srq_sge: Limits::MAX_SRQ_SGE,
            max_pkeys: Limits::PKEY_TBL_LEN,
            local_ca_ack_delay: Limits::LOCAL_CA_ACK_DELAY,
            phys_port_cnt: 1,
        }
    }
}

/// `struct ibv_port_attr`: what `ibv_query_port` returns for port 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttr {
    /// Logical port state.
    pub state: PortState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// MTU in use (see [`active_mtu_for_netdev_mtu`]).
    pub active_mtu: Mtu,
    /// GID table capacity (`int`).
    pub gid_tbl_len: i32,
    /// `enum ibv_port_cap_flags` bits.
    pub port_cap_flags: PortCap,
    /// Largest message in bytes.
    pub max_msg_sz: u32,
    /// Bad P_Key counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// LID (none on RoCE): 0.
    pub lid: u16,
    /// Subnet manager LID (none on RoCE): 0.
    pub sm_lid: u16,
    /// LID mask control: 0.
    pub lmc: u8,
    /// Virtual lanes: 1.
    pub max_vl_num: u8,
    /// Subnet manager service level: 0.
    pub sm_sl: u8,
    /// Subnet propagation delay exponent: 0.
    pub subnet_timeout: u8,
    /// Init type reply: 0.
    pub init_type_reply: u8,
    /// Link width (`IB_WIDTH_*`).
    pub active_width: u8,
    /// Link speed (`IBV_SPEED_*`).
    pub active_speed: u8,
    /// Physical port state (`IB_PORT_PHYS_STATE_*`).
    pub phys_state: u8,
    /// `IBV_LINK_LAYER_*`.
    pub link_layer: u8,
    /// `enum ibv_port_flags` (only `IBV_QPF_GRH_REQUIRED`): 0.
    pub flags: u8,
    /// `enum ibv_port_cap_flags2` bits: 0.
    pub port_cap_flags2: u16,
    /// Extended link speed (`uint32_t`, newer rdma-core): the same speed as `active_speed`.
    pub active_speed_ex: u32,
}

impl PortAttr {
    /// The attributes of a softrnic port: active, Ethernet link layer (RoCE), MTU
    /// `active_mtu` (of at most 4096, RoCE's largest), a GID table of `gid_tbl_len` entries
    /// (see [`super::GID_TBL_LEN`]).
    ///
    /// Width and speed are nominal (1X SDR, rxe's `RXE_PORT_ACTIVE_WIDTH` /
    /// `RXE_PORT_ACTIVE_SPEED`): nothing is rate-limited.
    pub fn softrnic(active_mtu: Mtu, gid_tbl_len: u32) -> PortAttr {
        PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu,
            gid_tbl_len: i32::try_from(gid_tbl_len).unwrap_or(i32::MAX),
            port_cap_flags: PortCap::SOFTRNIC,
            max_msg_sz: Limits::MAX_MSG_SZ,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: Limits::PKEY_TBL_LEN,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_vl_num: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            active_width: WIDTH_1X,
            active_speed: SPEED_SDR,
            phys_state: PHYS_STATE_LINK_UP,
            link_layer: LINK_LAYER_ETHERNET,
            flags: 0,
            port_cap_flags2: 0,
            active_speed_ex: u32::from(SPEED_SDR),
        }
    }
}
