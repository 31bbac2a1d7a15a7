//! Steering: every datagram to `(address, 4791)` reaches the process that owns its
//! destination QP, and only that process, through the kernel's `SO_REUSEPORT` groups.
//!
//! RoCEv2 (IBTA annex A17.2.2) fixes the destination UDP port at 4791, so every process using
//! one device receives on the same `(address, 4791)`. Sockets bound there with `SO_REUSEPORT`
//! form a group in which the kernel picks one socket per datagram; a classic BPF program
//! attached to the group (`SO_ATTACH_REUSEPORT_CBPF`) picks it by index. The program sees
//! the datagram from its UDP payload on, which begins with the BTH, so it reads the DestQP
//! (BTH bytes 5..8, IBTA 9.2) and returns its QPN block ([`super::block`]): the socket at
//! index *n* of the group is the one of the process leasing block *n*. Index 0 is the host
//! agent's socket: QP0, QP1, datagrams too short for a BTH and blocks nobody leases go there.
//!
//! The index of a socket is its place in the group's array, which only the order of joins
//! and leaves decides (a leaving socket's place is taken by the last one). So the agent
//! creates every socket of the group, in index order, and keeps a duplicate of each: a
//! process that exits (or is killed) then takes nothing out of the group, and its place is
//! handed to the next process that leases its block. The order is the agent's alone.
//!
//! Facts this relies on, measured on Linux 6.18: the program's loads are relative to the UDP
//! payload; an index at or beyond the group's size falls back to the 4-tuple hash (hence the
//! bound in the program); a load past the end ends the program with 0; `connect()` takes a
//! socket out of the group (a 4791 socket is never connected); only sockets of one user may
//! share the port without `SO_REUSEADDR`, which is never set on it (with it, another user's
//! socket would take the traffic).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use softrnic_wire::ROCE_V2_UDP_PORT;

use super::block::BLOCK_BITS;
use crate::bpf::*;
use crate::transport::udp::{bound_socket, never_fragment, setsockopt, RX_BUFFER};

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// The length of a BTH, below which a datagram cannot name a QP.
const BTH_LEN: u32 = 12;

/// The group's program for a group of `slots` sockets: the DestQP's block if it is below
/// `slots`, else 0 (the agent's socket).
pub fn program(slots: u16) -> [libc::sock_filter; 8] {
    [
        op(LD_W_LEN, 0, 0, 0),             // 0: A = payload length
        op(JGE_K, 0, 5, BTH_LEN),          // 1: too short for a BTH: to 7
        op(LD_W_ABS, 0, 0, 4),             // 2: A = reserved byte, DestQP
        op(AND_K, 0, 0, 0x00ff_ffff),      // 3: A = DestQP
        op(RSH_K, 0, 0, BLOCK_BITS),       // 4: A = its block
        op(JGE_K, 1, 0, u32::from(slots)), // 5: beyond the group: to 7
        op(RET_A, 0, 0, 0),                // 6: the block's socket
        op(RET_K, 0, 0, 0),                // 7: the agent's socket
    ]
}

/// A new socket of the group of `(addr, 4791)`: `SO_REUSEPORT`, bound, nonblocking, never
/// fragmenting, with a receive buffer for bursts.
///
/// The buffer matters to socket 0, where every QP1 MAD of the address arrives: with the
/// kernel's default (208 KiB, some 250 MADs of the skbs loopback makes) a burst of a thousand
/// REQs, as `cmtime -c 1000` sends, overflowed it, and each lost MAD cost its connection a
/// CM response timeout (4 s) before the retry. A process's slot is set so again by its
/// transport.
///
/// Never fragmenting (`IP_PMTUDISC_DO`) matters to the agent, which sends its MADs (a REJ to a
/// REQ for nobody, a DREP) from socket 0 unconnected, with the ICRC `gsi::encode` computes for
/// an IPv4 header of DF and IP ID 0. Linux sends exactly that only from a socket that forbids
/// fragmenting; with the default (`IP_PMTUDISC_WANT`) the datagram has DF and a random ID,
/// and kernel rxe dropped the agent's REJs for their ICRC, its rdma_cm waiting seconds for a
/// REQ retry. (A process's slot is set so again by its transport.)
///
/// # Errors
/// `AddrInUse` if a socket outside the group (another user's, kernel rxe's) holds the port.
pub fn open_slot(addr: IpAddr) -> io::Result<UdpSocket> {
    let reuse_port = (libc::SOL_SOCKET, libc::SO_REUSEPORT, 1);
    let s = bound_socket(SocketAddr::new(addr, ROCE_V2_UDP_PORT), &[reuse_port])?;
    never_fragment(&s, addr)?;
    // Best effort, as for every receive socket: the kernel caps it at net.core.rmem_max.
    let _ = setsockopt(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, RX_BUFFER);
    Ok(s)
}

/// Attaches [`program`] for `slots` sockets to the group `member` is in.
///
/// # Errors
/// The kernel's.
pub fn attach(member: &UdpSocket, slots: u16) -> io::Result<()> {
    crate::bpf::attach(
        member.as_raw_fd(),
        SO_ATTACH_REUSEPORT_CBPF,
        &program(slots),
    )
}

/// Whether no socket holds `(addr, 4791)`: a socket without `SO_REUSEPORT` can bind it.
pub fn port_is_free(addr: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(addr, ROCE_V2_UDP_PORT)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    /// A BTH-sized datagram to `dest_qp`.
    fn bth_to(dest_qp: u32) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[4..8].copy_from_slice(&dest_qp.to_be_bytes());
        b[4] = 0;
        b
    }

    fn got(s: &UdpSocket) -> usize {
        let mut n = 0;
        let mut buf = [0u8; 64];
        std::thread::sleep(Duration::from_millis(20));
        while s.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    }

    #[test]
    fn each_datagram_reaches_the_socket_of_its_block() {
        let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 2));
        let slots: Vec<UdpSocket> = (0..3).map(|_| open_slot(addr).unwrap()).collect();
        attach(&slots[0], 3).unwrap();
        let to = SocketAddr::new(addr, ROCE_V2_UDP_PORT);
        let send = |payload: &[u8]| {
            // A new source port each time: the 4-tuple hash would spread these.
            let tx = UdpSocket::bind((addr, 0)).unwrap();
            tx.send_to(payload, to).unwrap();
        };
        let block = |b: u32| b << BLOCK_BITS;
        for _ in 0..4 {
            send(&bth_to(block(1) + 17));
            send(&bth_to(block(2) + 5));
            send(&bth_to(block(2) + 6));
        }
        for q in [1, 0xffffff, block(3) + 1, block(7)] {
            send(&bth_to(q)); // QP1, multicast QPN, unleased blocks
        }
        send(&[0u8; 3]); // too short for a BTH
        assert_eq!(
            slots.iter().map(got).collect::<Vec<_>>(),
            [5, 4, 8],
            "agent, block 1, block 2"
        );
        assert!(!port_is_free(addr));
        drop(slots);
        assert!(port_is_free(addr));
    }

    /// A burst of a thousand MADs, as many REQs as `cmtime -c 1000` sends at once, waits
    /// whole in a slot nobody reads yet. Skips if `net.core.rmem_max` caps the buffer below
    /// what the burst takes.
    #[test]
    fn a_slot_holds_a_burst_of_a_thousand_mads() {
        use softrnic_wire::mad::MAD_LEN;
        use softrnic_wire::Psn;
        const BURST: usize = 1000;
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if rmem_max < RX_BUFFER as usize {
            let reason = format!(
                "net.core.rmem_max is {rmem_max}, below the {RX_BUFFER} bytes a slot asks for"
            );
            softrnic_testkit::skip("a_slot_holds_a_burst_of_a_thousand_mads", &reason);
            return;
        }
        let addr = Ipv4Addr::new(127, 0, 41, 14);
        let peer = Ipv4Addr::new(127, 0, 41, 15);
        let slot = open_slot(addr.into()).unwrap();
        let tx = UdpSocket::bind((peer, 0)).unwrap();
        let p = crate::gsi::encode(
            (peer.into(), ROCE_V2_UDP_PORT),
            addr.into(),
            Psn::new(0),
            &[0x5a; MAD_LEN],
        )
        .unwrap();
        for _ in 0..BURST {
            tx.send_to(&p, (addr, ROCE_V2_UDP_PORT)).unwrap();
        }
        let mut buf = [0u8; 512];
        let mut n = 0;
        while slot.recv(&mut buf).is_ok() {
            n += 1;
        }
        assert_eq!(n, BURST, "MADs lost in the slot's receive buffer");
    }

    /// What a slot sends unconnected, as the agent sends its MADs, has the ICRC of the IPv4
    /// header it leaves with: DF and IP ID 0, seen on a raw socket (kernel rxe checks the
    /// ICRC over the real header). A raw socket needs `CAP_NET_RAW`: without it the test
    /// skips.
    #[test]
    fn a_slot_sends_mads_with_the_icrc_of_their_ip_header() {
        use crate::transport::{IcrcStatus, RecvMeta, RecvPacket};
        use softrnic_wire::mad::MAD_LEN;
        use softrnic_wire::Psn;
        use std::os::fd::{FromRawFd, OwnedFd};
        let addr = Ipv4Addr::new(127, 0, 41, 12);
        let peer = Ipv4Addr::new(127, 0, 41, 13);
        // SAFETY: plain socket(2); the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            let reason = format!("a raw socket needs CAP_NET_RAW ({e})");
            softrnic_testkit::skip(
                "a_slot_sends_mads_with_the_icrc_of_their_ip_header",
                &reason,
            );
            return;
        }
        // SAFETY: `fd` is a new socket nothing else owns.
        let raw = UdpSocket::from(unsafe { OwnedFd::from_raw_fd(fd) });
        raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let slot = open_slot(addr.into()).unwrap();
        let mad = [0x5a; MAD_LEN];
        let p = crate::gsi::encode(
            (addr.into(), ROCE_V2_UDP_PORT),
            peer.into(),
            Psn::new(0),
            &mad,
        )
        .unwrap();
        slot.send_to(&p, (peer, ROCE_V2_UDP_PORT)).unwrap();
        // The raw socket gets every UDP datagram of the host: take the slot's.
        let mut buf = [0u8; 1024];
        let (header, payload) = loop {
            let n = raw.recv(&mut buf).expect("the slot's datagram");
            let ihl = usize::from(buf[0] & 0x0f) * 4;
            let (ip, udp) = buf[..n].split_at(ihl);
            if ip[12..16] == addr.octets() && ip[16..20] == peer.octets() && udp[8..] == p[..] {
                break (ip.to_vec(), udp[8..].to_vec());
            }
        };
        let (flags, id) = (header[6] & 0xe0, u16::from_be_bytes([header[4], header[5]]));
        assert_eq!((flags, id), (0x40, 0), "DF, IP ID 0");
        let mut meta = RecvMeta::from_socket(
            SocketAddr::new(addr.into(), ROCE_V2_UDP_PORT),
            peer.into(),
            payload.len(),
        );
        meta.set_ip_header(&header);
        let rx = RecvPacket {
            meta: &meta,
            payload: &payload,
        };
        assert_eq!(rx.icrc_status(), IcrcStatus::Ok);
    }

    #[test]
    fn the_program_is_bounded_by_the_group() {
        let p = program(4);
        assert_eq!(p.len(), 8);
        assert_eq!((p[5].code, p[5].k), (JGE_K, 4));
    }
}
