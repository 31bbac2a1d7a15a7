//! RC through a path whose delay varies per packet (jitter), as the soak's link with
//! `--delay 1 --jitter N` (`testbed/tests/soak.rs`), in virtual time. Jitter reorders
//! heavily, the requests and their responses alike: an ACK overtakes the READ response
//! before it, READ responses overtake each other. Go-back-N must recover from all of it, and
//! a QP fails only when its peer is gone for `retry_cnt` x the local ACK timeout.
//!
//! * One READ answered, reordered, after an outage that spent all but one retry.
//! * An ACK that makes progress and reaches past an unanswered READ (an implied NAK) after a
//!   timeout spent the retry budget: the progress restores it first.
//! * 16 QPs from A to B, each with 8 SEND / WRITE / READ / atomic work requests in flight, of
//!   1 byte to 16 KiB, through loss, duplication, reordering and a delay of 1 ms plus a
//!   uniform draw, with the link down for 300 ms halfway through: every work request
//!   completes successfully. (Each QP has a send window of its own here; the soak's share
//!   their device's, `rc/requester/window.rs`.)

mod common;

use std::time::Duration;

use common::wrs::{recv_wr, remote_of, send_wr, sge_of};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::transport::{FabricConfig, SplitMix64};
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::SendOpcode;
use softrnic_wire::opcode::Operation;

const QPS: usize = 16;
const WINDOW: usize = 8;
const MAX_LEN: usize = 16 << 10;
const MS: u64 = 1_000_000;

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// The soak's link: 1 % loss, 1 % duplication, 2 % reordering, 0.5 % corruption, 1 ms plus a
/// uniform `0..=jitter_ms`.
fn link(jitter_ms: u64) -> FabricConfig {
    FabricConfig {
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.02,
        corrupt: 0.005,
        delay_ns: MS,
        jitter_ns: jitter_ms * MS,
        ..FabricConfig::default()
    }
}

/// The outcome of a run: work requests completed, and the first that failed (QP index,
/// opcode, status, virtual ms), if any.
struct Outcome {
    completed: u64,
    failed: Option<(usize, SendOpcode, WcStatus, u64)>,
}

/// Runs the workload for `ms` virtual milliseconds of posting (then lets it drain) through
/// `link(jitter_ms)` with `seed`, the link down for `down_ms` from `ms / 2`.
fn run(seed: u64, jitter_ms: u64, ms: u64, down_ms: u64) -> Outcome {
    let c = Connect {
        max_rd_atomic: 16,
        ..Connect::default()
    };
    let mut p = Pair::new(link(jitter_ms), seed, c);
    for i in 1..QPS as u32 {
        p.add_qps(0x100 + i, None, 0x200 + i, None, c);
    }
    let qpns: Vec<u32> = p.a.qps().map(|q| q.qpn()).collect();
    let src = p.a.region(QPS * WINDOW * MAX_LEN, ALL);
    let sink = p.a.region(QPS * WINDOW * MAX_LEN, ALL);
    let target = p.b.region(QPS * WINDOW * MAX_LEN + QPS * 8, ALL);
    let recv = p.b.region(QPS * 2 * WINDOW * MAX_LEN, ALL);
    // Receives at B, two per slot, reposted as they complete.
    let bqpns: Vec<u32> = p.b.qps().map(|q| q.qpn()).collect();
    let post_recv = |b: &mut Node, qp: usize, k: u64| {
        let slot = (qp * 2 * WINDOW) as u64 + k % (2 * WINDOW) as u64;
        let wr = recv_wr(
            (qp as u64) << 32 | k,
            vec![sge_of(&recv, slot * MAX_LEN as u64, MAX_LEN as u32)],
        );
        b.qp_mut(bqpns[qp]).unwrap().post_recv(&wr).unwrap();
    };
    let mut recv_next = [0u64; QPS];
    for (qp, next) in recv_next.iter_mut().enumerate() {
        for _ in 0..2 * WINDOW {
            post_recv(&mut p.b, qp, *next);
            *next += 1;
        }
    }
    let mut rng = SplitMix64(seed ^ 0x717e);
    let mut wr_serial = 0u64;
    let mut post = |a: &mut Node, qp: usize, slot: usize, rng: &mut SplitMix64| {
        let bits = rng.below(17);
        let len = (1 + rng.below(1 << bits) as usize).min(MAX_LEN) as u32;
        let at = ((qp * WINDOW + slot) * MAX_LEN) as u64;
        let word = remote_of(&target, (QPS * WINDOW * MAX_LEN + qp * 8) as u64);
        let mut wr = match rng.below(6) {
            0 => send_wr(0, SendOpcode::Send, vec![sge_of(&src, at, len)], word),
            1 => send_wr(
                0,
                SendOpcode::RdmaWrite,
                vec![sge_of(&src, at, len)],
                remote_of(&target, at),
            ),
            2 => send_wr(
                0,
                SendOpcode::RdmaWriteWithImm,
                vec![sge_of(&src, at, len)],
                remote_of(&target, at),
            ),
            3 => send_wr(
                0,
                SendOpcode::RdmaRead,
                vec![sge_of(&sink, at, len)],
                remote_of(&target, at),
            ),
            4 => send_wr(
                0,
                SendOpcode::AtomicCmpAndSwp,
                vec![sge_of(&sink, at, 8)],
                word,
            ),
            _ => send_wr(
                0,
                SendOpcode::AtomicFetchAndAdd,
                vec![sge_of(&sink, at, 8)],
                word,
            ),
        };
        wr.compare_add = rng.next_u64() & 1;
        wr.swap = rng.next_u64();
        wr_serial += 1;
        wr.wr_id = (qp * WINDOW + slot) as u64 | wr_serial << 16;
        a.post_send_on(qpns[qp], &wr).unwrap();
    };
    for qp in 0..QPS {
        for slot in 0..WINDOW {
            post(&mut p.a, qp, slot, &mut rng);
        }
    }
    let down_at = ms / 2 * MS;
    let mut down = false;
    let mut out = Outcome {
        completed: 0,
        failed: None,
    };
    let mut outstanding = QPS * WINDOW;
    let mut sends = std::mem::take(&mut p.a.send_wcs);
    let mut recvs = std::mem::take(&mut p.b.recv_wcs);
    for _ in 0..50_000_000u64 {
        let now = p.fabric.now();
        // The link goes down for `down_ms`, and comes back.
        if !down && now >= down_at && now < down_at + down_ms * MS {
            down = true;
            p.fabric.set_config(FabricConfig {
                loss: 1.0,
                ..link(jitter_ms)
            });
        } else if down && now >= down_at + down_ms * MS {
            down = false;
            p.fabric.set_config(link(jitter_ms));
        }
        std::mem::swap(&mut sends, &mut p.a.send_wcs);
        for wc in sends.drain(..) {
            let (qp, slot) = (
                (wc.wr_id & 0xffff) as usize / WINDOW,
                wc.wr_id as usize % WINDOW,
            );
            if wc.status != WcStatus::Success {
                out.failed.get_or_insert((
                    qp,
                    match wc.opcode {
                        softrnic_provider::wc::WcOpcode::RdmaRead => SendOpcode::RdmaRead,
                        softrnic_provider::wc::WcOpcode::CompSwap => SendOpcode::AtomicCmpAndSwp,
                        softrnic_provider::wc::WcOpcode::FetchAdd => SendOpcode::AtomicFetchAndAdd,
                        softrnic_provider::wc::WcOpcode::RdmaWrite => SendOpcode::RdmaWrite,
                        _ => SendOpcode::Send,
                    },
                    wc.status,
                    now / MS,
                ));
                outstanding -= 1;
                continue;
            }
            out.completed += 1;
            if now < ms * MS && out.failed.is_none() {
                post(&mut p.a, qp, slot, &mut rng);
            } else {
                outstanding -= 1;
            }
        }
        std::mem::swap(&mut recvs, &mut p.b.recv_wcs);
        for wc in recvs.drain(..) {
            assert_eq!(wc.status, WcStatus::Success, "a receive at B");
            let qp = (wc.wr_id >> 32) as usize;
            post_recv(&mut p.b, qp, recv_next[qp]);
            recv_next[qp] += 1;
        }
        if outstanding == 0 {
            return out;
        }
        if p.step() {
            continue;
        }
        let next = [
            p.fabric
                .next_arrival()
                .map(|ns| p.base + Duration::from_nanos(ns)),
            p.a.poll_timeout(),
            p.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(t) = next else {
            panic!("seed {seed}: {outstanding} work requests outstanding, nothing to wait for");
        };
        let ns = t.duration_since(p.base).as_nanos() as u64;
        // Wake at the link's changes too.
        let edge = [down_at, down_at + down_ms * MS]
            .into_iter()
            .filter(|&e| e > now)
            .min()
            .unwrap_or(u64::MAX);
        p.fabric.advance_to(ns.min(edge).max(now + 1));
    }
    panic!("seed {seed}: not done");
}

/// The local ACK timeout of `Connect::default()`'s timeout 14: 4.096 µs x 2^14.
const TIMEOUT_NS: u64 = 4_096 * (1 << 14);

/// A READ of `len` bytes from B's region to A's (seeded fabric, `Connect::default()`), through
/// a link down from the start for `down_ms` and then `link(jitter_ms)` without loss: returns
/// A's send completions, whether A read B's bytes, and the READ responses that reached A.
fn read_after_an_outage(
    seed: u64,
    len: usize,
    down_ms: u64,
    jitter_ms: u64,
) -> (Vec<WcStatus>, bool, usize) {
    let up = FabricConfig {
        loss: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        corrupt: 0.0,
        ..link(jitter_ms)
    };
    let mut p = Pair::new(FabricConfig { loss: 1.0, ..up }, seed, Connect::default());
    let sink = p.a.region(len, ALL);
    let src = p.b.region(len, ALL);
    let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
    p.b.fill(&src, 0, &bytes);
    let wr = send_wr(
        1,
        SendOpcode::RdmaRead,
        vec![sge_of(&sink, 0, len as u32)],
        remote_of(&src, 0),
    );
    p.a.post_send_on(p.a.qp.qpn(), &wr).unwrap();
    p.run_until(1_000_000, |p| p.fabric.now() >= down_ms * MS);
    p.fabric.set_config(up);
    p.run_to_quiescence(1_000_000);
    let statuses = p.a.send_wcs.iter().map(|w| w.status).collect();
    let responses =
        p.a.seen
            .iter()
            .filter(|s| {
                s.opcode
                    .info()
                    .is_some_and(|i| i.operation == Operation::RdmaReadResponse)
            })
            .count();
    (statuses, p.a.read(&sink, 0, len) == bytes, responses)
}

#[test]
fn the_answer_to_the_last_retry_completes_the_read_though_jitter_reorders_it() {
    // The link is down for 450 ms: the READ request and its resends 1 to 6 (one local ACK
    // timeout apart, 67 ms, at 67 ... 403 ms) are lost. Resend 7, the last retry_cnt allows,
    // leaves at 470 ms on a link that is up again, and the responder answers it: 64 READ
    // responses, which a jitter of 2 ms reorders. The peer was gone for less than
    // retry_cnt x timeout (470 ms), so the READ completes. A response ahead of the expected
    // one goes back to resend (9.7.6.2.2: the READ asks for the rest), but that is the
    // responder answering, not a timeout: it must not take a retry that is not there.
    let down_ms = 450;
    assert!(down_ms * MS > 6 * TIMEOUT_NS && down_ms * MS < 7 * TIMEOUT_NS);
    for seed in 0..8 {
        let (statuses, same, _) = read_after_an_outage(seed, 64 << 10, down_ms, 2);
        assert_eq!(statuses, vec![WcStatus::Success], "seed {seed}");
        assert!(same, "seed {seed}: the READ brought B's bytes");
    }
}

#[test]
fn a_read_through_jitter_takes_its_responses_in_any_order() {
    // No loss, 2 ms of jitter: the 64 responses of a 64 KiB READ arrive in nearly any order.
    // Each lands at its place in the READ's buffer. Going back at every response ahead of
    // the expected one had the responder restart the READ each time: some 2000 responses
    // and 60 requests for one READ of 64 packets.
    for seed in 0..4 {
        let (statuses, same, responses) = read_after_an_outage(seed, 64 << 10, 0, 2);
        assert_eq!(statuses, vec![WcStatus::Success], "seed {seed}");
        assert!(same, "seed {seed}: the READ brought B's bytes");
        assert!(
            responses < 2 * 64,
            "seed {seed}: {responses} READ responses for 64"
        );
    }
}

#[test]
fn an_ack_that_makes_progress_past_an_unanswered_read_does_not_end_the_qp() {
    // retry_cnt 1. A WRITE, a READ and a SEND; the WRITE is lost, so the responder holds the
    // READ and the SEND behind it (`responder/reorder.rs`). The local ACK timer resends the
    // WRITE, taking the one retry. The responder runs all three and answers: ACK 100, the
    // READ response, ACK 102. On a jittery path ACK 102 arrives first (here the other two
    // are lost). It acknowledges the WRITE, progress that restores the retry budget, and
    // reaches past the READ, whose response it is not: an implied NAK, which resends the
    // READ. The budget it draws on is the restored one: the READ and the SEND complete.
    let c = Connect {
        retry_cnt: 1,
        ..Connect::default()
    };
    let mut p = Pair::new(FabricConfig::default(), 5, c);
    let a_mem = p.a.region(4096, ALL);
    let b_mem = p.b.region(4096, ALL);
    p.b.fill(&b_mem, 0, &[7; 64]);
    let recv = recv_wr(900, vec![sge_of(&b_mem, 1024, 1024)]);
    p.b.qp.post_recv(&recv).unwrap();
    let mut dropped_write = false;
    p.b.drop_if = Some(Box::new(move |pkt| {
        let first =
            pkt.repr.bth.opcode == softrnic_wire::Opcode::RC_RDMA_WRITE_ONLY && !dropped_write;
        dropped_write |= first;
        first
    }));
    let (mut acks, mut reads) = (0, 0);
    p.a.drop_if = Some(Box::new(move |pkt| {
        use softrnic_wire::Opcode;
        let op = pkt.repr.bth.opcode;
        if op == Opcode::RC_ACKNOWLEDGE {
            acks += 1;
            return acks == 1; // ACK 100
        }
        if op == Opcode::RC_RDMA_READ_RESPONSE_ONLY {
            reads += 1;
            return reads == 1;
        }
        false
    }));
    let qpn = p.a.qp.qpn();
    let wrs = [
        send_wr(
            1,
            SendOpcode::RdmaWrite,
            vec![sge_of(&a_mem, 0, 64)],
            remote_of(&b_mem, 2048),
        ),
        send_wr(
            2,
            SendOpcode::RdmaRead,
            vec![sge_of(&a_mem, 1024, 64)],
            remote_of(&b_mem, 0),
        ),
        send_wr(
            3,
            SendOpcode::Send,
            vec![sge_of(&a_mem, 0, 64)],
            Default::default(),
        ),
    ];
    for wr in &wrs {
        p.a.post_send_on(qpn, wr).unwrap();
    }
    p.run_to_quiescence(100_000);
    let got: Vec<_> = p.a.send_wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    assert_eq!(p.a.read(&a_mem, 1024, 64), vec![7; 64]);
}

#[test]
fn the_round_trip_is_timed_on_a_packet_that_asks_for_its_ack() {
    // A round trip of 2 ms. An unsignaled WRITE asks for no ACK; the signaled one posted 50
    // ms later asks, and its ACK covers both. Timing the first (the first packet sent) took
    // 52 ms for the round trip, and the early resend after a loss waited srtt + 4 rttvar,
    // past the local ACK timeout: every loss cost a whole timeout and a retry. Timed on the
    // packet that asks, the round trip is 2 ms and the lost WRITE after them goes again
    // within a few, uncounted.
    let config = FabricConfig {
        delay_ns: MS,
        ..FabricConfig::default()
    };
    let mut p = Pair::new(config, 9, Connect::default());
    let a_mem = p.a.region(4096, ALL);
    let b_mem = p.b.region(4096, ALL);
    let qpn = p.a.qp.qpn();
    let write = |wr_id, signaled: bool| {
        let mut wr = send_wr(
            wr_id,
            SendOpcode::RdmaWrite,
            vec![sge_of(&a_mem, 0, 64)],
            remote_of(&b_mem, 0),
        );
        if !signaled {
            wr.flags = softrnic_provider::wr::SendFlags::empty();
        }
        wr
    };
    p.a.post_send_on(qpn, &write(1, false)).unwrap();
    p.run_until(100_000, |p| p.b.seen.len() == 1);
    p.fabric.advance_to(50 * MS);
    p.a.post_send_on(qpn, &write(2, true)).unwrap();
    p.run_to_quiescence(100_000);
    assert_eq!(p.a.send_wcs.len(), 1, "the signaled WRITE completed");
    // The next WRITE's first copy is lost.
    let mut writes = 0;
    p.b.drop_if = Some(Box::new(move |pkt| {
        if pkt.repr.bth.opcode != softrnic_wire::Opcode::RC_RDMA_WRITE_ONLY {
            return false;
        }
        writes += 1;
        writes == 1
    }));
    p.a.post_send_on(qpn, &write(3, true)).unwrap();
    p.run_to_quiescence(100_000);
    assert_eq!(p.a.send_wcs.len(), 2, "the third WRITE completed");
    let at: Vec<u64> =
        p.b.seen_of(softrnic_wire::Opcode::RC_RDMA_WRITE_ONLY)
            .map(|s| s.at)
            .collect();
    let resent_after = Duration::from_nanos(at[3] - at[2]);
    assert!(
        resent_after < Duration::from_millis(15),
        "the lost WRITE went again after {resent_after:?}"
    );
    assert_eq!(
        p.a.qp.counters().completer_retry_err,
        0,
        "an early resend takes no retry"
    );
}

#[test]
fn sixteen_qps_survive_a_jittery_lossy_link_going_down_for_300_ms() {
    let mut failures = Vec::new();
    for seed in 0..2 {
        let out = run(seed, 2, 800, 300);
        eprintln!(
            "seed {seed}: {} completed, failed: {:?}",
            out.completed, out.failed
        );
        if let Some(f) = out.failed {
            failures.push((seed, f));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
