//! More QPs than the process may open file descriptors, over kernel UDP: every QP's WRITE
//! completes. A QP's packets are meant to leave from its own UDP source port (A17.2.3), and
//! the UDP transport sends each port's from a socket of its own; with one per QP, 1024 QPs
//! ran a process into the usual limit of 1024 descriptors, and the packets whose socket could
//! not be opened were lost until their WRs ended in `IBV_WC_RETRY_EXC_ERR`. Now a transport
//! opens at most 256 such sockets, and past them, or when no descriptor is left, a QP's port
//! shares one of them (`provider/src/transport/udp/send.rs`).
//!
//! The test lowers its own process's limit to [`FD_LIMIT`] (its one test, so nothing else in
//! the process feels it), below the [`QPS`] QPs of each of its two devices, and below the two
//! transports' 256 source-port sockets each, so that both ways out are taken.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::{Setup, Side};
use softrnic_provider::transport::UdpTransport;
use softrnic_uapi::{
    Access, ConnectAttr, MemoryRegion, Progress, QpCaps, QpInitAttr, QueuePair, RemoteAddr,
    SendFlags, SendOpcode, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 64, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 64, 2));
/// QPs on each device.
const QPS: usize = 400;
/// The process's file descriptor limit during the test.
const FD_LIMIT: u64 = 384;
/// Bytes each QP writes.
const LEN: usize = 64;

/// A device on plain kernel UDP (no packet ring, no host-local path: every packet leaves
/// through a source-port socket, its own or a shared one), [`QPS`] QPs besides the side's own
/// (left unconnected), and a region for them.
fn side(addr: IpAddr, seed: u64) -> (Side, Vec<QueuePair>, MemoryRegion) {
    let transport = UdpTransport::bind(addr)
        .unwrap_or_else(|e| panic!("binding {addr}:4791: {e}"))
        .without_ring();
    let setup = Setup {
        progress: Progress::Polling,
        seed,
        cqe: QPS,
        send_wr: 1,
        recv_wr: 1,
        ..Setup::DEFAULT
    };
    let s = setup.on_transport(Box::new(transport));
    let caps = QpCaps {
        max_send_wr: 1,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qps = (0..QPS)
        .map(|_| s.pd.create_qp(&QpInitAttr::rc(&s.cq, caps)).unwrap())
        .collect();
    let mr =
        s.pd.reg_mr(QPS * LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
    (s, qps, mr)
}

/// The byte `k` QP `q` writes.
fn byte(q: usize, k: usize) -> u8 {
    (q * 13 + k) as u8
}

#[test]
fn more_qps_than_file_descriptors_all_complete() {
    softrnic_testkit::rlimit::limit_open_files(FD_LIMIT);
    let ((a, a_qps, a_mr), (b, b_qps, b_mr)) = (side(A, 1), side(B, 2));
    for (qps, dest, peers) in [(&a_qps, B, &b_qps), (&b_qps, A, &a_qps)] {
        for (qp, peer_qp) in qps.iter().zip(peers) {
            qp.connect(&ConnectAttr {
                dest,
                dest_qp_num: peer_qp.qp_num(),
                ..ConnectAttr::default()
            })
            .unwrap();
        }
    }
    for (q, qp) in a_qps.iter().enumerate() {
        let data: Vec<u8> = (0..LEN).map(|k| byte(q, k)).collect();
        a_mr.write(q * LEN, &data).unwrap();
        let w = SendWr {
            flags: SendFlags::SIGNALED,
            remote: RemoteAddr {
                addr: b_mr.addr() + (q * LEN) as u64,
                rkey: b_mr.rkey(),
            },
            ..SendWr::new(
                q as u64,
                SendOpcode::RdmaWrite,
                vec![a_mr.sge(q * LEN, LEN as u32)],
            )
        };
        qp.post_send(&[w]).map_err(|(_, e)| e).unwrap();
    }
    // One thread drives both devices (a 60 s guard against a hang, not a timing assertion).
    let mut done = vec![0usize; QPS];
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::RdmaWrite, 0); 16];
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.iter().sum::<usize>() < QPS {
        assert!(Instant::now() < deadline, "stuck: {done:?}");
        b.cq.poll(&mut wcs).unwrap();
        let k = a.cq.poll(&mut wcs).unwrap();
        for w in &wcs[..k] {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
            done[w.wr_id as usize] += 1;
        }
    }
    assert!(done.iter().all(|&n| n == 1), "{done:?}");
    let mut back = vec![0u8; QPS * LEN];
    b_mr.read(0, &mut back).unwrap();
    for q in 0..QPS {
        assert!(
            (0..LEN).all(|k| back[q * LEN + k] == byte(q, k)),
            "QP {q}'s bytes"
        );
    }
}
