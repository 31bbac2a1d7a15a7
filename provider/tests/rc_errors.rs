//! Error scenarios of the RC engine over the in-memory fabric, in virtual time: RNR NAKs and
//! their retry budget, the local ACK timeout and `retry_cnt`, R_Key violations of RDMA WRITE,
//! RDMA READ and atomics, local protection and length errors, duplicate READs and atomics,
//! and the flush of both queues in ERR.
//!
//! Every test checks the statuses and wr_ids of the completions on both sides, the QP states,
//! and the memory: what must be written, byte for byte, and what must not be touched.

mod common;

use std::time::Duration;

use common::wrs::{bytes, recv_wr, remote_of, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::mr::{Access, PdHandle};
use softrnic_provider::qp::{Qp, QpAttr};
use softrnic_provider::qp_state::{AttrMask, Mtu, QpState};
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcOpcode, WcStatus};
use softrnic_provider::wr::{RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};
use softrnic_wire::aeth::{NakCode, RnrTimer, Syndrome};
use softrnic_wire::{Opcode, Psn};

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// Another protection domain than the QPs' ([`PD`]).
const OTHER_PD: PdHandle = PdHandle(2);

/// How many packets with `opcode` a node's QP was handed (dropped ones excluded).
fn count(n: &Node, opcode: Opcode) -> usize {
    n.seen_of(opcode).filter(|s| !s.dropped).count()
}

/// The PSNs of the packets with `opcode` that reached the node (dropped ones included).
fn psns(n: &Node, opcode: Opcode) -> Vec<Psn> {
    n.seen_of(opcode).map(|s| s.psn).collect()
}

fn naks(n: &Node) -> Vec<Syndrome> {
    n.seen
        .iter()
        .filter_map(|s| s.syndrome)
        .filter(|s| !matches!(s, Syndrome::Ack(_)))
        .collect()
}

fn rnr_wait(code: u8) -> Duration {
    Duration::from_micros(u64::from(RnrTimer(code).micros()))
}

fn ack_timeout(timeout: u8) -> Duration {
    Duration::from_nanos(4096 << timeout)
}

/// `length` bytes of `r` from `offset`, with a wrong key byte in the L_Key.
fn bad_lkey_sge(r: &Region, offset: u64, length: u32) -> Sge {
    Sge {
        lkey: r.keys.lkey ^ 1,
        ..sge_of(r, offset, length)
    }
}

/// `(wr_id, status)` for each of `wr_ids`, as [`wc_statuses`] gives them.
fn each(wr_ids: impl IntoIterator<Item = u64>, status: WcStatus) -> Vec<(u64, WcStatus)> {
    wr_ids.into_iter().map(|i| (i, status)).collect()
}

/// A pair connected with `c` over a perfect network (no loss, duplicates or reordering).
fn pair(seed: u64, c: Connect) -> Pair {
    Pair::new(FabricConfig::default(), seed, c)
}

/// Moves the QP to `state` (ibv_modify_qp with the state alone).
fn set_state(qp: &mut Qp, state: QpState) {
    let attr = QpAttr {
        qp_state: state,
        ..QpAttr::default()
    };
    qp.modify(&attr, AttrMask::STATE, &LIMITS).unwrap();
}

/// Asserts the states of A's and of B's QP.
#[track_caller]
fn assert_states(p: &Pair, a: QpState, b: QpState) {
    assert_eq!(p.a.qp.state(), a, "A's QP");
    assert_eq!(p.b.qp.state(), b, "B's QP");
}

/// Shorthands on a node: a region filled with data, and posts of one signaled WR with one
/// SGE (each panics if the post fails).
trait NodeExt {
    /// A region of `len` bytes with `access`, filled with `bytes(len, seed)`, returned too.
    fn filled_with(&mut self, len: usize, access: Access, seed: u8) -> (Region, Vec<u8>);
    /// Posts `wr` on the node's QP.
    fn post_wr(&mut self, wr: &SendWr);
    /// Posts a receive WR of the bytes `sge`.
    fn post_recv(&mut self, wr_id: u64, sge: Sge);

    /// A region of `len` bytes with every right, filled with `bytes(len, seed)`, returned too.
    fn filled(&mut self, len: usize, seed: u8) -> (Region, Vec<u8>) {
        self.filled_with(len, ALL, seed)
    }
    /// Posts `opcode` of the bytes `local` to or from `remote`.
    fn post(&mut self, wr_id: u64, opcode: SendOpcode, local: Sge, remote: RemoteAddr) {
        self.post_wr(&send_wr(wr_id, opcode, vec![local], remote));
    }
    /// Posts a SEND of the bytes `src` (a SEND names no remote address).
    fn post_send(&mut self, wr_id: u64, src: Sge) {
        self.post(wr_id, SendOpcode::Send, src, RemoteAddr::default());
    }
    /// Posts an RDMA WRITE of the bytes `src` to `dst`.
    fn post_write(&mut self, wr_id: u64, src: Sge, dst: RemoteAddr) {
        self.post(wr_id, SendOpcode::RdmaWrite, src, dst);
    }
    /// Posts an RDMA READ of `src` into the bytes `sink`.
    fn post_read(&mut self, wr_id: u64, sink: Sge, src: RemoteAddr) {
        self.post(wr_id, SendOpcode::RdmaRead, sink, src);
    }
    /// Posts a FETCH_ADD of `add` to the `word`, its original value into `sink`.
    fn post_fetch_add(&mut self, wr_id: u64, sink: Sge, word: RemoteAddr, add: u64) {
        let mut wr = send_wr(wr_id, SendOpcode::AtomicFetchAndAdd, vec![sink], word);
        wr.compare_add = add;
        self.post_wr(&wr);
    }
    /// Posts a CMP_SWAP of the `word` (`compare` for `swap`), its original value into `sink`.
    fn post_cmp_swap(&mut self, wr_id: u64, sink: Sge, word: RemoteAddr, compare: u64, swap: u64) {
        let mut wr = send_wr(wr_id, SendOpcode::AtomicCmpAndSwp, vec![sink], word);
        (wr.compare_add, wr.swap) = (compare, swap);
        self.post_wr(&wr);
    }
}

impl NodeExt for Node {
    fn filled_with(&mut self, len: usize, access: Access, seed: u8) -> (Region, Vec<u8>) {
        let r = self.region(len, access);
        let data = bytes(len, seed);
        self.fill(&r, 0, &data);
        (r, data)
    }

    fn post_wr(&mut self, wr: &SendWr) {
        self.qp.post_send(wr, &self.mrs).unwrap();
    }

    fn post_recv(&mut self, wr_id: u64, sge: Sge) {
        self.qp.post_recv(&recv_wr(wr_id, vec![sge])).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// RNR
// ---------------------------------------------------------------------------------------

#[test]
fn rnr_nak_then_the_send_succeeds_once_a_receive_is_posted() {
    const TIMER: u8 = 14; // 1.28 ms
    let c = Connect {
        min_rnr_timer: TIMER,
        rnr_retry: 7,
        ..Connect::default()
    };
    let mut p = pair(10, c);
    let a_mem = p.a.region(8192, ALL);
    let b_mem = p.b.region(8192, ALL);
    let data = bytes(3000, 5); // three packets at MTU 1024
    p.a.fill(&a_mem, 0, &data);
    let untouched = bytes(8192, 77);
    p.b.fill(&b_mem, 0, &untouched);
    p.a.post_send(1, sge_of(&a_mem, 0, 3000));

    // The SEND arrives at a receive queue with nothing posted: RNR NAK with B's timer.
    p.run_until(1000, |p| !naks(&p.a).is_empty());
    assert_eq!(
        naks(&p.a),
        vec![Syndrome::RnrNak(RnrTimer(TIMER))],
        "an RNR NAK with min_rnr_timer"
    );
    let nak = p.a.seen.iter().find(|s| s.syndrome.is_some()).unwrap();
    assert_eq!(
        nak.psn,
        Psn::new(c.a_psn),
        "the NAK names the SEND's first PSN"
    );
    let first_nak_at = nak.at;

    // Several RNR rounds while the receiver stays unready: nothing completes, and the
    // requester waits the RNR timer before every resend.
    let wait = rnr_wait(TIMER).as_nanos() as u64;
    p.run_until(100_000, |p| p.fabric.now() >= first_nak_at + 5 * wait);
    assert!(p.a.send_wcs.is_empty() && p.b.recv_wcs.is_empty());
    assert_eq!(p.a.qp.send_queue_len(), 1);
    assert_eq!(p.a.qp.state(), QpState::Rts);
    let firsts: Vec<u64> = p.b.seen_of(Opcode::RC_SEND_FIRST).map(|s| s.at).collect();
    assert!(firsts.len() >= 5, "resent after every RNR NAK: {firsts:?}");
    for pair in firsts.windows(2) {
        assert!(
            pair[1] - pair[0] >= wait,
            "a resend came before the RNR timer ran out: {firsts:?}"
        );
    }
    assert_eq!(
        naks(&p.a).len(),
        firsts.len(),
        "one RNR NAK per try (the MIDDLE/LAST behind a NAKed FIRST are dropped silently)"
    );
    assert!(naks(&p.a)
        .iter()
        .all(|s| *s == Syndrome::RnrNak(RnrTimer(TIMER))));
    assert_eq!(p.b.read(&b_mem, 0, 8192), untouched, "nothing written yet");

    // The receiver becomes ready; the next resend succeeds.
    p.b.post_recv(900, sge_of(&b_mem, 1000, 4000));
    let posted_at = p.fabric.now();
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(p.a.send_wcs[0].byte_len, 3000);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(900, WcStatus::Success)]);
    assert_eq!(p.b.recv_wcs[0].byte_len, 3000);
    assert_eq!(p.b.read(&b_mem, 1000, 3000), data);
    assert_eq!(p.b.read(&b_mem, 0, 1000), untouched[..1000]);
    assert_eq!(p.b.read(&b_mem, 4000, 4192), untouched[4000..]);
    let all_firsts: Vec<u64> = p.b.seen_of(Opcode::RC_SEND_FIRST).map(|s| s.at).collect();
    assert_eq!(
        all_firsts.len(),
        firsts.len() + 1,
        "one more try, the good one"
    );
    let last = all_firsts[firsts.len()];
    assert!(
        last >= posted_at && last - firsts[firsts.len() - 1] >= wait,
        "the good try also waited the RNR timer"
    );
    assert_states(&p, QpState::Rts, QpState::Rts);
    assert_eq!(count(&p.b, Opcode::RC_SEND_LAST), firsts.len() + 1);
}

#[test]
fn rnr_retry_exhausted_completes_with_rnr_retry_exc_err() {
    const TIMER: u8 = 5; // 60 us
    for rnr_retry in [0u8, 2, 6] {
        let c = Connect {
            min_rnr_timer: TIMER,
            rnr_retry,
            ..Connect::default()
        };
        let mut p = pair(11, c);
        let a_mem = p.a.region(4096, ALL);
        let (b_mem, untouched) = p.b.filled(4096, 3);
        p.a.post_send(1, sge_of(&a_mem, 0, 100));
        // Behind the SEND: a WRITE that must never execute (its PSN is never the expected
        // one at the receiver), and another SEND.
        p.a.post_write(2, sge_of(&a_mem, 0, 64), remote_of(&b_mem, 0));
        p.a.post_send(3, sge_of(&a_mem, 0, 10));
        p.run_to_quiescence(10_000);

        let ctx = format!("rnr_retry {rnr_retry}");
        assert_eq!(
            wc_statuses(&p.a.send_wcs),
            vec![
                (1, WcStatus::RnrRetryExcErr),
                (2, WcStatus::WrFlushErr),
                (3, WcStatus::WrFlushErr)
            ],
            "{ctx}"
        );
        assert_eq!(p.a.send_wcs[0].opcode, WcOpcode::Send, "{ctx}");
        assert_eq!(p.a.qp.state(), QpState::Err, "{ctx}");
        let tries = usize::from(rnr_retry) + 1;
        assert_eq!(
            count(&p.b, Opcode::RC_SEND_ONLY),
            2 * tries,
            "{ctx}: both SENDs sent on each of the {tries} tries"
        );
        assert_eq!(
            naks(&p.a),
            vec![Syndrome::RnrNak(RnrTimer(TIMER)); tries],
            "{ctx}"
        );
        // Counted as rxe counts them: each RNR NAK on both sides, the exhaustion once.
        let (ca, cb) = (p.a.qp.counters(), p.b.qp.counters());
        let tries = tries as u64;
        assert_eq!((cb.send_rnr_err, ca.rcvd_rnr_err), (tries, tries), "{ctx}");
        assert_eq!(ca.retry_rnr_exceeded_err, 1, "{ctx}");
        assert_eq!(
            (ca.completer_retry_err, ca.retry_exceeded_err),
            (0, 0),
            "{ctx}"
        );
        // The three requests on each try, an RNR NAK for each try.
        assert_eq!(ca.sent_pkts, 3 * tries, "{ctx}");
        assert_eq!((cb.rcvd_pkts, cb.sent_pkts), (3 * tries, tries), "{ctx}");
        assert_eq!(ca.rcvd_pkts, tries, "{ctx}");
        assert!(
            p.elapsed() >= rnr_wait(TIMER) * u32::from(rnr_retry),
            "{ctx}: each retry waited the RNR timer ({:?})",
            p.elapsed()
        );
        // RNR is no error for the responder.
        assert_eq!(p.b.qp.state(), QpState::Rts, "{ctx}");
        assert!(p.b.recv_wcs.is_empty(), "{ctx}");
        assert_eq!(p.b.read(&b_mem, 0, 4096), untouched, "{ctx}");
        // Posting in ERR flushes at once.
        p.a.post_send(4, sge_of(&a_mem, 0, 1));
        p.run_to_quiescence(100);
        assert_eq!(
            wc_statuses(&p.a.send_wcs[3..]),
            vec![(4, WcStatus::WrFlushErr)],
            "{ctx}"
        );
    }
}

#[test]
fn rnr_retry_7_retries_for_ever() {
    const TIMER: u8 = 14; // 1.28 ms
    let c = Connect {
        min_rnr_timer: TIMER,
        rnr_retry: 7,
        timeout: 10, // a local ACK timeout far below the run: it must not end the retries
        retry_cnt: 1,
        ..Connect::default()
    };
    let mut p = pair(12, c);
    let a_mem = p.a.region(4096, ALL);
    let b_mem = p.b.region(4096, ALL);
    let data = bytes(200, 9);
    p.a.fill(&a_mem, 0, &data);
    p.a.post_send(1, sge_of(&a_mem, 0, 200));
    let long = Duration::from_secs(2);
    p.run_until(1_000_000, |p| p.elapsed() >= long);
    assert!(p.elapsed() >= long, "the requester kept a timer running");
    assert!(p.a.send_wcs.is_empty(), "{:?}", p.a.send_wcs);
    assert_eq!(p.a.qp.send_queue_len(), 1);
    assert_eq!(p.a.qp.state(), QpState::Rts);
    let tries = count(&p.b, Opcode::RC_SEND_ONLY);
    assert!(
        tries as u128 >= long.as_nanos() / rnr_wait(TIMER).as_nanos() / 2,
        "only {tries} tries in {long:?}"
    );
    assert_eq!(naks(&p.a).len(), tries);

    p.b.post_recv(900, sge_of(&b_mem, 0, 4096));
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(900, WcStatus::Success)]);
    assert_eq!(p.b.read(&b_mem, 0, 200), data);
}

// ---------------------------------------------------------------------------------------
// Local ACK timeout
// ---------------------------------------------------------------------------------------

/// How the peer disappears.
#[derive(Debug, Clone, Copy)]
enum Gone {
    /// Every packet is lost.
    Loss,
    /// The peer QP is in ERR: it drops requests.
    PeerErr,
    /// The peer QP is in RESET.
    PeerReset,
}

fn peer_gone(gone: Gone, retry_cnt: u8) {
    const TIMEOUT: u8 = 10; // 4.19 ms
    let c = Connect {
        timeout: TIMEOUT,
        retry_cnt,
        ..Connect::default()
    };
    let ctx = format!("{gone:?}, retry_cnt {retry_cnt}");
    let mut p = pair(13, c);
    let a_mem = p.a.region(4096, ALL);
    let (b_mem, untouched) = p.b.filled(4096, 1);
    p.b.post_recv(900, sge_of(&b_mem, 0, 4096));
    match gone {
        Gone::Loss => p.fabric.set_config(FabricConfig {
            loss: 1.0,
            ..FabricConfig::default()
        }),
        Gone::PeerErr => set_state(&mut p.b.qp, QpState::Err),
        Gone::PeerReset => set_state(&mut p.b.qp, QpState::Reset),
    }
    let start = p.elapsed();
    p.a.post_send(1, sge_of(&a_mem, 0, 100));
    p.a.post_write(2, sge_of(&a_mem, 0, 100), remote_of(&b_mem, 0));
    p.run_until(100_000, |p| !p.a.send_wcs.is_empty());
    let took = p.elapsed() - start;
    p.run_to_quiescence(1000);

    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)],
        "{ctx}"
    );
    assert_eq!(p.a.qp.state(), QpState::Err, "{ctx}");
    // The first try and `retry_cnt` retries, each after a full local ACK timeout.
    let t = ack_timeout(TIMEOUT);
    let tries = u32::from(retry_cnt) + 1;
    assert!(
        took >= t * tries && took < t * (tries + 1),
        "{ctx}: failed after {took:?}, expected {tries} x {t:?}"
    );
    let c = p.a.qp.counters();
    let retries = u64::from(retry_cnt);
    assert_eq!(
        (
            c.completer_retry_err,
            c.timeout_resends,
            c.retry_exceeded_err
        ),
        (retries, retries, 1),
        "{ctx}: each retry a timeout's, then the exhaustion"
    );
    assert_eq!(c.sent_pkts, p.fabric.stats().sent, "{ctx}");
    let sent = p.fabric.stats().sent;
    assert_eq!(
        sent,
        u64::from(tries) + 1,
        "{ctx}: both requests, then the first again on each retry (the probe whose ACK \
         would say how far the peer got), nothing else"
    );
    let b_recvs = match gone {
        Gone::Loss => {
            assert_eq!(p.fabric.stats().lost, sent, "{ctx}");
            assert_eq!(p.b.qp.state(), QpState::Rts, "{ctx}");
            vec![]
        }
        Gone::PeerErr => vec![(900, WcStatus::WrFlushErr)],
        Gone::PeerReset => vec![], // RESET discards the queues without completions
    };
    assert_eq!(wc_statuses(&p.b.recv_wcs), b_recvs, "{ctx}");
    assert!(p.a.seen.is_empty(), "{ctx}: no answer ever came");
    assert_eq!(p.b.read(&b_mem, 0, 4096), untouched, "{ctx}");
}

#[test]
fn ack_timeout_exhausts_retry_cnt_when_the_peer_is_gone() {
    for retry_cnt in [0, 1, 3, 6] {
        peer_gone(Gone::Loss, retry_cnt);
    }
    peer_gone(Gone::PeerErr, 2);
    peer_gone(Gone::PeerReset, 2);
}

#[test]
fn retry_cnt_7_means_7_retries_not_infinite() {
    // IBTA: retry_cnt is a plain count; kernel rxe treats 7 as infinite, softrnic does not.
    peer_gone(Gone::Loss, 7);
}

// ---------------------------------------------------------------------------------------
// Remote access violations
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RemoteOp {
    Write,
    Read,
    CmpSwap,
    FetchAdd,
}

impl RemoteOp {
    fn atomic(self) -> bool {
        matches!(self, RemoteOp::CmpSwap | RemoteOp::FetchAdd)
    }

    /// The bytes it moves: three packets at MTU 1024 for WRITE/READ.
    fn len(self) -> u32 {
        if self.atomic() {
            8
        } else {
            3000
        }
    }

    fn right(self) -> Access {
        match self {
            RemoteOp::Write => Access::REMOTE_WRITE,
            RemoteOp::Read => Access::REMOTE_READ,
            _ => Access::REMOTE_ATOMIC,
        }
    }

    fn opcode(self) -> SendOpcode {
        match self {
            RemoteOp::Write => SendOpcode::RdmaWrite,
            RemoteOp::Read => SendOpcode::RdmaRead,
            RemoteOp::CmpSwap => SendOpcode::AtomicCmpAndSwp,
            RemoteOp::FetchAdd => SendOpcode::AtomicFetchAndAdd,
        }
    }
}

/// What is wrong with the remote access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// A key that names no slot (upper 24 bits zero: reserved).
    KeyBeyondTable,
    /// A key of another slot (free, or holding another key).
    KeyNotRegistered,
    /// The target was deregistered before the request.
    Deregistered,
    /// The target was deregistered and its memory registered again at the same index: the
    /// old key (stale key byte) must not reach the new registration.
    StaleKeyReregistered,
    /// The access ends one byte past the region (atomics: the word right after it).
    PastTheEnd,
    /// The access starts one byte before the region (atomics: the word right before it).
    BelowTheStart,
    /// `va + len` overflows 64 bits.
    Overflow,
    /// One byte longer than the region, from its start (not for atomics).
    TooLong,
    /// The region lacks the right the operation needs.
    MissingRight,
    /// The region belongs to another protection domain.
    WrongPd,
    /// The responder QP's `qp_access_flags` lack the operation (NAK Invalid Request).
    QpAccess,
    /// An atomic at an address that is not 8-byte aligned (NAK Invalid Request).
    Misaligned,
}

const FAULTS: [Fault; 12] = [
    Fault::KeyBeyondTable,
    Fault::KeyNotRegistered,
    Fault::Deregistered,
    Fault::StaleKeyReregistered,
    Fault::PastTheEnd,
    Fault::BelowTheStart,
    Fault::Overflow,
    Fault::TooLong,
    Fault::MissingRight,
    Fault::WrongPd,
    Fault::QpAccess,
    Fault::Misaligned,
];

impl Fault {
    /// Whether the fault can be made with `op`: atomics have a fixed length, and only atomics
    /// need alignment.
    fn applies_to(self, op: RemoteOp) -> bool {
        match self {
            Fault::TooLong => !op.atomic(),
            Fault::Misaligned => op.atomic(),
            _ => true,
        }
    }
}

const PAGE: usize = 4096;

/// A requester A posts `op` with `fault` to B, then a valid WRITE and a SEND behind it, then
/// one more SEND once A is in ERR. B's target region is the middle page of a three-page
/// buffer, so that accesses around it hit real memory, which must stay as it was.
fn remote_violation(op: RemoteOp, fault: Fault) {
    assert!(fault.applies_to(op));
    let ctx = format!("{op:?} with {fault:?}");
    let mut p = pair(20, Connect::default());

    // B: a buffer only B itself may write (no remote rights), with the target in its middle.
    let (backing, before) = p.b.filled_with(3 * PAGE, Access::LOCAL_WRITE, 0x40);
    let (pd, access) = match fault {
        Fault::WrongPd => (OTHER_PD, ALL),
        Fault::MissingRight => (PD, ALL.difference(op.right())),
        _ => (PD, ALL),
    };
    let mut target = p.b.subregion(&backing, PAGE, PAGE, pd, access);
    // A region B's QP may write: the target of the valid WRITE behind the bad request.
    let (other, other_before) = p.b.filled(PAGE, 0x80);
    p.b.post_recv(900, sge_of(&other, 0, PAGE as u32));

    // A: the source of WRITEs, and the sink of READs and atomics (which must stay as it is).
    let (src, _) = p.a.filled(2 * PAGE, 0x11);
    let (sink, sink_before) = p.a.filled(2 * PAGE, 0x22);

    let mut len = op.len();
    let mut rkey = target.keys.rkey;
    let (start, end) = (target.addr(), target.end());
    let mut va = start + 64;
    let mut expect = (WcStatus::RemAccessErr, NakCode::RemoteAccessError);
    match fault {
        Fault::KeyBeyondTable => rkey &= 0xff,
        Fault::KeyNotRegistered => rkey ^= 1 << 8,
        Fault::Deregistered => p.b.mrs.deregister(target.keys.rkey).unwrap(),
        Fault::StaleKeyReregistered => {
            let stale = target.keys.rkey;
            p.b.mrs.deregister(stale).unwrap();
            // A free index is taken at random: register until the index comes back.
            loop {
                let again = p.b.subregion(&backing, PAGE, PAGE, PD, ALL);
                if p.b.mrs.index_of(again.keys.rkey) == p.b.mrs.index_of(stale) {
                    assert_ne!(again.keys.rkey, stale);
                    target = again;
                    break;
                }
                p.b.mrs.deregister(again.keys.rkey).unwrap();
            }
            // The memory is registered with every right again; only the key is stale.
            rkey = stale;
        }
        Fault::PastTheEnd => {
            va = if op.atomic() {
                end
            } else {
                end - u64::from(len) + 1
            }
        }
        Fault::BelowTheStart => va = if op.atomic() { start - 8 } else { start - 1 },
        Fault::Overflow => va = u64::MAX - 7 - if op.atomic() { 0 } else { 1000 },
        Fault::TooLong => {
            va = start;
            len = PAGE as u32 + 1;
        }
        Fault::MissingRight | Fault::WrongPd => {}
        Fault::QpAccess => {
            let mut qp_access = ALL;
            qp_access.remove(op.right());
            let attr = QpAttr {
                qp_state: QpState::Rts,
                qp_access_flags: qp_access,
                ..QpAttr::default()
            };
            p.b.qp
                .modify(&attr, AttrMask::STATE | AttrMask::ACCESS_FLAGS, &LIMITS)
                .unwrap();
            expect = (WcStatus::RemInvReqErr, NakCode::InvalidRequest);
        }
        Fault::Misaligned => {
            va = start + 4;
            expect = (WcStatus::RemInvReqErr, NakCode::InvalidRequest);
        }
    }

    let local = if op == RemoteOp::Write { &src } else { &sink };
    let mut bad = send_wr(
        1,
        op.opcode(),
        vec![sge_of(local, 0, len)],
        RemoteAddr { addr: va, rkey },
    );
    bad.compare_add = u64::from_ne_bytes(before[PAGE + 64..PAGE + 72].try_into().unwrap());
    bad.swap = 0x0123_4567_89ab_cdef;
    p.a.post_wr(&bad);
    p.a.post_write(2, sge_of(&src, 0, 64), remote_of(&other, 0));
    p.a.post_send(3, sge_of(&src, 0, 64));
    p.run_to_quiescence(10_000);
    p.a.post_send(4, sge_of(&src, 0, 64));
    p.run_to_quiescence(100);

    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![
            (1, expect.0),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr),
            (4, WcStatus::WrFlushErr),
        ],
        "{ctx}"
    );
    assert_eq!(p.a.send_wcs[0].byte_len, 0, "{ctx}");
    assert_eq!(naks(&p.a), vec![Syndrome::Nak(expect.1)], "{ctx}");
    assert_eq!(p.a.qp.state(), QpState::Err, "{ctx}: requester");
    assert_eq!(p.b.qp.state(), QpState::Err, "{ctx}: responder");
    assert_eq!(
        wc_statuses(&p.b.recv_wcs),
        vec![(900, WcStatus::WrFlushErr)],
        "{ctx}: the responder's receive queue is flushed"
    );
    assert_eq!(
        p.b.read(&backing, 0, 3 * PAGE),
        before,
        "{ctx}: the target memory and around it"
    );
    assert_eq!(
        p.b.read(&other, 0, PAGE),
        other_before,
        "{ctx}: the requests behind the failed one did not execute"
    );
    assert_eq!(p.a.read(&sink, 0, 2 * PAGE), sink_before, "{ctx}: the sink");
    let _ = target;
}

fn remote_violations(ops: &[RemoteOp]) {
    for &op in ops {
        for fault in FAULTS.into_iter().filter(|f| f.applies_to(op)) {
            remote_violation(op, fault);
        }
    }
}

#[test]
fn rdma_write_rkey_violations() {
    remote_violations(&[RemoteOp::Write]);
}

#[test]
fn rdma_read_rkey_violations() {
    remote_violations(&[RemoteOp::Read]);
}

#[test]
fn atomic_rkey_violations() {
    remote_violations(&[RemoteOp::CmpSwap, RemoteOp::FetchAdd]);
}

#[test]
fn zero_length_write_and_read_need_no_valid_rkey() {
    // IBTA C9-88: a zero-length RDMA WRITE or READ is not checked against any R_Key.
    let mut p = pair(21, Connect::default());
    let (b_mem, before) = p.b.filled(PAGE, 0x33);
    let (a_mem, a_before) = p.a.filled(PAGE, 0x44);
    let bogus = [
        RemoteAddr {
            addr: b_mem.addr(),
            rkey: 0xdead_beef,
        },
        RemoteAddr {
            addr: u64::MAX,
            rkey: b_mem.keys.rkey ^ 0x55,
        },
    ];
    let mut id = 0;
    for r in bogus {
        for op in [SendOpcode::RdmaWrite, SendOpcode::RdmaRead] {
            id += 1;
            p.a.post_wr(&send_wr(id, op, vec![], r));
            id += 1;
            // A zero-length SGE is allowed too.
            p.a.post(id, op, sge_of(&a_mem, 0, 0), r);
        }
    }
    p.run_to_quiescence(1000);
    assert_eq!(wc_statuses(&p.a.send_wcs), each(1..=id, WcStatus::Success));
    assert!(p.a.send_wcs.iter().all(|w| w.byte_len == 0));
    assert!(naks(&p.a).is_empty());
    assert_states(&p, QpState::Rts, QpState::Rts);
    assert_eq!(p.b.read(&b_mem, 0, PAGE), before);
    assert_eq!(p.a.read(&a_mem, 0, PAGE), a_before);
}

// ---------------------------------------------------------------------------------------
// Local errors
// ---------------------------------------------------------------------------------------

#[test]
fn send_with_a_bad_lkey_fails_locally() {
    /// Makes the bad SGE from the node and a good source region.
    type BadSge = Box<dyn Fn(&mut Node, &Region) -> Sge>;
    let cases: Vec<(&str, BadSge)> = vec![
        ("wrong key byte", Box::new(|_, r| bad_lkey_sge(r, 0, 100))),
        (
            "key index beyond the table",
            Box::new(|_, r| Sge {
                lkey: 0xdead_be00,
                ..sge_of(r, 0, 100)
            }),
        ),
        (
            "past the end",
            Box::new(|_, r| sge_of(r, PAGE as u64 - 99, 100)),
        ),
        (
            "region of another PD",
            Box::new(|n, _| {
                let o = n.region_in(OTHER_PD, PAGE, ALL);
                sge_of(&o, 0, 100)
            }),
        ),
        (
            "deregistered region",
            Box::new(|n, _| {
                let o = n.region(PAGE, ALL);
                n.mrs.deregister(o.keys.lkey).unwrap();
                sge_of(&o, 0, 100)
            }),
        ),
    ];
    for (what, bad_sge) in cases {
        let mut p = pair(30, Connect::default());
        let src = p.a.region(PAGE, ALL);
        let (b_mem, before) = p.b.filled(PAGE, 0x55);
        p.b.post_recv(900, sge_of(&b_mem, 0, PAGE as u32));
        let bad = bad_sge(&mut p.a, &src);
        p.a.post_send(1, bad);
        p.a.post_send(2, sge_of(&src, 0, 10));
        p.run_to_quiescence(1000);
        assert_eq!(
            wc_statuses(&p.a.send_wcs),
            vec![(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)],
            "{what}"
        );
        assert_eq!(p.a.qp.state(), QpState::Err, "{what}");
        assert_eq!(p.fabric.stats().sent, 0, "{what}: nothing left A");
        assert_eq!(p.b.qp.state(), QpState::Rts, "{what}");
        assert!(p.b.recv_wcs.is_empty(), "{what}");
        assert_eq!(p.b.read(&b_mem, 0, PAGE), before, "{what}");
    }
}

#[test]
fn a_local_error_completes_after_the_wrs_before_it() {
    // Send completions come in posting order: a bad lkey found while earlier WRs are still
    // in flight is reported after they complete, not before (as rxe's completer does).
    let mut p = pair(31, Connect::default());
    let src = p.a.region(PAGE, ALL);
    let data = bytes(100, 6);
    p.a.fill(&src, 0, &data);
    let b_mem = p.b.region(PAGE, ALL);
    p.b.post_recv(900, sge_of(&b_mem, 0, 2000));
    p.b.post_recv(901, sge_of(&b_mem, 2000, 2000));
    p.a.post_send(1, sge_of(&src, 0, 100));
    p.a.post_send(2, bad_lkey_sge(&src, 0, 100));
    p.a.post_send(3, sge_of(&src, 0, 100));
    p.run_to_quiescence(1000);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::LocProtErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(p.a.qp.state(), QpState::Err);
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(900, WcStatus::Success)]);
    assert_eq!(p.b.read(&b_mem, 0, 100), data);
    assert_eq!(p.b.qp.state(), QpState::Rts);
}

#[test]
fn a_waiting_local_error_is_flushed_when_a_wr_before_it_fails() {
    // The WRITE before the bad SEND fails remotely: the QP enters ERR with the SEND still
    // waiting, which is then flushed like any other WR behind the failure.
    let mut p = pair(34, Connect::default());
    let src = p.a.region(PAGE, ALL);
    let (b_mem, before) = p.b.filled(PAGE, 0x19);
    let bad_rkey = RemoteAddr {
        rkey: b_mem.keys.rkey ^ 1,
        ..remote_of(&b_mem, 0)
    };
    p.a.post_write(1, sge_of(&src, 0, 100), bad_rkey);
    p.a.post_send(2, bad_lkey_sge(&src, 0, 100));
    p.run_to_quiescence(1000);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
    );
    assert_states(&p, QpState::Err, QpState::Err);
    assert_eq!(p.b.read(&b_mem, 0, PAGE), before);
}

#[test]
fn read_or_atomic_into_a_sink_without_local_write_fails_locally() {
    for op in [RemoteOp::Read, RemoteOp::CmpSwap, RemoteOp::FetchAdd] {
        let mut p = pair(32, Connect::default());
        let (b_mem, b_before) = p.b.filled(PAGE, 0x66);
        // Remote read is no local write right.
        let (backing, sink_before) = p.a.filled_with(PAGE, Access::LOCAL_WRITE, 0x77);
        let sink = p.a.subregion(&backing, 0, PAGE, PD, Access::REMOTE_READ);
        p.a.post(
            1,
            op.opcode(),
            sge_of(&sink, 0, op.len()),
            remote_of(&b_mem, 8),
        );
        p.run_to_quiescence(1000);
        assert_eq!(
            wc_statuses(&p.a.send_wcs),
            vec![(1, WcStatus::LocProtErr)],
            "{op:?}"
        );
        assert_eq!(p.a.qp.state(), QpState::Err, "{op:?}");
        assert_eq!(p.fabric.stats().sent, 0, "{op:?}: the request never left");
        assert_eq!(p.b.qp.state(), QpState::Rts, "{op:?}");
        assert_eq!(p.b.read(&b_mem, 0, PAGE), b_before, "{op:?}");
        assert_eq!(p.a.read(&backing, 0, PAGE), sink_before, "{op:?}");
    }
}

#[test]
fn send_longer_than_the_receive_buffer() {
    // (message length, receive buffer length): one packet, and three packets of which the
    // last overflows.
    for (len, room) in [(100u32, 64u32), (3000, 2500)] {
        let ctx = format!("{len} bytes into {room}");
        let mut p = pair(33, Connect::default());
        let (src, _) = p.a.filled(PAGE, 0x12);
        let (b_mem, before) = p.b.filled(2 * PAGE, 0x34);
        p.b.post_recv(900, sge_of(&b_mem, 1000, room));
        p.b.post_recv(901, sge_of(&b_mem, 5000, 3000));
        p.a.post_send(1, sge_of(&src, 0, len));
        p.a.post_send(2, sge_of(&src, 0, 10));
        p.run_to_quiescence(1000);
        assert_eq!(
            wc_statuses(&p.b.recv_wcs),
            vec![(900, WcStatus::LocLenErr), (901, WcStatus::WrFlushErr)],
            "{ctx}"
        );
        assert_eq!(
            wc_statuses(&p.a.send_wcs),
            vec![(1, WcStatus::RemInvReqErr), (2, WcStatus::WrFlushErr)],
            "{ctx}"
        );
        assert_eq!(
            naks(&p.a),
            vec![Syndrome::Nak(NakCode::InvalidRequest)],
            "{ctx}"
        );
        assert_eq!(p.a.qp.state(), QpState::Err, "{ctx}");
        assert_eq!(p.b.qp.state(), QpState::Err, "{ctx}");
        // Inside the receive buffer the bytes are undefined after the error; outside it,
        // nothing moved (and the second receive buffer was never written).
        let end = 1000 + room as usize;
        assert_eq!(p.b.read(&b_mem, 0, 1000), before[..1000], "{ctx}");
        assert_eq!(
            p.b.read(&b_mem, end, 2 * PAGE - end),
            before[end..],
            "{ctx}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Duplicate READs and atomics
// ---------------------------------------------------------------------------------------

/// Drops the `nth` (0-based) packet with `opcode` that reaches the node.
fn drop_nth(n: &mut Node, opcode: Opcode, nth: usize) {
    let mut k = 0;
    n.drop_if = Some(Box::new(move |pkt| {
        if pkt.repr.bth.opcode != opcode {
            return false;
        }
        k += 1;
        k == nth + 1
    }));
}

#[test]
fn a_lost_send_is_nak_ed_and_resent_and_counted_on_both_sides() {
    let mut p = pair(41, Connect::default());
    let a_mem = p.a.region(4096, ALL);
    let b_mem = p.b.region(4 * 4096, ALL);
    for i in 0..4u64 {
        p.b.post_recv(900 + i, sge_of(&b_mem, 4096 * i, 100));
    }
    drop_nth(&mut p.b, Opcode::RC_SEND_ONLY, 0);
    for i in 1..=4 {
        p.a.post_send(i, sge_of(&a_mem, 0, 100));
    }
    p.run_to_quiescence(100_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), each(1..=4, WcStatus::Success));
    let (ca, cb) = (p.a.qp.counters(), p.b.qp.counters());
    // The loss is found by a PSN Sequence Error NAK, or by the retransmit timer: here its
    // early interval (no round trip measured yet), which costs no retry.
    assert!(ca.rcvd_seq_err + ca.timeout_resends >= 1, "{ca:?}");
    assert_eq!(cb.out_of_seq_request, ca.rcvd_seq_err, "{ca:?} {cb:?}");
    assert!(ca.completer_retry_err <= ca.rcvd_seq_err + ca.timeout_resends);
    assert_eq!(
        cb.out_of_seq_request,
        u64::from(naks(&p.a).contains(&Syndrome::Nak(NakCode::PsnSequenceError)))
    );
    // The dropped SEND never reached the QP; everything else did.
    assert_eq!(cb.rcvd_pkts, ca.sent_pkts - 1, "{ca:?} {cb:?}");
    assert_eq!(ca.rcvd_pkts, cb.sent_pkts, "{ca:?} {cb:?}");
    assert_eq!((ca.retry_exceeded_err, cb.send_rnr_err), (0, 0));
}

#[test]
fn a_lost_read_response_is_answered_again_with_the_same_data() {
    const TIMEOUT: u8 = 10;
    let c = Connect {
        timeout: TIMEOUT,
        ..Connect::default()
    };
    let mut p = pair(40, c);
    let (b_mem, data) = p.b.filled(PAGE, 0x21);
    let sink = p.a.region(PAGE, ALL);
    drop_nth(&mut p.a, Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0);
    p.a.post_read(1, sge_of(&sink, 100, 500), remote_of(&b_mem, 7));
    p.run_to_quiescence(10_000);

    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(p.a.send_wcs[0].byte_len, 500);
    assert_eq!(p.a.read(&sink, 100, 500), data[7..507]);
    assert_eq!(p.a.read(&sink, 0, 100), vec![0; 100]);
    assert_eq!(p.a.read(&sink, 600, PAGE - 600), vec![0; PAGE - 600]);
    // The responder saw the same request twice and answered both.
    let reqs = psns(&p.b, Opcode::RC_RDMA_READ_REQUEST);
    assert_eq!(reqs, vec![Psn::new(c.a_psn); 2]);
    let resps: Vec<_> =
        p.a.seen_of(Opcode::RC_RDMA_READ_RESPONSE_ONLY)
            .map(|s| (s.psn, s.payload_len, s.dropped))
            .collect();
    assert_eq!(
        resps,
        vec![
            (Psn::new(c.a_psn), 500, true),
            (Psn::new(c.a_psn), 500, false)
        ]
    );
    assert!(
        p.elapsed() >= ack_timeout(TIMEOUT),
        "resent after a timeout"
    );
    assert_eq!(p.b.read(&b_mem, 0, PAGE), data, "a READ writes nothing");
    assert_states(&p, QpState::Rts, QpState::Rts);
}

#[test]
fn a_lost_middle_read_response_is_asked_for_again() {
    // Three responses, the middle one lost: the requester asks again for the rest only
    // (IBTA 9.7.6.2.2) and the responder answers the duplicate from its saved READ.
    let c = Connect::default();
    let mut p = pair(41, c);
    let (b_mem, data) = p.b.filled(PAGE, 0x31);
    let sink = p.a.region(PAGE, ALL);
    drop_nth(&mut p.a, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 0);
    p.a.post_read(1, sge_of(&sink, 0, 3000), remote_of(&b_mem, 50));
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(p.a.read(&sink, 0, 3000), data[50..3050]);
    assert_eq!(p.a.read(&sink, 3000, PAGE - 3000), vec![0; PAGE - 3000]);
    let reqs = psns(&p.b, Opcode::RC_RDMA_READ_REQUEST);
    assert_eq!(
        reqs,
        vec![Psn::new(c.a_psn), Psn::new(c.a_psn + 1)],
        "the second request starts at the lost response"
    );
    assert_eq!(p.b.qp.state(), QpState::Rts);
}

#[test]
fn a_lost_atomic_ack_is_replayed_not_executed_again() {
    const TIMEOUT: u8 = 10;
    for op in [RemoteOp::FetchAdd, RemoteOp::CmpSwap] {
        let c = Connect {
            timeout: TIMEOUT,
            ..Connect::default()
        };
        let mut p = pair(42, c);
        let b_mem = p.b.region(PAGE, ALL);
        p.b.fill(&b_mem, 64, &42u64.to_ne_bytes());
        let sink = p.a.region(PAGE, ALL);
        p.a.fill(&sink, 0, &u64::MAX.to_ne_bytes());
        drop_nth(&mut p.a, Opcode::RC_ATOMIC_ACKNOWLEDGE, 0);
        // FAA adds 10; CAS swaps 42 for 7 (run twice, the second would see 7 and fail).
        let (sge, word) = (sge_of(&sink, 0, 8), remote_of(&b_mem, 64));
        match op {
            RemoteOp::FetchAdd => p.a.post_fetch_add(1, sge, word, 10),
            _ => p.a.post_cmp_swap(1, sge, word, 42, 7),
        }
        p.run_to_quiescence(10_000);

        let after = if op == RemoteOp::FetchAdd { 52u64 } else { 7 };
        assert_eq!(
            wc_statuses(&p.a.send_wcs),
            vec![(1, WcStatus::Success)],
            "{op:?}"
        );
        assert_eq!(
            p.b.read(&b_mem, 64, 8),
            after.to_ne_bytes(),
            "{op:?}: executed once"
        );
        assert_eq!(
            p.a.read(&sink, 0, 8),
            42u64.to_ne_bytes(),
            "{op:?}: the original value"
        );
        let op_code = if op == RemoteOp::FetchAdd {
            Opcode::RC_FETCH_ADD
        } else {
            Opcode::RC_COMPARE_SWAP
        };
        let reqs = psns(&p.b, op_code);
        assert_eq!(reqs, vec![Psn::new(c.a_psn); 2], "{op:?}: a duplicate");
        let acks: Vec<_> =
            p.a.seen_of(Opcode::RC_ATOMIC_ACKNOWLEDGE)
                .map(|s| (s.psn, s.atomic_orig, s.dropped))
                .collect();
        assert_eq!(
            acks,
            vec![
                (Psn::new(c.a_psn), Some(42), true),
                (Psn::new(c.a_psn), Some(42), false)
            ],
            "{op:?}: the replayed ACK carries the saved original value"
        );
        assert!(p.elapsed() >= ack_timeout(TIMEOUT));
        assert_states(&p, QpState::Rts, QpState::Rts);
    }
}

#[test]
fn every_packet_twice_executes_every_request_once() {
    let fabric = FabricConfig {
        duplicate: 1.0,
        ..FabricConfig::default()
    };
    let mut p = Pair::new(fabric, 43, Connect::default());
    let (src, data) = p.a.filled(PAGE, 0x5a);
    let sink = p.a.region(PAGE, ALL);
    let b_mem = p.b.region(4 * PAGE, ALL);
    let b_data = bytes(PAGE, 0x6b);
    p.b.fill(&b_mem, 0, &b_data);
    p.b.fill(&b_mem, PAGE, &100u64.to_ne_bytes());
    p.b.post_recv(900, sge_of(&b_mem, 2 * PAGE as u64, 3000));
    p.b.post_recv(901, sge_of(&b_mem, 3 * PAGE as u64, 3000));
    let word = remote_of(&b_mem, PAGE as u64);
    for i in 0..3u64 {
        p.a.post_fetch_add(1 + i, sge_of(&sink, 8 * i, 8), word, 5);
    }
    p.a.post_cmp_swap(4, sge_of(&sink, 24, 8), word, 115, 1);
    p.a.post_read(5, sge_of(&sink, 100, 3000), remote_of(&b_mem, 0));
    p.a.post_send(6, sge_of(&src, 0, 2500));
    p.run_to_quiescence(10_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), each(1..=6, WcStatus::Success));
    assert!(p.fabric.stats().duplicated > 0);
    // Every request arrived twice: the second copies are duplicates (the responder's
    // answers to them arrive twice too, but the requester has no such counter).
    let (ca, cb) = (p.a.qp.counters(), p.b.qp.counters());
    assert_eq!(cb.duplicate_request * 2, cb.rcvd_pkts, "{cb:?}");
    assert_eq!(cb.rcvd_pkts, 2 * ca.sent_pkts, "{ca:?} {cb:?}");
    assert_eq!(ca.completer_retry_err + cb.out_of_seq_request, 0);
    // 100 + 5 + 5 + 5 = 115, then CAS 115 -> 1: each atomic ran once.
    assert_eq!(p.b.read(&b_mem, PAGE, 8), 1u64.to_ne_bytes());
    let origs: Vec<u64> = (0..4)
        .map(|i| u64::from_ne_bytes(p.a.read(&sink, 8 * i, 8).try_into().unwrap()))
        .collect();
    assert_eq!(origs, vec![100, 105, 110, 115]);
    assert_eq!(p.a.read(&sink, 100, 3000), b_data[..3000]);
    // The SEND took one receive buffer.
    assert_eq!(wc_statuses(&p.b.recv_wcs), vec![(900, WcStatus::Success)]);
    assert_eq!(p.b.read(&b_mem, 2 * PAGE, 2500), data[..2500]);
    assert_eq!(p.b.read(&b_mem, 3 * PAGE, 3000), vec![0; 3000]);
    assert_states(&p, QpState::Rts, QpState::Rts);
}

// ---------------------------------------------------------------------------------------
// Flush on ERR
// ---------------------------------------------------------------------------------------

#[test]
fn modify_to_err_flushes_every_outstanding_wr_once() {
    let c = Connect {
        mtu: Mtu::Mtu1024,
        rnr_retry: 7,
        min_rnr_timer: 14,
        ..Connect::default()
    };
    let mut p = pair(50, c);
    let (a_mem, a_before) = p.a.filled(4 * PAGE, 0x71);
    let b_mem = p.b.region(4 * PAGE, ALL);
    for id in 100..104 {
        p.a.post_recv(id, sge_of(&a_mem, 0, 64));
    }
    // B has no receive posted: the first SEND is RNR-NAKed for ever, and everything behind
    // it stays outstanding.
    let ops = [
        (1, SendOpcode::Send),
        (2, SendOpcode::RdmaWrite),
        (3, SendOpcode::RdmaRead),
        (4, SendOpcode::RdmaWrite), // unsignaled
        (5, SendOpcode::AtomicFetchAndAdd),
        (6, SendOpcode::SendWithImm),
    ];
    for (id, op) in ops {
        let len = if op == SendOpcode::AtomicFetchAndAdd {
            8
        } else {
            2000
        };
        let mut w = send_wr(
            id,
            op,
            vec![sge_of(&a_mem, 2 * PAGE as u64, len)],
            remote_of(&b_mem, 0),
        );
        if id == 4 {
            w.flags = SendFlags::empty();
        }
        p.a.post_wr(&w);
    }
    p.run_until(1000, |p| naks(&p.a).len() >= 2);
    assert_eq!(naks(&p.a).len(), 2);
    assert!(p.a.send_wcs.is_empty() && p.a.recv_wcs.is_empty());
    assert_eq!(p.a.qp.send_queue_len(), 6);

    set_state(&mut p.a.qp, QpState::Err);
    assert_eq!(p.a.qp.state(), QpState::Err);
    assert_eq!(p.a.qp.send_queue_len(), 0);
    p.run_until(10_000, |p| {
        p.fabric.in_flight() == 0 && !p.a.qp.wants_transmit()
    });
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        each(1..=6, WcStatus::WrFlushErr),
        "every send WR, signaled or not, in order"
    );
    let opcodes: Vec<_> = p.a.send_wcs.iter().map(|w| w.opcode).collect();
    assert_eq!(
        opcodes,
        vec![
            WcOpcode::Send,
            WcOpcode::RdmaWrite,
            WcOpcode::RdmaRead,
            WcOpcode::RdmaWrite,
            WcOpcode::FetchAdd,
            WcOpcode::Send
        ]
    );
    assert_eq!(
        wc_statuses(&p.a.recv_wcs),
        each(100..104, WcStatus::WrFlushErr)
    );
    assert!(p
        .a
        .send_wcs
        .iter()
        .chain(&p.a.recv_wcs)
        .all(|w| w.qp_num == p.a.qp.qpn()));

    // Posting in ERR completes at once with a flush, exactly once.
    p.a.post_write(7, sge_of(&a_mem, 0, 10), remote_of(&b_mem, 0));
    p.a.post_recv(104, sge_of(&a_mem, 0, 64));
    // Time goes on: nothing else completes, nothing is sent.
    let sent = p.fabric.stats().sent;
    let horizon = p.fabric.now() + 1_000_000_000;
    p.run_until(100_000, |p| p.fabric.now() >= horizon);
    assert_eq!(p.fabric.stats().sent, sent, "a QP in ERR sends nothing");
    assert_eq!(
        wc_statuses(&p.a.send_wcs[6..]),
        vec![(7, WcStatus::WrFlushErr)]
    );
    assert_eq!(
        wc_statuses(&p.a.recv_wcs[4..]),
        vec![(104, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.a.read(&a_mem, 0, 4 * PAGE), a_before, "nothing written");
    assert!(p.b.recv_wcs.is_empty());
}

#[test]
fn modify_to_err_flushes_a_receive_in_progress() {
    // B is in the middle of a three-packet SEND (its LAST packet lost) when it enters ERR:
    // the receive WQE in use is flushed once, with the ones behind it.
    let mut p = pair(51, Connect::default());
    let src = p.a.region(PAGE, ALL);
    let b_mem = p.b.region(2 * PAGE, ALL);
    drop_nth(&mut p.b, Opcode::RC_SEND_LAST, 0);
    for id in 900..903 {
        p.b.post_recv(id, sge_of(&b_mem, 0, PAGE as u32));
    }
    p.a.post_send(1, sge_of(&src, 0, 3000));
    p.run_until(1000, |p| p.b.seen.iter().any(|s| s.dropped));
    assert!(p.b.recv_wcs.is_empty());
    set_state(&mut p.b.qp, QpState::Err);
    p.run_until(1000, |p| p.b.recv_wcs.len() >= 3);
    assert_eq!(
        wc_statuses(&p.b.recv_wcs),
        each(900..903, WcStatus::WrFlushErr)
    );
    // The requester retries into silence and gives up; B completes nothing more.
    p.run_to_quiescence(100_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::RetryExcErr)]);
    assert_eq!(p.b.recv_wcs.len(), 3);
}

#[test]
fn rnr_nak_on_write_with_immediate_then_success() {
    // WRITE with immediate needs a receive WQE at its last packet: RNR NAK there, then the
    // resend succeeds once one is posted. One packet (ONLY) and three (FIRST..LAST).
    const TIMER: u8 = 5;
    for len in [100u32, 3000] {
        let c = Connect {
            min_rnr_timer: TIMER,
            rnr_retry: 7,
            ..Connect::default()
        };
        let mut p = pair(14, c);
        let (src, data) = p.a.filled(PAGE, 0x2c);
        let b_mem = p.b.region(PAGE, ALL);
        let mut w = send_wr(
            1,
            SendOpcode::RdmaWriteWithImm,
            vec![sge_of(&src, 0, len)],
            remote_of(&b_mem, 500),
        );
        w.imm_data_or_inv_rkey = 0x1234_5678;
        p.a.post_wr(&w);
        p.run_until(1000, |p| naks(&p.a).len() >= 2);
        assert_eq!(
            naks(&p.a),
            vec![Syndrome::RnrNak(RnrTimer(TIMER)); 2],
            "{len}"
        );
        assert!(p.b.recv_wcs.is_empty() && p.a.send_wcs.is_empty(), "{len}");
        p.b.qp.post_recv(&recv_wr(900, vec![])).unwrap();
        p.run_to_quiescence(10_000);
        assert_eq!(
            wc_statuses(&p.a.send_wcs),
            vec![(1, WcStatus::Success)],
            "{len}"
        );
        assert_eq!(
            wc_statuses(&p.b.recv_wcs),
            vec![(900, WcStatus::Success)],
            "{len}"
        );
        let r = &p.b.recv_wcs[0];
        assert_eq!(
            (r.opcode, r.byte_len, r.imm_data_or_inv_rkey),
            (WcOpcode::RecvRdmaWithImm, len, 0x1234_5678),
            "{len}"
        );
        assert_eq!(
            p.b.read(&b_mem, 500, len as usize),
            data[..len as usize],
            "{len}"
        );
        assert_eq!(p.b.read(&b_mem, 0, 500), vec![0; 500], "{len}");
        let end = 500 + len as usize;
        assert_eq!(p.b.read(&b_mem, end, PAGE - end), vec![0; PAGE - end]);
        assert_states(&p, QpState::Rts, QpState::Rts);
    }
}

#[test]
fn replayed_atomics_answer_with_their_saved_values_not_the_current_word() {
    // Two FETCH_ADDs in flight; the first one's ACK is lost. The second ACK shows the gap,
    // the requester resends both, and the responder replays both from its saved results
    // (100 and 105) although the word is 110 by then.
    let mut p = pair(44, Connect::default());
    let b_mem = p.b.region(PAGE, ALL);
    p.b.fill(&b_mem, 0, &100u64.to_ne_bytes());
    let sink = p.a.region(PAGE, ALL);
    drop_nth(&mut p.a, Opcode::RC_ATOMIC_ACKNOWLEDGE, 0);
    for i in 0..2u64 {
        p.a.post_fetch_add(1 + i, sge_of(&sink, 8 * i, 8), remote_of(&b_mem, 0), 5);
    }
    p.run_to_quiescence(10_000);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(p.b.read(&b_mem, 0, 8), 110u64.to_ne_bytes());
    assert_eq!(p.a.read(&sink, 0, 8), 100u64.to_ne_bytes());
    assert_eq!(p.a.read(&sink, 8, 8), 105u64.to_ne_bytes());
    assert_eq!(count(&p.b, Opcode::RC_FETCH_ADD), 4, "both sent twice");
    let replayed: Vec<_> =
        p.a.seen_of(Opcode::RC_ATOMIC_ACKNOWLEDGE)
            .filter(|s| !s.dropped)
            .map(|s| s.atomic_orig.unwrap())
            .collect();
    assert_eq!(replayed, vec![105, 100, 105]);
    assert_states(&p, QpState::Rts, QpState::Rts);
}

#[test]
fn a_region_deregistered_in_the_middle_of_a_write_stops_it_there() {
    // B gets the FIRST packet of a three-packet WRITE; the MIDDLE and LAST are lost; B
    // deregisters the target. The resent MIDDLE fails its R_Key check: NAK Remote Access
    // Error at its PSN, and nothing after the FIRST packet reaches the memory.
    let c = Connect {
        timeout: 10,
        ..Connect::default()
    };
    let mut p = pair(35, c);
    let (src, data) = p.a.filled(PAGE, 0x4d);
    let (backing, before) = p.b.filled_with(PAGE, Access::LOCAL_WRITE, 0x5e);
    let target = p.b.subregion(&backing, 0, PAGE, PD, ALL);
    let mut lost = 0;
    p.b.drop_if = Some(Box::new(move |pkt| {
        let later = matches!(
            pkt.repr.bth.opcode,
            Opcode::RC_RDMA_WRITE_MIDDLE | Opcode::RC_RDMA_WRITE_LAST
        );
        if later && lost < 2 {
            lost += 1;
            return true;
        }
        false
    }));
    p.a.post_write(1, sge_of(&src, 0, 3000), remote_of(&target, 100));
    p.run_until(1000, |p| p.b.seen.iter().filter(|s| s.dropped).count() == 2);
    assert_eq!(count(&p.b, Opcode::RC_RDMA_WRITE_FIRST), 1);
    p.b.mrs.deregister(target.keys.rkey).unwrap();
    p.run_to_quiescence(10_000);

    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::RemAccessErr)]
    );
    assert_eq!(naks(&p.a), vec![Syndrome::Nak(NakCode::RemoteAccessError)]);
    // (Before it, the ACK of the resent FIRST packet, the probe, said the MIDDLE was next.)
    let is_nak = |s: &&Seen| matches!(s.syndrome, Some(Syndrome::Nak(_)));
    let nak = p.a.seen.iter().find(is_nak).unwrap();
    assert_eq!(nak.psn, Psn::new(c.a_psn + 1), "the MIDDLE packet's PSN");
    assert_states(&p, QpState::Err, QpState::Err);
    let mut expect = before.clone();
    expect[100..1124].copy_from_slice(&data[..1024]); // the FIRST packet, while registered
    assert_eq!(p.b.read(&backing, 0, PAGE), expect);
}

#[test]
fn a_receive_buffer_with_a_bad_lkey_fails_at_the_responder() {
    // The SEND's data cannot be placed: the receive completes with IBV_WC_LOC_PROT_ERR, the
    // requester gets NAK Remote Operational Error (IBV_WC_REM_OP_ERR), both QPs enter ERR.
    let mut p = pair(36, Connect::default());
    let src = p.a.region(PAGE, ALL);
    let (b_mem, before) = p.b.filled(PAGE, 0x6f);
    p.b.post_recv(900, bad_lkey_sge(&b_mem, 0, 2000));
    p.b.post_recv(901, sge_of(&b_mem, 2000, 2000));
    p.a.post_send(1, sge_of(&src, 0, 100));
    p.a.post_send(2, sge_of(&src, 0, 100));
    p.run_to_quiescence(1000);
    assert_eq!(
        wc_statuses(&p.b.recv_wcs),
        vec![(900, WcStatus::LocProtErr), (901, WcStatus::WrFlushErr)]
    );
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::RemOpErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(
        naks(&p.a),
        vec![Syndrome::Nak(NakCode::RemoteOperationalError)]
    );
    assert_states(&p, QpState::Err, QpState::Err);
    assert_eq!(p.b.read(&b_mem, 0, PAGE), before);
}

/// The link of the early-resend tests: 20 µs each way, `len` bytes registered on each side,
/// and the round trip (40 µs) measured by a first WRITE of 64 bytes, completed.
fn pair_with_a_measured_round_trip(seed: u64, c: Connect, len: usize) -> (Pair, Region, Region) {
    let mut p = Pair::new(
        FabricConfig {
            delay_ns: 20_000,
            ..FabricConfig::default()
        },
        seed,
        c,
    );
    let a_mem = p.a.region(len, ALL);
    let b_mem = p.b.region(len, ALL);
    p.a.post_write(1, sge_of(&a_mem, 0, 64), remote_of(&b_mem, 0));
    p.run_until(10_000, |p| !p.a.send_wcs.is_empty());
    assert_eq!(wc_statuses(&p.a.send_wcs), [(1, WcStatus::Success)]);
    (p, a_mem, b_mem)
}

/// A lost packet that nothing follows is resent once no ACK came within the measured round
/// trip (at least `MIN_RTO`), not a whole local ACK timeout later, and the early resend
/// costs no retry: with `retry_cnt` 0 the WR still succeeds. A dead peer is still reported
/// a whole timeout after each counted try (`ack_timeout_exhausts_retry_cnt_when_the_peer_is_gone`).
#[test]
fn a_lost_last_packet_is_resent_after_the_round_trip_not_the_timeout() {
    use softrnic_provider::rc::MIN_RTO;
    let c = Connect {
        timeout: 14, // 67 ms
        retry_cnt: 0,
        ..Connect::default()
    };
    let (mut p, a_mem, b_mem) = pair_with_a_measured_round_trip(41, c, 4096);
    // The second WRITE is lost once.
    p.fabric.set_config(FabricConfig {
        loss: 1.0,
        delay_ns: 20_000,
        ..FabricConfig::default()
    });
    let start = p.elapsed();
    p.a.post_write(2, sge_of(&a_mem, 64, 64), remote_of(&b_mem, 64));
    p.step();
    assert_eq!(p.fabric.stats().lost, 1, "the WRITE went out and was lost");
    p.fabric.set_config(FabricConfig {
        delay_ns: 20_000,
        ..FabricConfig::default()
    });
    p.run_until(10_000, |p| p.a.send_wcs.len() == 2);
    let took = p.elapsed() - start;
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert!(
        took >= MIN_RTO && took < ack_timeout(14) / 8,
        "recovered after {took:?} (the local ACK timeout is {:?})",
        ack_timeout(14)
    );
}

/// An early resend goes back to the oldest unacknowledged PSN and resends only it (the
/// probe whose ACK says how far the peer got), while the rest of the message may still wait
/// unread at the peer: the QP keeps counting all of it in its device's send window until
/// the peer makes progress, so that other QPs do not fill a receiver that holds it.
#[test]
fn an_early_resend_keeps_what_it_went_back_over_in_the_device_window() {
    let (mut p, a_mem, b_mem) = pair_with_a_measured_round_trip(43, Connect::default(), 4096);
    let window = softrnic_provider::rc::DeviceWindow::new();
    p.a.qp.share_window(window.clone());
    assert_eq!(window.in_flight(), 0);
    // Four packets (PMTU 1024) to a peer that now answers 10 ms later: past the early
    // interval (a few round trips, at least MIN_RTO), short of the 67 ms timeout.
    p.fabric.set_config(FabricConfig {
        delay_ns: 5_000_000,
        ..FabricConfig::default()
    });
    p.a.post_write(2, sge_of(&a_mem, 0, 4096), remote_of(&b_mem, 0));
    p.step();
    assert_eq!(window.in_flight(), 4);
    p.run_until(10_000, |p| p.a.qp.counters().timeout_resends == 1);
    assert_eq!(p.a.qp.counters().completer_retry_err, 0, "an early resend");
    assert_eq!(
        window.in_flight(),
        4,
        "the four packets still count while only the first was resent"
    );
    p.run_until(100_000, |p| p.a.send_wcs.len() == 2);
    assert_eq!(wc_statuses(&p.a.send_wcs)[1], (2, WcStatus::Success));
    assert_eq!(window.in_flight(), 0, "acknowledged: nothing counts");
}

/// A dead peer behind a whole window: the early resend keeps the window's 512 PSNs counted
/// (above), and its probe still leaves (it takes no room), so the retries run their course
/// and the WR ends in `IBV_WC_RETRY_EXC_ERR` rather than waiting for room forever.
#[test]
fn an_early_resend_of_a_whole_window_to_a_dead_peer_still_ends_in_retry_exceeded() {
    let c = Connect {
        timeout: 10, // 4 ms
        retry_cnt: 1,
        ..Connect::default()
    };
    let len = softrnic_provider::rc::DEVICE_WINDOW_PSNS as usize * 1024;
    let (mut p, a_mem, b_mem) = pair_with_a_measured_round_trip(44, c, len);
    p.a.qp
        .share_window(softrnic_provider::rc::DeviceWindow::new());
    p.fabric.set_config(FabricConfig {
        loss: 1.0,
        ..FabricConfig::default()
    });
    p.a.post_write(2, sge_of(&a_mem, 0, len as u32), remote_of(&b_mem, 0));
    p.run_until(100_000, |p| p.a.send_wcs.len() == 2);
    assert_eq!(wc_statuses(&p.a.send_wcs)[1], (2, WcStatus::RetryExcErr));
    let c = p.a.qp.counters();
    assert!(
        c.timeout_resends > c.completer_retry_err,
        "early resends came first: {c:?}"
    );
}

/// Packets a link swaps with their neighbour are held by the responder and executed in
/// order once the late one arrives (`responder/reorder.rs`): no NAK, nothing resent, and
/// the data lands whole. SENDs and WRITEs of four packets each, a third of the packets
/// overtaken by the next one.
#[test]
fn a_reordered_packet_is_waited_for_not_naked() {
    const MESSAGES: u64 = 24;
    let swaps = FabricConfig {
        reorder: 0.3,
        reorder_by: 1,
        // A packet nothing follows (the last of a message) arrives this late: sooner than
        // the requester would resend it (`rc::MIN_RTO`).
        reorder_hold_ns: 100_000,
        ..FabricConfig::default()
    };
    let mut p = Pair::new(swaps, 47, Connect::default());
    let (src, data) = p.a.filled(4096 * MESSAGES as usize, 3);
    let dst = p.b.region(4096 * MESSAGES as usize, ALL);
    for m in 0..MESSAGES {
        let at = m * 4096;
        if m % 2 == 0 {
            p.b.post_recv(900 + m, sge_of(&dst, at, 4096));
            p.a.post_send(m, sge_of(&src, at, 4096));
        } else {
            p.a.post_write(m, sge_of(&src, at, 4096), remote_of(&dst, at));
        }
        p.run_until(100_000, |p| p.a.send_wcs.len() as u64 == m + 1);
    }
    assert!(p.fabric.stats().reordered > 10, "the link reordered");
    assert!(p.a.send_wcs.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(p.b.read(&dst, 0, data.len()), data);
    let naks =
        p.a.seen
            .iter()
            .filter(|s| matches!(s.syndrome, Some(Syndrome::Nak(_))));
    assert_eq!(naks.count(), 0, "a reordered packet was NAKed");
    let requests = p.b.seen.len() as u64;
    assert_eq!(requests, MESSAGES * 4, "packets were resent");
}

/// Two packets of one window lost: the responder holds what follows each, and once the
/// resent first one has run with what it held up to the second gap, it NAKs that gap at
/// once (the requester is waiting on its probe and sends nothing that would show it), so
/// that the requester resends the second lost packet alone rather than everything after it,
/// which the responder holds already. Each lost packet is sent twice, no other once more.
#[test]
fn a_second_loss_behind_the_first_is_resent_alone() {
    const PACKETS: u32 = 40;
    let c = Connect::default();
    let mut p = pair(48, c);
    let len = PACKETS as usize * 1024;
    let (src, data) = p.a.filled(len, 9);
    let dst = p.b.region(len, ALL);
    let lost = [Psn::new(c.a_psn + 5), Psn::new(c.a_psn + 20)];
    let mut dropped = Vec::new();
    p.b.drop_if = Some(Box::new(move |pkt| {
        let psn = pkt.repr.bth.psn;
        if lost.contains(&psn) && !dropped.contains(&psn) {
            dropped.push(psn);
            return true;
        }
        false
    }));
    p.a.post_write(1, sge_of(&src, 0, len as u32), remote_of(&dst, 0));
    p.run_to_quiescence(100_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(p.b.read(&dst, 0, len), data);
    let naks: Vec<_> =
        p.a.seen
            .iter()
            .filter(|s| matches!(s.syndrome, Some(Syndrome::Nak(_))))
            .map(|s| s.psn)
            .collect();
    assert_eq!(naks, lost, "each gap NAKed once");
    assert_eq!(
        p.b.seen.len() as u32,
        PACKETS + 2,
        "only the lost packets were resent"
    );
}

/// A sequence NAK that comes again, late (a later ACK overtook it) or twice (the link
/// duplicated it), says nothing new: it costs no retry and moves nothing back. With
/// `retry_cnt` 1, the one retry the second loss takes is all there is; the stale NAK of the
/// first loss and a copy of the second's, handed to the requester while it resends, used to
/// take one more each and end the WR with `IBV_WC_RETRY_EXC_ERR`.
#[test]
fn a_stale_or_duplicated_sequence_nak_costs_no_retry() {
    use softrnic_wire::roce::{RocePacket, RoceRepr};
    use std::cell::RefCell;
    use std::rc::Rc;
    const PACKETS: u32 = 200;
    let c = Connect {
        retry_cnt: 1,
        ..Connect::default()
    };
    let mut p = pair(49, c);
    let len = PACKETS as usize * 1024;
    let (src, data) = p.a.filled(len, 10);
    let dst = p.b.region(len, ALL);
    let lost = [Psn::new(c.a_psn + 5), Psn::new(c.a_psn + 100)];
    let mut dropped = Vec::new();
    p.b.drop_if = Some(Box::new(move |pkt| {
        let psn = pkt.repr.bth.psn;
        if lost.contains(&psn) && !dropped.contains(&psn) {
            dropped.push(psn);
            return true;
        }
        false
    }));
    let naks: Rc<RefCell<Vec<RoceRepr>>> = Rc::default();
    let seen_naks = naks.clone();
    p.a.drop_if = Some(Box::new(move |pkt| {
        if matches!(pkt.repr.aeth.map(|a| a.syndrome), Some(Syndrome::Nak(_))) {
            seen_naks.borrow_mut().push(pkt.repr);
        }
        false
    }));
    p.a.post_write(1, sge_of(&src, 0, len as u32), remote_of(&dst, 0));
    // Until the second loss is NAKed (the first resent, and acknowledged by that NAK).
    p.run_until(100_000, |_| naks.borrow().len() == 2);
    let replay: Vec<_> = naks.borrow().clone();
    assert_eq!(
        replay.iter().map(|r| r.bth.psn).collect::<Vec<_>>(),
        lost,
        "each loss NAKed"
    );
    let now = p.now();
    for repr in replay {
        let nak = RocePacket {
            repr,
            payload: &[],
            icrc: 0,
        };
        p.a.qp.handle_packet(now, &nak, &p.a.mrs, &mut p.a.srqs);
    }
    p.run_to_quiescence(100_000);
    assert_eq!(wc_statuses(&p.a.send_wcs), vec![(1, WcStatus::Success)]);
    assert_eq!(p.b.read(&dst, 0, len), data);
    assert_eq!(
        p.b.seen.len() as u32,
        PACKETS + 2,
        "only the lost packets were resent"
    );
}
