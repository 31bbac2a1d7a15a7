//! `softrnic stat` from another process: this test's process runs a known workload between
//! two devices (127.0.67.1 sends, 127.0.67.2 receives, RC over kernel UDP), and the counters
//! `softrnic stat --json` reads from it must agree with what that workload must have sent and
//! received: `N` SENDs of one packet each, one at a time, are `N` request packets and `N`
//! ACKs (the next SEND waits for the ACK of the last); a SEND that finds no receive WQE is
//! RNR NAKed, and every RNR NAK sent is received. Exact where nothing was resent; a resend
//! (a local ACK timeout on a loaded machine) is allowed for and accounted for.

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use softrnic_tools::rig::{wr, Rig};
use softrnic_uapi::{Progress, RemoteAddr, SendOpcode};

const BIN: &str = env!("CARGO_BIN_EXE_softrnic");
const A: &str = "127.0.67.1";
const B: &str = "127.0.67.2";
/// SENDs of the first phase.
const N: u64 = 20;
/// Bytes per SEND: one packet at any path MTU.
const SIZE: u32 = 64;

fn stat(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("stat")
        .args(args)
        .output()
        .expect("stat runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("text")
}

/// This process's entry for the device of `addr` in `softrnic stat --json`.
fn this_process(addr: &str) -> Value {
    let json: Value = serde_json::from_str(&stat(&["--json", "--addr", addr])).expect("JSON");
    let processes = json[0]["processes"].as_array().expect("processes").clone();
    let me = processes
        .into_iter()
        .find(|p| p["pid"] == std::process::id())
        .unwrap_or_else(|| panic!("this process is not listed: {json}"));
    assert_eq!(me["qps"].as_array().map(Vec::len), Some(1), "{me}");
    me
}

/// Counter `name` of `v` (a `counters` object).
fn get(v: &Value, name: &str) -> u64 {
    v[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}: {v}"))
}

/// The device's and its one QP's counters of this process on `addr`.
fn counters(addr: &str) -> (Value, Value) {
    let me = this_process(addr);
    (me["counters"].clone(), me["qps"][0]["counters"].clone())
}

#[test]
fn stat_counts_what_a_known_workload_sent_and_received() {
    let (a, b): (IpAddr, IpAddr) = (A.parse().unwrap(), B.parse().unwrap());
    let rig = Rig::new(a, b, 1 << 16, Progress::Thread).expect("the rig");
    let send = |id: u64| {
        let w = wr(
            id,
            SendOpcode::Send,
            vec![rig.a.mr.sge(0, SIZE)],
            RemoteAddr::default(),
        );
        rig.a.post(w).expect("post_send");
    };

    // N SENDs, one at a time.
    for i in 0..N {
        rig.b.post_recv(i, 0, SIZE).expect("post_recv");
    }
    for i in 0..N {
        send(i);
        rig.a.wait(1).expect("the SEND completes");
        rig.b.wait(1).expect("the receive completes");
    }
    let (dev_a, qp_a) = counters(A);
    let (dev_b, qp_b) = counters(B);
    let resent = get(&qp_a, "completer_retry_err") + get(&qp_a, "timeout_resends");
    if resent == 0 {
        assert_eq!(get(&qp_a, "sent_pkts"), N, "{qp_a}");
        assert_eq!(get(&qp_b, "rcvd_pkts"), N, "{qp_b}");
        assert_eq!(get(&qp_b, "duplicate_request"), 0, "{qp_b}");
        assert_eq!(get(&qp_b, "sent_pkts"), N, "one ACK per SEND: {qp_b}");
        assert_eq!(get(&qp_a, "rcvd_pkts"), N, "{qp_a}");
    } else {
        eprintln!("resends happened ({resent}): bounds only");
        assert!(get(&qp_a, "sent_pkts") > N, "{qp_a}");
        assert!(get(&qp_b, "sent_pkts") >= N, "{qp_b}");
    }
    // Nothing is lost on loopback: each side received what the other sent, and every
    // request beyond the N first was a duplicate.
    assert_eq!(get(&qp_b, "rcvd_pkts"), get(&qp_a, "sent_pkts"), "{qp_b}");
    assert_eq!(get(&qp_a, "rcvd_pkts"), get(&qp_b, "sent_pkts"), "{qp_a}");
    assert_eq!(get(&qp_b, "duplicate_request"), get(&qp_b, "rcvd_pkts") - N);
    // Each SEND completed once at each end, as rxe counts it.
    assert_eq!(get(&qp_a, "rdma_sends"), N, "{qp_a}");
    assert_eq!(get(&qp_b, "rdma_recvs"), N, "{qp_b}");
    assert_eq!((get(&qp_a, "rdma_recvs"), get(&qp_b, "rdma_sends")), (0, 0));
    // Each device has one QP here: its packets are that QP's; nothing was dropped.
    for (dev, qp) in [(&dev_a, &qp_a), (&dev_b, &qp_b)] {
        assert_eq!(get(dev, "sent_pkts"), get(qp, "sent_pkts"), "{dev}");
        assert_eq!(get(dev, "rcvd_pkts"), get(qp, "rcvd_pkts"), "{dev}");
        for name in [
            "send_err",
            "out_of_seq_request",
            "send_rnr_err",
            "rcvd_rnr_err",
            "rcvd_seq_err",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
            "icrc_errors",
            "addr_mismatch",
            "no_qp",
            "malformed",
            "bad_pkey",
        ] {
            assert_eq!(get(dev, name), 0, "{name}: {dev}");
        }
    }

    // A SEND with no receive WQE posted: RNR NAKed (min_rnr_timer 12, 0.64 ms, retried
    // without limit) until a receive is posted.
    send(N);
    let deadline = Instant::now() + Duration::from_secs(20);
    let naks = loop {
        let (_, qp) = counters(B);
        let naks = get(&qp, "send_rnr_err");
        if naks > 0 || Instant::now() > deadline {
            break naks;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(naks > 0, "no RNR NAK within 20 s");
    rig.b.post_recv(N, 0, SIZE).expect("post_recv");
    rig.b.wait(1).expect("the receive completes");
    rig.a
        .wait(1)
        .expect("the SEND completes after its RNR NAKs");
    let (dev_a, qp_a) = counters(A);
    let (dev_b, qp_b) = counters(B);
    let naks = get(&qp_b, "send_rnr_err");
    assert!(naks > 0, "{qp_b}");
    assert_eq!(
        get(&qp_a, "rcvd_rnr_err"),
        naks,
        "every RNR NAK arrives: {qp_a}"
    );
    assert_eq!(get(&dev_a, "rcvd_rnr_err"), naks, "{dev_a}");
    assert_eq!(get(&dev_b, "send_rnr_err"), naks, "{dev_b}");
    assert_eq!(get(&qp_a, "retry_rnr_exceeded_err"), 0, "{qp_a}");
    let resent = get(&qp_a, "completer_retry_err") + get(&qp_a, "timeout_resends");
    if resent == 0 {
        // The SEND once, then again after each RNR NAK; one ACK at the end.
        assert_eq!(get(&qp_a, "sent_pkts"), N + 1 + naks, "{qp_a}");
        assert_eq!(get(&qp_b, "sent_pkts"), N + naks + 1, "{qp_b}");
    }
    assert_eq!(get(&qp_b, "rcvd_pkts"), get(&qp_a, "sent_pkts"), "{qp_b}");
    assert_eq!(get(&qp_a, "rcvd_pkts"), get(&qp_b, "sent_pkts"), "{qp_a}");
    assert_eq!(get(&dev_a, "rdma_sends"), N + 1, "{dev_a}");
    assert_eq!(get(&dev_b, "rdma_recvs"), N + 1, "{dev_b}");

    // The other formats carry the same counts.
    let sent_a = get(&qp_a, "sent_pkts");
    let prom = stat(&["--prometheus", "--addr", A]);
    let pid = std::process::id();
    let line = format!("softrnic_sent_pkts{{device=\"{A}\",pid=\"{pid}\"}} ");
    let value = prom
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .unwrap_or_else(|| panic!("no {line}: {prom}"));
    assert!(value.parse::<u64>().unwrap() >= sent_a, "{prom}");
    assert!(
        prom.contains("# TYPE softrnic_rcvd_rnr_err counter\n"),
        "{prom}"
    );
    let text = stat(&["--addr", A]);
    assert!(text.starts_with(&format!("{A} (lo) pid {pid} ")), "{text}");
}
