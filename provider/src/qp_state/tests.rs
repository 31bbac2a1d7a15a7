//! Tests of the state machine against an independent transcription of the kernel's
//! `qp_state_table` (`drivers/infiniband/core/verbs.c`), written out entry by entry below
//! without using the constants of `table.rs`.

use super::*;
use core::time::Duration;

/// `QpState::Err` under a name that does not shadow `Result::Err`.
const ERR: QpState = QpState::Err;
use AttrMask as A;
use QpState::{Init, Reset, Rtr, Rts, Sqd, Sqe};
use QpType::*;

/// (type, current, next, required without STATE, optional) for every allowed transition, as
/// the kernel table lists it for RC, UC and UD.
fn kernel_table() -> Vec<(QpType, QpState, QpState, A, A)> {
    let e = A::EMPTY;
    let mut v = Vec::new();
    for t in QpType::ALL {
        // The state-only entries, the same for every type.
        v.push((t, Reset, Reset, e, e));
        for from in [Init, Rtr, Rts, Sqd, Sqe, ERR] {
            v.push((t, from, Reset, e, e));
            v.push((t, from, ERR, e, e));
        }
        v.push((t, Rts, Sqd, e, A::EN_SQD_ASYNC_NOTIFY));
    }
    let a = A::ACCESS_FLAGS;
    let (pk, port, qk) = (A::PKEY_INDEX, A::PORT, A::QKEY);
    let (cur, alt, mig, rnr) = (
        A::CUR_STATE,
        A::ALT_PATH,
        A::PATH_MIG_STATE,
        A::MIN_RNR_TIMER,
    );
    v.extend([
        (Rc, Reset, Init, pk | port | a, e),
        (Uc, Reset, Init, pk | port | a, e),
        (Ud, Reset, Init, pk | port | qk, e),
        (Rc, Init, Init, e, pk | port | a),
        (Uc, Init, Init, e, pk | port | a),
        (Ud, Init, Init, e, pk | port | qk),
        (
            Rc,
            Init,
            Rtr,
            A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN | A::MAX_DEST_RD_ATOMIC | rnr,
            alt | a | pk,
        ),
        (
            Uc,
            Init,
            Rtr,
            A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN,
            alt | a | pk,
        ),
        (Ud, Init, Rtr, e, pk | qk),
        (
            Rc,
            Rtr,
            Rts,
            A::TIMEOUT | A::RETRY_CNT | A::RNR_RETRY | A::SQ_PSN | A::MAX_QP_RD_ATOMIC,
            cur | alt | a | rnr | mig,
        ),
        (Uc, Rtr, Rts, A::SQ_PSN, cur | alt | a | mig),
        (Ud, Rtr, Rts, A::SQ_PSN, cur | qk),
        (Rc, Rts, Rts, e, cur | a | alt | mig | rnr),
        (Uc, Rts, Rts, e, cur | a | alt | mig),
        (Ud, Rts, Rts, e, cur | qk),
        (Rc, Sqd, Rts, e, cur | alt | a | rnr | mig),
        (Uc, Sqd, Rts, e, cur | alt | a | mig),
        (Ud, Sqd, Rts, e, cur | qk),
        (
            Rc,
            Sqd,
            Sqd,
            e,
            port | A::AV
                | A::TIMEOUT
                | A::RETRY_CNT
                | A::RNR_RETRY
                | A::MAX_QP_RD_ATOMIC
                | A::MAX_DEST_RD_ATOMIC
                | alt
                | a
                | pk
                | rnr
                | mig,
        ),
        (Uc, Sqd, Sqd, e, A::AV | alt | a | pk | mig),
        (Ud, Sqd, Sqd, e, pk | qk),
        (Rc, Sqe, Rts, e, e),
        (Uc, Sqe, Rts, e, cur | a),
        (Ud, Sqe, Rts, e, cur | qk),
    ]);
    // The kernel's XRC_INI (XrcSend) and XRC_TGT (XrcRecv) columns.
    let (av, mtu, dqpn, rqpsn) = (A::AV, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN);
    let (to, sqpsn) = (A::TIMEOUT, A::SQ_PSN);
    let req_rts = to | A::RETRY_CNT | A::RNR_RETRY | sqpsn | A::MAX_QP_RD_ATOMIC;
    v.extend([
        (XrcSend, Reset, Init, pk | port | a, e),
        (XrcRecv, Reset, Init, pk | port | a, e),
        (XrcSend, Init, Init, e, pk | port | a),
        (XrcRecv, Init, Init, e, pk | port | a),
        (XrcSend, Init, Rtr, av | mtu | dqpn | rqpsn, alt | a | pk),
        (
            XrcRecv,
            Init,
            Rtr,
            av | mtu | dqpn | rqpsn | A::MAX_DEST_RD_ATOMIC | rnr,
            alt | a | pk,
        ),
        (XrcSend, Rtr, Rts, req_rts, cur | alt | a | mig),
        (XrcRecv, Rtr, Rts, to | sqpsn, cur | alt | a | rnr | mig),
        (XrcSend, Rts, Rts, e, cur | a | alt | mig),
        (XrcRecv, Rts, Rts, e, cur | a | alt | mig | rnr),
        (XrcSend, Sqd, Rts, e, cur | alt | a | mig),
        (XrcRecv, Sqd, Rts, e, cur | alt | a | rnr | mig),
        (
            XrcSend,
            Sqd,
            Sqd,
            e,
            port | av | to | A::RETRY_CNT | A::RNR_RETRY | A::MAX_QP_RD_ATOMIC | alt | a | pk | mig,
        ),
        (
            XrcRecv,
            Sqd,
            Sqd,
            e,
            port | av | to | A::MAX_DEST_RD_ATOMIC | alt | a | pk | rnr | mig,
        ),
        (XrcSend, Sqe, Rts, e, e),
        (XrcRecv, Sqe, Rts, e, e),
    ]);
    v
}

fn expected(t: QpType, from: QpState, to: QpState) -> Option<(A, A)> {
    kernel_table()
        .into_iter()
        .find(|r| r.0 == t && r.1 == from && r.2 == to)
        .map(|r| (r.3, r.4))
}

/// Every single bit of a u32, named or not.
fn all_bits() -> impl Iterator<Item = A> {
    (0..32).map(|i| A::from_bits_retain(1 << i))
}

fn is_einval(r: Result<()>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

#[test]
fn hand_written_list_has_no_duplicates() {
    let t = kernel_table();
    for (i, a) in t.iter().enumerate() {
        assert!(
            !t[i + 1..]
                .iter()
                .any(|b| (b.0, b.1, b.2) == (a.0, a.1, a.2)),
            "{a:?}"
        );
    }
}

#[test]
fn table_matches_kernel_for_every_pair() {
    for t in QpType::ALL {
        for from in QpState::ALL {
            for to in QpState::ALL {
                let got = transition_masks(t, from, to);
                let want = expected(t, from, to).map(|(req, opt)| {
                    if from == to {
                        TransitionMasks {
                            required: req,
                            optional: opt | A::STATE,
                        }
                    } else {
                        TransitionMasks {
                            required: req | A::STATE,
                            optional: opt,
                        }
                    }
                });
                assert_eq!(got, want, "{t:?} {from} -> {to}");
            }
        }
    }
}

#[test]
fn allowedness_matches_kernel_for_every_pair() {
    for t in QpType::ALL {
        for from in QpState::ALL {
            for to in QpState::ALL {
                let full = expected(t, from, to).map(|(req, opt)| req | opt | A::STATE);
                let r = check_transition(t, from, to, full.unwrap_or(A::STATE));
                assert_eq!(r.is_ok(), full.is_some(), "{t:?} {from} -> {to}: {r:?}");
                if full.is_none() {
                    let want = format!("state transition {from} -> {to} is not allowed");
                    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m.ends_with(&want)));
                }
            }
        }
    }
}

#[test]
fn every_allowed_transition_needs_exactly_its_attributes() {
    for t in QpType::ALL {
        for from in QpState::ALL {
            for to in QpState::ALL {
                let Some(m) = transition_masks(t, from, to) else {
                    continue;
                };
                let ctx = format!("{t:?} {from} -> {to}");
                assert_eq!(check_transition(t, from, to, m.required), Ok(()), "{ctx}");
                let full = m.required | m.optional;
                assert_eq!(check_transition(t, from, to, full), Ok(()), "{ctx}");
                for b in m.required.iter() {
                    let r = check_transition(t, from, to, full.difference(b));
                    assert!(is_einval(r), "{ctx}: without {b:?} gave {r:?}");
                }
                for b in all_bits().filter(|b| !full.contains(*b)) {
                    let r = check_transition(t, from, to, full | b);
                    assert!(is_einval(r), "{ctx}: with {b:?} gave {r:?}");
                }
                for b in m.optional.iter() {
                    assert_eq!(
                        check_transition(t, from, to, m.required | b),
                        Ok(()),
                        "{ctx} {b:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn well_known_transitions() {
    let s = A::STATE;
    let ok = |t, f, n, m| check_transition(t, f, n, m) == Ok(());
    // The four modifies of every RC connection setup (perftest, rping, ...).
    assert!(ok(
        Rc,
        Reset,
        Init,
        s | A::PKEY_INDEX | A::PORT | A::ACCESS_FLAGS
    ));
    let rtr = s | A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN | A::MAX_DEST_RD_ATOMIC;
    assert!(ok(Rc, Init, Rtr, rtr | A::MIN_RNR_TIMER));
    assert!(!ok(Rc, Init, Rtr, rtr));
    let rts = s | A::SQ_PSN | A::TIMEOUT | A::RETRY_CNT | A::RNR_RETRY | A::MAX_QP_RD_ATOMIC;
    assert!(ok(Rc, Rtr, Rts, rts));
    assert!(!ok(Rc, Rtr, Rts, rts.difference(A::RNR_RETRY)));
    // UD.
    assert!(ok(Ud, Reset, Init, s | A::PKEY_INDEX | A::PORT | A::QKEY));
    assert!(!ok(
        Ud,
        Reset,
        Init,
        s | A::PKEY_INDEX | A::PORT | A::ACCESS_FLAGS
    ));
    assert!(ok(Ud, Init, Rtr, s));
    assert!(ok(Ud, Rtr, Rts, s | A::SQ_PSN));
    assert!(!ok(Ud, Rtr, Rts, s | A::SQ_PSN | A::TIMEOUT));
    // UC has no ACK timeout, retries or read/atomic depth.
    assert!(ok(
        Uc,
        Init,
        Rtr,
        s | A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN
    ));
    assert!(!ok(
        Uc,
        Init,
        Rtr,
        s | A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN | A::MIN_RNR_TIMER
    ));
    assert!(ok(Uc, Rtr, Rts, s | A::SQ_PSN));
    // Skipping a state, going back, and RESET -> ERR are refused.
    assert!(!ok(
        Rc,
        Reset,
        Rtr,
        rtr | A::MIN_RNR_TIMER | A::PKEY_INDEX | A::PORT
    ));
    assert!(!ok(Rc, Rts, Init, s));
    assert!(!ok(Rc, Reset, ERR, s));
    assert!(!ok(Rc, Init, Sqd, s));
    // Any other state -> RESET / ERR with STATE only.
    for from in [Init, Rtr, Rts, Sqd, Sqe, ERR] {
        assert!(ok(Rc, from, ERR, s) && ok(Ud, from, Reset, s), "{from}");
        assert!(!ok(Rc, from, ERR, s | A::QKEY), "{from}");
    }
}

#[test]
fn without_state_the_qp_stays() {
    // RTS -> RTS attribute changes.
    assert_eq!(
        check_transition(Rc, Rts, Rts, A::MIN_RNR_TIMER | A::ACCESS_FLAGS),
        Ok(())
    );
    assert_eq!(check_transition(Ud, Rts, Rts, A::QKEY), Ok(()));
    assert!(is_einval(check_transition(Rc, Rts, Rts, A::TIMEOUT)));
    // A changed state needs IBV_QP_STATE.
    let r = check_transition(Rc, Init, Rtr, A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN);
    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m.contains("IBV_QP_STATE")));
    // No RTR -> RTR or SQE -> SQE entry: attribute-only modifies fail there.
    assert!(is_einval(check_transition(Rc, Rtr, Rtr, A::EMPTY)));
    assert!(is_einval(check_transition(Ud, Sqe, Sqe, A::EMPTY)));
    // RESET and ERR accept an empty modify.
    assert_eq!(check_transition(Rc, Reset, Reset, A::EMPTY), Ok(()));
    assert_eq!(check_transition(Rc, ERR, ERR, A::EMPTY), Ok(()));
    // check_modify resolves the next state from the mask.
    assert_eq!(
        check_modify(Rc, Rts, A::MIN_RNR_TIMER, Reset, Init),
        Ok(Rts)
    );
    assert_eq!(check_modify(Rc, Rts, A::STATE, Reset, ERR), Ok(ERR));
}

#[test]
fn cur_state() {
    let s = A::STATE | A::CUR_STATE;
    // Allowed where the table lists it, and only from RTR, RTS, SQD, SQE.
    assert_eq!(check_modify(Ud, Sqe, s, Sqe, Rts), Ok(Rts));
    assert_eq!(check_modify(Rc, Sqd, s, Sqd, Rts), Ok(Rts));
    assert_eq!(check_modify(Rc, Rts, A::CUR_STATE, Rts, Reset), Ok(Rts));
    assert!(check_modify(Rc, Init, s, Init, Init).is_err());
    assert!(check_modify(Rc, Rts, s, Rts, Sqd).is_err());
    assert!(check_modify(Rc, Sqe, s, Sqe, Rts).is_err());
    // Its value must be the actual state.
    let r = check_modify(Ud, Rts, s, Sqe, Rts);
    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m.contains("does not match")));
    // Without the bit, cur_qp_state is not read.
    assert_eq!(check_modify(Ud, Sqe, A::STATE, Reset, Rts), Ok(Rts));
}

#[test]
fn errors_name_the_attribute() {
    let r = check_transition(Rc, Reset, Init, A::STATE | A::PKEY_INDEX | A::PORT);
    assert_eq!(
        r,
        Err(Error::InvalidArgument(
            "modify QP: required attribute missing: IBV_QP_ACCESS_FLAGS"
        ))
    );
    let r = check_transition(Ud, Rtr, Rts, A::STATE | A::SQ_PSN | A::RATE_LIMIT);
    assert_eq!(
        r,
        Err(Error::InvalidArgument(
            "modify QP: attribute not allowed in this transition: IBV_QP_RATE_LIMIT"
        ))
    );
    let r = check_transition(Rc, Rts, Rts, A::from_bits_retain(1 << 21));
    assert_eq!(
        r,
        Err(Error::InvalidArgument(
            "modify QP: unknown bit in attr_mask"
        ))
    );
    assert_eq!(r.unwrap_err().errno(), 22);
}

#[test]
fn numeric_values() {
    for (i, s) in QpState::ALL.into_iter().enumerate() {
        assert_eq!(s.ibv(), i as u32);
        assert_eq!(QpState::from_ibv(i as u32), Ok(s));
    }
    assert!(QpState::from_ibv(7).is_err());
    assert_eq!((Rc.ibv(), Uc.ibv(), Ud.ibv()), (2, 3, 4));
    assert_eq!(QpType::from_ibv(4), Ok(Ud));
    assert_eq!(QpType::from_ibv(9), Ok(XrcSend));
    assert_eq!(QpType::from_ibv(10), Ok(XrcRecv));
    assert!(matches!(QpType::from_ibv(8), Err(Error::NotSupported(_))));
    assert!(matches!(
        QpType::from_ibv(1),
        Err(Error::InvalidArgument(_))
    ));
    let bits = [
        (A::STATE, 0),
        (A::CUR_STATE, 1),
        (A::EN_SQD_ASYNC_NOTIFY, 2),
        (A::ACCESS_FLAGS, 3),
        (A::PKEY_INDEX, 4),
        (A::PORT, 5),
        (A::QKEY, 6),
        (A::AV, 7),
        (A::PATH_MTU, 8),
        (A::TIMEOUT, 9),
        (A::RETRY_CNT, 10),
        (A::RNR_RETRY, 11),
        (A::RQ_PSN, 12),
        (A::MAX_QP_RD_ATOMIC, 13),
        (A::ALT_PATH, 14),
        (A::MIN_RNR_TIMER, 15),
        (A::SQ_PSN, 16),
        (A::MAX_DEST_RD_ATOMIC, 17),
        (A::PATH_MIG_STATE, 18),
        (A::CAP, 19),
        (A::DEST_QPN, 20),
        (A::RATE_LIMIT, 25),
    ];
    let mut known = A::EMPTY;
    for (m, bit) in bits {
        assert_eq!(m.bits(), 1 << bit);
        assert!(m.name().is_some());
        known |= m;
    }
    assert_eq!(known, A::KNOWN);
    assert_eq!(
        format!("{:?}", A::STATE | A::AV | A::from_bits_retain(1 << 30)),
        "AttrMask(IBV_QP_STATE | IBV_QP_AV | 0x40000000)"
    );
}

#[test]
fn queue_rules() {
    let send: Vec<_> = QpState::ALL
        .into_iter()
        .filter(|s| s.can_post_send())
        .collect();
    assert_eq!(send, [Rts, Sqd, Sqe, ERR]);
    let recv: Vec<_> = QpState::ALL
        .into_iter()
        .filter(|s| s.can_post_recv())
        .collect();
    assert_eq!(recv, [Init, Rtr, Rts, Sqd, Sqe, ERR]);
    let incoming: Vec<_> = QpState::ALL
        .into_iter()
        .filter(|s| s.accepts_incoming())
        .collect();
    assert_eq!(incoming, [Rtr, Rts, Sqd, Sqe]);
    let responses: Vec<_> = QpState::ALL
        .into_iter()
        .filter(|s| s.accepts_responses())
        .collect();
    assert_eq!(responses, [Rts, Sqd, Sqe]);
    let flush: Vec<_> = QpState::ALL
        .into_iter()
        .filter(|s| s.flushes_on_entry())
        .collect();
    assert_eq!(flush, [ERR]);
}

#[test]
fn timeout_encoding() {
    assert_eq!(local_ack_timeout(0), Ok(None));
    assert_eq!(local_ack_timeout(1), Ok(Some(Duration::from_nanos(8192))));
    assert_eq!(
        local_ack_timeout(8),
        Ok(Some(Duration::from_nanos(1_048_576)))
    );
    assert_eq!(
        local_ack_timeout(14),
        Ok(Some(Duration::from_nanos(67_108_864)))
    );
    assert_eq!(
        local_ack_timeout(31),
        Ok(Some(Duration::from_nanos(4096 << 31)))
    );
    assert!(local_ack_timeout(32).is_err());
}

#[test]
fn mtu_encoding() {
    for (v, bytes) in [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
        let m = Mtu::from_ibv(v).unwrap();
        assert_eq!((m.ibv(), m.bytes()), (v, bytes));
        assert_eq!(Mtu::from_bytes(bytes), Ok(m));
    }
    assert!(Mtu::from_ibv(0).is_err() && Mtu::from_ibv(6).is_err());
    assert!(Mtu::from_bytes(1500).is_err() && Mtu::from_bytes(128).is_err());
}

#[test]
fn retry_counts() {
    fn count(mut r: Retries) -> usize {
        (0..100).take_while(|_| r.try_consume()).count()
    }
    for n in 0..=7u8 {
        assert_eq!(
            count(transport_retries(n).unwrap()),
            n as usize,
            "retry_cnt {n}"
        );
    }
    for n in 0..=6u8 {
        assert_eq!(count(rnr_retries(n).unwrap()), n as usize, "rnr_retry {n}");
    }
    assert_eq!(rnr_retries(7), Ok(Retries::Unlimited));
    assert_eq!(count(Retries::Unlimited), 100);
    assert!(transport_retries(8).is_err() && rnr_retries(8).is_err());
}
