//! `ibv_resolve_eth_l2_from_gid` (rdma-core 44 `libibverbs/verbs.c` and `neigh.c`): the
//! Ethernet address, and VLAN, behind the destination GID of a RoCE address vector, as the
//! kernel's routing and neighbour tables give them.
//!
//! rdma-core asks the kernel over netlink: the source is GID `attr.grh.sgid_index` of the
//! device, its interface the outgoing one; then, in order,
//!
//! 1. a multicast destination has its encoded MAC: `01:00:5e` and the low 23 bits of an IPv4
//!    group (RFC 1112 § 6.4), `33:33` and the last 4 bytes of an IPv6 group (RFC 2464 § 7);
//! 2. a destination that is an address of this host (a "local" route: any interface's
//!    address, all of 127.0.0.0/8) answers with the MAC of the outgoing interface, which for
//!    loopback is `00:00:00:00:00:00`;
//! 3. anything else is the neighbour entry of the next hop (the destination itself, or the
//!    gateway of its route), resolved first if the kernel has none.
//!
//! softrnic answers 1 and 2 the same way, and 3 for IPv4 from `/proc/net/route` and
//! `/proc/net/arp` (the kernel's IPv4 routes and neighbour cache): with no complete entry yet
//! it sends one UDP datagram to the next hop's discard port (9), as rdma-core does to make the
//! kernel resolve it, and looks again for up to 3 seconds, rdma-core's timeout. An IPv6
//! destination that is not on this host is not resolved (the IPv6 neighbour cache is only
//! readable over netlink): `-EHOSTUNREACH`, rdma-core's answer for a neighbour it cannot
//! find. The VLAN is that of the outgoing interface if it is a VLAN device (from
//! `/proc/net/vlan/config`), else `0xffff`, rdma-core's "none".
//!
//! Returns 0, or a negative errno: `-EINVAL` for NULL pointers or a source GID on no
//! interface, `-EHOSTUNREACH` for a neighbour not found; -1 (with `errno` `EINVAL`) for a
//! `sgid_index` or port with no GID, as rdma-core passes on `ibv_query_gid`'s -1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::time::{Duration, Instant};

use libc::c_int;
use softrnic_provider::device::{Gid, InterfaceInfo};

use crate::abi::context::ibv_context;
use crate::abi::qp_attr::ibv_ah_attr;
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};

/// `0xffff`: no VLAN.
const NO_VLAN: u16 = 0xffff;
/// How long a neighbour is waited for (rdma-core's `NEIGH_GET_DEFAULT_TIMEOUT_MS`).
const NEIGH_TIMEOUT: Duration = Duration::from_millis(3000);
/// `ATF_COM` in `/proc/net/arp`'s flags: the entry is complete (has a MAC).
const ATF_COM: u32 = 0x2;

/// The IP address a RoCE GID stands for, as rdma-core's `ipv6_addr_v4mapped` decides it:
/// IPv4-mapped GIDs and the IPv4 multicast groups encoded as `ff0e::ffff:a.b.c.d` are IPv4.
fn gid_ip(gid: &[u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(*gid);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    if gid[..4] == [0xff, 0x0e, 0, 0] && gid[4..10] == [0; 6] && gid[10..12] == [0xff, 0xff] {
        return IpAddr::V4(Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]));
    }
    IpAddr::V6(v6)
}

/// The Ethernet address a multicast group maps to, or `None` for a unicast address.
fn multicast_mac(ip: IpAddr) -> Option<[u8; 6]> {
    match ip {
        IpAddr::V4(a) if a.is_multicast() => {
            let o = a.octets();
            Some([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
        }
        IpAddr::V6(a) if a.is_multicast() => {
            let o = a.octets();
            Some([0x33, 0x33, o[12], o[13], o[14], o[15]])
        }
        _ => None,
    }
}

/// Whether `ip` is an address of this host: one of `ifaces`' or, for IPv4, in 127.0.0.0/8
/// (the kernel's `local 127.0.0.0/8 dev lo` route).
fn is_local(ip: IpAddr, ifaces: &[InterfaceInfo]) -> bool {
    ip.is_loopback() || ifaces.iter().any(|i| i.has_address(ip))
}

/// The next hop towards `dst` out of interface `ifname`, from the text of `/proc/net/route`
/// (columns Iface, Destination, Gateway, Flags, ..., Mask; addresses as native-endian hex of
/// the network-order bytes): the gateway of the longest matching route, or `dst` itself for a
/// route without one (flag `RTF_GATEWAY` 0x2 clear); `None` if no route out of `ifname`
/// matches.
fn ipv4_next_hop(routes: &str, ifname: &str, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    let hex = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|v| Ipv4Addr::from(v.to_ne_bytes()))
    };
    let d = u32::from(dst);
    routes
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 || f[0] != ifname {
                return None;
            }
            let (net, gw, mask) = (hex(f[1])?, hex(f[2])?, hex(f[7])?);
            let flags = u32::from_str_radix(f[3], 16).ok()?;
            let m = u32::from(mask);
            (d & m == u32::from(net) & m).then_some((m.count_ones(), flags & 0x2 != 0, gw))
        })
        .max_by_key(|&(len, _, _)| len)
        .map(|(_, via_gateway, gw)| if via_gateway { gw } else { dst })
}

/// The MAC of `ip`'s complete entry on interface `ifname` in the text of `/proc/net/arp`
/// (columns IP address, HW type, Flags, HW address, Mask, Device).
fn arp_entry(arp: &str, ifname: &str, ip: Ipv4Addr) -> Option<[u8; 6]> {
    arp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 6 || f[5] != ifname || f[0].parse::<Ipv4Addr>().ok()? != ip {
            return None;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        if flags & ATF_COM == 0 {
            return None;
        }
        let mut mac = [0u8; 6];
        let mut parts = f[3].split(':');
        for b in &mut mac {
            *b = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        Some(mac)
    })
}

/// The VLAN of interface `ifname` from the text of `/proc/net/vlan/config` (two header lines,
/// then `name | vid | real device`), or [`NO_VLAN`].
fn vlan_of(config: &str, ifname: &str) -> u16 {
    config
        .lines()
        .skip(2)
        .find_map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            (f.len() == 3 && f[0] == ifname).then(|| f[1].parse().ok())?
        })
        .filter(|&v| v <= 0xfff)
        .unwrap_or(NO_VLAN)
}

/// The MAC of IPv4 neighbour `dst` out of `iface` from source `src`, resolving it if needed.
fn ipv4_neighbour(iface: &InterfaceInfo, src: Ipv4Addr, dst: Ipv4Addr) -> Option<[u8; 6]> {
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    let hop = ipv4_next_hop(&routes, &iface.name, dst)?;
    let look = || {
        arp_entry(
            &std::fs::read_to_string("/proc/net/arp").ok()?,
            &iface.name,
            hop,
        )
    };
    if let Some(mac) = look() {
        return Some(mac);
    }
    // A datagram to the discard port makes the kernel resolve the next hop (rdma-core does
    // the same); its loss does not matter.
    if let Ok(s) = UdpSocket::bind((src, 0)) {
        let _ = s.send_to(&[0], (dst, 9));
    }
    let deadline = Instant::now() + NEIGH_TIMEOUT;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        if let Some(mac) = look() {
            return Some(mac);
        }
    }
    None
}

/// The MAC and VLAN behind `dst` for a device whose interface is `iface` and source GID
/// `sgid`; a negative errno if there is none.
fn resolve(iface: &InterfaceInfo, sgid: Gid, dst: IpAddr) -> Result<([u8; 6], u16), c_int> {
    let vid = std::fs::read_to_string("/proc/net/vlan/config")
        .map_or(NO_VLAN, |c| vlan_of(&c, &iface.name));
    if let Some(mac) = multicast_mac(dst) {
        return Ok((mac, vid));
    }
    let ifaces = InterfaceInfo::list().map_err(|_| -libc::EINVAL)?;
    if is_local(dst, &ifaces) {
        return Ok((iface.mac, vid));
    }
    match (sgid.to_ip(), dst) {
        (IpAddr::V4(src), IpAddr::V4(d)) => ipv4_neighbour(iface, src, d)
            .map(|mac| (mac, vid))
            .ok_or(-libc::EHOSTUNREACH),
        _ => Err(-libc::EHOSTUNREACH),
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_resolve_eth_l2_from_gid(struct ibv_context *, struct ibv_ah_attr *attr,
    /// uint8_t eth_mac[6], uint16_t *vid)`: writes the MAC behind `attr->grh.dgid`, and the
    /// VLAN to `*vid` if `vid` is not NULL (see the module doc); 0 or a negative errno.
    unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
        context: *mut ibv_context,
        attr: *mut ibv_ah_attr,
        eth_mac: *mut u8,
        vid: *mut u16,
    ) -> c_int {
        catch(-libc::EIO, || {
            let Some(c) = context::lookup(context) else { return -libc::EINVAL };
            if attr.is_null() || eth_mac.is_null() {
                return -libc::EINVAL;
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_ah_attr.
            let a = unsafe { *attr };
            let sgid = match c.dev.gids.get(a.grh.sgid_index.into()) {
                Some(e) if a.port_num == 1 => e.gid,
                _ => {
                    set_errno(libc::EINVAL);
                    return -1;
                }
            };
            match resolve(c.dev.gids.interface(), sgid, gid_ip(&a.grh.dgid.raw)) {
                Ok((mac, v)) => {
                    // SAFETY: the caller passes 6 writable bytes at eth_mac and a writable
                    // uint16_t at vid if it is not NULL.
                    unsafe {
                        std::ptr::copy_nonoverlapping(mac.as_ptr(), eth_mac, 6);
                        if !vid.is_null() {
                            vid.write_unaligned(v);
                        }
                    }
                    0
                }
                Err(e) => {
                    set_errno(-e);
                    e
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_groups_map_to_their_encoded_macs() {
        let g = |s: &str| multicast_mac(s.parse().unwrap());
        assert_eq!(g("224.0.0.251"), Some([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]));
        assert_eq!(g("239.129.2.3"), Some([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]));
        assert_eq!(
            g("ff02::1:ff00:1234"),
            Some([0x33, 0x33, 0xff, 0x00, 0x12, 0x34])
        );
        assert_eq!(g("127.0.59.1"), None);
        assert_eq!(g("fd00::1"), None);
    }

    #[test]
    fn gids_that_stand_for_ipv4() {
        let v4 = Gid::from_ip("127.0.59.2".parse().unwrap()).to_raw();
        assert_eq!(gid_ip(&v4), "127.0.59.2".parse::<IpAddr>().unwrap());
        let mut mc = [0u8; 16];
        mc[..2].copy_from_slice(&[0xff, 0x0e]);
        mc[10..].copy_from_slice(&[0xff, 0xff, 239, 1, 2, 3]);
        assert_eq!(gid_ip(&mc), "239.1.2.3".parse::<IpAddr>().unwrap());
        let v6 = Gid::from_ip("fd00::59:1".parse().unwrap()).to_raw();
        assert_eq!(gid_ip(&v6), "fd00::59:1".parse::<IpAddr>().unwrap());
    }

    /// Hex of an address as `/proc/net/route` prints it.
    fn route_hex(a: &str) -> String {
        format!(
            "{:08X}",
            u32::from_ne_bytes(a.parse::<Ipv4Addr>().unwrap().octets())
        )
    }

    #[test]
    fn the_next_hop_is_the_gateway_of_the_longest_route() {
        let line = |dst: &str, gw: &str, flags: u32, mask: &str| {
            let (d, g, m) = (route_hex(dst), route_hex(gw), route_hex(mask));
            format!("eth9\t{d}\t{g}\t{flags:04X}\t0\t0\t0\t{m}\t0\t0\t0\n")
        };
        let table = format!(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n{}{}",
            line("0.0.0.0", "10.9.0.1", 0x3, "0.0.0.0"),
            line("10.9.0.0", "0.0.0.0", 0x1, "255.255.255.0"),
        );
        let hop = |d: &str| ipv4_next_hop(&table, "eth9", d.parse().unwrap());
        assert_eq!(hop("10.9.0.7"), Some("10.9.0.7".parse().unwrap()));
        assert_eq!(hop("198.51.100.1"), Some("10.9.0.1".parse().unwrap()));
        assert_eq!(
            ipv4_next_hop(&table, "eth8", "10.9.0.7".parse().unwrap()),
            None
        );
    }

    #[test]
    fn only_complete_arp_entries_on_the_interface_count() {
        let arp =
            "IP address       HW type     Flags       HW address            Mask     Device\n\
                   10.9.0.1         0x1         0x2         02:fc:00:00:00:05     *        eth9\n\
                   10.9.0.2         0x1         0x0         00:00:00:00:00:00     *        eth9\n\
                   10.9.0.3         0x1         0x2         02:fc:00:00:00:07     *        eth8\n";
        let e = |ip: &str| arp_entry(arp, "eth9", ip.parse().unwrap());
        assert_eq!(e("10.9.0.1"), Some([0x02, 0xfc, 0, 0, 0, 5]));
        assert_eq!(e("10.9.0.2"), None);
        assert_eq!(e("10.9.0.3"), None);
    }

    #[test]
    fn the_vlan_is_the_interfaces_if_it_is_a_vlan_device() {
        let config = "VLAN Dev name    | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n\
                      eth9.5         | 5  | eth9\n";
        assert_eq!(vlan_of(config, "eth9.5"), 5);
        assert_eq!(vlan_of(config, "eth9"), NO_VLAN);
    }
}
