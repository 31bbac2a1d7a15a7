//! The link between softrnic and the guest: a private network namespace (one per test
//! process) holding a bridge,
//! `br0`, with the host side's addresses, and one tap device the guest's virtio NIC plugs
//! into. Everything softrnic runs in the matrix runs inside that namespace, so nothing touches
//! the machine's own interfaces, and the link's MTU can change between cells (rxe's path MTU
//! follows its netdev's: 1500 gives 1024, 9000 gives 4096).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

/// The prefix of the namespace's name; the process's id follows it, so that two runs on one
/// host (two worktrees' test suites) each have their own link.
const NETNS_PREFIX: &str = "softrnic-rxe-";

/// This process's namespace: `softrnic-rxe-<pid>`.
pub fn netns() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| format!("{NETNS_PREFIX}{}", std::process::id()))
}
/// The bridge's IPv4 address: softrnic's, as a host on the link.
pub const HOST_V4: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 1);
/// The guest's IPv4 address.
pub const GUEST_V4: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 2);
/// The bridge's IPv6 address.
pub const HOST_V6: Ipv6Addr = Ipv6Addr::new(0xfd98, 0, 0, 0, 0, 0, 0, 1);
/// The guest's IPv6 address.
pub const GUEST_V6: Ipv6Addr = Ipv6Addr::new(0xfd98, 0, 0, 0, 0, 0, 0, 2);
/// The bridge.
pub const BRIDGE: &str = "br0";
/// The guest's tap device.
pub const TAP: &str = "tap0";

/// IPv4 or IPv6: which addresses RoCE runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 (the GID is IPv4-mapped).
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// softrnic's address on the link.
    pub fn host(self) -> IpAddr {
        match self {
            Family::V4 => HOST_V4.into(),
            Family::V6 => HOST_V6.into(),
        }
    }

    /// The guest's address on the link.
    pub fn guest(self) -> IpAddr {
        match self {
            Family::V4 => GUEST_V4.into(),
            Family::V6 => GUEST_V6.into(),
        }
    }
}

/// Runs `ip` with `args` inside the namespace (`ip -n`).
fn ip(args: &[&str]) -> io::Result<()> {
    run(Command::new("ip").arg("-n").arg(netns()).args(args))
}

/// Runs `cmd`; an error if it cannot start or exits with a failure.
pub(crate) fn run(cmd: &mut Command) -> io::Result<()> {
    let out = cmd.output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Creates the namespace, its bridge with the host side's addresses, and the guest's tap,
/// every one at `mtu`. An old namespace of the same name (a run that was killed) goes first.
///
/// # Errors
/// When `ip` fails: no root, or no bridge or tun support.
pub fn create(mtu: u32) -> io::Result<()> {
    remove_stale();
    destroy();
    run(Command::new("ip").args(["netns", "add", netns()]))?;
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link",
        "add",
        BRIDGE,
        "type",
        "bridge",
        "stp_state",
        "0",
        "forward_delay",
        "0",
    ])?;
    ip(&["tuntap", "add", "dev", TAP, "mode", "tap"])?;
    ip(&["link", "set", TAP, "master", BRIDGE])?;
    set_mtu(mtu)?;
    ip(&["addr", "add", &format!("{HOST_V4}/24"), "dev", BRIDGE])?;
    ip(&[
        "-6",
        "addr",
        "add",
        &format!("{HOST_V6}/64"),
        "dev",
        BRIDGE,
        "nodad",
    ])?;
    ip(&["link", "set", TAP, "up"])?;
    ip(&["link", "set", BRIDGE, "up"])
}

/// Sets the MTU of the tap and the bridge (the guest's own `eth0` is the guest's business).
///
/// # Errors
/// When `ip` fails.
pub fn set_mtu(mtu: u32) -> io::Result<()> {
    let mtu = mtu.to_string();
    ip(&["link", "set", TAP, "mtu", &mtu])?;
    ip(&["link", "set", BRIDGE, "mtu", &mtu])
}

/// Deletes the namespace and everything in it, if it exists.
pub fn destroy() {
    let _ = Command::new("ip")
        .args(["netns", "delete", netns()])
        .output();
}

/// Deletes the namespaces of runs whose process is gone (killed before they could).
fn remove_stale() {
    let Ok(names) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for name in names.filter_map(Result::ok) {
        let name = name.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        }
    }
}
