//! Randomized workloads over a faulty fabric: all RC opcodes, sizes from 0 bytes to many MTUs,
//! random scatter/gather lists, both directions at once, under seeded loss, duplication,
//! reordering and corruption. For every seed: each work request completes exactly once, in
//! order and successfully, and memory on both sides is byte-exact against a model; or the QP
//! entered ERR and every request after the failed one was flushed.

mod common;

use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::{Mtu, QpState};
use softrnic_provider::transport::{FabricConfig, SplitMix64};
use softrnic_provider::wc::{WcOpcode, WcStatus, WorkCompletion};
use softrnic_provider::wr::{RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);
const SRC: usize = 128 << 10;
const TARGET: usize = 128 << 10;
const SINK: usize = 1 << 20;
const RECV: usize = 1 << 20;
const WORDS: usize = 64;

/// One node's regions: a source (random bytes, never written), the target of the peer's
/// WRITEs and READs, a sink for READ/atomic results, receive buffers, atomic words.
struct Mem {
    src: Region,
    target: Region,
    sink: Region,
    recv: Region,
    words: Region,
    src_bytes: Vec<u8>,
}

fn mem(n: &mut Node, rng: &mut SplitMix64) -> Mem {
    let m = Mem {
        src: n.region(SRC, ALL),
        target: n.region(TARGET, ALL),
        sink: n.region(SINK, ALL),
        recv: n.region(RECV, ALL),
        words: n.region(WORDS * 8, ALL),
        src_bytes: (0..SRC).map(|_| rng.next_u64() as u8).collect(),
    };
    n.fill(&m.src, 0, &m.src_bytes);
    m
}

/// What a work request should have produced.
enum Expect {
    /// `bytes` at these (region offset, len) pieces of the sink (READ, atomic result).
    Sink(Vec<(usize, usize)>, Vec<u8>),
    None,
}

/// A receive WQE and the bytes it should hold.
struct RecvExpect {
    wr_id: u64,
    pieces: Vec<(usize, usize)>,
    bytes: Vec<u8>,
    opcode: WcOpcode,
    imm: Option<u32>,
}

struct Plan {
    sends: Vec<(SendWr, Expect, u32)>,
    recvs: Vec<RecvExpect>,
    /// The model of the peer's target region and atomic words after everything.
    target: Vec<u8>,
    words: Vec<u64>,
}

/// Splits `len` bytes into 1..=4 SGE pieces placed by `place`.
fn pieces(
    rng: &mut SplitMix64,
    len: usize,
    mut place: impl FnMut(&mut SplitMix64, usize) -> usize,
) -> Vec<(usize, usize)> {
    let n = if len == 0 {
        rng.below(2) as usize
    } else {
        1 + rng.below(4) as usize
    };
    let mut cuts: Vec<usize> = (0..n.saturating_sub(1))
        .map(|_| rng.below(len as u64 + 1) as usize)
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([len]) {
        let l = c - at;
        out.push((place(rng, l), l));
        at = c;
    }
    if n == 0 {
        out.clear();
    }
    out
}

fn plan(rng: &mut SplitMix64, me: &Mem, peer: &Mem, pmtu: usize, count: usize) -> Plan {
    let mut target = vec![0u8; TARGET];
    let mut words = vec![0u64; WORDS];
    let mut sink_at = 0usize;
    let mut recv_at = 0usize;
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    // READ ranges not yet fenced: a READ's responses read the memory when they are sent, so a
    // later WRITE to the range may show through unless it carries IBV_SEND_FENCE (IBTA
    // 10.8.3.3); the plan fences exactly those WRITEs.
    let mut unfenced_reads: Vec<(usize, usize)> = Vec::new();
    for i in 0..count {
        let wr_id = 1000 + i as u64;
        let len = match rng.below(20) {
            0 => 0,
            1 => rng.below(64 << 10) as usize,
            2..=4 => rng.below(8 * pmtu as u64) as usize,
            _ => rng.below(2 * pmtu as u64 + 1) as usize,
        };
        let op = match rng.below(40) {
            0..=9 => SendOpcode::Send,
            10..=19 => SendOpcode::RdmaWrite,
            20..=23 => SendOpcode::RdmaWriteWithImm,
            24..=33 => SendOpcode::RdmaRead,
            34..=36 => SendOpcode::AtomicCmpAndSwp,
            _ => SendOpcode::AtomicFetchAndAdd,
        };
        let sge = |r: &Region, (off, len): (usize, usize)| Sge {
            addr: r.addr() + off as u64,
            length: len as u32,
            lkey: r.keys.lkey,
        };
        let bump = |at: &mut usize, rng: &mut SplitMix64, l: usize| {
            let p = *at + rng.below(64) as usize;
            *at = p + l;
            p
        };
        // Fields are evaluated in the order written: the flag draw comes before the
        // immediate's, as the workload of each seed expects.
        let mut w = SendWr {
            flags: if rng.chance(0.8) || i == count - 1 {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            },
            imm_data_or_inv_rkey: rng.next_u64() as u32,
            remote: RemoteAddr {
                addr: 0,
                rkey: peer.target.keys.rkey,
            },
            ..SendWr::new(wr_id, op, vec![])
        };
        let (expect, byte_len) = match op {
            SendOpcode::Send | SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm => {
                let src = pieces(rng, len, |rng, l| rng.below((SRC - l) as u64 + 1) as usize);
                let data: Vec<u8> = src
                    .iter()
                    .flat_map(|&(o, l)| me.src_bytes[o..o + l].to_vec())
                    .collect();
                w.sg_list = src.iter().map(|&p| sge(&me.src, p)).collect();
                if op == SendOpcode::Send {
                    let slack = rng.below(3) as usize * 7;
                    let dst = pieces(rng, len + slack, |rng, l| bump(&mut recv_at, rng, l));
                    recvs.push(RecvExpect {
                        wr_id: wr_id + 1_000_000,
                        pieces: dst,
                        bytes: data,
                        opcode: WcOpcode::Recv,
                        imm: None,
                    });
                } else {
                    let off = rng.below((TARGET - len) as u64 + 1) as usize;
                    w.remote.addr = peer.target.addr() + off as u64;
                    target[off..off + len].copy_from_slice(&data);
                    if unfenced_reads
                        .iter()
                        .any(|&(o, l)| o < off + len && off < o + l)
                    {
                        w.flags |= SendFlags::FENCE;
                        unfenced_reads.clear();
                    }
                    if op == SendOpcode::RdmaWriteWithImm {
                        recvs.push(RecvExpect {
                            wr_id: wr_id + 1_000_000,
                            pieces: vec![],
                            bytes: data,
                            opcode: WcOpcode::RecvRdmaWithImm,
                            imm: Some(w.imm_data_or_inv_rkey),
                        });
                    }
                }
                (Expect::None, len as u32)
            }
            SendOpcode::RdmaRead => {
                let off = rng.below((TARGET - len) as u64 + 1) as usize;
                w.remote.addr = peer.target.addr() + off as u64;
                let dst = pieces(rng, len, |rng, l| bump(&mut sink_at, rng, l));
                w.sg_list = dst.iter().map(|&p| sge(&me.sink, p)).collect();
                unfenced_reads.push((off, len));
                (
                    Expect::Sink(dst, target[off..off + len].to_vec()),
                    len as u32,
                )
            }
            _ => {
                let k = rng.below(WORDS as u64) as usize;
                w.remote = RemoteAddr {
                    addr: peer.words.addr() + 8 * k as u64,
                    rkey: peer.words.keys.rkey,
                };
                let orig = words[k];
                if op == SendOpcode::AtomicCmpAndSwp {
                    w.compare_add = if rng.chance(0.5) {
                        orig
                    } else {
                        rng.next_u64()
                    };
                    w.swap = rng.next_u64();
                    if orig == w.compare_add {
                        words[k] = w.swap;
                    }
                } else {
                    w.compare_add = rng.below(1000);
                    words[k] = orig.wrapping_add(w.compare_add);
                }
                let p = bump(&mut sink_at, rng, 8);
                w.sg_list = vec![sge(&me.sink, (p, 8))];
                (Expect::Sink(vec![(p, 8)], orig.to_ne_bytes().to_vec()), 8)
            }
        };
        assert!(
            sink_at < SINK && recv_at < RECV,
            "the plan fits the regions"
        );
        sends.push((w, expect, byte_len));
    }
    Plan {
        sends,
        recvs,
        target,
        words,
    }
}

fn expected_wc_opcode(op: SendOpcode) -> WcOpcode {
    match op {
        SendOpcode::Send => WcOpcode::Send,
        SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
        SendOpcode::RdmaRead => WcOpcode::RdmaRead,
        SendOpcode::AtomicCmpAndSwp => WcOpcode::CompSwap,
        _ => WcOpcode::FetchAdd,
    }
}

/// Checks one direction; returns whether it ended in success (false: the QP erred, checked).
fn check(sender: &Node, smem: &Mem, receiver: &Node, rmem: &Mem, plan: &Plan, seed: u64) -> bool {
    let wcs: &[WorkCompletion] = &sender.send_wcs;
    let failed = wcs.iter().position(|w| w.status != WcStatus::Success);
    if let Some(f) = failed {
        // Every WR from the failed one on has exactly one error completion, in order.
        let first_id = wcs[f].wr_id;
        if std::env::var("RC_DEBUG").is_ok() {
            eprintln!(
                "seed {seed}: wr {first_id} failed with {:?} after {} completions",
                wcs[f].status, f
            );
        }
        let idx = plan
            .sends
            .iter()
            .position(|(w, _, _)| w.wr_id == first_id)
            .unwrap();
        let rest: Vec<u64> = plan.sends[idx..].iter().map(|(w, _, _)| w.wr_id).collect();
        let got: Vec<u64> = wcs[f..].iter().map(|w| w.wr_id).collect();
        assert_eq!(
            got, rest,
            "seed {seed}: after a failure every WR completes once, in order"
        );
        assert!(
            wcs[f + 1..]
                .iter()
                .all(|w| w.status == WcStatus::WrFlushErr),
            "seed {seed}"
        );
        assert_eq!(sender.qp.state(), QpState::Err, "seed {seed}");
        return false;
    }
    let signaled: Vec<_> = plan
        .sends
        .iter()
        .filter(|(w, _, _)| w.flags.contains(SendFlags::SIGNALED))
        .collect();
    assert_eq!(
        wcs.len(),
        signaled.len(),
        "seed {seed}: one completion per signaled WR"
    );
    for (wc, (w, _, len)) in wcs.iter().zip(&signaled) {
        assert_eq!(
            (wc.wr_id, wc.opcode, wc.byte_len),
            (w.wr_id, expected_wc_opcode(w.opcode), *len),
            "seed {seed}"
        );
    }
    for (w, e, _) in &plan.sends {
        if let Expect::Sink(pieces, bytes) = e {
            let got: Vec<u8> = pieces
                .iter()
                .flat_map(|&(o, l)| sender.read(&smem.sink, o, l))
                .collect();
            if got != *bytes {
                let at = got.iter().zip(bytes).position(|(a, b)| a != b);
                panic!(
                    "{}",
                    format!(
                        "seed {seed}: wr {} {:?} len {} sges {:?}: first difference at {at:?}",
                        w.wr_id,
                        w.opcode,
                        bytes.len(),
                        w.sg_list.iter().map(|s| s.length).collect::<Vec<_>>()
                    ) + &format!(
                        " got {:?} want {:?}",
                        &got[..8.min(got.len())],
                        &bytes[..8.min(bytes.len())]
                    )
                );
            }
        }
    }
    assert!(
        receiver.read(&rmem.target, 0, TARGET) == plan.target,
        "seed {seed}: target region"
    );
    let words: Vec<u64> = (0..WORDS)
        .map(|k| u64::from_ne_bytes(receiver.read(&rmem.words, 8 * k, 8).try_into().unwrap()))
        .collect();
    assert_eq!(words, plan.words, "seed {seed}: atomic words");
    let rwcs = &receiver.recv_wcs;
    assert_eq!(
        rwcs.len(),
        plan.recvs.len(),
        "seed {seed}: one receive completion per message"
    );
    for (wc, r) in rwcs.iter().zip(&plan.recvs) {
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode, wc.byte_len as usize),
            (r.wr_id, WcStatus::Success, r.opcode, r.bytes.len()),
            "seed {seed}"
        );
        if let Some(imm) = r.imm {
            assert_eq!(wc.imm_data_or_inv_rkey, imm);
        } else {
            let mut got: Vec<u8> = r
                .pieces
                .iter()
                .flat_map(|&(o, l)| receiver.read(&rmem.recv, o, l))
                .collect();
            got.truncate(r.bytes.len());
            assert!(got == r.bytes, "seed {seed}: received bytes of {}", r.wr_id);
        }
    }
    true
}

fn run_seed(seed: u64, config: FabricConfig) -> (bool, bool) {
    let mut rng = SplitMix64(seed);
    let mtu = Mtu::ALL[rng.below(5) as usize];
    let near_wrap = rng.chance(0.3);
    let c = Connect {
        mtu,
        timeout: 8 + rng.below(4) as u8,
        a_psn: if near_wrap {
            0xff_ffff - rng.below(40) as u32
        } else {
            rng.below(1 << 24) as u32
        },
        b_psn: rng.below(1 << 24) as u32,
        max_rd_atomic: 1 + rng.below(8) as u8,
        ..Connect::default()
    };
    let mut p = Pair::new(config, seed, c);
    let am = mem(&mut p.a, &mut rng);
    let bm = mem(&mut p.b, &mut rng);
    let count = 40 + rng.below(40) as usize;
    let ab = plan(&mut rng, &am, &bm, mtu.bytes() as usize, count);
    let ba = plan(&mut rng, &bm, &am, mtu.bytes() as usize, count);
    for (n, m, pl) in [(&mut p.b, &bm, &ab), (&mut p.a, &am, &ba)] {
        for r in &pl.recvs {
            let sg_list = r
                .pieces
                .iter()
                .map(|&(o, l)| Sge {
                    addr: m.recv.addr() + o as u64,
                    length: l as u32,
                    lkey: m.recv.keys.lkey,
                })
                .collect();
            n.qp.post_recv(&RecvWr {
                wr_id: r.wr_id,
                sg_list,
            })
            .unwrap();
        }
    }
    for (n, pl) in [(&mut p.a, &ab), (&mut p.b, &ba)] {
        for (w, _, _) in &pl.sends {
            n.qp.post_send(w, &n.mrs).unwrap();
        }
    }
    p.run_to_quiescence(2_000_000);
    let r1 = check(&p.a, &am, &p.b, &bm, &ab, seed);
    let r2 = check(&p.b, &bm, &p.a, &am, &ba, seed);
    (r1, r2)
}

fn faulty(loss: f64) -> FabricConfig {
    FabricConfig {
        loss,
        duplicate: 0.02,
        reorder: 0.05,
        corrupt: 0.01,
        delay_ns: 5_000,
        ..FabricConfig::default()
    }
}

#[test]
fn random_workloads_on_a_perfect_fabric() {
    for seed in 0..20 {
        assert_eq!(
            run_seed(seed, FabricConfig::default()),
            (true, true),
            "seed {seed}"
        );
    }
}

#[test]
fn random_workloads_under_faults() {
    for seed in 100..200 {
        let (a, b) = run_seed(seed, faulty(0.02));
        assert!(a && b, "seed {seed}: 2% loss must not exhaust 7 retries");
    }
}

#[test]
fn random_workloads_under_heavy_loss_complete_or_flush() {
    let mut ok = 0;
    for seed in 200..220 {
        // 20% loss: some QPs may exhaust their retries; `check` verifies either outcome.
        let (a, b) = run_seed(seed, faulty(0.2));
        ok += usize::from(a) + usize::from(b);
    }
    assert!(ok > 0, "at 20% loss some directions still complete");
}
