//! The IPv4 Identification a connected UDP socket gives its next datagram.
//!
//! The kernel gives an IPv4 datagram with DF set (`IP_PMTUDISC_DO`) the ID 0 when its socket
//! is unconnected, and the socket's running counter when it is connected: the counter starts
//! at a random value at `connect` and goes up by one per datagram handed to the kernel (a UDP
//! GSO run is one; its segments carry the run's ID plus their place). The ICRC covers the ID
//! (IBTA A17.4.2), so a sender on a connected socket must know the counter.
//!
//! No socket option reads it; a transmit timestamp does. With `SO_TIMESTAMPING` asking for a
//! software timestamp when a datagram enters the device queue (`SOF_TIMESTAMPING_TX_SCHED`),
//! the kernel loops a copy of the datagram, headers included, back to the socket's error
//! queue. [`probe`] sends two empty datagrams from the connected socket to a local sink socket
//! (a connected UDP socket may still send to another address, and the counter numbers those
//! too), reads both IDs from the error queue, and checks that they follow each other. It fails
//! where the kernel gives no timestamp or no data with it (`net.core.tstamp_allow_data = 0`
//! for an unprivileged process), and the transport then keeps the socket unconnected.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::sock::write_sockaddr;

/// How long the error queue is waited on for one timestamp.
const WAIT: Duration = Duration::from_millis(200);

/// The Identification the next datagram from `s` (connected, IPv4, DF) will carry, learnt by
/// sending two empty datagrams to `sink` (a socket on the same host, which is drained).
///
/// # Errors
///
/// `Unsupported` if the kernel returns no timestamped copy of the probes, or IDs that do not
/// follow each other; the socket calls' errors.
pub(super) fn probe(s: &UdpSocket, sink: &UdpSocket) -> io::Result<u16> {
    let to = sink.local_addr()?;
    let flags = libc::SOF_TIMESTAMPING_TX_SCHED | libc::SOF_TIMESTAMPING_SOFTWARE;
    set_timestamping(s, flags)?;
    let ids = (|| -> io::Result<(u16, u16)> {
        let first = send_and_read(s, to)?;
        let second = send_and_read(s, to)?;
        Ok((first, second))
    })();
    let off = set_timestamping(s, 0);
    drain(sink.as_raw_fd(), 0);
    drain(s.as_raw_fd(), libc::MSG_ERRQUEUE);
    let (first, second) = ids?;
    off?;
    if second != first.wrapping_add(1) {
        return Err(unsupported("the socket's IP IDs do not count up by one"));
    }
    Ok(second.wrapping_add(1))
}

fn unsupported(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, why)
}

fn set_timestamping(s: &UdpSocket, flags: libc::c_uint) -> io::Result<()> {
    let v = flags as libc::c_int;
    super::sock::setsockopt(s, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, v)
}

/// Sends an empty datagram from `s` to `to` and returns the ID its timestamped copy carries.
fn send_and_read(s: &UdpSocket, to: SocketAddr) -> io::Result<u16> {
    let local = s.local_addr()?;
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = write_sockaddr(to, &mut addr);
    // SAFETY: `addr` outlives the call; an empty datagram reads no buffer.
    let r = unsafe {
        libc::sendto(
            s.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            (&raw const addr).cast(),
            len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let mut data = [0u8; 256];
        let n = recv_into(s.as_raw_fd(), &mut data, libc::MSG_ERRQUEUE);
        if n >= 0 {
            let got = &data[..(n as usize).min(data.len())];
            if let Some(id) = find_ident(got, local, to) {
                return Ok(id);
            }
            continue; // another timestamp: not this probe's
        }
        let err = io::Error::last_os_error();
        if !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return Err(err);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(unsupported("no timestamped copy of the probe came back"));
        }
        let mut p = libc::pollfd {
            fd: s.as_raw_fd(),
            events: 0, // POLLERR is always reported
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as libc::c_int) };
    }
}

/// The IPv4 Identification of the UDP datagram from `src` to `dst` found in `frame` (an IPv4
/// header at its start, or behind a link-layer header of at most 64 bytes).
fn find_ident(frame: &[u8], src: SocketAddr, dst: SocketAddr) -> Option<u16> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else {
        return None;
    };
    (0..=64.min(frame.len())).find_map(|at| {
        let ip = frame.get(at..at + 28)?;
        let udp = &ip[20..];
        let found = ip[0] == 0x45
            && ip[9] == 17
            && ip[12..16] == s.octets()
            && ip[16..20] == d.octets()
            && udp[0..2] == src.port().to_be_bytes()
            && udp[2..4] == dst.port().to_be_bytes();
        found.then(|| u16::from_be_bytes([ip[4], ip[5]]))
    })
}

/// Reads and drops whatever is queued on `fd` (with `flags`, e.g. the error queue).
fn drain(fd: RawFd, flags: libc::c_int) {
    let mut buf = [0u8; 64];
    for _ in 0..64 {
        if recv_into(fd, &mut buf, flags) < 0 {
            return;
        }
    }
}

/// One nonblocking `recvmsg` on `fd` with `flags` into `buf`, its control messages read and
/// dropped: the byte count, or -1 with `errno` set.
fn recv_into(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> isize {
    let mut ctrl = [0u64; 64];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 64]>() as _;
    // SAFETY: the message points to `buf` and `ctrl`, valid for writes of their lengths.
    unsafe { libc::recvmsg(fd, &mut msg, flags | libc::MSG_DONTWAIT) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn lo(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 34, last))
    }

    #[test]
    fn find_ident_takes_the_probes_header_behind_a_link_header() {
        let (src, dst): (SocketAddr, SocketAddr) = (
            "127.0.0.1:5000".parse().unwrap(),
            "127.0.0.2:6000".parse().unwrap(),
        );
        let mut frame = vec![0u8; 14];
        frame.extend_from_slice(&[0x45, 0, 0, 28, 0xab, 0xcd, 0x40, 0, 64, 17, 0, 0]);
        frame.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 2]);
        frame.extend_from_slice(&[0x13, 0x88, 0x17, 0x70, 0, 8, 0, 0]);
        assert_eq!(find_ident(&frame, src, dst), Some(0xabcd));
        assert_eq!(find_ident(&frame[14..], src, dst), Some(0xabcd));
        let other: SocketAddr = "127.0.0.2:6001".parse().unwrap();
        assert_eq!(find_ident(&frame, src, other), None, "another destination");
    }

    /// What the kernel does, checked against what the probe says: datagrams to the peer and a
    /// GSO run each take one number.
    #[test]
    fn the_probe_predicts_the_counter_of_a_connected_socket() {
        let s = UdpSocket::bind((lo(1), 0)).unwrap();
        super::super::sock::setsockopt(
            &s,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
        .unwrap();
        let peer = UdpSocket::bind((lo(2), 0)).unwrap();
        let sink = UdpSocket::bind((lo(1), 0)).unwrap();
        s.connect(peer.local_addr().unwrap()).unwrap();
        let next = match probe(&s, &sink) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                let reason = format!("this kernel gives no timestamped copies: {e}");
                softrnic_testkit::skip(
                    "the_probe_predicts_the_counter_of_a_connected_socket",
                    &reason,
                );
                return;
            }
            Err(e) => panic!("probe: {e}"),
        };
        for _ in 0..5 {
            s.send(b"x").unwrap();
        }
        let mut sent = 5;
        // A run of three segments is one datagram to the counter.
        let segment = super::super::UDP_SEGMENT;
        if super::super::sock::setsockopt(&s, libc::SOL_UDP, segment, 100).is_ok() {
            s.send(&[7; 300]).unwrap();
            super::super::sock::setsockopt(&s, libc::SOL_UDP, segment, 0).unwrap();
            sent += 1;
        }
        // The two probes take two numbers too.
        assert_eq!(probe(&s, &sink).unwrap(), next.wrapping_add(sent + 2));
    }
}
