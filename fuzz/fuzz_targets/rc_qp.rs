//! Feeds arbitrary bytes to a connected RC QP through the NIC's receive path (`accept`, then
//! `Nic::handle_packet_from`), from the QP's peer, with the ICRCs a hostile peer computes: nothing may panic, and
//! the memory around the QP's only registered region must stay as it was.
//!
//! Each input is cut into packets at 0xff 0xff 0x5a 0xa5 markers (so that one input can walk
//! the QP through several states); a packet's first byte, if it is an RC opcode, is kept and
//! the destination QP is forced to the QP's, so that most packets reach the engine.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use softrnic_provider::driver::accept;
use softrnic_provider::mr::{Access, MrTable, PdHandle};
use softrnic_provider::nic::Nic;
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::rc::{ConnectAttr, QpCaps, QpLimits, TxQueue};
use softrnic_provider::transport::{seal_as_socket_sent, RecvMeta, RecvPacket};
use softrnic_provider::wc::{WcOpcode, WcStatus, WorkCompletion};
use softrnic_provider::wr::{RecvWr, Sge};

const PAGE: usize = 4096;
const GUARD: u8 = 0xa7;
const PD: PdHandle = PdHandle(1);
const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const LIMITS: QpLimits = QpLimits {
    active_mtu: Mtu::Mtu4096,
    max_rd_atomic: 16,
    max_dest_rd_atomic: 16,
};

fuzz_target!(|data: &[u8]| {
    let mut buf = vec![GUARD; 4 * PAGE];
    let win = buf.as_mut_ptr() as u64 + PAGE as u64;
    let all = Access(
        Access::LOCAL_WRITE.0
            | Access::REMOTE_WRITE.0
            | Access::REMOTE_READ.0
            | Access::REMOTE_ATOMIC.0,
    );
    let mrs = Arc::new(MrTable::new(16, 1).unwrap());
    // SAFETY: deregistered below, before `buf` is read or dropped.
    let keys = unsafe { mrs.register(PD, buf.as_mut_ptr().add(PAGE), 2 * PAGE, win, all) }.unwrap();
    let mut nic = Nic::new(LOCAL, mrs.clone(), 2);
    let cq = nic.create_cq(1024);
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 64,
    };
    let qpn = nic.create_qp(PD, cq, cq, None, caps, false, 1024).unwrap();
    let attr = ConnectAttr {
        path_mtu: Mtu::Mtu256,
        dest: PEER,
        dest_qp_num: 0x11,
        rq_psn: 0,
        sq_psn: 0,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..ConnectAttr::default()
    };
    for (a, mask) in attr.steps() {
        nic.qp(qpn).unwrap().modify(&a, mask, &LIMITS).unwrap();
    }
    for id in 0..8 {
        let wr = RecvWr {
            wr_id: id,
            sg_list: vec![Sge {
                addr: win,
                length: 2 * PAGE as u32,
                lkey: keys.lkey,
            }],
        };
        nic.qp(qpn).unwrap().post_recv(&wr).unwrap();
    }
    let base = Instant::now();
    let mut out = TxQueue::new();
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
    for (i, part) in split(data).enumerate() {
        let mut pkt = part.to_vec();
        if pkt.len() >= 12 && pkt[0] < 0x20 {
            pkt[5..8].copy_from_slice(&qpn.to_be_bytes()[1..]);
        }
        let from = SocketAddr::new(PEER, 0xc011);
        seal_as_socket_sent(from, LOCAL, &mut pkt);
        let meta = RecvMeta::from_socket(from, LOCAL, pkt.len());
        let recv = RecvPacket {
            meta: &meta,
            payload: &pkt,
        };
        let now = base + Duration::from_micros(i as u64 * 100);
        if let Ok((p, verified)) = accept(&recv) {
            nic.handle_packet_from(now, &p, verified, PEER);
        }
        nic.handle_timeout(now);
        out.clear();
        nic.poll_transmit(now, &mut out, 64);
        let _ = nic.poll_cq(cq, &mut wcs);
    }
    drop(nic);
    mrs.deregister(keys.lkey).unwrap();
    assert!(
        buf[..PAGE].iter().all(|&b| b == GUARD),
        "guard before the window"
    );
    assert!(
        buf[3 * PAGE..].iter().all(|&b| b == GUARD),
        "guard after the window"
    );
});

fn split(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    const MARK: [u8; 4] = [0xff, 0xff, 0x5a, 0xa5];
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let at = rest.windows(4).position(|w| w == MARK);
        let (part, next) = match at {
            Some(i) => (&rest[..i], &rest[i + 4..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        Some(part)
    })
    .take(64)
}
