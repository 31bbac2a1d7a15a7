//! What accepting a received datagram costs (`driver::accept`: the ICRC check, then the
//! parse), per packet, for a 64 B SEND and a 4 KiB WRITE packet: through a UDP socket, where
//! the IPv4 ID is not seen and the ICRC is checked for the ID that makes it match (the
//! packets carry ID 0x1234, as a connected socket's or rxe's would), and with the IP header
//! seen (a packet ring, the fabric), where it is checked over the header; and with the header
//! seen but for its ID (a later segment of a run the ring saw), solved for.
//!
//! `cargo bench -p softrnic-provider --bench ingress` (about 2 s; each figure the best of 5
//! batches). Without `--bench` (as `cargo test --all-targets` runs it) it checks each packet
//! once and prints nothing.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use softrnic_provider::driver::accept;
use softrnic_provider::transport::{seal_as_socket_sent, RecvMeta, RecvPacket};
use softrnic_wire::frame::IpHeader;
use softrnic_wire::icrc::with_ipv4_ident;

const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const IDENT: u16 = 0x1234;

/// A UDP payload of RC `opcode` with `ext` bytes of extension headers and `len` of payload,
/// whose ICRC is for IP ID [`IDENT`]; and the IPv4 header it came with.
fn packet(opcode: u8, ext: usize, len: usize) -> (Vec<u8>, [u8; 20]) {
    let mut b = vec![opcode, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 7];
    b.extend(std::iter::repeat_n(0u8, ext));
    b.extend((0..len).map(|i| i as u8));
    b.extend_from_slice(&[0; 4]);
    let from = SocketAddr::new(SRC, 0xc000);
    assert!(seal_as_socket_sent(from, DST, &mut b));
    let at = b.len() - 4;
    let icrc = u32::from_le_bytes(b[at..].try_into().unwrap());
    let moved = with_ipv4_ident(icrc, 0, IDENT, b.len());
    b[at..].copy_from_slice(&moved.to_le_bytes());
    let mut ip = [0u8; 20];
    let header = IpHeader::udp_socket(SRC, DST, 64)
        .unwrap()
        .with_ident(IDENT);
    header.emit(8 + b.len(), &mut ip).unwrap();
    (b, ip)
}

/// Nanoseconds per accepted packet, the best of 5 batches of `n`.
fn ns_per(n: u32, pkt: &RecvPacket<'_>) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n {
                assert!(black_box(accept(black_box(pkt))).is_ok());
            }
            start.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    let n = if timed { 100_000 } else { 1 };
    for (what, opcode, ext, len) in [("SEND 64 B", 0x04, 0, 64), ("WRITE 4 KiB", 0x0a, 16, 4096)] {
        let (payload, ip) = packet(opcode, ext, len);
        let from = SocketAddr::new(SRC, 0xc000);
        let socket = RecvMeta::from_socket(from, DST, payload.len());
        let mut seen = socket;
        seen.set_ip_header(&ip);
        let mut guessed = socket;
        let mut other_ident = ip;
        other_ident[4..6].copy_from_slice(&[0, 0]);
        guessed.set_ip_header_ident_unknown(&other_ident);
        for (path, meta) in [
            ("socket, ID solved", &socket),
            ("header, ID solved", &guessed),
            ("IP header seen", &seen),
        ] {
            let pkt = RecvPacket {
                meta,
                payload: &payload,
            };
            let ns = ns_per(n, &pkt);
            if timed {
                println!("accept {what:<12} {path:<18} {ns:8.1} ns");
            }
        }
    }
}
