use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn gid(s: &str) -> Gid {
    Gid::from_ip(ip(s))
}

fn addr(s: &str, prefix_len: u8) -> IfAddr {
    IfAddr::new(ip(s), prefix_len)
}

/// `lo` as Linux has it.
fn lo() -> InterfaceInfo {
    InterfaceInfo {
        name: "lo".into(),
        index: 1,
        mac: [0; 6],
        mtu: 65536,
        loopback: true,
        addrs: vec![addr("127.0.0.1", 8), addr("::1", 128)],
    }
}

/// An Ethernet interface with IPv4, a ULA and its SLAAC link-local address (this machine's
/// `eth0` at the time of writing).
fn eth0() -> InterfaceInfo {
    InterfaceInfo {
        name: "eth0".into(),
        index: 4,
        mac: [0x02, 0xfc, 0x00, 0x00, 0x00, 0x01],
        mtu: 1400,
        loopback: false,
        addrs: vec![
            addr("192.0.2.2", 24),
            addr("fd00::2", 64),
            addr("fe80::fc:ff:fe00:1", 64),
        ],
    }
}

fn gids(t: &GidTable) -> Vec<Gid> {
    t.iter().map(|e| e.gid).collect()
}

// ---- GIDs ----

#[test]
fn eui64_vectors() {
    // lo's all-zero MAC: only the U/L bit flips.
    let g = Gid::link_local_from_mac([0; 6]);
    assert_eq!(g.to_string(), "fe80::200:ff:fe00:0");
    assert_eq!(
        g.raw(),
        &[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0, 0]
    );
    // A locally administered MAC (U/L bit set) loses the bit: `ip addr` shows this one for
    // 02:fc:00:00:00:01 on this machine's eth0.
    assert_eq!(
        Gid::link_local_from_mac([0x02, 0xfc, 0, 0, 0, 1]).to_string(),
        "fe80::fc:ff:fe00:1"
    );
    // QEMU's default MAC and a universally administered one.
    assert_eq!(
        Gid::link_local_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]).to_string(),
        "fe80::5054:ff:fe12:3456"
    );
    assert_eq!(
        Gid::link_local_from_mac([0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc]).to_string(),
        "fe80::21b:21ff:feaa:bbcc"
    );
    assert_eq!(g.subnet_prefix(), 0xfe80_0000_0000_0000);
    assert_eq!(g.interface_id(), 0x0200_00ff_fe00_0000);
}

#[test]
fn ipv4_is_mapped_both_ways() {
    let g = gid("127.0.0.1");
    assert_eq!(
        g.raw(),
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]
    );
    assert!(g.is_ipv4_mapped());
    assert_eq!(g.to_string(), "::ffff:127.0.0.1");
    assert_eq!(format!("{g:?}"), "::ffff:127.0.0.1");
    assert_eq!(g.to_ip(), ip("127.0.0.1"));
    // An IPv4-mapped IPv6 address is the same GID and comes back as IPv4.
    assert_eq!(gid("::ffff:10.0.0.1"), gid("10.0.0.1"));
    assert_eq!(gid("::ffff:10.0.0.1").to_ip(), ip("10.0.0.1"));
}

#[test]
fn ipv6_stays_ipv6() {
    for s in [
        "::1",
        "::7f00:1",
        "fe80::1",
        "fd00::2",
        "::",
        "::fffe:7f00:1",
    ] {
        let g = gid(s);
        assert!(!g.is_ipv4_mapped(), "{s}");
        assert_eq!(g.to_ip(), ip(s), "{s}");
        assert_eq!(g.to_string(), s);
    }
    // `Ipv6Addr::to_ipv4` would turn ::1 into 0.0.0.1; to_ip must not.
    assert_eq!(gid("::1").to_ip(), IpAddr::V6(Ipv6Addr::LOCALHOST));
}

#[test]
fn raw_accessors_agree() {
    let raw = [7u8; 16];
    let g = Gid::from_raw(raw);
    assert_eq!(g.to_raw(), raw);
    assert_eq!(Gid::from(raw), g);
    assert_eq!(Ipv6Addr::from(g).octets(), raw);
    assert_eq!(Gid::from(ip("1.2.3.4")), gid("1.2.3.4"));
    assert_eq!(Gid::ZERO.to_string(), "::");
}

#[test]
fn gid_type_has_ibv_gid_type_values() {
    assert_eq!(GidType::Ib.ibv(), 0);
    assert_eq!(GidType::RoceV1.ibv(), 1);
    assert_eq!(GidType::RoceV2.ibv(), 2);
    for t in [GidType::Ib, GidType::RoceV1, GidType::RoceV2] {
        assert_eq!(GidType::from_ibv(t.ibv()), Some(t));
    }
    assert_eq!(GidType::from_ibv(3), None);
}

proptest! {
    #[test]
    fn any_ipv4_round_trips(a in any::<u32>()) {
        let v4 = IpAddr::V4(Ipv4Addr::from(a));
        let g = Gid::from_ip(v4);
        prop_assert!(g.is_ipv4_mapped());
        prop_assert_eq!(g.to_ip(), v4);
    }

    #[test]
    fn any_ipv6_round_trips(a in any::<u128>()) {
        let v6 = Ipv6Addr::from(a);
        let g = Gid::from_ip(IpAddr::V6(v6));
        prop_assert_eq!(g.raw(), &v6.octets());
        let back = g.to_ip();
        match v6.to_ipv4_mapped() {
            Some(v4) => prop_assert_eq!(back, IpAddr::V4(v4)),
            None => prop_assert_eq!(back, IpAddr::V6(v6)),
        }
        prop_assert_eq!(Gid::from_ip(back), g);
    }
}

// ---- interfaces ----

#[test]
fn prefixes_contain() {
    assert!(addr("127.0.0.1", 8).contains(ip("127.255.0.9")));
    assert!(!addr("127.0.0.1", 8).contains(ip("128.0.0.1")));
    assert!(addr("10.0.0.1", 32).contains(ip("10.0.0.1")));
    assert!(!addr("10.0.0.1", 32).contains(ip("10.0.0.2")));
    assert!(addr("10.0.0.1", 0).contains(ip("192.0.2.1")));
    assert!(addr("fd00::2", 64).contains(ip("fd00::ffff")));
    assert!(!addr("fd00::2", 64).contains(ip("fd00:0:0:1::2")));
    assert!(addr("::", 0).contains(ip("2001:db8::1")));
    assert!(!addr("::1", 128).contains(ip("::2")));
    // Families never mix, not even for IPv4-mapped IPv6.
    assert!(!addr("127.0.0.1", 8).contains(ip("::ffff:127.0.0.1")));
    assert_eq!(addr("10.0.0.1", 99).prefix_len, 32);
}

#[test]
fn the_owning_interface() {
    let all = [lo(), eth0()];
    let name = |a: &str| InterfaceInfo::owning(&all, ip(a)).map(|i| i.name.as_str());
    assert_eq!(name("127.0.0.1"), Some("lo"));
    assert_eq!(name("::1"), Some("lo"));
    // Not assigned, but inside lo's 127.0.0.0/8: local.
    assert_eq!(name("127.0.0.2"), Some("lo"));
    assert_eq!(name("192.0.2.2"), Some("eth0"));
    assert_eq!(name("fe80::fc:ff:fe00:1"), Some("eth0"));
    // Inside eth0's subnet is another host's address, not ours.
    assert_eq!(name("192.0.2.77"), None);
    assert_eq!(name("fd00::77"), None);
    assert_eq!(name("::2"), None);
    assert_eq!(name("0.0.0.0"), None);
}

#[test]
fn address_labels_name_their_interface() {
    assert_eq!(iface::interface_name("eth0:1"), "eth0");
    assert_eq!(iface::interface_name("eth0"), "eth0");
    assert_eq!(iface::interface_name("lo"), "lo");
}

// ---- the GID table ----

#[test]
fn loopback_table() {
    let t = GidTable::build(ip("127.0.0.1"), &lo());
    assert_eq!(
        gids(&t),
        [gid("fe80::200:ff:fe00:0"), gid("127.0.0.1"), gid("::1")]
    );
    assert_eq!(t.len(), 3);
    assert!(!t.is_empty());
    assert_eq!(t.local_gid(), gid("127.0.0.1"));
    assert_eq!(t.get(LOCAL_GID_INDEX).unwrap().gid, gid("127.0.0.1"));
    assert_eq!(t.get(3), None);
    assert_eq!(t.get(u32::MAX), None);
    assert_eq!(t.find(gid("::1")), Some(2));
    assert_eq!(t.find(gid("127.0.0.2")), None);
    assert_eq!(t.interface().name, "lo");
}

#[test]
fn unassigned_loopback_address_is_index_1() {
    let t = GidTable::build(ip("127.0.0.2"), &lo());
    assert_eq!(
        gids(&t),
        [
            gid("fe80::200:ff:fe00:0"),
            gid("127.0.0.2"),
            gid("127.0.0.1"),
            gid("::1")
        ]
    );
    assert_eq!(t.find(gid("127.0.0.2")), Some(1));
}

#[test]
fn ethernet_table() {
    // IPv4 device: the interface's link-local address is GID 0 already, not repeated.
    let t = GidTable::build(ip("192.0.2.2"), &eth0());
    assert_eq!(
        gids(&t),
        [gid("fe80::fc:ff:fe00:1"), gid("192.0.2.2"), gid("fd00::2")]
    );
    // IPv6 device: its address moves to index 1, the IPv4 address follows.
    let t = GidTable::build(ip("fd00::2"), &eth0());
    assert_eq!(
        gids(&t),
        [gid("fe80::fc:ff:fe00:1"), gid("fd00::2"), gid("192.0.2.2")]
    );
    for (i, e) in t.iter().enumerate() {
        assert_eq!(e.index, i as u32);
        assert_eq!(e.gid_type, GidType::RoceV2);
        assert_eq!(e.ndev_ifindex, 4);
        assert_eq!(t.get(e.index), Some(e));
        assert_eq!(t.find(e.gid), Some(e.index));
    }
}

#[test]
fn device_on_the_link_local_address_keeps_index_1() {
    let t = GidTable::build(ip("fe80::fc:ff:fe00:1"), &eth0());
    assert_eq!(t.get(0).unwrap().gid, gid("fe80::fc:ff:fe00:1"));
    assert_eq!(t.get(1).unwrap().gid, gid("fe80::fc:ff:fe00:1"));
    assert_eq!(t.find(gid("fe80::fc:ff:fe00:1")), Some(0));
    assert_eq!(gids(&t)[2..], [gid("192.0.2.2"), gid("fd00::2")]);
}

#[test]
fn table_is_capped() {
    let mut many = eth0();
    many.addrs = (1..=40u8)
        .map(|i| addr(&format!("198.51.100.{i}"), 24))
        .collect();
    let t = GidTable::build(ip("198.51.100.40"), &many);
    assert_eq!(t.len(), GID_TBL_LEN as usize);
    assert_eq!(t.local_gid(), gid("198.51.100.40"));
    assert_eq!(t.get(2).unwrap().gid, gid("198.51.100.1"));
    assert_eq!(t.get(GID_TBL_LEN), None);
    let mut seen = gids(&t);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), t.len(), "no duplicates");
}

// ---- this host ----

#[test]
fn real_loopback() {
    let t = GidTable::for_address(ip("127.0.0.1")).unwrap();
    let i = t.interface();
    assert!(i.loopback, "{i:?}");
    assert!(i.index > 0, "{i:?}");
    assert!(i.mtu >= 1280, "{i:?}");
    assert_eq!(i.mac, [0; 6], "{i:?}");
    assert_eq!(t.get(0).unwrap().gid, gid("fe80::200:ff:fe00:0"));
    assert_eq!(t.get(1).unwrap().gid, gid("127.0.0.1"));
    assert_eq!(t.get(1).unwrap().ndev_ifindex, i.index);
    assert!(i.has_address(ip("127.0.0.1")));
    // SIOCGIFMTU agrees with sysfs, where sysfs is mounted.
    if let Ok(s) = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", i.name)) {
        assert_eq!(s.trim().parse::<u32>().unwrap(), i.mtu);
    }

    let t2 = GidTable::for_address(ip("127.0.0.2")).unwrap();
    assert_eq!(t2.local_gid(), gid("127.0.0.2"));
    assert_eq!(t2.interface().index, i.index);
}

#[test]
fn real_interfaces_are_listed() {
    let all = InterfaceInfo::list().unwrap();
    assert!(all
        .iter()
        .any(|i| i.loopback && i.has_address(ip("127.0.0.1"))));
    assert!(all.iter().all(|i| !i.name.contains(':')));
    for i in &all {
        assert!(i.index > 0, "{i:?}");
    }
}

#[test]
fn address_of_no_interface_is_an_error() {
    // Documentation ranges (RFC 5737, RFC 3849): no interface has them.
    for a in ["198.51.100.77", "2001:db8::77", "0.0.0.0"] {
        let e = GidTable::for_address(ip(a)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable, "{a}: {e}");
        assert!(e.to_string().contains(a), "{e}");
    }
}
