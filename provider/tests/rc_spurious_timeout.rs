//! An early resend (`rc/requester/rto.rs`) fired on a peer that was only slow, and one that
//! found a real loss, over the in-memory fabric in virtual time.
//!
//! The early interval is a few round trips: a receiver whose thread pauses longer (a
//! scheduler's time slice, on a machine with as many busy threads as cores) lets it run out
//! while everything sent is waiting, unread, at that receiver. The probe (the oldest
//! unacknowledged packet, resent alone) then reaches the peer after everything sent before
//! it, and progress past its PSN shows the timeout was spurious (RFC 5682's F-RTO): the rest
//! is not sent again. A real loss behind the probe is found by the responder, which holds
//! what came after the gap and answers the probe with the sequence NAK it had deferred.

mod common;

use common::wrs::{bytes, remote_of, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::{RemoteAddr, SendOpcode, Sge};
use softrnic_wire::aeth::{NakCode, Syndrome};
use softrnic_wire::Psn;

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// The fabric's one-way delay while the round trip is measured: 20 µs.
const DELAY_NS: u64 = 20_000;

fn post_write(n: &mut Node, wr_id: u64, src: Sge, dst: RemoteAddr) {
    let wr = send_wr(wr_id, SendOpcode::RdmaWrite, vec![src], dst);
    n.qp.post_send(&wr, &n.mrs).unwrap();
}

/// A pair whose requester (A) measured a round trip of 40 µs with a first WRITE of 64 bytes,
/// `len` bytes registered on each side (path MTU 1024), A's filled.
fn measured_pair(seed: u64, len: usize) -> (Pair, Region, Region, Vec<u8>) {
    let link = FabricConfig {
        delay_ns: DELAY_NS,
        ..FabricConfig::default()
    };
    let mut p = Pair::new(link, seed, Connect::default());
    let src = p.a.region(len, ALL);
    let data = bytes(len, 7);
    p.a.fill(&src, 0, &data);
    let dst = p.b.region(len, ALL);
    post_write(&mut p.a, 1, sge_of(&src, 0, 64), remote_of(&dst, 0));
    p.run_until(10_000, |p| !p.a.send_wcs.is_empty());
    assert_eq!(wc_statuses(&p.a.send_wcs), [(1, WcStatus::Success)]);
    (p, src, dst, data)
}

/// A peer 5 ms away each way (a receiver that does not run for that long), two WRITEs half
/// a millisecond apart: the early timer fires at about 1 ms and probes; the first WRITE's ACK
/// comes at 10 ms, the second's half a millisecond later. In between, the requester knows
/// the timeout was spurious and sends nothing: every packet reaches the responder once,
/// the probes aside. (Going back to the first unacknowledged PSN at the first ACK resent
/// the whole second WRITE, 384 duplicates.)
#[test]
fn a_timeout_on_a_peer_that_was_only_slow_resends_no_more_than_its_probes() {
    const FIRST: usize = 128 << 10;
    const SECOND: usize = 384 << 10;
    let (mut p, src, dst, data) = measured_pair(61, FIRST + SECOND);
    p.fabric.set_config(FabricConfig {
        delay_ns: 5_000_000,
        ..FabricConfig::default()
    });
    let wrs = [(2, 0, FIRST), (3, FIRST, SECOND)];
    for (i, &(wr_id, at, len)) in wrs.iter().enumerate() {
        if i > 0 {
            p.fabric.advance_to(p.fabric.now() + 500_000);
        }
        post_write(
            &mut p.a,
            wr_id,
            sge_of(&src, at as u64, len as u32),
            remote_of(&dst, at as u64),
        );
        p.step();
    }
    p.run_until(100_000, |p| p.a.send_wcs.len() == 3);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    assert_eq!(p.b.read(&dst, 0, FIRST + SECOND), data);
    // Whatever else was sent arrives.
    p.run_to_quiescence(100_000);
    let a = p.a.qp.counters();
    let b = p.b.qp.counters();
    assert!(a.timeout_resends >= 1, "the early timer fired: {a:?}");
    assert_eq!(a.completer_retry_err, 0, "early resends cost no retry");
    // A probe whose ACK came before it left (in the same round) is not sent.
    assert!(
        (1..=a.timeout_resends).contains(&b.duplicate_request),
        "only probes came twice: {} duplicates, {} early resends",
        b.duplicate_request,
        a.timeout_resends
    );
}

/// A packet lost with two behind it (a gap too short for the responder to call a loss: it
/// may be reordering) and nothing after them: the early timer probes with the oldest
/// unacknowledged packet, which the responder has; it answers with the NAK for the gap it
/// holds packets behind, and the requester resends the lost packet alone, about a round
/// trip after the probe, not an early interval later.
#[test]
fn a_probe_behind_a_held_gap_is_naked_at_the_gap() {
    const PACKETS: u32 = 8;
    let len = PACKETS as usize * 1024;
    let (mut p, src, dst, data) = measured_pair(62, len);
    let first = Psn::new(Connect::default().a_psn + 1); // after the measuring WRITE
    let lost = first.add(5);
    let mut dropped = false;
    p.b.drop_if = Some(Box::new(move |pkt| {
        let drop = pkt.repr.bth.psn == lost && !dropped;
        dropped |= drop;
        drop
    }));
    let start = p.elapsed();
    post_write(&mut p.a, 2, sge_of(&src, 0, len as u32), remote_of(&dst, 0));
    p.run_until(100_000, |p| p.a.send_wcs.len() == 2);
    assert_eq!(wc_statuses(&p.a.send_wcs)[1], (2, WcStatus::Success));
    assert_eq!(p.b.read(&dst, 0, len), data);
    let naks: Vec<_> =
        p.a.seen
            .iter()
            .filter_map(|s| match s.syndrome {
                Some(Syndrome::Nak(code)) => Some((s.psn, code)),
                _ => None,
            })
            .collect();
    assert_eq!(naks, [(lost, NakCode::PsnSequenceError)], "the gap NAKed");
    let a = p.a.qp.counters();
    assert_eq!(a.timeout_resends, 1, "one early resend: {a:?}");
    // The probe left at the early interval (at least MIN_RTO); the resend a round trip later.
    let took = p.elapsed() - start;
    let rto = softrnic_provider::rc::MIN_RTO;
    assert!(
        took < rto + rto / 2,
        "recovered after {took:?}, more than a round trip after the probe"
    );
    assert_eq!(
        p.b.qp.counters().duplicate_request,
        1,
        "the probe came twice, nothing else"
    );
}
