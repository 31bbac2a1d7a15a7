//! Crafted captures for the decoder's tests, built with the wire crate's emitters: RC packets
//! between 10.0.0.1 and 10.0.0.2, GSO super-packets as `tcpdump -i lo` shows them, written
//! to a pcap file under the test's temporary directory.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use softrnic_wire::aeth::{AethRepr, CreditCode, NakCode, Syndrome};
use softrnic_wire::bth::BthRepr;
use softrnic_wire::frame::{DatagramRepr, IpHeader, UdpHeader};
use softrnic_wire::reth::RethRepr;
use softrnic_wire::roce::RoceRepr;
use softrnic_wire::{gso, pcap, Opcode, Psn};

pub const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
pub const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// An IP datagram from `src` to `dst` QP `qp`, IPv4 ID `id`, with an optional AETH.
pub fn datagram(
    (src, dst): (IpAddr, IpAddr),
    id: u16,
    qp: u32,
    opcode: Opcode,
    psn: u32,
    payload: &[u8],
    aeth: Option<Syndrome>,
) -> Vec<u8> {
    with_reth((src, dst), id, qp, opcode, psn, payload, aeth, None)
}

/// A READ request from A to B's QP 0x11 for `len` bytes.
pub fn read_request(psn: u32, len: u32) -> Vec<u8> {
    let reth = RethRepr {
        va: 0x1000,
        rkey: 1,
        dma_len: len,
    };
    let opcode = Opcode::RC_RDMA_READ_REQUEST;
    with_reth((A, B), 0, 0x11, opcode, psn, &[], None, Some(reth))
}

#[allow(clippy::too_many_arguments)]
fn with_reth(
    (src, dst): (IpAddr, IpAddr),
    id: u16,
    qp: u32,
    opcode: Opcode,
    psn: u32,
    payload: &[u8],
    aeth: Option<Syndrome>,
    reth: Option<RethRepr>,
) -> Vec<u8> {
    let mut roce = RoceRepr::new(BthRepr {
        opcode,
        solicited: false,
        mig_req: false,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: qp,
        ack_req: false,
        psn: Psn::new(psn),
    });
    roce.payload_len = payload.len();
    roce.aeth = aeth.map(|syndrome| AethRepr { syndrome, msn: 1 });
    roce.reth = reth;
    let repr = DatagramRepr {
        ip: IpHeader::udp_socket(src, dst, 64).unwrap().with_ident(id),
        udp: UdpHeader {
            src_port: 0xc000,
            dst_port: 4791,
            checksum: 0,
        },
        roce,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf, &[payload]).unwrap();
    buf
}

/// A SEND of `n` packets of `mtu` bytes from A to B's QP 0x11, PSNs from `psn`, IPv4 IDs
/// from `id`.
pub fn send(id: u16, psn: u32, mtu: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|k| {
            let opcode = match k {
                _ if n == 1 => Opcode::RC_SEND_ONLY,
                0 => Opcode::RC_SEND_FIRST,
                k if k == n - 1 => Opcode::RC_SEND_LAST,
                _ => Opcode::RC_SEND_MIDDLE,
            };
            let payload = vec![k as u8; mtu];
            datagram(
                (A, B),
                id.wrapping_add(k as u16),
                0x11,
                opcode,
                psn + k as u32,
                &payload,
                None,
            )
        })
        .collect()
}

/// An ACK (or NAK) from B to A's QP 0x12.
pub fn ack(psn: u32, syndrome: Syndrome) -> Vec<u8> {
    datagram(
        (B, A),
        0,
        0x12,
        Opcode::RC_ACKNOWLEDGE,
        psn,
        &[],
        Some(syndrome),
    )
}

pub const ACK: Syndrome = Syndrome::Ack(CreditCode::UNLIMITED);
pub const NAK_SEQ: Syndrome = Syndrome::Nak(NakCode::PsnSequenceError);

/// The run of `datagrams` as the kernel hands it to `lo`.
pub fn run(datagrams: &[Vec<u8>]) -> Vec<u8> {
    let refs: Vec<&[u8]> = datagrams.iter().map(Vec::as_slice).collect();
    gso::coalesce(&refs).unwrap()
}

/// `datagram` in an Ethernet frame.
pub fn ethernet(datagram: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    if datagram[0] >> 4 == 6 {
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
    }
    f.extend_from_slice(datagram);
    f
}

/// Writes the datagrams as a pcap file named `name` in the test's temporary directory.
pub fn write_pcap(name: &str, datagrams: &[Vec<u8>]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut w = pcap::Writer::new(Vec::new()).unwrap();
    for (i, d) in datagrams.iter().enumerate() {
        w.write(Duration::from_millis(i as u64), &ethernet(d))
            .unwrap();
    }
    std::fs::write(&path, w.into_inner()).unwrap();
    path
}
