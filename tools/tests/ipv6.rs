//! RC over RoCEv2/IPv6: the whole demo (every opcode, every byte verified, 64 KiB WRITEs as
//! segmentation runs) between two devices on fd99::1 and fd99::2, in a private network
//! namespace whose `lo` carries those addresses. Over IPv6 the receiver rebuilds the IP header
//! the ICRC covers (no IP ID), so the demo's packets are verified end to end.
//!
//! Needs root (a network namespace) and the `ip` command; skips otherwise
//! (`softrnic_testkit::skip`).

use std::net::IpAddr;

use softrnic_uapi::Progress;

mod netns;
use netns::{enter, have, run, Netns};

#[test]
fn the_demo_runs_over_ipv6() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !have("ip", "-V") {
        softrnic_testkit::skip(
            "the_demo_runs_over_ipv6",
            "needs root and the ip command (apt-get install iproute2)",
        );
        return;
    }
    let ns = Netns::new("v6");
    for a in ["fd99::1/128", "fd99::2/128"] {
        run(&[
            "ip", "-n", &ns.0, "-6", "addr", "add", a, "dev", "lo", "nodad",
        ]);
    }
    let name = ns.0.clone();
    let report = std::thread::spawn(move || {
        enter(&name);
        let a: IpAddr = "fd99::1".parse().unwrap();
        let b: IpAddr = "fd99::2".parse().unwrap();
        softrnic_tools::demo::run(a, b, Progress::Polling).expect("the demo runs over IPv6")
    })
    .join()
    .expect("the namespace thread");
    // The demo fails on any byte that differs; here, that every operation ran.
    assert_eq!(report.checks.len(), 6, "{:?}", report.checks);
    assert!(report.write_gbit_s > 0.0);
}
