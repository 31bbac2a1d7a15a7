use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use softrnic_wire::frame::{IPV6_HEADER_LEN, UDP_HEADER_LEN};
use softrnic_wire::icrc::ICRC_LEN;
use softrnic_wire::{bth, opcode};

use super::*;
use crate::qp_state::Mtu;

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
fn node_guid_is_the_eui64_of_the_mac() {
    assert_eq!(node_guid_from_mac([0; 6]), 0x0200_00ff_fe00_0000);
    assert_eq!(
        node_guid_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
        0x5054_00ff_fe12_3456
    );
    let mac = [0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc];
    assert_eq!(
        node_guid_from_mac(mac),
        Gid::link_local_from_mac(mac).interface_id()
    );
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
fn the_link_local_gid_routes_to_the_device_itself() {
    let t = GidTable::build(ip("192.0.2.2"), &eth0());
    assert_eq!(t.route(ip("fe80::fc:ff:fe00:1")), ip("192.0.2.2"));
    // Every other destination is left alone: its own address, its interface's other
    // addresses (another device may be bound to them), and other hosts.
    for d in ["192.0.2.2", "fd00::2", "192.0.2.9", "fe80::fc:ff:fe00:2"] {
        assert_eq!(t.route(ip(d)), ip(d), "{d}");
    }
    let t = GidTable::build(ip("fd00::2"), &eth0());
    assert_eq!(t.route(ip("fe80::fc:ff:fe00:1")), ip("fd00::2"));
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

// ---- MTU ----

#[test]
fn active_mtu_examples() {
    for (netdev, ib) in [
        (1500, Mtu::Mtu1024),
        (1400, Mtu::Mtu1024),
        (9000, Mtu::Mtu4096),
        (65536, Mtu::Mtu4096),
        (1000, Mtu::Mtu512),
        (1280, Mtu::Mtu1024),
        (576, Mtu::Mtu256),
        (0, Mtu::Mtu256),
    ] {
        assert_eq!(active_mtu_for_netdev_mtu(netdev), ib, "netdev MTU {netdev}");
    }
}

#[test]
fn active_mtu_thresholds() {
    // An IB MTU is chosen from netdev MTU = IB MTU + 88 on.
    for m in Mtu::ALL {
        let at = m.bytes() + MAX_HEADER_OVERHEAD;
        assert_eq!(active_mtu_for_netdev_mtu(at), m, "at {at}");
        if m != Mtu::Mtu256 {
            assert!(active_mtu_for_netdev_mtu(at - 1) < m, "below {at}");
        }
    }
    // rxe's 80 bytes would give 1024 here; the largest packet (IPv6 XRC WRITE_ONLY_WITH_IMM
    // of 1024 bytes = 1112) would not fit.
    assert_eq!(active_mtu_for_netdev_mtu(1111), Mtu::Mtu512);
    assert_eq!(active_mtu_for_netdev_mtu(1112), Mtu::Mtu1024);
}

#[test]
fn active_mtu_is_monotone_and_fits() {
    let mut last = Mtu::Mtu256;
    for netdev in 0..70_000u32 {
        let m = active_mtu_for_netdev_mtu(netdev);
        assert!(m >= last, "{netdev}");
        if netdev >= 256 + MAX_HEADER_OVERHEAD {
            assert!(m.bytes() + MAX_HEADER_OVERHEAD <= netdev, "{netdev}");
        }
        last = m;
    }
    assert_eq!(active_mtu_for_netdev_mtu(u32::MAX), Mtu::Mtu4096);
}

#[test]
fn overhead_covers_every_opcode() {
    let fixed = IPV6_HEADER_LEN + UDP_HEADER_LEN + bth::HEADER_LEN + ICRC_LEN;
    let worst = opcode::TABLE
        .iter()
        .filter(|i| i.has_payload())
        .map(|i| fixed + i.ext_len())
        .max()
        .unwrap();
    assert_eq!(worst as u32, MAX_HEADER_OVERHEAD);
    assert_eq!(MAX_HEADER_OVERHEAD, 88);
}

// ---- attributes ----

#[test]
fn device_attr_is_consistent() {
    let a = DeviceAttr::softrnic(0x0200_00ff_fe00_0000);
    assert_eq!(a.node_guid, 0x0200_00ff_fe00_0000);
    assert_eq!(a.sys_image_guid, a.node_guid);
    assert!(!a.fw_ver.is_empty() && a.fw_ver.len() < 64, "fits char[64]");
    assert!(a.max_qp_init_rd_atom <= a.max_qp_rd_atom);
    assert_eq!(a.max_res_rd_atom, a.max_qp * a.max_qp_rd_atom);
    assert!(a.max_sge_rd <= a.max_sge);
    assert!(a.max_srq_sge <= a.max_sge);
    assert!(a.max_srq_wr <= a.max_qp_wr);
    assert!(a.max_cqe >= a.max_qp_wr, "a CQ can take a full queue");
    for v in [
        a.max_qp,
        a.max_qp_wr,
        a.max_sge,
        a.max_cq,
        a.max_cqe,
        a.max_mr,
        a.max_pd,
        a.max_srq,
    ] {
        assert!(v > 0);
    }
    assert_eq!(a.max_mw, 0);
    assert_eq!(a.max_ah, 0, "no address handles before UD");
    assert!(
        a.device_cap_flags.contains(DeviceCap::SRQ_RESIZE),
        "SRQs resize"
    );
    assert!(
        !a.device_cap_flags.contains(DeviceCap::MEM_WINDOW),
        "no windows yet"
    );
    assert!(!a.device_cap_flags.contains(DeviceCap::MEM_MGT_EXTENSIONS));
    assert!(a.device_cap_flags.contains(DeviceCap::RC_RNR_NAK_GEN));
    assert_eq!(a.atomic_cap as u32, 1);
    assert_eq!(a.max_pkeys, 1);
    assert_eq!(a.phys_port_cnt, 1);
    assert_eq!(a.local_ca_ack_delay, 15);
    assert_eq!(a.max_mr_size, u64::MAX);
    assert!(
        a.max_mr as u32 <= crate::mr::MAX_MR_LIMIT,
        "keys can index every MR"
    );
    assert_eq!(
        (a.max_ee, a.max_rdd, a.max_mcast_grp, a.max_fmr),
        (0, 0, 0, 0)
    );
}

#[test]
fn flag_values_match_verbs_h() {
    assert_eq!(DeviceCap::BAD_PKEY_CNTR.bits(), 2);
    assert_eq!(DeviceCap::BAD_QKEY_CNTR.bits(), 4);
    assert_eq!(DeviceCap::CURR_QP_STATE_MOD.bits(), 128);
    assert_eq!(DeviceCap::PORT_ACTIVE_EVENT.bits(), 1024);
    assert_eq!(DeviceCap::SYS_IMAGE_GUID.bits(), 2048);
    assert_eq!(DeviceCap::RC_RNR_NAK_GEN.bits(), 4096);
    assert_eq!(DeviceCap::SRQ_RESIZE.bits(), 8192);
    assert_eq!(DeviceCap::MEM_WINDOW.bits(), 131_072);
    assert_eq!(DeviceCap::MEM_MGT_EXTENSIONS.bits(), 2_097_152);
    assert_eq!(PortCap::CM_SUP.bits(), 65_536);
    assert_eq!(PortCap::IP_BASED_GIDS.bits(), 67_108_864);
    assert_eq!(PortState::Active as u32, 4);
    assert_eq!(PortState::Down as u32, 1);
    assert_eq!(LINK_LAYER_ETHERNET, 2);
    assert_eq!(AtomicCap::Hca as u32, 1);
}

#[test]
fn port_attr_is_consistent() {
    let p = PortAttr::softrnic(Mtu::Mtu1024, GID_TBL_LEN);
    assert_eq!(p.state, PortState::Active);
    assert_eq!(p.max_mtu, Mtu::Mtu4096);
    assert_eq!(p.active_mtu, Mtu::Mtu1024);
    assert!(p.active_mtu <= p.max_mtu);
    assert_eq!(p.gid_tbl_len, 16);
    assert_eq!(p.max_msg_sz, 0x8000_0000);
    assert_eq!(p.pkey_tbl_len, 1);
    assert_eq!(p.link_layer, LINK_LAYER_ETHERNET);
    assert_eq!(p.phys_state, PHYS_STATE_LINK_UP);
    assert_eq!(p.port_cap_flags, PortCap::IP_BASED_GIDS, "no CM yet");
    assert_eq!(p.active_speed_ex, u32::from(p.active_speed));
    assert_eq!((p.lid, p.sm_lid, p.lmc), (0, 0, 0));
    // A real table never outgrows the length the port reports.
    let t = GidTable::for_address(ip("127.0.0.1")).unwrap();
    assert!(t.len() <= p.gid_tbl_len as usize);
}
