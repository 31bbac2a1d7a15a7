//! Tests of the capture: what is written is what went over the fabric, a packet the NIC drops
//! says why, and a full file makes way for the next.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use softrnic_wire::frame::Frame;
use softrnic_wire::pcap;

use super::*;
use crate::transport::test_util::send_only;
use crate::transport::{Fabric, FabricConfig};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("softrnic-capture-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Sends a SEND_ONLY with PSN `psn` from `from` to B, its ICRC flipped if `corrupt`.
fn send(from: &mut impl Transport, psn: u32, corrupt: bool) {
    let data = [7u8; 64];
    let (hdr, mut icrc) = send_only((from.local_addr(), 0xc001), B, 0x11, psn, &data);
    if corrupt {
        icrc[0] ^= 1;
    }
    send_pieces(from, &[&hdr, &data, &icrc]);
}

/// Sends one datagram of `pieces` from port 0xc001 to B's RoCE port.
fn send_pieces(from: &mut impl Transport, pieces: &[&[u8]]) {
    let pieces: Vec<Bytes<'_>> = pieces.iter().map(|&p| Bytes::from(p)).collect();
    let pkt = OutPacket {
        dst: SocketAddr::new(B, 4791),
        src_port: 0xc001,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    assert_eq!(from.send_batch(&[pkt]).unwrap(), 1);
}

#[test]
fn sent_and_received_packets_are_written_as_they_were_and_drops_say_why() {
    let d = dir("drops");
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let (a_path, b_path) = (d.join("a.pcapng"), d.join("b.pcapng"));
    let mut a = Capture::new(fabric.attach(A).unwrap(), CaptureConfig::new(&a_path))
        .map_err(|(_, e)| e)
        .unwrap();
    let mut b = Capture::new(fabric.attach(B).unwrap(), CaptureConfig::new(&b_path))
        .map_err(|(_, e)| e)
        .unwrap();
    send(&mut a, 5, false);
    send(&mut a, 6, true);
    fabric.advance_to(1_000_000);
    let mut batch = RecvBatch::new(8, 4224);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 2);
    drop((a, b));

    let sent = pcap::read_file(&a_path).unwrap();
    let received = pcap::read_file(&b_path).unwrap();
    assert_eq!(sent.len(), 2);
    assert_eq!(received.len(), 2);
    for (s, r) in sent.iter().zip(&received) {
        assert_eq!(s.data, r.data, "the frame received is the frame sent");
    }
    let ok: Vec<bool> = received
        .iter()
        .map(|r| Frame::parse(&r.data).unwrap().datagram.icrc_ok)
        .collect();
    assert_eq!(ok, vec![true, false]);
    assert_eq!(received[0].comment, None);
    assert_eq!(
        received[1].comment.as_deref(),
        Some("dropped: the ICRC does not verify")
    );
    assert_eq!(sent[1].comment, None, "the sender does not judge");
    let f = Frame::parse(&sent[0].data).unwrap();
    assert_eq!(f.datagram.repr.ip.src_addr(), A);
    assert_eq!(f.datagram.repr.udp.src_port, 0xc001);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_full_file_is_renamed_and_only_the_newest_files_are_kept() {
    let d = dir("rotate");
    let fabric = Fabric::new(FabricConfig::default(), 2);
    let path = d.join("a.pcapng");
    let config = CaptureConfig {
        path: path.clone(),
        file_bytes: 1000, // about five frames of 150 bytes
        files: 3,
        clock: None,
    };
    let mut a = Capture::new(fabric.attach(A).unwrap(), config)
        .map_err(|(_, e)| e)
        .unwrap();
    for psn in 0..40 {
        send(&mut a, psn, false);
    }
    drop(a);
    let psns = |p: &std::path::Path| -> Vec<u32> {
        pcap::read_file(p)
            .unwrap()
            .iter()
            .map(|r| {
                Frame::parse(&r.data)
                    .unwrap()
                    .datagram
                    .repr
                    .roce
                    .bth
                    .psn
                    .value()
            })
            .collect()
    };
    let (newest, one, two) = (
        psns(&path),
        psns(&d.join("a.pcapng.1")),
        psns(&d.join("a.pcapng.2")),
    );
    assert!(!d.join("a.pcapng.3").exists(), "three files kept");
    assert_eq!(
        newest.last(),
        Some(&39),
        "the newest file ends with the last packet"
    );
    assert_eq!(
        one.last().map(|p| p + 1),
        newest.first().copied(),
        "in order: {one:?} {newest:?}"
    );
    assert_eq!(
        two.last().map(|p| p + 1),
        one.first().copied(),
        "in order: {two:?} {one:?}"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_capture_on_the_fabric_clock_stamps_frames_with_virtual_time() {
    let d = dir("clock");
    let fabric = Fabric::new(
        FabricConfig {
            delay_ns: 500,
            ..FabricConfig::default()
        },
        3,
    );
    let (a_path, b_path) = (d.join("a.pcapng"), d.join("b.pcapng"));
    let on_clock = |path: &std::path::Path| CaptureConfig {
        clock: Some(fabric.clock()),
        ..CaptureConfig::new(path)
    };
    let mut a = Capture::new(fabric.attach(A).unwrap(), on_clock(&a_path))
        .map_err(|(_, e)| e)
        .unwrap();
    let mut b = Capture::new(fabric.attach(B).unwrap(), on_clock(&b_path))
        .map_err(|(_, e)| e)
        .unwrap();
    fabric.advance_to(7_000);
    send(&mut a, 1, false);
    fabric.advance_to(7_500);
    let mut batch = RecvBatch::new(8, 4224);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
    drop((a, b));
    let stamp = |p: &std::path::Path| pcap::read_file(p).unwrap()[0].timestamp;
    assert_eq!(stamp(&a_path), std::time::Duration::from_nanos(7_000));
    assert_eq!(stamp(&b_path), std::time::Duration::from_nanos(7_500));
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn packets_the_engine_drops_say_why_and_keep_their_place() {
    use std::sync::Arc;

    use crate::driver::{Device, Progress};
    use crate::mr::MrTable;
    use crate::transport::seal_as_socket_sent;

    let d = dir("engine-drops");
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let b_path = d.join("b.pcapng");
    let b = Capture::new(fabric.attach(B).unwrap(), CaptureConfig::new(&b_path))
        .map_err(|(_, e)| e)
        .unwrap();
    let device = Device::start(
        Box::new(b),
        Arc::new(MrTable::new(16, 1).unwrap()),
        4,
        Progress::Polling,
    )
    .unwrap();
    let mut a = fabric.attach(A).unwrap();
    // A SEND to a QPN the device does not have; a packet whose opcode (RC 0x1f, reserved)
    // does not parse, with a right ICRC; a SEND with a wrong ICRC; another SEND to no QP.
    send(&mut a, 5, false);
    let data = [7u8; 64];
    let (mut hdr, icrc) = send_only((A, 0xc001), B, 0x11, 6, &data);
    hdr[0] = 0x1f;
    let mut reserved = [hdr.as_slice(), &data, &icrc].concat();
    assert!(seal_as_socket_sent(
        SocketAddr::new(A, 0xc001),
        B,
        &mut reserved
    ));
    send_pieces(&mut a, &[&reserved]);
    send(&mut a, 7, true);
    send(&mut a, 8, false);
    fabric.advance_to(1_000_000);
    device.progress();
    drop(device);

    let received = pcap::read_file(&b_path).unwrap();
    let comments: Vec<Option<&str>> = received.iter().map(|r| r.comment.as_deref()).collect();
    assert_eq!(
        comments,
        vec![
            Some("dropped: no QP has its DestQP"),
            Some("dropped: its transport headers do not parse"),
            Some("dropped: the ICRC does not verify"),
            Some("dropped: no QP has its DestQP"),
        ]
    );
    // The BTH's PSN (its last three bytes), after Ethernet, IPv4 and UDP headers: the
    // reserved opcode's frame does not parse.
    let psns: Vec<u32> = received
        .iter()
        .map(|r| u32::from_be_bytes([0, r.data[51], r.data[52], r.data[53]]))
        .collect();
    assert_eq!(psns, vec![5, 6, 7, 8], "in the order they came");
    let _ = std::fs::remove_dir_all(d);
}
