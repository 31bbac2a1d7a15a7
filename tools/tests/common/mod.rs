//! Shared setup of the two-process scenario tests: the test process's node on 127.0.10.N, a
//! peer process's on 127.0.11.N (N per test, so that tests running at once never share an
//! address), their QPs connected with the shared recipe.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

use softrnic_tools::peer::client::{Peer, Wc};
use softrnic_tools::peer::node::{MrInfo, Node};
use softrnic_uapi::{
    Access, ConnectAttr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge, WcStatus,
};

pub const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);
pub const PAGE: usize = 4096;
/// A guard against a hang, never a timing assertion.
pub const LONG: Duration = Duration::from_secs(30);

/// PSNs of the two sides.
pub const A_PSN: u32 = 100;
pub const B_PSN: u32 = 5000;

pub struct Two {
    /// The requester, in this process.
    pub a: Node,
    /// The responder, in the peer process.
    pub b: Peer,
}

/// Opens both sides for test number `n` and connects them with `attr` (dest, QPNs and PSNs
/// filled in; `a_psn` is A's first PSN).
pub fn two(n: u8, attr: ConnectAttr, a_psn: u32) -> Two {
    let a_addr = IpAddr::V4(Ipv4Addr::new(127, 0, 10, n));
    let b_addr = IpAddr::V4(Ipv4Addr::new(127, 0, 11, n));
    let a = Node::open(a_addr, u64::from(n)).expect("the local device opens");
    let mut b = Peer::spawn(Path::new(env!("CARGO_BIN_EXE_softrnic")), b_addr).expect("peer");
    let b_qpn = b.qpn().unwrap();
    a.connect(&ConnectAttr {
        dest: b_addr,
        dest_qp_num: b_qpn,
        sq_psn: a_psn,
        rq_psn: B_PSN,
        ..attr
    })
    .unwrap();
    b.connect(&ConnectAttr {
        dest: a_addr,
        dest_qp_num: a.qpn(),
        sq_psn: B_PSN,
        rq_psn: a_psn,
        ..attr
    })
    .unwrap();
    Two { a, b }
}

/// The connection attributes of the in-memory tests' default.
pub fn attr() -> ConnectAttr {
    ConnectAttr {
        path_mtu: softrnic_uapi::Mtu::Mtu1024,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..ConnectAttr::default()
    }
}

pub fn wr(wr_id: u64, opcode: SendOpcode, sg_list: Vec<Sge>, remote: RemoteAddr) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        remote,
        ..SendWr::new(wr_id, opcode, sg_list)
    }
}

pub fn remote(m: &MrInfo, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: m.addr + offset,
        rkey: m.rkey,
    }
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// (wr_id, status) of the local completions.
pub fn statuses(wcs: &[softrnic_uapi::WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// (wr_id, status) of the peer's completions.
pub fn peer_statuses(wcs: &[Wc]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}
