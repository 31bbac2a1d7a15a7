//! ACK coalescing (`rc/ack_coalesce.rs`) between two engines on the in-memory fabric: a
//! ping-pong that does not wait for its send completions gets one ACK per two messages once
//! the responder has probed, and every WR still completes exactly once; a requester that waits
//! for each send completion is held up only by the probes, which come at ever longer
//! intervals.

mod common;

use std::time::Duration;

use common::wrs::{recv_wr, send_wr, sge_of};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::{RemoteAddr, SendOpcode, SendWr, Sge};
use softrnic_wire::Opcode;

/// 2 µs each way: a round trip well inside an ACK's 50 µs hold.
const DELAY_NS: u64 = 2_000;

/// Longer than an ACK's hold.
const HOLD_END: Duration = Duration::from_micros(60);

fn signaled_send(wr_id: u64, sge: Sge) -> SendWr {
    send_wr(wr_id, SendOpcode::Send, vec![sge], RemoteAddr::default())
}

/// A pair 2 µs apart, each side with `n` receives of 64 bytes posted; each side's source.
fn ping_pong_pair(n: u64) -> (Pair, Sge, Sge) {
    let config = FabricConfig {
        delay_ns: DELAY_NS,
        ..FabricConfig::default()
    };
    let mut p = Pair::new(config, 7, Connect::default());
    let mut srcs = Vec::new();
    for node in [&mut p.a, &mut p.b] {
        let mem = node.region(8192, Access::LOCAL_WRITE);
        for i in 0..n {
            node.qp
                .post_recv(&recv_wr(i, vec![sge_of(&mem, 4096, 64)]))
                .unwrap();
        }
        srcs.push(sge_of(&mem, 0, 64));
    }
    (p, srcs[0], srcs[1])
}

/// `rounds` round trips of A's SEND and B's answer, each side posting as soon as the other's
/// message arrives (never waiting for its send completions), then quiescence.
fn ping_pong(p: &mut Pair, rounds: u64, a_src: Sge, b_src: Sge) {
    for i in 0..rounds {
        p.a.qp
            .post_send(&signaled_send(i, a_src), &p.a.mrs)
            .unwrap();
        p.run_until(1000, |p| p.b.recv_wcs.len() as u64 > i);
        p.b.qp
            .post_send(&signaled_send(i, b_src), &p.b.mrs)
            .unwrap();
        p.run_until(1000, |p| p.a.recv_wcs.len() as u64 > i);
    }
    p.run_to_quiescence(10_000);
}

/// The ACKs (plain, syndrome ACK) `node` was handed.
fn acks_seen(node: &Node) -> usize {
    node.seen_of(Opcode::RC_ACKNOWLEDGE).count()
}

#[test]
fn a_ping_pong_that_does_not_wait_for_send_completions_gets_half_the_acks() {
    const ROUNDS: u64 = 200;
    let (mut p, a_src, b_src) = ping_pong_pair(ROUNDS);
    ping_pong(&mut p, ROUNDS, a_src, b_src);
    // Every WR completed once, successfully, in order.
    for wcs in [&p.a.send_wcs, &p.b.send_wcs, &p.a.recv_wcs, &p.b.recv_wcs] {
        let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, (0..ROUNDS).collect::<Vec<_>>());
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    }
    // The first 16 ACKs each way leave at once; then the probe finds the peer going on, and
    // an ACK covers two messages (the last one leaves at the end of its hold).
    for node in [&p.a, &p.b] {
        let acks = acks_seen(node);
        let expected = 16 + (ROUNDS as usize - 16).div_ceil(2);
        assert!(
            (expected - 1..=expected + 1).contains(&acks),
            "{acks} ACKs for {ROUNDS} messages, expected about {expected}"
        );
    }
    assert!(p.a.seen.iter().chain(&p.b.seen).all(|s| !s.dropped));
}

#[test]
fn a_held_ack_waits_for_no_time_once_released_as_before_a_destroy() {
    const ROUNDS: u64 = 40;
    let (mut p, a_src, b_src) = ping_pong_pair(ROUNDS + 1);
    ping_pong(&mut p, ROUNDS, a_src, b_src);
    // Coalescing by now (B's last ACK left covering two messages, so no hold of B's ended
    // unanswered): the ACK of A's next SEND is held, with the hold as B's deadline.
    p.a.qp
        .post_send(&signaled_send(ROUNDS, a_src), &p.a.mrs)
        .unwrap();
    p.run_until(1000, |p| p.b.recv_wcs.len() as u64 > ROUNDS);
    let now = p.now();
    assert!(p.b.qp.poll_transmit(now, &p.b.mrs).is_none());
    assert!(p.b.qp.poll_timeout().is_some_and(|t| t > now));
    // Released (what the driver does for every QP before one is destroyed): it goes now.
    p.b.qp.release_acks();
    let ack = p.b.qp.poll_transmit(now, &p.b.mrs).expect("the ACK");
    assert_eq!(ack.roce.bth.opcode, Opcode::RC_ACKNOWLEDGE);
    assert!(p.b.qp.poll_timeout().is_none_or(|t| t > now + HOLD_END));
}

#[test]
fn a_requester_that_waits_for_each_ack_is_held_up_only_by_ever_rarer_probes() {
    const MESSAGES: u64 = 300;
    let (mut p, a_src, _) = ping_pong_pair(MESSAGES);
    let mut slow = Vec::new();
    for i in 0..MESSAGES {
        let t0 = p.elapsed();
        p.a.qp
            .post_send(&signaled_send(i, a_src), &p.a.mrs)
            .unwrap();
        p.run_until(1000, |p| p.a.send_wcs.len() as u64 > i);
        if p.elapsed() - t0 > Duration::from_micros(40) {
            slow.push(i);
        }
    }
    assert!(p.a.send_wcs.iter().all(|w| w.status == WcStatus::Success));
    // Probes after 16, then 32, 64 and 128 immediate ACKs: each time the next request comes
    // right after the held ACK left, so the peer was waiting.
    assert_eq!(slow, [16, 49, 114, 243]);
    assert_eq!(acks_seen(&p.a), MESSAGES as usize);
}
