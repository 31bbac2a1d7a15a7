//! Address resolution without a kernel RDMA device: what `rdma_resolve_addr` learns from the
//! kernel's routing table (the source address a packet to the destination would leave from),
//! and the ports an id binds to.
//!
//! On RoCE, `rdma_resolve_route` needs no path query (no subnet administrator): the path is
//! the device's own, computed in `exchange`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

use softrnic_provider::device::InterfaceInfo;

/// The source address the kernel picks for packets to `dst`: a UDP socket `connect`ed to it
/// sends nothing, and `getsockname` tells the route lookup's answer.
///
/// # Errors
/// `ENETUNREACH` / `EHOSTUNREACH` when no route leads there.
pub fn source_for(dst: IpAddr) -> io::Result<IpAddr> {
    let any: IpAddr = match dst {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let s = UdpSocket::bind((any, 0))?;
    // Any port: connecting a UDP socket only looks the route up.
    s.connect((dst, 9))?;
    Ok(s.local_addr()?.ip())
}

/// Every address a device may sit on: each interface's IPv4 addresses and its IPv6 ones that
/// are not link-local.
pub fn local_addresses() -> Vec<IpAddr> {
    let ifaces = InterfaceInfo::list().unwrap_or_default();
    ifaces
        .iter()
        .flat_map(|i| i.addrs.iter().map(|a| a.addr))
        .filter(|a| !matches!(a, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80))
        .collect()
}

/// The first port of the range ids bind to when given port 0 (Linux's
/// `ip_local_port_range` default).
const EPHEMERAL_FIRST: u16 = 32768;
/// Ports in that range.
const EPHEMERAL_LEN: u16 = 28232;

/// Ephemeral ports handed out by this process so far.
static TAKEN: AtomicU32 = AtomicU32::new(0);

/// An ephemeral port for a bind with port 0: the range walked from a place of this process's
/// own, so that processes rarely meet and one process repeats a port only when it wraps.
pub fn ephemeral_port() -> u16 {
    let n = TAKEN.fetch_add(1, Ordering::Relaxed);
    let start = std::process::id().wrapping_mul(40503);
    let offset = start.wrapping_add(n) % u32::from(EPHEMERAL_LEN);
    EPHEMERAL_FIRST + offset as u16
}

/// `addr` with `port`.
pub fn with_port(addr: SocketAddr, port: u16) -> SocketAddr {
    SocketAddr::new(addr.ip(), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_destination_routes_from_loopback() {
        let src = source_for(IpAddr::V4(Ipv4Addr::new(127, 0, 48, 9))).unwrap();
        assert!(src.is_loopback(), "{src}");
    }

    #[test]
    fn ephemeral_ports_stay_in_range_and_move_on() {
        let a = ephemeral_port();
        let b = ephemeral_port();
        assert!((EPHEMERAL_FIRST..EPHEMERAL_FIRST + EPHEMERAL_LEN).contains(&a));
        assert!((EPHEMERAL_FIRST..EPHEMERAL_FIRST + EPHEMERAL_LEN).contains(&b));
        assert_ne!(a, b);
    }
}
