//! RC over RoCEv2/IPv6: the whole demo (every opcode, every byte verified, 64 KiB WRITEs as
//! segmentation runs) between two devices on fd99::1 and fd99::2, in a private network
//! namespace whose `lo` carries those addresses. Over IPv6 the receiver rebuilds the IP header
//! the ICRC covers (no IP ID), so the demo's packets are verified end to end.
//!
//! Needs root (a network namespace) and the `ip` command; says so on stderr and skips
//! otherwise.

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::Command;

use softrnic_uapi::Progress;

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

#[test]
fn the_demo_runs_over_ipv6() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !ip {
        eprintln!("SKIPPED: needs root and the ip command (apt-get install iproute2)");
        return;
    }
    let ns = Netns(format!("softrnic-v6-{}", std::process::id()));
    run(&["ip", "netns", "add", &ns.0]);
    run(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
    for a in ["fd99::1/128", "fd99::2/128"] {
        run(&[
            "ip", "-n", &ns.0, "-6", "addr", "add", a, "dev", "lo", "nodad",
        ]);
    }
    let name = ns.0.clone();
    let report = std::thread::spawn(move || {
        let file = std::fs::File::open(format!("/run/netns/{name}")).expect("netns file");
        // SAFETY: a valid descriptor of a network namespace; setns changes only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
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
