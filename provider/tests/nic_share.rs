//! How a device's QPs share its transmit (`nic/turns.rs`): in turns of up to `QUANTUM`
//! packets, so that each QP's packets leave in runs the transport can segment as one
//! (UDP GSO), and within one send window for the whole device, each sending QP getting an
//! equal share of it.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use common::wrs::send_wr;
use common::*;
use softrnic_provider::mr::{Access, MrTable};
use softrnic_provider::nic::{Nic, QUANTUM};
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::rc::{TxQueue, DEVICE_WINDOW_PSNS, MIN_SHARE_PSNS, WINDOW_PSNS};
use softrnic_provider::wr::{RemoteAddr, SendFlags, SendOpcode, Sge};

/// A NIC with `n` RC QPs to peer QPs 0x100.. on B_ADDR (which never answers), each with
/// `messages` unsignaled 64 KiB RDMA WRITEs posted (PMTU 4096: 16 packets each), and the
/// buffer they read from.
fn writers(n: usize, messages: usize) -> (Nic, Vec<u32>, Vec<u8>, Arc<MrTable>) {
    let mrs = Arc::new(MrTable::new(16, 5).unwrap());
    let buf = vec![7u8; 1 << 16];
    // SAFETY: the NIC only reads `buf`, which the caller keeps alive beside it (and drops
    // after it).
    let keys = unsafe {
        mrs.register(
            PD,
            buf.as_ptr().cast_mut(),
            buf.len(),
            buf.as_ptr() as u64,
            Access::LOCAL_WRITE,
        )
        .unwrap()
    };
    let mut nic = Nic::new(A_ADDR, mrs.clone(), 2048);
    let cq = nic.create_cq(4096);
    let c = Connect {
        mtu: Mtu::Mtu4096,
        ..Connect::default()
    };
    let mut qpns = Vec::new();
    for i in 0..n {
        let qpn = nic
            .create_qp(PD, cq, cq, None, caps(), false, 4096)
            .unwrap();
        connect(
            nic.qp(qpn).unwrap(),
            0x100 + i as u32,
            B_ADDR,
            c,
            c.a_psn,
            c.b_psn,
        );
        for m in 0..messages {
            let mut wr = send_wr(
                m as u64,
                SendOpcode::RdmaWrite,
                vec![Sge {
                    addr: buf.as_ptr() as u64,
                    length: 1 << 16,
                    lkey: keys.lkey,
                }],
                RemoteAddr {
                    addr: 0x1000,
                    rkey: 0x55,
                },
            );
            wr.flags = SendFlags(0);
            let (qp, mrs) = nic.qp_and_mrs(qpn).unwrap();
            qp.post_send(&wr, mrs).unwrap();
        }
        qpns.push(qpn);
    }
    (nic, qpns, buf, mrs)
}

/// Full transmit passes of batches of 32 until the QPs have nothing more (no ACK comes):
/// the destination QPN of every packet, in order.
fn drain(nic: &mut Nic) -> Vec<u32> {
    let (now, mut out, mut all) = (Instant::now(), TxQueue::new(), Vec::new());
    loop {
        out.clear();
        nic.poll_transmit(now, &mut out, 32);
        all.extend(out.as_slice().iter().map(|t| t.roce.bth.dest_qp));
        if out.len() < 32 {
            return all;
        }
    }
}

/// Consecutive packets to the same QP, as (QPN, count).
fn runs(dests: &[u32]) -> Vec<(u32, usize)> {
    let mut runs: Vec<(u32, usize)> = Vec::new();
    for &q in dests {
        match runs.last_mut() {
            Some((p, n)) if *p == q => *n += 1,
            _ => runs.push((q, 1)),
        }
    }
    runs
}

/// Packets per destination QP.
fn per_qp(dests: &[u32]) -> HashMap<u32, usize> {
    let mut n = HashMap::new();
    for &q in dests {
        *n.entry(q).or_default() += 1;
    }
    n
}

#[test]
fn one_qp_alone_has_its_whole_window() {
    let (mut nic, _, _buf, _mrs) = writers(1, 64);
    assert_eq!(drain(&mut nic).len(), WINDOW_PSNS as usize);
}

#[test]
fn four_qps_send_in_quanta_and_share_the_device_window() {
    let (mut nic, _, _buf, _mrs) = writers(4, 64);
    let dests = drain(&mut nic);
    let share = DEVICE_WINDOW_PSNS as usize / 4;
    assert_eq!(dests.len(), DEVICE_WINDOW_PSNS as usize);
    for (q, n) in runs(&dests) {
        // A turn's quantum, or two turns in a row when the others have nothing left.
        assert!(n % QUANTUM == 0, "a run of {n} packets to QP {q:#x}");
    }
    assert!(per_qp(&dests).values().all(|&n| n == share), "{dests:?}");
}

#[test]
fn many_qps_together_stay_within_the_device_window() {
    let (mut nic, _, _buf, _mrs) = writers(1024, 1);
    let dests = drain(&mut nic);
    assert_eq!(
        dests.len(),
        DEVICE_WINDOW_PSNS as usize,
        "not a packet per QP"
    );
    // A run each, for as many QPs as the window holds; the others wait their turn.
    let n = per_qp(&dests);
    assert_eq!(n.len(), (DEVICE_WINDOW_PSNS / MIN_SHARE_PSNS) as usize);
    assert!(n.values().all(|&k| k == MIN_SHARE_PSNS as usize), "{n:?}");
}

#[test]
fn a_qp_that_goes_back_after_a_timeout_lets_the_others_send() {
    let (mut nic, qpns, _buf, _mrs) = writers(4, 64);
    // The first QP starts alone, from a post's round before any full pass, and fills the
    // whole window; the others, counted as they come, find it full.
    let now = Instant::now();
    let mut sent = Vec::new();
    for &q in &qpns {
        let mut out = TxQueue::new();
        nic.poll_transmit_qp(q, now, &mut out, 4096);
        sent.push(out.len());
    }
    assert_eq!(sent, [WINDOW_PSNS as usize, 0, 0, 0]);
    assert!(drain(&mut nic).is_empty(), "nothing is acknowledged");
    // No ACK comes (the peer is dead): at its retransmit timeout the first QP goes back to
    // resend from its oldest PSN and holds no more than its share of the window.
    let later = now + std::time::Duration::from_secs(1);
    nic.handle_timeout(later);
    let (mut out, mut dests) = (TxQueue::new(), Vec::new());
    loop {
        out.clear();
        nic.poll_transmit(later, &mut out, 32);
        dests.extend(out.as_slice().iter().map(|t| t.roce.bth.dest_qp));
        if out.len() < 32 {
            break;
        }
    }
    let share = DEVICE_WINDOW_PSNS as usize / 4;
    let n = per_qp(&dests);
    assert_eq!(n.len(), 4, "every QP sends: {n:?}");
    assert!(n.values().all(|&k| k == share), "{n:?}");
}
