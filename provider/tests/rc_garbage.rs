//! Robustness of the RC engine against bad packets: a connected pair runs a normal workload
//! (SEND, WRITE, WRITE with immediate, READ, atomics, both ways) while seeded garbage is fed to
//! both QPs, bypassing the ICRC (as a buggy or hostile peer that computes it would):
//!
//! * real packets of the run with random bit flips in their headers (BTH opcode, pad count,
//!   dest QP, AckReq, PSN, and RETH / AETH / AtomicETH / ImmDt fields);
//! * packets of random RC opcodes (so out of sequence) at PSNs next to the live ones, their
//!   extension headers made of plausible values (the regions' addresses, real R_Keys, keys of
//!   regions without the right or in another PD) and random bytes;
//! * real packets with truncated or oversized payloads, and cut datagrams;
//! * random bytes, with and without a plausible BTH, through `accept` (the ingress path).
//!
//! After the garbage stops, the pair runs to quiescence and both QPs are moved to ERR. Then:
//! nothing panicked; the memory around and between the registered windows (guard pages, a
//! region without remote rights, a region of another PD) is untouched; every WR completed
//! exactly once, in order, as successes, then at most one error, then flushes; a QP still in
//! RTS before the forced ERR has completed all its sends successfully.

mod common;

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::wrs::{bytes, recv_wr, remote_of, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::driver::accept;
use softrnic_provider::mr::{Access, PdHandle};
use softrnic_provider::qp::{QpAttr, TxQueue};
use softrnic_provider::qp_state::{AttrMask, QpState};
use softrnic_provider::transport::{
    seal_as_socket_sent, FabricConfig, RecvMeta, RecvPacket, SplitMix64,
};
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::SendOpcode;
use softrnic_wire::aeth::{NakCode, Syndrome};
use softrnic_wire::opcode::ExtHeader;
use softrnic_wire::roce::RoceRepr;
use softrnic_wire::Opcode;

const PAGE: usize = 4096;
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);
const OTHER_PD: PdHandle = PdHandle(2);
/// The pattern the memory outside the windows holds.
const GUARD_SEED: u8 = 0x5a;

/// The fabric's seeded generator, with the draws that pick mutations.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    fn fill(&mut self, b: &mut [u8]) {
        for x in b {
            *x = self.next() as u8;
        }
    }
}

/// One node's memory: five pages, registered for local writes only (the "backing", whose
/// R_Key grants nothing remote); pages 1-2 are the window every WR uses (all rights, the QPs'
/// PD); page 3 is a region with all rights in another PD. Pages 0, 3 and 4 must never change.
struct Mem {
    backing: Region,
    win: Region,
    other_pd: Region,
}

const WIN: usize = 2 * PAGE;

impl Mem {
    fn new(n: &mut Node) -> Mem {
        let backing = n.region(5 * PAGE, Access::LOCAL_WRITE);
        n.fill(&backing, 0, &bytes(5 * PAGE, GUARD_SEED));
        let win = n.subregion(&backing, PAGE, WIN, PD, ALL);
        let other_pd = n.subregion(&backing, 3 * PAGE, PAGE, OTHER_PD, ALL);
        Mem {
            backing,
            win,
            other_pd,
        }
    }

    /// The bytes outside the window (pages 0, 3, 4), as they are now.
    fn guard(&self, n: &Node) -> Vec<u8> {
        let mut g = n.read(&self.backing, 0, PAGE);
        g.extend(n.read(&self.backing, 3 * PAGE, 2 * PAGE));
        g
    }

    fn expected_guard() -> Vec<u8> {
        let all = bytes(5 * PAGE, GUARD_SEED);
        let mut g = all[..PAGE].to_vec();
        g.extend_from_slice(&all[3 * PAGE..]);
        g
    }
}

/// The packets each node's QP received, as bytes (headers re-emitted, the payload as
/// received, a dummy ICRC): the templates garbage is made from.
type Captured = Rc<RefCell<Vec<Vec<u8>>>>;

fn capture(n: &mut Node) -> Captured {
    let cap: Captured = Rc::default();
    let c = cap.clone();
    n.drop_if = Some(Box::new(move |p| {
        let mut v = vec![0u8; p.repr.buffer_len()];
        let at = p.repr.emit_headers(&mut v).expect("a parsed packet emits");
        v[at..at + p.payload.len()].copy_from_slice(p.payload);
        let mut c = c.borrow_mut();
        if c.len() >= 64 {
            c.remove(0);
        }
        c.push(v);
        false
    }));
    cap
}

/// Sets the BTH pad count of `b` for a payload of `len` bytes.
fn set_pad(b: &mut [u8], len: usize) {
    let pad = ((4 - len % 4) % 4) as u8;
    b[1] = (b[1] & !0x30) | (pad << 4);
}

/// A packet with `template`'s BTH (opcode `op`, PSN moved by `dpsn`), extension headers of
/// plausible values and random bytes, and a payload of `len` random bytes.
fn forge(
    rng: &mut Rng,
    template: &[u8],
    op: u8,
    dpsn: i32,
    len: usize,
    keys: &[(u64, u32)],
) -> Vec<u8> {
    let mut b = template[..12].to_vec();
    b[0] = op;
    let psn = u32::from_be_bytes([0, b[9], b[10], b[11]]).wrapping_add(dpsn as u32) & 0x00ff_ffff;
    b[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
    if rng.chance(30) {
        b[8] ^= 0x80; // AckReq
    }
    if let Some(info) = Opcode(op).info() {
        for &h in info.headers {
            let mut e = vec![0u8; h.size()];
            rng.fill(&mut e);
            let (addr, key) = rng.pick(keys);
            let va = if rng.chance(80) {
                addr.wrapping_add(rng.below(WIN as u64 + 64))
                    .wrapping_sub(32)
                    & !rng.pick(&[0, 7])
            } else {
                rng.next()
            };
            let key = if rng.chance(85) {
                key
            } else {
                key ^ (1 << rng.below(32))
            };
            match h {
                ExtHeader::Reth => {
                    e[..8].copy_from_slice(&va.to_be_bytes());
                    e[8..12].copy_from_slice(&key.to_be_bytes());
                    let dma_len = if rng.chance(80) {
                        rng.below(3 * 1024) as u32
                    } else {
                        rng.next() as u32
                    };
                    e[12..16].copy_from_slice(&dma_len.to_be_bytes());
                }
                ExtHeader::AtomicEth => {
                    e[..8].copy_from_slice(&va.to_be_bytes());
                    e[8..12].copy_from_slice(&key.to_be_bytes());
                }
                ExtHeader::Aeth => {
                    e[0] = rng.pick(&[
                        0x1f, 0x00, 0x05, 0x20, 0x21, 0x3f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x9f,
                        0xff,
                    ]);
                }
                _ => {}
            }
            b.extend_from_slice(&e);
        }
    }
    let mut payload = vec![0u8; len];
    rng.fill(&mut payload);
    b.extend_from_slice(&payload);
    b.extend(std::iter::repeat_n(0, (4 - len % 4) % 4));
    b.extend_from_slice(&[0; 4]);
    set_pad(&mut b, len);
    b
}

/// One piece of garbage made from `template` (a real packet to the node).
fn garbage(rng: &mut Rng, template: &[u8], keys: &[(u64, u32)]) -> Vec<u8> {
    let hdr_len = RoceRepr::parse(template).map_or(12, |p| p.repr.header_len());
    let lens = [0, 1, 3, 4, 7, 8, 255, 256, 1023, 1024, 1028, 2048, 4096];
    match rng.below(6) {
        // (a) bit flips in the headers.
        0 => {
            let mut b = template.to_vec();
            for _ in 0..=rng.below(3) {
                let bit = rng.below(8 * hdr_len as u64) as usize;
                b[bit / 8] ^= 1 << (bit % 8);
            }
            b
        }
        // (a) a named field moved: the PSN next to the live one, the AckReq bit, the pad.
        1 => {
            let mut b = template.to_vec();
            let psn = u32::from_be_bytes([0, b[9], b[10], b[11]]);
            let psn = psn.wrapping_add(rng.below(9) as u32).wrapping_sub(4) & 0x00ff_ffff;
            b[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
            match rng.below(3) {
                0 => b[8] ^= 0x80,
                1 => b[1] ^= 0x10 << rng.below(2),
                _ => {}
            }
            b
        }
        // (b) a random RC opcode at a PSN next to the live one.
        2 => {
            let op = rng.below(0x20) as u8;
            let dpsn = rng.below(9) as i32 - 4;
            let len = match Opcode(op).info().map(|i| i.has_payload()) {
                Some(true) => rng.pick(&lens),
                _ => 0,
            };
            forge(rng, template, op, dpsn, len, keys)
        }
        // (b) an opcode of another transport (UC, UD, ...), same QP and PSN.
        3 if rng.chance(30) => {
            let op = rng.pick(&[0x20, 0x24, 0x2a, 0x64, 0x65, 0x81]);
            let len = rng.pick(&lens[..6]);
            forge(rng, template, op, 0, len, keys)
        }
        // (c) the payload cut or grown (the pad fixed, or not), or the datagram cut.
        3 | 4 => {
            let mut b = template[..hdr_len.min(template.len())].to_vec();
            let len = if rng.chance(50) {
                rng.pick(&lens)
            } else {
                rng.below(4200) as usize
            };
            let mut payload = vec![0u8; len];
            rng.fill(&mut payload);
            b.extend_from_slice(&payload);
            b.extend(std::iter::repeat_n(0, (4 - len % 4) % 4));
            b.extend_from_slice(&[0; 4]);
            if rng.chance(80) {
                set_pad(&mut b, len);
            }
            if rng.chance(20) {
                b.truncate(rng.below(b.len() as u64 + 1) as usize);
            }
            b
        }
        // (d) random bytes after the template's BTH (opcode random), or none at all.
        _ => {
            let mut b = if rng.chance(70) {
                let mut h = template[..12].to_vec();
                h[0] = rng.below(0x20) as u8;
                h
            } else {
                Vec::new()
            };
            let mut tail = vec![0u8; rng.below(80) as usize];
            rng.fill(&mut tail);
            b.extend_from_slice(&tail);
            b
        }
    }
}

/// Hands `bytes` to the node's QP as the NIC would: with the ICRC a UDP socket sending them
/// gives them (a peer that computes ICRCs), through `accept`, then demultiplexed by
/// destination QP.
fn inject(n: &mut Node, now: Instant, from: SocketAddr, to: IpAddr, bytes: &[u8]) -> bool {
    let mut bytes = bytes.to_vec();
    seal_as_socket_sent(from, to, &mut bytes);
    let meta = RecvMeta::from_socket(from, to, bytes.len());
    let pkt = RecvPacket {
        meta: &meta,
        payload: &bytes,
    };
    let Ok((p, _)) = accept(&pkt) else {
        return false;
    };
    if p.repr.bth.dest_qp != n.qp.qpn() {
        return false;
    }
    n.qp.handle_packet(now, &p, &n.mrs, &mut n.srqs);
    true
}

fn to_err(qp: &mut softrnic_provider::qp::Qp) {
    let attr = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    qp.modify(&attr, AttrMask::STATE, &LIMITS).unwrap();
}

/// Checks the completions of WRs `0..n` posted in order: each exactly once, in order, as
/// successes, then at most one error, then flushes.
fn check_once(what: &str, wcs: &[(u64, WcStatus)], ids: &[u64]) {
    let got: Vec<u64> = wcs.iter().map(|w| w.0).collect();
    assert_eq!(got, ids, "{what}: every WR completes once, in order");
    let ok = wcs.iter().take_while(|w| w.1 == WcStatus::Success).count();
    let rest = &wcs[ok..];
    let flushed = rest
        .iter()
        .skip(usize::from(
            rest.first().is_some_and(|w| w.1 != WcStatus::WrFlushErr),
        ))
        .all(|w| w.1 == WcStatus::WrFlushErr);
    assert!(
        flushed,
        "{what}: successes, at most one error, then flushes: {wcs:?}"
    );
}

/// Posts the workload: `n` mixed WRs from `from` to `to` (whose window is `to_win`), and
/// enough receives on `to`. Returns (send wr_ids, receive wr_ids).
fn workload(
    rng: &mut Rng,
    from: &mut Node,
    from_mem: &Mem,
    to: &mut Node,
    to_mem: &Mem,
    n: usize,
) -> (Vec<u64>, Vec<u64>) {
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    for i in 0..n as u64 {
        let id = 1000 + i;
        recvs.push(id);
        to.qp
            .post_recv(&recv_wr(id, vec![sge_of(&to_mem.win, 0, WIN as u32)]))
            .unwrap();
    }
    for i in 0..n as u64 {
        let op = rng.pick(&[
            SendOpcode::Send,
            SendOpcode::SendWithImm,
            SendOpcode::RdmaWrite,
            SendOpcode::RdmaWriteWithImm,
            SendOpcode::RdmaRead,
            SendOpcode::AtomicCmpAndSwp,
            SendOpcode::AtomicFetchAndAdd,
        ]);
        let len = if op.is_atomic() {
            8
        } else {
            rng.pick(&[0, 1, 64, 1024, 1500, 3000]) as u32
        };
        let off = rng.below((WIN - 3000) as u64) & !7;
        let roff = rng.below((WIN - 3000) as u64) & !7;
        let mut wr = send_wr(
            i,
            op,
            vec![sge_of(&from_mem.win, off, len)],
            remote_of(&to_mem.win, roff),
        );
        wr.compare_add = rng.next();
        wr.swap = rng.next();
        from.qp.post_send(&wr, &from.mrs).unwrap();
        sends.push(i);
    }
    (sends, recvs)
}

fn run(seed: u64, stats: &mut (u64, u64)) {
    let mut rng = Rng(SplitMix64(seed));
    let c = Connect {
        retry_cnt: 3,
        rnr_retry: 3,
        timeout: 10,
        ..Connect::default()
    };
    let fabric = FabricConfig {
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.02,
        delay_ns: 2_000,
        ..FabricConfig::default()
    };
    let mut p = Pair::new(fabric, seed, c);
    let mem_a = Mem::new(&mut p.a);
    let mem_b = Mem::new(&mut p.b);
    let cap_a = capture(&mut p.a);
    let cap_b = capture(&mut p.b);
    let n = 8 + rng.below(16) as usize;
    let (a_sends, b_recvs) = workload(&mut rng, &mut p.a, &mem_a, &mut p.b, &mem_b, n);
    let m = 2 + rng.below(6) as usize;
    let (b_sends, a_recvs) = workload(&mut rng, &mut p.b, &mem_b, &mut p.a, &mem_a, m);
    let keys = |m: &Mem| {
        [
            (m.win.addr(), m.win.keys.rkey),
            (m.backing.addr(), m.backing.keys.rkey),
            (m.other_pd.addr(), m.other_pd.keys.rkey),
        ]
    };
    let (keys_a, keys_b) = (keys(&mem_a), keys(&mem_b));
    let from_a = SocketAddr::new(A_ADDR, 0xc011);
    let from_b = SocketAddr::new(B_ADDR, 0xc022);
    let rate = 1 + rng.below(12);

    // The workload with garbage: a few pieces per step, into either node.
    for _ in 0..3000 {
        if !p.step() && !p.advance() {
            break;
        }
        let now = p.now();
        for _ in 0..rng.below(rate) {
            let to_a = rng.chance(50);
            let (cap, keys) = if to_a {
                (&cap_a, &keys_a)
            } else {
                (&cap_b, &keys_b)
            };
            let template = {
                let c = cap.borrow();
                if c.is_empty() {
                    break;
                }
                let i = rng.below(c.len() as u64) as usize;
                c[i].clone()
            };
            let g = garbage(&mut rng, &template, keys);
            let delivered = if to_a {
                inject(&mut p.a, now, from_b, A_ADDR, &g)
            } else {
                inject(&mut p.b, now, from_a, B_ADDR, &g)
            };
            stats.0 += 1;
            stats.1 += u64::from(delivered);
        }
    }

    // No more garbage: to quiescence, then both QPs to ERR to flush what is left.
    p.run_to_quiescence(100_000);
    for (name, n) in [("A", &p.a), ("B", &p.b)] {
        let st = n.qp.state();
        assert!(
            matches!(st, QpState::Rts | QpState::Err),
            "seed {seed}: {name} in {st:?}"
        );
        if st == QpState::Rts {
            assert_eq!(n.qp.send_queue_len(), 0, "seed {seed}: {name} quiescent");
            assert!(
                n.send_wcs.iter().all(|w| w.status == WcStatus::Success),
                "seed {seed}: {name} in RTS had a send fail: {:?}",
                wc_statuses(&n.send_wcs)
            );
        }
    }
    to_err(&mut p.a.qp);
    to_err(&mut p.b.qp);
    p.run_until(1000, |p| p.fabric.in_flight() == 0);
    p.step();

    check_once(
        &format!("seed {seed}: A sends"),
        &wc_statuses(&p.a.send_wcs),
        &a_sends,
    );
    check_once(
        &format!("seed {seed}: B sends"),
        &wc_statuses(&p.b.send_wcs),
        &b_sends,
    );
    check_once(
        &format!("seed {seed}: A receives"),
        &wc_statuses(&p.a.recv_wcs),
        &a_recvs,
    );
    check_once(
        &format!("seed {seed}: B receives"),
        &wc_statuses(&p.b.recv_wcs),
        &b_recvs,
    );
    assert_eq!(
        mem_a.guard(&p.a),
        Mem::expected_guard(),
        "seed {seed}: A's memory outside the window"
    );
    assert_eq!(
        mem_b.guard(&p.b),
        Mem::expected_guard(),
        "seed {seed}: B's memory outside the window"
    );
}

#[test]
fn garbage_never_panics_nor_touches_memory_outside_the_windows() {
    let mut stats = (0, 0);
    for seed in 0..600 {
        run(seed, &mut stats);
    }
    eprintln!("garbage: {} made, {} delivered to a QP", stats.0, stats.1);
}

/// A request of `op` to QP `qpn` at `psn`: extension headers of `ext` zero bytes, a 4-byte
/// payload.
fn request(op: u8, ext: usize, qpn: u32, psn: u32) -> Vec<u8> {
    let mut b = vec![op, 0, 0xff, 0xff, 0];
    b.extend_from_slice(&qpn.to_be_bytes()[1..]);
    b.push(0x80);
    b.extend_from_slice(&psn.to_be_bytes()[1..]);
    b.extend(std::iter::repeat_n(0, ext));
    b.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0, 0]);
    b
}

/// IBTA 9.6.1.1 / rxe's `check_type_qp`: a packet whose opcode belongs to another transport
/// than the QP's (UC, UD, ...) is silently dropped; it is not an invalid request of the RC
/// connection and must not move the QP to ERR.
#[test]
fn opcodes_of_other_transports_are_dropped_not_fatal() {
    // UC SEND ONLY, UC RDMA WRITE ONLY (RETH), UD SEND ONLY (DETH).
    for (op, ext) in [(0x24u8, 0), (0x2a, 16), (0x64, 8)] {
        let c = Connect::default();
        let mut p = Pair::new(FabricConfig::default(), 1, c);
        let mem_b = Mem::new(&mut p.b);
        p.b.qp
            .post_recv(&recv_wr(7, vec![sge_of(&mem_b.win, 0, 64)]))
            .unwrap();
        let now = p.now();
        let from = SocketAddr::new(A_ADDR, 0xc011);
        assert!(inject(
            &mut p.b,
            now,
            from,
            B_ADDR,
            &request(op, ext, 0x22, c.a_psn)
        ));
        p.run_to_quiescence(100);
        assert_eq!(p.b.qp.state(), QpState::Rts, "opcode {op:#x}");
        assert!(p.b.recv_wcs.is_empty(), "opcode {op:#x}");
        assert!(p.a.seen.is_empty(), "opcode {op:#x}: no NAK");
    }
}

/// The NIC's whole receive path — `accept`, then `Nic::handle_packet` demultiplexing by
/// destination QP — fed random bytes and forged requests to a connected QP: no panic, the
/// counters add up, and memory outside the QP's window is untouched.
#[test]
fn random_bytes_through_accept_and_the_nic() {
    use softrnic_provider::nic::Nic;
    use softrnic_provider::wc::{WcOpcode, WorkCompletion};
    use std::sync::Arc;

    let mut rng = Rng(SplitMix64(0xbad));
    let mrs = Arc::new(softrnic_provider::mr::MrTable::new(16, 7).unwrap());
    // One buffer: a page of guard, the window (all rights), a page of guard.
    let mut buf = bytes(WIN + 2 * PAGE, GUARD_SEED);
    let win_addr = buf.as_mut_ptr() as u64 + PAGE as u64;
    // SAFETY: the region is deregistered below, before `buf` is read or dropped.
    let keys = unsafe {
        mrs.register(PD, buf.as_mut_ptr().add(PAGE), WIN, win_addr, ALL)
            .unwrap()
    };
    let mut nic = Nic::new(B_ADDR, mrs.clone(), 4);
    let cq = nic.create_cq(4096);
    let qpn = nic
        .create_qp(PD, cq, cq, None, caps(), false, 4096)
        .unwrap();
    let c = Connect::default();
    connect(nic.qp(qpn).unwrap(), 0x11, A_ADDR, c, c.b_psn, c.a_psn);
    for id in 0..64 {
        let wr = softrnic_provider::wr::RecvWr {
            wr_id: id,
            sg_list: vec![softrnic_provider::wr::Sge {
                addr: win_addr,
                length: WIN as u32,
                lkey: keys.lkey,
            }],
        };
        nic.qp(qpn).unwrap().post_recv(&wr).unwrap();
    }
    let template = request(0x04, 0, qpn, c.a_psn);
    let key_list = [
        (win_addr, keys.rkey),
        (win_addr - PAGE as u64, keys.rkey ^ 0x100),
    ];
    let base = Instant::now();
    let mut accepted = 0;
    let mut out = TxQueue::new();
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 64];
    for i in 0..20_000u64 {
        let g = match rng.below(3) {
            0 => {
                let mut b = vec![0u8; rng.below(100) as usize];
                rng.fill(&mut b);
                b
            }
            1 => {
                let op = rng.below(0x20) as u8;
                let len = rng.pick(&[0, 4, 8, 256, 1024]);
                let dpsn = rng.below(5) as i32 - 2;
                forge(&mut rng, &template, op, dpsn, len, &key_list)
            }
            _ => garbage(&mut rng, &template, &key_list),
        };
        let mut g = g;
        let from = SocketAddr::new(A_ADDR, 0xc011);
        seal_as_socket_sent(from, B_ADDR, &mut g);
        let meta = RecvMeta::from_socket(from, B_ADDR, g.len());
        let pkt = RecvPacket {
            meta: &meta,
            payload: &g,
        };
        let now = base + Duration::from_micros(i);
        if let Ok((p, verified)) = accept(&pkt) {
            accepted += 1;
            nic.handle_packet_from(now, &p, verified, A_ADDR);
        }
        nic.handle_timeout(now);
        out.clear();
        nic.poll_transmit(now, &mut out, 16);
        let _ = nic.poll_cq(cq, &mut wcs);
        let _ = nic.poll_async_event();
    }
    assert_eq!(nic.rx.delivered + nic.rx.no_qp + nic.rx.bad_pkey, accepted);
    assert_eq!(nic.rx.ident_solved, nic.rx.delivered);
    assert!(nic.rx.delivered > 1000, "{:?}", nic.rx);
    drop(nic);
    mrs.deregister(keys.lkey).unwrap();
    let expect = bytes(WIN + 2 * PAGE, GUARD_SEED);
    assert_eq!(buf[..PAGE], expect[..PAGE], "the guard before the window");
    assert_eq!(
        buf[PAGE + WIN..],
        expect[PAGE + WIN..],
        "the guard after it"
    );
}

/// IBTA 9.7.2.1 (the responder's side, as rxe's `check_length`): a FIRST or MIDDLE packet
/// must carry exactly one PMTU, a LAST one 1 to PMTU bytes. A SEND FIRST of 4 bytes is an
/// invalid request: NAK, the receive WQE it took completes with REM_INV_REQ_ERR, the QP
/// enters ERR, and nothing is written to the receive buffer.
#[test]
fn a_first_packet_shorter_than_the_pmtu_is_an_invalid_request() {
    let c = Connect::default();
    let mut p = Pair::new(FabricConfig::default(), 1, c);
    let mem_b = Mem::new(&mut p.b);
    let before = p.b.read(&mem_b.backing, 0, 5 * PAGE);
    p.b.qp
        .post_recv(&recv_wr(7, vec![sge_of(&mem_b.win, 0, 4096)]))
        .unwrap();
    let now = p.now();
    let from = SocketAddr::new(A_ADDR, 0xc011);
    // RC SEND FIRST (0x00) with 256 bytes of payload and an ICRC; the path MTU is 1024.
    let mut first = request(0x00, 0, 0x22, c.a_psn)[..12].to_vec();
    first.extend_from_slice(&[0x5a; 256 + 4]);
    assert!(inject(&mut p.b, now, from, B_ADDR, &first));
    p.run_to_quiescence(100);
    let naks: Vec<_> =
        p.a.seen
            .iter()
            .filter_map(|s| s.syndrome)
            .filter(|s| matches!(s, Syndrome::Nak(NakCode::InvalidRequest)))
            .collect();
    assert_eq!(naks.len(), 1, "one NAK invalid request");
    assert_eq!(p.b.qp.state(), QpState::Err);
    let wcs: Vec<_> = p.b.recv_wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(wcs, [(7, WcStatus::RemInvReqErr)]);
    assert_eq!(
        p.b.read(&mem_b.backing, 0, 5 * PAGE),
        before,
        "nothing written"
    );
}

/// A flood of duplicate READ requests (IBTA 9.7.5.1.2: each is answered from the saved
/// resource) cannot grow the responder's queue: a duplicate of a READ already being answered
/// adds nothing. (The cap on waiting answers is checked with atomics below.)
#[test]
fn a_flood_of_duplicate_reads_is_answered_a_bounded_number_of_times() {
    let c = Connect::default();
    let mut p = Pair::new(FabricConfig::default(), 1, c);
    let mem_b = Mem::new(&mut p.b);
    // RC RDMA READ REQUEST (0x0c): RETH = the window's address, its R_Key, 64 bytes.
    let mut read = request(0x0c, 0, 0x22, c.a_psn)[..12].to_vec();
    read.extend_from_slice(&mem_b.win.addr().to_be_bytes());
    read.extend_from_slice(&mem_b.win.keys.rkey.to_be_bytes());
    read.extend_from_slice(&64u32.to_be_bytes());
    read.extend_from_slice(&[0; 4]); // ICRC
    let now = p.now();
    let from = SocketAddr::new(A_ADDR, 0xc011);
    for _ in 0..1000 {
        assert!(inject(&mut p.b, now, from, B_ADDR, &read));
    }
    p.run_to_quiescence(100);
    let answers =
        p.a.seen
            .iter()
            .filter(|s| s.opcode == Opcode::RC_RDMA_READ_RESPONSE_ONLY)
            .count();
    assert!(answers >= 1, "the READ is answered");
    assert!(
        answers <= 1,
        "{answers} answers to one READ and 999 duplicates of it"
    );
    assert_eq!(p.b.qp.state(), QpState::Rts);
}

/// The same for a duplicated FETCH_AND_ADD: executed once, its saved result sent again at
/// most until `max_dest_rd_atomic` answers wait (16 here), not once per duplicate.
#[test]
fn a_flood_of_duplicate_atomics_is_executed_once_and_answered_a_bounded_number_of_times() {
    let c = Connect::default();
    let mut p = Pair::new(FabricConfig::default(), 1, c);
    let mem_b = Mem::new(&mut p.b);
    let before = p.b.read(&mem_b.win, 0, 8);
    // RC FETCH_AND_ADD (0x14): AtomicETH = the window's address, its R_Key, add 1.
    let mut fadd = request(0x14, 0, 0x22, c.a_psn)[..12].to_vec();
    fadd.extend_from_slice(&mem_b.win.addr().to_be_bytes());
    fadd.extend_from_slice(&mem_b.win.keys.rkey.to_be_bytes());
    fadd.extend_from_slice(&1u64.to_be_bytes());
    fadd.extend_from_slice(&0u64.to_be_bytes());
    fadd.extend_from_slice(&[0; 4]); // ICRC
    let now = p.now();
    let from = SocketAddr::new(A_ADDR, 0xc011);
    for _ in 0..1000 {
        assert!(inject(&mut p.b, now, from, B_ADDR, &fadd));
    }
    p.run_to_quiescence(100);
    let answers =
        p.a.seen
            .iter()
            .filter(|s| s.opcode == Opcode::RC_ATOMIC_ACKNOWLEDGE)
            .count();
    assert!(
        (1..=16).contains(&answers),
        "{answers} answers to 1000 copies"
    );
    let after = p.b.read(&mem_b.win, 0, 8);
    let add = |v: &[u8]| u64::from_ne_bytes(v.try_into().unwrap());
    assert_eq!(add(&after), add(&before).wrapping_add(1), "executed once");
}
