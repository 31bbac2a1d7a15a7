//! Which devices a process sees, and the device objects behind `ibv_get_device_list`.
//!
//! # Selection
//!
//! * By default, one device per network interface that has an IP address, named
//!   `softrnic_<interface>` (`softrnic_lo`, `softrnic_eth0`), in `getifaddrs(3)` order, bound to
//!   the interface's first IPv4 address, or else its first IPv6 address that is not link-local.
//! * `SOFTRNIC_ADDR=<IPv4 or IPv6 address>` makes the process see one device, that of the
//!   interface owning the address (as [`InterfaceInfo::owning`] decides: 127.0.0.2 belongs to
//!   `lo`), bound to that address. Two processes with `SOFTRNIC_ADDR=127.0.0.1` and
//!   `SOFTRNIC_ADDR=127.0.0.2` are two hosts, each with a device named `softrnic_lo`.
//!
//! GID index 1 of a device is its address (see `softrnic_provider::device`), as
//! `ibv_rc_pingpong -g 1` expects.
//!
//! # Lifetime
//!
//! Devices live as long as the process, like rdma-core's (a device must outlive
//! `ibv_free_device_list` while a context uses it): [`list`] leaks each new device once and
//! hands the same one out again for the same name and address.

use std::net::IpAddr;
use std::sync::Mutex;

use softrnic_provider::device::{
    active_mtu_for_netdev_mtu, node_guid_from_mac, DeviceAttr, GidTable, InterfaceInfo, PortAttr,
};

use crate::abi::context::{ibv_device, IBV_NODE_CA, IBV_TRANSPORT_IB};
use crate::ffi::c_chars;

/// The environment variable that picks the process's local address.
pub const ADDR_ENV: &str = "SOFTRNIC_ADDR";

/// The prefix of device names.
pub const NAME_PREFIX: &str = "softrnic_";

/// A device to offer: its name, its address, its interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choice {
    pub name: String,
    pub addr: IpAddr,
    pub iface: InterfaceInfo,
}

/// Whether `ip` is an IPv6 link-local address (`fe80::/10`), which needs a scope to bind.
fn is_link_local_v6(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

/// The devices to offer on a host with interfaces `ifaces`: see the module doc.
///
/// # Errors
/// With `only`, a message if no interface owns it.
pub(crate) fn choose(
    ifaces: &[InterfaceInfo],
    only: Option<IpAddr>,
) -> Result<Vec<Choice>, String> {
    let choice = |i: &InterfaceInfo, addr| Choice {
        name: format!("{NAME_PREFIX}{}", i.name),
        addr,
        iface: i.clone(),
    };
    if let Some(addr) = only {
        let iface = InterfaceInfo::owning(ifaces, addr)
            .ok_or_else(|| format!("no network interface has the address {addr}"))?;
        return Ok(vec![choice(iface, addr)]);
    }
    Ok(ifaces
        .iter()
        .filter_map(|i| {
            let v4 = i.addrs.iter().find(|a| a.addr.is_ipv4());
            let v6 = i
                .addrs
                .iter()
                .find(|a| !a.addr.is_ipv4() && !is_link_local_v6(a.addr));
            v4.or(v6).map(|a| choice(i, a.addr))
        })
        .collect())
}

/// The address `SOFTRNIC_ADDR` asks for, if set.
///
/// # Errors
/// A message if it is set but not an IP address.
pub(crate) fn addr_from_env() -> Result<Option<IpAddr>, String> {
    match std::env::var(ADDR_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(s) if s.trim().is_empty() => Ok(None),
        Ok(s) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{ADDR_ENV}={s:?} is not an IPv4 or IPv6 address")),
        Err(e) => Err(format!("{ADDR_ENV}: {e}")),
    }
}

/// A softrnic device: the C `ibv_device` first, so that a `*mut ibv_device` from the list is a
/// pointer to it, then what queries report.
#[repr(C)]
pub(crate) struct SoftDevice {
    pub ibv: ibv_device,
    pub addr: IpAddr,
    pub gids: GidTable,
    pub attr: DeviceAttr,
    pub port: PortAttr,
    /// The node GUID as a number (`ibv_device_attr.node_guid` holds it big-endian).
    pub guid: u64,
    /// The index `ibv_get_device_index` reports: the interface index.
    pub index: u32,
}

impl SoftDevice {
    fn new(c: &Choice) -> SoftDevice {
        let gids = GidTable::build(c.addr, &c.iface);
        let guid = node_guid_from_mac(c.iface.mac);
        let port = PortAttr::softrnic(active_mtu_for_netdev_mtu(c.iface.mtu), gids.len() as u32);
        SoftDevice {
            ibv: ibv_device {
                _ops: Default::default(),
                node_type: IBV_NODE_CA,
                transport_type: IBV_TRANSPORT_IB,
                name: c_chars(&c.name),
                dev_name: c_chars(&c.name),
                dev_path: c_chars(&format!("/sys/class/infiniband_verbs/{}", c.name)),
                ibdev_path: c_chars(&format!("/sys/class/infiniband/{}", c.name)),
            },
            addr: c.addr,
            gids,
            attr: DeviceAttr::softrnic(guid),
            port,
            guid,
            index: c.iface.index,
        }
    }

    /// The name (`ibv_device.name`).
    pub fn name(&self) -> String {
        let bytes: Vec<u8> = self
            .ibv
            .name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Every device handed out so far.
static DEVICES: Mutex<Vec<&'static SoftDevice>> = Mutex::new(Vec::new());

/// The devices to offer now (see the module doc), creating those not seen before.
///
/// # Errors
/// A message for a bad `SOFTRNIC_ADDR`, or the OS error of reading the interfaces.
pub(crate) fn list() -> Result<Vec<&'static SoftDevice>, String> {
    let only = addr_from_env()?;
    let ifaces =
        InterfaceInfo::list().map_err(|e| format!("reading the network interfaces: {e}"))?;
    let chosen = choose(&ifaces, only).map_err(|e| format!("{ADDR_ENV}: {e}"))?;
    Ok(intern(&chosen))
}

/// The device of the local address `addr`, listed or not: the connection manager binds to
/// any local address (`rdma_bind_addr`), as the kernel's finds the device holding its GID.
///
/// # Errors
/// A message if no interface owns `addr`, or the OS error of reading the interfaces.
pub(crate) fn for_address(addr: IpAddr) -> Result<&'static SoftDevice, String> {
    let ifaces =
        InterfaceInfo::list().map_err(|e| format!("reading the network interfaces: {e}"))?;
    let chosen = choose(&ifaces, Some(addr))?;
    intern(&chosen)
        .into_iter()
        .next()
        .ok_or_else(|| format!("no device for {addr}"))
}

/// The devices of `chosen`, creating those not seen before.
fn intern(chosen: &[Choice]) -> Vec<&'static SoftDevice> {
    let mut all = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    chosen
        .iter()
        .map(
            |c| match all.iter().find(|d| d.addr == c.addr && d.name() == c.name) {
                Some(d) => *d,
                None => {
                    let d: &'static SoftDevice = Box::leak(Box::new(SoftDevice::new(c)));
                    all.push(d);
                    d
                }
            },
        )
        .collect()
}

/// The device behind `ptr`, if it is one of ours (anything else is refused, not read).
pub(crate) fn lookup(ptr: *const ibv_device) -> Option<&'static SoftDevice> {
    let all = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    all.iter().copied().find(|d| std::ptr::eq(&d.ibv, ptr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use softrnic_provider::device::IfAddr;

    fn iface(name: &str, loopback: bool, addrs: &[&str]) -> InterfaceInfo {
        InterfaceInfo {
            name: name.into(),
            index: 1,
            mac: [0; 6],
            mtu: 1500,
            loopback,
            addrs: addrs
                .iter()
                .map(|a| {
                    let (ip, len) = a.split_once('/').unwrap();
                    IfAddr::new(ip.parse().unwrap(), len.parse().unwrap())
                })
                .collect(),
        }
    }

    fn host() -> Vec<InterfaceInfo> {
        vec![
            iface("lo", true, &["127.0.0.1/8", "::1/128"]),
            iface("ifb0", false, &[]),
            iface("eth0", false, &["fe80::1/64", "fd00::2/64", "192.0.2.2/24"]),
            iface("eth1", false, &["fe80::2/64", "2001:db8::5/64"]),
        ]
    }

    #[test]
    fn one_device_per_interface_with_an_address() {
        let c = choose(&host(), None).unwrap();
        let got: Vec<(String, String)> = c
            .iter()
            .map(|c| (c.name.clone(), c.addr.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("softrnic_lo".into(), "127.0.0.1".into()),
                ("softrnic_eth0".into(), "192.0.2.2".into()),
                ("softrnic_eth1".into(), "2001:db8::5".into()),
            ]
        );
    }

    #[test]
    fn softrnic_addr_picks_the_owning_interface() {
        let c = choose(&host(), Some("127.0.0.2".parse().unwrap())).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].name.as_str(), c[0].addr.to_string()),
            ("softrnic_lo", "127.0.0.2".into())
        );
        let c = choose(&host(), Some("fd00::2".parse().unwrap())).unwrap();
        assert_eq!(c[0].name, "softrnic_eth0");
        assert!(choose(&host(), Some("198.51.100.1".parse().unwrap())).is_err());
    }
}
