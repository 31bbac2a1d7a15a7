//! The socket calls `UdpTransport` needs that std's `UdpSocket` does not offer: options
//! (`IP_MTU_DISCOVER`, buffer sizes, `UDP_SEGMENT`), `sockaddr` conversion for
//! `sendmmsg`/`recvmmsg`, and which send errors drop one packet rather than fail the batch.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};

use softrnic_wire::ROCE_V2_UDP_PORT;

/// Errors that concern one datagram: it is dropped and sending goes on.
pub(super) fn per_packet_error(errno: i32) -> bool {
    matches!(
        errno,
        libc::EMSGSIZE
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH
            | libc::EHOSTDOWN
            | libc::ENETDOWN
            | libc::ECONNREFUSED
            | libc::EPERM
            | libc::EACCES
            | libc::EADDRNOTAVAIL
            | libc::ENOBUFS
            | libc::EINVAL
    )
}

/// A nonblocking UDP socket bound to `(ip, port)` that never fragments. A source port's
/// socket (any port but 4791) has `SO_REUSEADDR`: QPs of two processes on one address may
/// hash to one source port, and nothing is received on it (peers send to 4791).
pub(super) fn open_socket(ip: IpAddr, port: u16) -> io::Result<UdpSocket> {
    let reuse: &[_] = match port {
        ROCE_V2_UDP_PORT => &[],
        _ => &[(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)],
    };
    let s = bound_socket(SocketAddr::new(ip, port), reuse).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse if port == ROCE_V2_UDP_PORT => io::Error::new(
            e.kind(),
            format!(
                "UDP port 4791 on {ip} is in use: another softrnic device on this address, or \
                 the kernel's rdma_rxe (which binds 4791 on every address): {e}"
            ),
        ),
        io::ErrorKind::AddrInUse => io::Error::new(
            e.kind(),
            format!("UDP source port {port} on {ip} is in use by another socket: {e}"),
        ),
        io::ErrorKind::AddrNotAvailable => io::Error::new(
            e.kind(),
            format!("{ip} is not an address of this host: {e}"),
        ),
        _ => e,
    })?;
    never_fragment(&s, ip)?;
    Ok(s)
}

/// A nonblocking UDP socket with the socket options `opts` (level, name, value), bound to
/// `at` (IPv6 only, for an IPv6 address).
pub(crate) fn bound_socket(
    at: SocketAddr,
    opts: &[(libc::c_int, libc::c_int, libc::c_int)],
) -> io::Result<UdpSocket> {
    let domain = match at {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let kind = libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: plain socket(2); the result is checked.
    let fd = unsafe { libc::socket(domain, kind, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new socket that nothing else owns.
    let s = UdpSocket::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
    for &(level, name, v) in opts {
        setsockopt(&s, level, name, v)?;
    }
    if at.is_ipv6() {
        setsockopt(&s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
        // Kernel rxe sends RoCEv2 over IPv6 with UDP checksum 0, as over IPv4 (its ICRC
        // covers the packet). RFC 6936 lets a tunnel's receiver take such datagrams; Linux
        // drops them (Udp6InCsumErrors) unless the socket asks for them: without this,
        // nothing rxe sent over IPv6 arrived, the REP to our REQ first.
        setsockopt(&s, libc::SOL_UDP, UDP_NO_CHECK6_RX, 1)?;
    }
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = write_sockaddr(at, &mut storage);
    // SAFETY: `storage` holds a sockaddr of `len` bytes.
    let r = unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
}

/// `UDP_NO_CHECK6_TX` (linux/udp.h): IPv6 datagrams leave with UDP checksum 0.
#[cfg(test)]
pub(super) const UDP_NO_CHECK6_TX: libc::c_int = 101;

/// `UDP_NO_CHECK6_RX` (linux/udp.h): IPv6 datagrams with UDP checksum 0 are received.
const UDP_NO_CHECK6_RX: libc::c_int = 102;

/// Sets `PMTUDISC_DO` on `s` (of an `ip` address): the kernel never fragments its datagrams,
/// and (IPv4) an unconnected socket's go out with DF and IP ID 0.
pub(crate) fn never_fragment(s: &UdpSocket, ip: IpAddr) -> io::Result<()> {
    match ip {
        IpAddr::V4(_) => setsockopt(
            s,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        ),
        IpAddr::V6(_) => setsockopt(
            s,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        ),
    }
}

/// Dissolves `s`'s association with a peer (`connect` to `AF_UNSPEC`).
pub(super) fn disconnect(s: &UdpSocket) -> io::Result<()> {
    // SAFETY: all-zero is a valid sockaddr; AF_UNSPEC is 0.
    let addr: libc::sockaddr = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` outlives the call and its size is passed.
    let r = unsafe {
        libc::connect(
            s.as_raw_fd(),
            &addr,
            size_of::<libc::sockaddr>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub(crate) fn setsockopt(
    s: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: v outlives the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Writes `addr` as a `sockaddr_in` / `sockaddr_in6` into `out`; returns its length.
pub(crate) fn write_sockaddr(
    addr: SocketAddr,
    out: &mut libc::sockaddr_storage,
) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is larger and more aligned than sockaddr_in.
            let sin =
                unsafe { &mut *(out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 =
                unsafe { &mut *(out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Reads a `sockaddr_in` / `sockaddr_in6` that the kernel wrote.
pub(super) fn read_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}
