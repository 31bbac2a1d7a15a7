//! A QP whose UDP source port another socket of the host holds still talks. The QPs' ports
//! (0xC000 and up, IBTA annex A17.2.3) lie in Linux's ephemeral range, where any program's
//! socket may sit; a socket bound there without `SO_REUSEADDR` kept the QP's source-port
//! socket from binding, every packet of the QP was lost, and its WRs ended in
//! `IBV_WC_RETRY_EXC_ERR` (`softrnic perf --qps 1024` met it when a device's own IP-ID probe
//! socket had taken such a port). Its packets now leave from a port the kernel picks, their
//! ICRCs computed for it.
//!
//! Two devices over real kernel UDP on loopback, 127.0.94.1 and .2, each with its progress
//! thread; the test holds both QPs' ports before the first packet.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_provider::nic::src_port_of;
use softrnic_uapi::{Access, RemoteAddr, SendFlags, SendOpcode, SendWr, WcStatus};

const LEN: usize = 8192;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 94, last))
}

/// A node on `addr`, or `None` (the test skipping) if its device cannot be opened.
fn node(addr: IpAddr, seed: u64) -> Option<Node> {
    let test = "a_qp_whose_source_port_is_held_sends_from_another";
    let ctx = common::udp_context(test, addr, seed)?;
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    Some(Node::new(Setup::default().with(ctx), LEN, access))
}

/// A signaled RDMA WRITE of `from`'s bytes `0..len` to `to`'s region.
fn write(from: &Node, to: &Node, len: u32) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        remote: RemoteAddr {
            addr: to.mem.addr(),
            rkey: to.mem.rkey(),
        },
        ..SendWr::new(7, SendOpcode::RdmaWrite, vec![from.mem.sge(0, len)])
    }
}

#[test]
fn a_qp_whose_source_port_is_held_sends_from_another() {
    let (ia, ib) = (ip(1), ip(2));
    let (Some(a), Some(b)) = (node(ia, 1), node(ib, 2)) else {
        return;
    };
    // Bound as most programs bind: without SO_REUSEADDR. (Nothing was sent yet, so the QPs'
    // own sockets are not open.)
    let _held = [
        UdpSocket::bind((ia, src_port_of(a.qp.qp_num()))).unwrap(),
        UdpSocket::bind((ib, src_port_of(b.qp.qp_num()))).unwrap(),
    ];
    common::connect(&a.dev, ia, &b.dev, ib);
    // Two packets each way and their ACKs: every packet from a port the test did not hold.
    for (from, to, byte) in [(&a, &b, 0xa1u8), (&b, &a, 0xb2)] {
        from.mem.write(0, &[byte; LEN]).unwrap();
        from.qp.post_send(&[write(from, to, LEN as u32)]).unwrap();
        let wc = from.cq.wait(1, Duration::from_secs(10)).unwrap();
        assert_eq!(wc[0].status, WcStatus::Success);
        let mut got = vec![0u8; LEN];
        to.mem.read(0, &mut got).unwrap();
        assert!(got.iter().all(|&x| x == byte), "the WRITE's bytes arrived");
    }
    for n in [&a, &b] {
        let stats = n.ctx.device().transport_stats();
        assert_eq!(stats.tx_ports_moved, 1, "{stats:?}");
        assert_eq!(stats.tx_errors, 0, "{stats:?}");
    }
}
