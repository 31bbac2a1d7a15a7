//! Many QPs on one device in polling mode, under loss, reordering and duplication: the rounds
//! of progress look only at the QPs they have reason to (`provider/src/driver/round.rs`: the
//! QPs a batch went to, a post's QP, those owed a transmit), and timers and API changes bring
//! full passes. Every work request of every QP must still complete exactly once, with the
//! right bytes.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, ConnectAttr, Context, Cq, MemoryRegion, Mtu, OpenOptions, Pd, Progress, QpCaps,
    QpInitAttr, QueuePair, RecvWr, SendFlags, SendOpcode, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 37, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 37, 2));
const QPS: usize = 6;
const MSGS: usize = 12;
/// Three packets at the path MTU of 1024.
const LEN: usize = 3000;

struct Side {
    _ctx: Context,
    _pd: Pd,
    cq: Cq,
    qps: Vec<QueuePair>,
    mr: MemoryRegion,
}

fn side(fabric: &Fabric, addr: IpAddr, seed: u64) -> Side {
    let opts = OpenOptions {
        progress: Progress::Polling,
        key_seed: seed,
    };
    let ctx = Context::open_on(Box::new(fabric.attach(addr).unwrap()), opts).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(4 * QPS * MSGS).unwrap();
    let caps = QpCaps {
        max_send_wr: MSGS as u32,
        max_recv_wr: MSGS as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qps = (0..QPS)
        .map(|_| pd.create_qp(&QpInitAttr::rc(&cq, caps)).unwrap())
        .collect();
    let mr = pd.reg_mr(QPS * MSGS * 4096, Access::LOCAL_WRITE).unwrap();
    Side {
        _ctx: ctx,
        _pd: pd,
        cq,
        qps,
        mr,
    }
}

/// The byte `k` of message `m` of QP `q`.
fn byte(q: usize, m: usize, k: usize) -> u8 {
    (q * 31 + m * 7 + k) as u8
}

#[test]
fn every_qp_completes_every_wr_once_under_faults() {
    for seed in 37..41 {
        run(seed);
    }
}

fn run(seed: u64) {
    let config = FabricConfig {
        loss: 0.03,
        duplicate: 0.02,
        reorder: 0.05,
        ..FabricConfig::default()
    };
    let fabric = Fabric::new(config, seed);
    let (a, b) = (side(&fabric, A, 1), side(&fabric, B, 2));
    for (s, dest, peer) in [(&a, B, &b), (&b, A, &a)] {
        for (qp, peer_qp) in s.qps.iter().zip(&peer.qps) {
            qp.connect(&ConnectAttr {
                dest,
                dest_qp_num: peer_qp.qp_num(),
                path_mtu: Mtu::Mtu1024,
                timeout: 8, // about 1 ms: lost packets come back quickly
                ..ConnectAttr::default()
            })
            .unwrap();
        }
    }
    let slot = |q: usize, m: usize| (q * MSGS + m) * 4096;
    for q in 0..QPS {
        for m in 0..MSGS {
            let data: Vec<u8> = (0..LEN).map(|k| byte(q, m, k)).collect();
            a.mr.write(slot(q, m), &data).unwrap();
            let recv = RecvWr {
                wr_id: (q * MSGS + m) as u64,
                sg_list: vec![b.mr.sge(slot(q, m), LEN as u32)],
            };
            b.qps[q].post_recv(&[recv]).map_err(|(_, e)| e).unwrap();
        }
    }
    // The sends go out interleaved over the QPs, as the rounds see them.
    for m in 0..MSGS {
        for q in 0..QPS {
            let w = SendWr {
                flags: SendFlags::SIGNALED,
                ..SendWr::new(
                    (q * MSGS + m) as u64,
                    SendOpcode::Send,
                    vec![a.mr.sge(slot(q, m), LEN as u32)],
                )
            };
            a.qps[q].post_send(&[w]).map_err(|(_, e)| e).unwrap();
        }
    }
    // One thread drives both devices (a 60 s guard against a hang, not a timing assertion).
    // (a receive, QPN, wr_id) -> completions seen.
    let mut got: HashMap<(bool, u32, u64), usize> = HashMap::new();
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.values().sum::<usize>() < 2 * QPS * MSGS {
        assert!(
            Instant::now() < deadline,
            "stuck after {} completions",
            got.len()
        );
        for s in [&a, &b] {
            let k = s.cq.poll(&mut wcs).unwrap();
            for w in &wcs[..k] {
                assert_eq!(w.status, WcStatus::Success, "{w:?}");
                let recv = w.opcode == WcOpcode::Recv;
                *got.entry((recv, w.qp_num, w.wr_id)).or_default() += 1;
            }
        }
    }
    for (q, (qa, qb)) in a.qps.iter().zip(&b.qps).enumerate() {
        for m in 0..MSGS {
            let id = (q * MSGS + m) as u64;
            assert_eq!(got.get(&(false, qa.qp_num(), id)), Some(&1));
            assert_eq!(got.get(&(true, qb.qp_num(), id)), Some(&1));
            let mut back = vec![0u8; LEN];
            b.mr.read(slot(q, m), &mut back).unwrap();
            assert!(
                back.iter().enumerate().all(|(k, &x)| x == byte(q, m, k)),
                "QP {q} message {m}"
            );
        }
    }
    // The faults did happen (the run is not a clean one by luck).
    assert!(fabric.stats().lost > 0, "seed {seed}: {:?}", fabric.stats());
}
