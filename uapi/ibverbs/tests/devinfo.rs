//! Unmodified `ibv_devices` and `ibv_devinfo -v` (Debian's ibverbs-utils) list the softrnic
//! devices through our `libibverbs.so.1`: exit status 0, nothing on stderr, the loopback
//! device `softrnic_lo` with an active Ethernet port and its GIDs; `SOFTRNIC_ADDR` narrows the
//! list to the device of that address.

mod common;

use common::{program, run, texts};

#[test]
fn ibv_devices_lists_softrnic_lo() {
    let Some(p) = program("ibv_devices", "ibv_devices_lists_softrnic_lo") else {
        return;
    };
    let out = run(&p, &[], None);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "ibv_devices failed: {stdout}{stderr}");
    assert_eq!(stderr, "", "ibv_devices wrote to stderr");
    let lo = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("softrnic_lo"))
        .unwrap_or_else(|| panic!("no softrnic_lo in:\n{stdout}"));
    // lo's MAC is all zero: its EUI-64 node GUID.
    assert!(lo.contains("020000fffe000000"), "{lo}");
}

#[test]
fn ibv_devinfo_verbose_shows_an_active_ethernet_port_and_gids() {
    let Some(p) = program(
        "ibv_devinfo",
        "ibv_devinfo_verbose_shows_an_active_ethernet_port_and_gids",
    ) else {
        return;
    };
    let out = run(&p, &["-v", "-d", "softrnic_lo"], None);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "ibv_devinfo failed: {stdout}{stderr}");
    assert_eq!(stderr, "", "ibv_devinfo wrote to stderr");
    for want in [
        "hca_id:\tsoftrnic_lo",
        "transport:\t\t\tInfiniBand (0)",
        "phys_port_cnt:\t\t\t1",
        "max_qp:\t\t\t\t1024",
        "state:\t\t\tPORT_ACTIVE (4)",
        "active_mtu:\t\t4096 (5)",
        "link_layer:\t\tEthernet",
        "phys_state:\t\tLINK_UP (5)",
        "GID[  0]:\t\tfe80::200:ff:fe00:0, RoCE v2",
        "GID[  1]:\t\t::ffff:127.0.0.1, RoCE v2",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    let tbl_len: usize = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("gid_tbl_len:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("gid_tbl_len line");
    // Every index below gid_tbl_len is queryable and printed (perftest requires it).
    assert_eq!(stdout.matches("GID[").count(), tbl_len, "{stdout}");
}

#[test]
fn ibv_devinfo_lists_every_device_without_warnings() {
    let Some(p) = program(
        "ibv_devinfo",
        "ibv_devinfo_lists_every_device_without_warnings",
    ) else {
        return;
    };
    let out = run(&p, &["-v"], None);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "ibv_devinfo failed: {stdout}{stderr}");
    assert_eq!(stderr, "", "ibv_devinfo wrote to stderr");
    let ports = stdout.matches("PORT_ACTIVE").count();
    assert!(
        ports >= 1 && ports == stdout.matches("hca_id:").count(),
        "{stdout}"
    );
}

#[test]
fn softrnic_addr_selects_the_device_and_its_gid() {
    let Some(p) = program(
        "ibv_devinfo",
        "softrnic_addr_selects_the_device_and_its_gid",
    ) else {
        return;
    };
    let out = run(&p, &["-v"], Some("127.0.0.2"));
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "ibv_devinfo failed: {stdout}{stderr}");
    assert_eq!(stderr, "");
    assert_eq!(stdout.matches("hca_id:").count(), 1, "{stdout}");
    assert!(stdout.contains("hca_id:\tsoftrnic_lo"), "{stdout}");
    assert!(
        stdout.contains("GID[  1]:\t\t::ffff:127.0.0.2, RoCE v2"),
        "{stdout}"
    );
}

#[test]
fn a_bad_softrnic_addr_is_reported() {
    let Some(p) = program("ibv_devices", "a_bad_softrnic_addr_is_reported") else {
        return;
    };
    for bad in ["not-an-address", "198.51.100.77"] {
        let out = run(&p, &[], Some(bad));
        let (stdout, stderr) = texts(&out);
        assert!(!out.status.success(), "{stdout}");
        assert!(stderr.contains("SOFTRNIC_ADDR"), "{bad}: {stderr}");
    }
}
