//! The network interface a device is bound to: found with `getifaddrs(3)`, MTU from
//! `SIOCGIFMTU` (`netdevice(7)`).

use std::ffi::CStr;
use std::io;
use std::mem::zeroed;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;

/// One address of an interface and the length of its prefix (from the netmask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IfAddr {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length: 0..=32 for IPv4, 0..=128 for IPv6.
    pub prefix_len: u8,
}

impl IfAddr {
    /// An address with its prefix length (clamped to the family's width).
    pub fn new(addr: IpAddr, prefix_len: u8) -> IfAddr {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        IfAddr {
            addr,
            prefix_len: prefix_len.min(max),
        }
    }

    /// Whether `ip` is inside this address's prefix (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix_len))
                    .unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix_len))
                    .unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

/// What a device needs to know about the interface that owns its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// The interface name (`lo`, `eth0`).
    pub name: String,
    /// The interface index (`if_nametoindex`), reported as `ibv_gid_entry.ndev_ifindex`.
    pub index: u32,
    /// The link-layer (MAC) address; all zero for loopback or an interface without one.
    pub mac: [u8; 6],
    /// The netdev MTU in bytes (IP packet size, Ethernet header excluded).
    pub mtu: u32,
    /// `IFF_LOOPBACK`: the interface is a loopback.
    pub loopback: bool,
    /// Its IP addresses, in the order `getifaddrs` gives them (IPv4 first on Linux).
    pub addrs: Vec<IfAddr>,
}

impl InterfaceInfo {
    /// Whether `ip` is one of the interface's own addresses.
    pub fn has_address(&self, ip: IpAddr) -> bool {
        self.addrs.iter().any(|a| a.addr == ip)
    }

    /// The interface that owns `local`, among `ifaces`: the one with exactly that address, or
    /// else a loopback interface whose prefix contains it.
    ///
    /// The second rule covers addresses such as 127.0.0.2: Linux routes all of 127.0.0.0/8 to
    /// `lo` as local (the `local 127.0.0.0/8 dev lo` route of the local table), so a socket can
    /// bind to it although only 127.0.0.1/8 is assigned. An address merely inside another
    /// interface's subnet belongs to some other host and owns no interface here.
    pub fn owning(ifaces: &[InterfaceInfo], local: IpAddr) -> Option<&InterfaceInfo> {
        ifaces.iter().find(|i| i.has_address(local)).or_else(|| {
            ifaces
                .iter()
                .find(|i| i.loopback && i.addrs.iter().any(|a| a.contains(local)))
        })
    }

    /// Every interface of this host (network namespace), with its MTU.
    ///
    /// # Errors
    /// The OS error of `getifaddrs`, `socket` or `ioctl(SIOCGIFMTU)`.
    pub fn list() -> io::Result<Vec<InterfaceInfo>> {
        let mut all = scan()?;
        for i in &mut all {
            i.mtu = netdev_mtu(&i.name)?;
        }
        Ok(all)
    }

    /// The interface that owns `local` (see [`InterfaceInfo::owning`]), with its MTU.
    ///
    /// # Errors
    /// `AddrNotAvailable` if no interface owns `local`; the OS error of `getifaddrs`, `socket`
    /// or `ioctl(SIOCGIFMTU)`.
    pub fn for_address(local: IpAddr) -> io::Result<InterfaceInfo> {
        let all = scan()?;
        let mut found = InterfaceInfo::owning(&all, local).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("no network interface has the address {local}"),
            )
        })?;
        found.mtu = netdev_mtu(&found.name)?;
        Ok(found)
    }
}

/// Frees the list of `getifaddrs` when dropped.
struct IfAddrs(*mut libc::ifaddrs);

impl Drop for IfAddrs {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful getifaddrs and is freed once.
        unsafe { libc::freeifaddrs(self.0) }
    }
}

/// The prefix length of a netmask: its leading one bits.
fn prefix_len(mask: IpAddr) -> u8 {
    let ones = match mask {
        IpAddr::V4(m) => u32::from(m).leading_ones(),
        IpAddr::V6(m) => u128::from(m).leading_ones(),
    };
    ones as u8
}

/// The IP address in a `sockaddr` of family `AF_INET` or `AF_INET6`.
///
/// # Safety
/// `sa` must be null or point to a `sockaddr` as large as its family says.
unsafe fn ip_of(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY (all reads): the caller's promise; read_unaligned needs no alignment.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            let sin = unsafe { ptr::read_unaligned(sa.cast::<libc::sockaddr_in>()) };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))))
        }
        libc::AF_INET6 => {
            let sin6 = unsafe { ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>()) };
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

/// The interface of a `getifaddrs` entry name: IPv4 addresses with a label (`eth0:1`, made by
/// `ip addr add ... label eth0:1` or ifconfig aliases) belong to the interface before the colon.
pub(super) fn interface_name(label: &str) -> &str {
    label.split(':').next().unwrap_or_default()
}

/// All interfaces with name, index, MAC, flags and addresses (MTU left 0).
fn scan() -> io::Result<Vec<InterfaceInfo>> {
    let mut head: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs writes a list head to `head` on success.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let list = IfAddrs(head);
    let mut out: Vec<InterfaceInfo> = Vec::new();
    let mut cur = list.0;
    while !cur.is_null() {
        // SAFETY: every node of the list is valid until freeifaddrs (when `list` drops).
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string of the list.
        let label = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        let name = interface_name(&label).to_owned();
        let pos = match out.iter().position(|i| i.name == name) {
            Some(p) => p,
            None => {
                out.push(InterfaceInfo {
                    name,
                    index: 0,
                    mac: [0; 6],
                    mtu: 0,
                    loopback: false,
                    addrs: Vec::new(),
                });
                out.len() - 1
            }
        };
        let entry = &mut out[pos];
        entry.loopback |= ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of the list.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_PACKET {
            // SAFETY: AF_PACKET entries carry a sockaddr_ll (packet(7)).
            let sll = unsafe { ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_ll>()) };
            entry.index = u32::try_from(sll.sll_ifindex).unwrap_or(0);
            if sll.sll_halen == 6 {
                entry.mac.copy_from_slice(&sll.sll_addr[..6]);
            }
            continue;
        }
        // SAFETY: ifa_addr and ifa_netmask are null or sockaddrs of their family.
        let (addr, mask) = unsafe { (ip_of(ifa.ifa_addr), ip_of(ifa.ifa_netmask)) };
        if let Some(addr) = addr {
            let len = mask.map_or(if addr.is_ipv4() { 32 } else { 128 }, prefix_len);
            let a = IfAddr::new(addr, len);
            if !entry.addrs.contains(&a) {
                entry.addrs.push(a);
            }
        }
    }
    for i in &mut out {
        if i.index == 0 {
            i.index = if_index(&i.name);
        }
    }
    Ok(out)
}

/// `ifr_name` for `name`, NUL-terminated.
fn ifr_name(name: &str) -> io::Result<[libc::c_char; libc::IFNAMSIZ]> {
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?}"),
        ));
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (d, s) in out.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(out)
}

/// `if_nametoindex(name)`, 0 if unknown.
fn if_index(name: &str) -> u32 {
    let Ok(raw) = ifr_name(name) else { return 0 };
    // SAFETY: raw is NUL-terminated (ifr_name leaves at least one NUL).
    unsafe { libc::if_nametoindex(raw.as_ptr()) }
}

/// The MTU of interface `name`: `ioctl(SIOCGIFMTU)` on a datagram socket (`netdevice(7)`).
fn netdev_mtu(name: &str) -> io::Result<u32> {
    // SAFETY: ifreq is plain data; all zero is a valid value.
    let mut req: libc::ifreq = unsafe { zeroed() };
    req.ifr_name = ifr_name(name)?;
    let sock = datagram_socket()?;
    // SAFETY: SIOCGIFMTU reads ifr_name and writes ifr_mtu of the ifreq it is given.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the ioctl succeeded, so the union holds ifr_mtu.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("interface {name} reports MTU {mtu}"),
        )
    })
}

/// An unbound datagram socket for interface ioctls: IPv4, or IPv6 on an IPv6-only host.
fn datagram_socket() -> io::Result<OwnedFd> {
    let mut err = None;
    for family in [libc::AF_INET, libc::AF_INET6] {
        // SAFETY: plain socket(2) call.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            // SAFETY: fd is a new descriptor owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        err = Some(io::Error::last_os_error());
    }
    Err(err.expect("tried at least one family"))
}
