//! The RC engine's error scenarios (`provider/tests/rc_errors.rs`) between two processes over
//! kernel UDP: RNR then success, RNR retries exhausted, the local ACK timeout exhausted (peer
//! in ERR, or every packet lost), R_Key violations of WRITE, READ and atomics, and duplicate
//! READs and atomics made by dropping the peer's first response on the wire. The test process
//! is the requester (A); the responder (B) is a `softrnic scenario-peer` process.
//!
//! Outcomes are asserted — statuses, states, bytes on both sides, memory around targets, the
//! packets each transport saw — never times.

mod common;

use std::time::{Duration, Instant};

use common::*;
use softrnic_provider::transport::faults::{Action, Direction, Rule};
use softrnic_uapi::{Access, QpState, RemoteAddr, SendOpcode, WcStatus};
use softrnic_wire::Opcode;

/// Waits until `f` holds (a guard against a hang: fails after [`LONG`]).
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < LONG, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

const NO_WAIT: Duration = Duration::ZERO;

#[test]
fn rnr_nak_then_the_send_succeeds_once_a_receive_is_posted() {
    let c = softrnic_uapi::ConnectAttr {
        min_rnr_timer: 14, // 1.28 ms
        rnr_retry: 7,
        ..attr()
    };
    let Two { mut a, mut b } = two(20, c, A_PSN);
    let a_mem = a.reg_mr(8192, ALL, 0).unwrap();
    let b_mem = b.reg_mr(8192, ALL, 0).unwrap();
    let data = pattern(3000, 5); // three packets at MTU 1024
    a.fill(a_mem.id, 0, &data).unwrap();
    let untouched = pattern(8192, 77);
    b.fill(b_mem.id, 0, &untouched).unwrap();
    let sge = a.sge(a_mem.id, 0, 3000).unwrap();
    a.post_send(&wr(1, SendOpcode::Send, vec![sge], remote(&b_mem, 0)))
        .unwrap();
    // RNR NAKs (A hears only NAKs: nothing is acknowledged yet) while B has no receive.
    let naks = || a.faults().seen(Direction::Rx, Opcode::RC_ACKNOWLEDGE);
    wait_until("three RNR NAKs", || naks() >= 3);
    assert!(a.poll(1, NO_WAIT).is_empty(), "nothing completes meanwhile");
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(b.read(b_mem.id, 0, 8192).unwrap(), untouched);
    let tries = b.count(Direction::Rx, Opcode::RC_SEND_FIRST).unwrap();
    assert!(tries >= 3, "resent after every RNR NAK ({tries} tries)");

    b.post_recv(900, &[(b_mem.id, 1000, 4000)]).unwrap();
    let got = a.poll(1, LONG);
    assert_eq!(statuses(&got), vec![(1, WcStatus::Success)]);
    assert_eq!(got[0].byte_len, 3000);
    let r = b.poll(1, LONG).unwrap();
    assert_eq!(peer_statuses(&r), vec![(900, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, 3000);
    assert_eq!(b.read(b_mem.id, 1000, 3000).unwrap(), data);
    assert_eq!(b.read(b_mem.id, 0, 1000).unwrap(), untouched[..1000]);
    assert_eq!(b.read(b_mem.id, 4000, 4192).unwrap(), untouched[4000..]);
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(b.state().unwrap(), QpState::Rts);
}

#[test]
fn rnr_retry_exhausted_completes_with_rnr_retry_exc_err() {
    for rnr_retry in [0u8, 2] {
        let ctx = format!("rnr_retry {rnr_retry}");
        let c = softrnic_uapi::ConnectAttr {
            min_rnr_timer: 5, // 60 us
            rnr_retry,
            ..attr()
        };
        let Two { mut a, mut b } = two(21, c, A_PSN);
        let a_mem = a.reg_mr(PAGE, ALL, 0).unwrap();
        let b_mem = b.reg_mr(PAGE, ALL, 0).unwrap();
        let untouched = pattern(PAGE, 3);
        b.fill(b_mem.id, 0, &untouched).unwrap();
        let sge = |len| a.sge(a_mem.id, 0, len).unwrap();
        a.post_send(&wr(1, SendOpcode::Send, vec![sge(100)], remote(&b_mem, 0)))
            .unwrap();
        a.post_send(&wr(
            2,
            SendOpcode::RdmaWrite,
            vec![sge(64)],
            remote(&b_mem, 0),
        ))
        .unwrap();
        a.post_send(&wr(3, SendOpcode::Send, vec![sge(10)], remote(&b_mem, 0)))
            .unwrap();
        assert_eq!(
            statuses(&a.poll(3, LONG)),
            vec![
                (1, WcStatus::RnrRetryExcErr),
                (2, WcStatus::WrFlushErr),
                (3, WcStatus::WrFlushErr)
            ],
            "{ctx}"
        );
        assert_eq!(a.state(), QpState::Err, "{ctx}");
        let tries = u64::from(rnr_retry) + 1;
        assert_eq!(
            a.faults().seen(Direction::Rx, Opcode::RC_ACKNOWLEDGE),
            tries,
            "{ctx}: one RNR NAK per try"
        );
        assert!(
            b.count(Direction::Rx, Opcode::RC_SEND_ONLY).unwrap() >= tries,
            "{ctx}"
        );
        // RNR is no error for the responder, and nothing was written.
        assert_eq!(b.state().unwrap(), QpState::Rts, "{ctx}");
        assert!(b.poll(1, NO_WAIT).unwrap().is_empty(), "{ctx}");
        assert_eq!(b.read(b_mem.id, 0, PAGE).unwrap(), untouched, "{ctx}");
        // Posting in ERR flushes at once.
        a.post_send(&wr(4, SendOpcode::Send, vec![sge(1)], remote(&b_mem, 0)))
            .unwrap();
        assert_eq!(
            statuses(&a.poll(1, LONG)),
            vec![(4, WcStatus::WrFlushErr)],
            "{ctx}"
        );
    }
}

/// How the peer disappears.
#[derive(Debug, Clone, Copy)]
enum Gone {
    /// The peer's transport drops every packet it receives.
    Loss,
    /// The peer's QP is in ERR and drops requests.
    PeerErr,
}

#[test]
fn ack_timeout_exhausts_retry_cnt_when_the_peer_is_gone() {
    for gone in [Gone::Loss, Gone::PeerErr] {
        let retry_cnt = 2;
        let ctx = format!("{gone:?}");
        let c = softrnic_uapi::ConnectAttr {
            timeout: 10, // 4.19 ms
            retry_cnt,
            ..attr()
        };
        let Two { mut a, mut b } = two(22, c, A_PSN);
        let a_mem = a.reg_mr(PAGE, ALL, 0).unwrap();
        let b_mem = b.reg_mr(PAGE, ALL, 0).unwrap();
        let untouched = pattern(PAGE, 1);
        b.fill(b_mem.id, 0, &untouched).unwrap();
        b.post_recv(900, &[(b_mem.id, 0, PAGE as u32)]).unwrap();
        match gone {
            Gone::Loss => b
                .fault(Rule {
                    dir: Direction::Rx,
                    opcode: None,
                    nth: None,
                    action: Action::Drop,
                })
                .unwrap(),
            Gone::PeerErr => b.modify(QpState::Err, None).unwrap(),
        }
        let sge = a.sge(a_mem.id, 0, 100).unwrap();
        a.post_send(&wr(1, SendOpcode::Send, vec![sge], remote(&b_mem, 0)))
            .unwrap();
        a.post_send(&wr(2, SendOpcode::RdmaWrite, vec![sge], remote(&b_mem, 0)))
            .unwrap();
        assert_eq!(
            statuses(&a.poll(2, LONG)),
            vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)],
            "{ctx}"
        );
        assert_eq!(a.state(), QpState::Err, "{ctx}");
        let tries = u64::from(retry_cnt) + 1;
        assert_eq!(
            b.count(Direction::Rx, Opcode::RC_SEND_ONLY).unwrap(),
            tries,
            "{ctx}: the first try and retry_cnt retries reached the peer's host"
        );
        assert_eq!(
            a.faults().seen(Direction::Rx, Opcode::RC_ACKNOWLEDGE),
            0,
            "{ctx}"
        );
        let b_recvs = match gone {
            Gone::Loss => {
                assert_eq!(b.state().unwrap(), QpState::Rts, "{ctx}");
                vec![]
            }
            Gone::PeerErr => vec![(900, WcStatus::WrFlushErr)],
        };
        assert_eq!(
            peer_statuses(&b.poll(b_recvs.len(), LONG).unwrap()),
            b_recvs,
            "{ctx}"
        );
        assert_eq!(b.read(b_mem.id, 0, PAGE).unwrap(), untouched, "{ctx}");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// A key at an index where no region is registered.
    WrongKey,
    /// The access ends one byte past the region (atomics: the word right after it).
    OutOfBounds,
    /// The region lacks the right the operation needs.
    MissingRight,
    /// The region belongs to another protection domain than the QP.
    WrongPd,
    /// The region was deregistered before the request.
    Deregistered,
}

/// A posts `op` with `fault` to B, then a valid WRITE and a SEND behind it. B's target is
/// the middle page of a three-page buffer, so accesses around it hit real memory, which must
/// stay as it was; so must A's sink and the region the valid WRITE aims at.
fn remote_violation(op: SendOpcode, fault: Fault) {
    let ctx = format!("{op:?} with {fault:?}");
    let Two { mut a, mut b } = two(23, attr(), A_PSN);
    let atomic = matches!(
        op,
        SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd
    );
    let right = match op {
        SendOpcode::RdmaWrite => Access::REMOTE_WRITE,
        SendOpcode::RdmaRead => Access::REMOTE_READ,
        _ => Access::REMOTE_ATOMIC,
    };
    let backing = b.reg_mr(3 * PAGE, Access::LOCAL_WRITE, 0).unwrap();
    let before = pattern(3 * PAGE, 0x40);
    b.fill(backing.id, 0, &before).unwrap();
    let (pd, access) = match fault {
        Fault::WrongPd => (1, ALL),
        Fault::MissingRight => (0, ALL.difference(right)),
        _ => (0, ALL),
    };
    let target = b.reg_sub_mr(backing.id, PAGE, PAGE, access, pd).unwrap();
    let other = b.reg_mr(PAGE, ALL, 0).unwrap();
    let other_before = pattern(PAGE, 0x80);
    b.fill(other.id, 0, &other_before).unwrap();
    b.post_recv(900, &[(other.id, 0, PAGE as u32)]).unwrap();
    let src = a.reg_mr(2 * PAGE, ALL, 0).unwrap();
    a.fill(src.id, 0, &pattern(2 * PAGE, 0x11)).unwrap();
    let sink = a.reg_mr(2 * PAGE, ALL, 0).unwrap();
    let sink_before = pattern(2 * PAGE, 0x22);
    a.fill(sink.id, 0, &sink_before).unwrap();

    let len: u32 = if atomic { 8 } else { 3000 };
    let mut va = target.addr + 64;
    let mut rkey = target.rkey;
    match fault {
        Fault::WrongKey => rkey = (40 << 8) | (rkey & 0xff),
        Fault::OutOfBounds => {
            va = target.addr + target.len as u64 - if atomic { 0 } else { u64::from(len) - 1 }
        }
        Fault::Deregistered => b.dereg(target.id).unwrap(),
        Fault::MissingRight | Fault::WrongPd => {}
    }
    let local = if op == SendOpcode::RdmaWrite {
        &src
    } else {
        &sink
    };
    let mut bad = wr(
        1,
        op,
        vec![a.sge(local.id, 0, len).unwrap()],
        RemoteAddr { addr: va, rkey },
    );
    bad.compare_add = u64::from_ne_bytes(before[PAGE + 64..PAGE + 72].try_into().unwrap());
    bad.swap = 0x0123_4567_89ab_cdef;
    a.post_send(&bad).unwrap();
    let small = a.sge(src.id, 0, 64).unwrap();
    a.post_send(&wr(
        2,
        SendOpcode::RdmaWrite,
        vec![small],
        remote(&other, 0),
    ))
    .unwrap();
    a.post_send(&wr(3, SendOpcode::Send, vec![small], remote(&other, 0)))
        .unwrap();
    let got = a.poll(3, LONG);
    assert_eq!(
        statuses(&got),
        vec![
            (1, WcStatus::RemAccessErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ],
        "{ctx}"
    );
    assert_eq!(got[0].byte_len, 0, "{ctx}");
    assert_eq!(a.state(), QpState::Err, "{ctx}: requester");
    wait_until("the responder in ERR", || {
        b.state().unwrap() == QpState::Err
    });
    assert_eq!(
        peer_statuses(&b.poll(1, LONG).unwrap()),
        vec![(900, WcStatus::WrFlushErr)],
        "{ctx}: the responder's receive queue is flushed"
    );
    assert_eq!(
        b.read(backing.id, 0, 3 * PAGE).unwrap(),
        before,
        "{ctx}: target and around"
    );
    assert_eq!(
        b.read(other.id, 0, PAGE).unwrap(),
        other_before,
        "{ctx}: nothing behind it ran"
    );
    assert_eq!(
        a.read(sink.id, 0, 2 * PAGE).unwrap(),
        sink_before,
        "{ctx}: the sink"
    );
}

const FAULTS: [Fault; 5] = [
    Fault::WrongKey,
    Fault::OutOfBounds,
    Fault::MissingRight,
    Fault::WrongPd,
    Fault::Deregistered,
];

#[test]
fn rkey_violations_of_write_read_and_atomics() {
    for op in [
        SendOpcode::RdmaWrite,
        SendOpcode::RdmaRead,
        SendOpcode::AtomicCmpAndSwp,
        SendOpcode::AtomicFetchAndAdd,
    ] {
        for fault in FAULTS {
            remote_violation(op, fault);
        }
    }
}

fn drop_first(b: &mut softrnic_tools::peer::client::Peer, opcode: Opcode) {
    b.fault(Rule {
        dir: Direction::Tx,
        opcode: Some(opcode),
        nth: Some(0),
        action: Action::Drop,
    })
    .unwrap();
}

#[test]
fn a_lost_read_response_is_answered_again_with_the_same_data() {
    let c = softrnic_uapi::ConnectAttr {
        timeout: 10,
        ..attr()
    };
    let Two { mut a, mut b } = two(24, c, A_PSN);
    let b_mem = b.reg_mr(PAGE, ALL, 0).unwrap();
    let data = pattern(PAGE, 0x21);
    b.fill(b_mem.id, 0, &data).unwrap();
    let sink = a.reg_mr(PAGE, ALL, 0).unwrap();
    drop_first(&mut b, Opcode::RC_RDMA_READ_RESPONSE_ONLY);
    let sge = a.sge(sink.id, 100, 500).unwrap();
    a.post_send(&wr(1, SendOpcode::RdmaRead, vec![sge], remote(&b_mem, 7)))
        .unwrap();
    let got = a.poll(1, LONG);
    assert_eq!(statuses(&got), vec![(1, WcStatus::Success)]);
    assert_eq!(got[0].byte_len, 500);
    assert_eq!(a.read(sink.id, 100, 500).unwrap(), data[7..507]);
    assert_eq!(a.read(sink.id, 0, 100).unwrap(), vec![0; 100]);
    assert_eq!(
        a.read(sink.id, 600, PAGE - 600).unwrap(),
        vec![0; PAGE - 600]
    );
    // The responder saw the request twice and answered twice; one answer reached A.
    assert_eq!(
        b.count(Direction::Rx, Opcode::RC_RDMA_READ_REQUEST)
            .unwrap(),
        2
    );
    assert_eq!(
        b.count(Direction::Tx, Opcode::RC_RDMA_READ_RESPONSE_ONLY)
            .unwrap(),
        2
    );
    assert_eq!(
        a.faults()
            .seen(Direction::Rx, Opcode::RC_RDMA_READ_RESPONSE_ONLY),
        1
    );
    assert_eq!(
        b.read(b_mem.id, 0, PAGE).unwrap(),
        data,
        "a READ writes nothing"
    );
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(b.state().unwrap(), QpState::Rts);
}

#[test]
fn a_duplicated_read_request_completes_once() {
    let Two { mut a, mut b } = two(25, attr(), A_PSN);
    let b_mem = b.reg_mr(PAGE, ALL, 0).unwrap();
    let data = pattern(PAGE, 0x23);
    b.fill(b_mem.id, 0, &data).unwrap();
    let sink = a.reg_mr(PAGE, ALL, 0).unwrap();
    a.faults()
        .add(Rule {
            dir: Direction::Tx,
            opcode: Some(Opcode::RC_RDMA_READ_REQUEST),
            nth: Some(0),
            action: Action::Duplicate,
        })
        .unwrap();
    let sge = a.sge(sink.id, 0, 3000).unwrap();
    a.post_send(&wr(1, SendOpcode::RdmaRead, vec![sge], remote(&b_mem, 50)))
        .unwrap();
    assert_eq!(statuses(&a.poll(1, LONG)), vec![(1, WcStatus::Success)]);
    assert_eq!(a.read(sink.id, 0, 3000).unwrap(), data[50..3050]);
    assert_eq!(
        a.read(sink.id, 3000, PAGE - 3000).unwrap(),
        vec![0; PAGE - 3000]
    );
    assert_eq!(
        b.count(Direction::Rx, Opcode::RC_RDMA_READ_REQUEST)
            .unwrap(),
        2
    );
    assert!(
        a.poll(1, Duration::from_millis(50)).is_empty(),
        "one completion only"
    );
    assert_eq!(a.state(), QpState::Rts);
    assert_eq!(b.state().unwrap(), QpState::Rts);
}

#[test]
fn a_lost_atomic_ack_is_replayed_not_executed_again() {
    for op in [SendOpcode::AtomicFetchAndAdd, SendOpcode::AtomicCmpAndSwp] {
        let c = softrnic_uapi::ConnectAttr {
            timeout: 10,
            ..attr()
        };
        let Two { mut a, mut b } = two(26, c, A_PSN);
        let b_mem = b.reg_mr(PAGE, ALL, 0).unwrap();
        b.fill(b_mem.id, 64, &42u64.to_ne_bytes()).unwrap();
        let sink = a.reg_mr(PAGE, ALL, 0).unwrap();
        a.fill(sink.id, 0, &u64::MAX.to_ne_bytes()).unwrap();
        drop_first(&mut b, Opcode::RC_ATOMIC_ACKNOWLEDGE);
        let mut w = wr(
            1,
            op,
            vec![a.sge(sink.id, 0, 8).unwrap()],
            remote(&b_mem, 64),
        );
        // FAA adds 10; CAS swaps 42 for 7 (run twice, the second would see 7 and fail).
        let (after, request) = if op == SendOpcode::AtomicFetchAndAdd {
            w.compare_add = 10;
            (52u64, Opcode::RC_FETCH_ADD)
        } else {
            (w.compare_add, w.swap) = (42, 7);
            (7, Opcode::RC_COMPARE_SWAP)
        };
        a.post_send(&w).unwrap();
        assert_eq!(
            statuses(&a.poll(1, LONG)),
            vec![(1, WcStatus::Success)],
            "{op:?}"
        );
        assert_eq!(
            b.read(b_mem.id, 64, 8).unwrap(),
            after.to_ne_bytes(),
            "{op:?}: once"
        );
        assert_eq!(
            a.read(sink.id, 0, 8).unwrap(),
            42u64.to_ne_bytes(),
            "{op:?}: original"
        );
        assert_eq!(
            b.count(Direction::Rx, request).unwrap(),
            2,
            "{op:?}: a duplicate"
        );
        assert_eq!(
            b.count(Direction::Tx, Opcode::RC_ATOMIC_ACKNOWLEDGE)
                .unwrap(),
            2
        );
        assert_eq!(a.state(), QpState::Rts);
        assert_eq!(b.state().unwrap(), QpState::Rts);
    }
}
