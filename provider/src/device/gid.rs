//! GIDs and GID types: `union ibv_gid`, `enum ibv_gid_type` (rdma-core `verbs.h`).

use core::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// A 128-bit Global Identifier, `union ibv_gid` (IBTA vol. 1 chapter 4, "Addressing"), bytes in
/// network order.
///
/// For RoCE v2 a GID is an IP address (IBTA annex A17): an IPv6 address as is, an IPv4
/// address IPv4-mapped (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2). `Debug` and `Display` print it as
/// IPv6 text, as `inet_ntop(AF_INET6)` and `ibv_devinfo -v` do (`::ffff:127.0.0.1`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Gid([u8; 16]);

/// `ifid[0] ^= 2; ff:fe in the middle`: the modified EUI-64 interface identifier of a 48-bit
/// MAC (RFC 4291 appendix A), as the kernel's `addrconf_addr_eui48()` computes it.
pub(crate) fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

impl Gid {
    /// The all-zero GID (an empty table slot in the kernel).
    pub const ZERO: Gid = Gid([0; 16]);

    /// The GID with these 16 bytes (network order).
    pub const fn from_raw(raw: [u8; 16]) -> Gid {
        Gid(raw)
    }

    /// The 16 bytes, network order (`ibv_gid.raw`).
    pub const fn raw(&self) -> &[u8; 16] {
        &self.0
    }

    /// The 16 bytes by value.
    pub const fn to_raw(self) -> [u8; 16] {
        self.0
    }

    /// The RoCE v2 GID of an IP address: IPv6 as is, IPv4 as `::ffff:a.b.c.d`.
    pub fn from_ip(ip: IpAddr) -> Gid {
        match ip {
            IpAddr::V4(v4) => Gid(v4.to_ipv6_mapped().octets()),
            IpAddr::V6(v6) => Gid(v6.octets()),
        }
    }

    /// The IP address of a RoCE v2 GID: IPv4-mapped GIDs give the IPv4 address, every other
    /// GID the IPv6 address. (`::a.b.c.d`, the deprecated IPv4-compatible form, and `::1`
    /// stay IPv6.)
    pub fn to_ip(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.0);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// Whether the GID is IPv4-mapped (`::ffff:0:0/96`).
    pub fn is_ipv4_mapped(&self) -> bool {
        self.0[..10] == [0; 10] && self.0[10..12] == [0xff, 0xff]
    }

    /// The IPv6 link-local GID of a MAC: `fe80::/64` and the modified EUI-64 of the MAC. This is
    /// the interface's SLAAC link-local address (RFC 4862, RFC 4291 appendix A) and the kernel's
    /// default RoCE GID at index 0 (`make_default_gid()` in `drivers/infiniband/core/cache.c`:
    /// subnet prefix `0xfe80000000000000`, `addrconf_ifid_eui48()`).
    ///
    /// Loopback's all-zero MAC gives `fe80::200:ff:fe00:0`.
    pub fn link_local_from_mac(mac: [u8; 6]) -> Gid {
        let mut raw = [0u8; 16];
        raw[0] = 0xfe;
        raw[1] = 0x80;
        raw[8..].copy_from_slice(&eui64_from_mac(mac));
        Gid(raw)
    }

    /// The first 8 bytes as a number (`ibv_gid.global.subnet_prefix`, stored big-endian).
    pub fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().expect("8 bytes"))
    }

    /// The last 8 bytes as a number (`ibv_gid.global.interface_id`, stored big-endian).
    pub fn interface_id(&self) -> u64 {
        u64::from_be_bytes(self.0[8..].try_into().expect("8 bytes"))
    }
}

impl From<IpAddr> for Gid {
    fn from(ip: IpAddr) -> Gid {
        Gid::from_ip(ip)
    }
}

impl From<[u8; 16]> for Gid {
    fn from(raw: [u8; 16]) -> Gid {
        Gid(raw)
    }
}

impl From<Gid> for Ipv6Addr {
    fn from(gid: Gid) -> Ipv6Addr {
        Ipv6Addr::from(gid.0)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // std prints IPv4-mapped addresses as `::ffff:a.b.c.d`, like inet_ntop.
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The type of a GID table entry, with rdma-core's `enum ibv_gid_type` values (`verbs.h`,
/// returned in `ibv_gid_entry.gid_type` by `ibv_query_gid_ex` / `ibv_query_gid_table`).
///
/// Every entry of a softrnic table is [`GidType::RoceV2`]. (Not to be confused with the older
/// `enum ibv_gid_type_sysfs` of `ibv_query_gid_type`, where 0 is "IB/RoCE v1" and 1 is
/// "RoCE v2".)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GidType {
    /// `IBV_GID_TYPE_IB`: an InfiniBand GID.
    Ib = 0,
    /// `IBV_GID_TYPE_ROCE_V1`: RoCE v1 (GRH over Ethernet, ethertype 0x8915).
    RoceV1 = 1,
    /// `IBV_GID_TYPE_ROCE_V2`: RoCE v2 (IP/UDP, port 4791).
    RoceV2 = 2,
}

impl GidType {
    /// The `ibv_gid_type` value.
    pub fn ibv(self) -> u32 {
        self as u32
    }

    /// The type with `ibv_gid_type` value `v`, if any.
    pub fn from_ibv(v: u32) -> Option<GidType> {
        match v {
            0 => Some(GidType::Ib),
            1 => Some(GidType::RoceV1),
            2 => Some(GidType::RoceV2),
            _ => None,
        }
    }
}
