//! IP multicast for the UDP transport: RoCE v2's multicast (IBTA 10.5 carried as in annex
//! A17, the multicast GID being the destination IP address).
//!
//! * **Join**: one socket per group, bound to `(group, 4791)` with `SO_REUSEADDR` and
//!   `SO_REUSEPORT`, so that several devices (and processes) on this host can join the same
//!   group — the kernel gives every socket bound to a multicast address its own copy — and a
//!   membership on the device's interface: `IP_ADD_MEMBERSHIP` with the device's IPv4
//!   address, `IPV6_JOIN_GROUP` with its interface's index. Bound to the group address, the
//!   socket receives only that group's datagrams, so [`super::RecvMeta::dst`] is the group.
//!   Leaving closes the socket, which drops the membership.
//! * **Send**: every socket of the transport has `IP_MULTICAST_IF` / `IPV6_MULTICAST_IF` =
//!   the device's address (its interface), so a datagram to a group leaves from the device's
//!   interface, and `IP_MULTICAST_LOOP` on, so devices on this host that joined get it.
//!
//! Limits: the kernel does not filter a group socket's datagrams by interface, so if devices
//! on two interfaces of one host join the same group, each receives what the other's
//! interface receives. The multicast TTL is the kernel's default, 1: groups stay on the link.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use softrnic_wire::ROCE_V2_UDP_PORT;

use super::sock::{setsockopt, write_sockaddr};
use crate::device::InterfaceInfo;

/// A joined group: its address and the socket that receives its datagrams.
#[derive(Debug)]
pub(super) struct Group {
    pub ip: IpAddr,
    pub sock: UdpSocket,
}

/// Opens a nonblocking socket bound to `(group, 4791)` and joins `group` on the interface of
/// `local`.
pub(super) fn join(local: IpAddr, group: IpAddr) -> io::Result<Group> {
    if !group.is_multicast() || group.is_ipv4() != local.is_ipv4() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a multicast address of the device's family",
        ));
    }
    let family = if group.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: a plain socket call; the descriptor is owned at once.
    let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    let sock = UdpSocket::from(unsafe { OwnedFd::from_raw_fd(fd) });
    setsockopt(&sock, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    setsockopt(&sock, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = write_sockaddr(SocketAddr::new(group, ROCE_V2_UDP_PORT), &mut ss);
    // SAFETY: `ss` holds a sockaddr of `len` bytes.
    let r = unsafe { libc::bind(sock.as_raw_fd(), (&raw const ss).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    sock.set_nonblocking(true)?;
    match (group, local) {
        (IpAddr::V4(g), IpAddr::V4(l)) => sock.join_multicast_v4(&g, &l)?,
        (IpAddr::V6(g), _) => sock.join_multicast_v6(&g, interface_index(local)?)?,
        _ => unreachable!("families checked above"),
    }
    Ok(Group { ip: group, sock })
}

/// Makes `s` send multicast datagrams from the interface of `local`, and loop them back to
/// this host's members (best effort: unicast works without it).
pub(super) fn set_send_options(s: &UdpSocket, local: IpAddr) {
    match local {
        IpAddr::V4(l) => {
            let addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(l.octets()),
            };
            // SAFETY: `addr` outlives the call and its size is passed.
            unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_MULTICAST_IF,
                    (&raw const addr).cast(),
                    size_of::<libc::in_addr>() as libc::socklen_t,
                )
            };
            let _ = s.set_multicast_loop_v4(true);
        }
        IpAddr::V6(_) => {
            if let Ok(index) = interface_index(local) {
                let index = index as libc::c_int;
                let _ = setsockopt(s, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_IF, index);
            }
            let _ = s.set_multicast_loop_v6(true);
        }
    }
}

/// The index of the interface that owns `local`.
fn interface_index(local: IpAddr) -> io::Result<u32> {
    InterfaceInfo::for_address(local).map(|i| i.index)
}

#[cfg(test)]
#[path = "mcast_tests.rs"]
mod tests;
