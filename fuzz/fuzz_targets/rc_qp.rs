//! Feeds arbitrary bytes to a connected RC QP through the NIC's receive path (`accept`, then
//! `Nic::handle_packet_from`), from the QP's peer, with the ICRCs a hostile peer computes.
//! Nothing may panic, and no byte of the memory around and between the registered regions
//! may change unless the shadow map (`rc_qp/memory.rs`) says a peer may write it: remote-
//! writable regions and windows, the aligned words of atomic ones, the posted receive
//! buffers, and the destinations of the QP's own READ and atomic.
//!
//! The QP is the responder to the fuzzer's requests (IBTA 9.7.5) and, for a READ, an atomic,
//! a SEND and a WRITE posted before the first packet, the requester whose responses the
//! fuzzer forges (9.7.6).
//!
//! Each input is cut into parts at 0xff 0xff 0x5a 0xa5 markers, so that one input walks the
//! QP through several states. A one-byte part moves the clock (2^b µs, b < 28), so that
//! timers fire; other parts are packets. For an RC opcode (first byte below 0x20) the target
//! rewrites what a fuzzer cannot guess but a peer knows, keeping everything else:
//!
//! * the destination QP and P_Key are the QP's;
//! * the PSN is relative (24-bit wrapping) to the PSN after the previous request, or the
//!   previous response (for the response opcodes 0x0d-0x12): 0 is "next", 0xffffff "again";
//! * an R_Key below 0x100 in a RETH, AtomicETH or IETH names the regions and windows in turn
//!   (`KEYS`), and the VA beside it is then an offset from that one's start.
#![no_main]

#[path = "rc_qp/memory.rs"]
mod memory;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use memory::{Memory, RegionSpec, L_INDEX, REGIONS};
use softrnic_provider::driver::accept;
use softrnic_provider::mr::{Access, MrTable, MwBind, MwType, PdHandle};
use softrnic_provider::nic::{CqId, Nic};
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::qp::{ConnectAttr, QpCaps, QpLimits, TxQueue};
use softrnic_provider::transport::{seal_as_socket_sent, RecvMeta, RecvPacket};
use softrnic_provider::wc::{WcOpcode, WcStatus, WorkCompletion};
use softrnic_provider::wr::{RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};

const PD: PdHandle = PdHandle(1);
const OTHER_PD: PdHandle = PdHandle(2);
const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const PEER_QPN: u32 = 0x11;
const LIMITS: QpLimits = QpLimits {
    active_mtu: Mtu::Mtu4096,
    max_rd_atomic: 16,
    max_dest_rd_atomic: 16,
};
const MAX_PARTS: usize = 64;

/// What one input runs against: the key table, the NIC, its QP and CQ.
struct Setup {
    nic: Nic,
    qpn: u32,
    cq: CqId,
    /// The R_Keys a small key in a packet names, with the VA each starts at.
    keys: Vec<(u32, u64)>,
}

fn setup(mem: &Memory) -> Setup {
    let mrs = Arc::new(MrTable::new(16, 0x5eed).unwrap());
    let mut keys = Vec::new();
    let mut lkeys = Vec::new();
    for (
        i,
        RegionSpec {
            bytes,
            other_pd,
            access,
        },
    ) in REGIONS.iter().enumerate()
    {
        let pd = if *other_pd { OTHER_PD } else { PD };
        let iova = memory::iova(i, bytes.start);
        // SAFETY: the buffer outlives the table, and is only read or reset once the table
        // (and with it every registration) is dropped at the end of the input.
        let k = unsafe {
            mrs.register(
                pd,
                mem.base.add(bytes.start),
                bytes.len(),
                iova,
                Access::from_bits_retain(*access),
            )
        }
        .unwrap();
        keys.push((k.rkey, iova));
        lkeys.push(k.lkey);
    }
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
        dest_qp_num: PEER_QPN,
        timeout: 8,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..ConnectAttr::default()
    };
    for (a, mask) in attr.steps() {
        nic.qp(qpn).unwrap().modify(&a, mask, &LIMITS).unwrap();
    }
    let l = |r: &std::ops::Range<usize>| Sge {
        addr: memory::iova(L_INDEX, r.start),
        length: r.len() as u32,
        lkey: lkeys[L_INDEX],
    };
    for (mw, mw_type, qp, access) in [
        (
            memory::MW2,
            MwType::Type2,
            qpn,
            Access::REMOTE_WRITE | Access::REMOTE_READ,
        ),
        (memory::MW1, MwType::Type1, 0, Access::REMOTE_ATOMIC),
    ] {
        let mw_rkey = mrs.alloc_window(PD, mw_type).unwrap();
        let bind = MwBind {
            mw_rkey,
            rkey: mw_rkey.wrapping_add(1),
            mr_lkey: lkeys[L_INDEX],
            addr: l(&mw).addr,
            length: mw.len() as u64,
            access,
        };
        keys.push((mrs.bind_window(PD, qp, &bind).unwrap(), bind.addr));
    }
    for id in 0..8 {
        let wr = RecvWr {
            wr_id: id,
            sg_list: memory::RECV_SGES.iter().map(l).collect(),
        };
        nic.qp(qpn).unwrap().post_recv(&wr).unwrap();
    }
    let w = Sge {
        addr: keys[0].1,
        length: 300,
        lkey: lkeys[0],
    };
    let remote = RemoteAddr {
        addr: 0x7000_0000,
        rkey: 0x1234,
    };
    let wrs = [
        SendWr::new(100, SendOpcode::Send, vec![Sge { length: 64, ..w }]),
        SendWr::new(101, SendOpcode::RdmaRead, vec![l(&memory::READ_DEST)]),
        SendWr {
            compare_add: 1,
            ..SendWr::new(
                102,
                SendOpcode::AtomicFetchAndAdd,
                vec![l(&memory::ATOMIC_RESULT)],
            )
        },
        SendWr::new(103, SendOpcode::RdmaWrite, vec![w]),
    ];
    for wr in wrs {
        let wr = SendWr {
            flags: SendFlags::SIGNALED,
            remote,
            ..wr
        };
        let (qp, mrs) = nic.qp_and_mrs(qpn).unwrap();
        qp.post_send(&wr, mrs).unwrap();
    }
    Setup { nic, qpn, cq, keys }
}

/// The PSN cursors: the next request's and the next response's.
#[derive(Default)]
struct Cursors {
    request: u32,
    response: u32,
}

/// Rewrites an RC packet's header fields as the module doc says.
fn normalize(pkt: &mut [u8], qpn: u32, keys: &[(u32, u64)], psn: &mut Cursors) {
    let op = pkt[0];
    pkt[2..4].copy_from_slice(&0xffffu16.to_be_bytes());
    pkt[5..8].copy_from_slice(&qpn.to_be_bytes()[1..]);
    let cursor = if (0x0d..=0x12).contains(&op) {
        &mut psn.response
    } else {
        &mut psn.request
    };
    let raw = u32::from_be_bytes([0, pkt[9], pkt[10], pkt[11]]);
    let abs = cursor.wrapping_add(raw) & 0xff_ffff;
    pkt[9..12].copy_from_slice(&abs.to_be_bytes()[1..]);
    *cursor = (abs + 1) & 0xff_ffff;
    // Where a VA and R_Key sit: RETH and AtomicETH start with them; FLUSH has its FETH
    // first; an IETH is an R_Key alone.
    let (va_at, key_at) = match op {
        0x06 | 0x0a | 0x0b | 0x0c | 0x13 | 0x14 | 0x1d => (Some(12), 20),
        0x1c => (Some(16), 24),
        0x16 | 0x17 => (None, 12),
        _ => return,
    };
    let Some(key) = pkt.get(key_at..key_at + 4) else {
        return;
    };
    let small = u32::from_be_bytes(key.try_into().unwrap());
    if small >= 0x100 {
        return;
    }
    let (rkey, start) = keys[small as usize % keys.len()];
    pkt[key_at..key_at + 4].copy_from_slice(&rkey.to_be_bytes());
    if let Some(at) = va_at {
        let off = u64::from_be_bytes(pkt[at..at + 8].try_into().unwrap());
        pkt[at..at + 8].copy_from_slice(&start.wrapping_add(off).to_be_bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    let mem = Memory::get();
    mem.reset();
    let Setup {
        mut nic,
        qpn,
        cq,
        keys,
    } = setup(mem);
    let mut now = Instant::now();
    let mut out = TxQueue::new();
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
    let mut psn = Cursors::default();
    nic.poll_transmit(now, &mut out, 64);
    for part in split(data) {
        if let [b] = part {
            now += Duration::from_micros(1 << (b % 28));
        } else {
            let mut pkt = part.to_vec();
            if pkt.len() >= 12 && pkt[0] < 0x20 {
                normalize(&mut pkt, qpn, &keys, &mut psn);
            }
            let from = SocketAddr::new(PEER, 0xc011);
            seal_as_socket_sent(from, LOCAL, &mut pkt);
            let meta = RecvMeta::from_socket(from, LOCAL, pkt.len());
            let recv = RecvPacket {
                meta: &meta,
                payload: &pkt,
            };
            if let Ok((p, verified)) = accept(&recv) {
                nic.handle_packet_from(now, &p, verified, PEER);
            }
            now += Duration::from_micros(10);
        }
        nic.handle_timeout(now);
        out.clear();
        nic.poll_transmit(now, &mut out, 64);
        while let Ok(n @ 1..) = nic.poll_cq(cq, &mut wcs) {
            if trace() {
                for w in &wcs[..n] {
                    eprintln!("wc {} {:?} {:?}", w.wr_id, w.opcode, w.status);
                }
            }
        }
    }
    // Dropping the NIC and then the last handle on the key table deregisters everything.
    drop(nic);
    if trace() {
        mem.trace();
    }
    mem.check();
});

/// Whether `RC_QP_TRACE` is set: then the target prints the completions and which pages
/// changed, to see what an input reaches.
fn trace() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| std::env::var_os("RC_QP_TRACE").is_some())
}

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
    .take(MAX_PARTS)
}
