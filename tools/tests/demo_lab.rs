//! `softrnic demo --loss 2% --reorder 5% --dup 1% --seed N`, the teaching lab: the verified
//! operations over the faulty in-memory fabric, on its virtual clock. Every check passes, the
//! report says what recovered the run, and the same seed gives the same run: the same report
//! and the same capture, byte for byte.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use softrnic_wire::frame::Frame;
use softrnic_wire::pcap;

const FAULTS: [&str; 6] = ["--loss", "2%", "--reorder", "5%", "--dup", "0.01"];

/// The lab's output with `seed`, capturing into `pcap` if given.
fn lab(seed: u64, pcap: Option<&Path>) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_softrnic"));
    c.arg("demo")
        .args(FAULTS)
        .args(["--seed", &seed.to_string()]);
    if let Some(p) = pcap {
        c.arg("--pcap").arg(p);
    }
    let out = c.output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the lab failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo_lab");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The number after `label` on the line starting with it.
fn count(out: &str, label: &str) -> u64 {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} in:\n{out}"));
    line.trim()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count after {label:?} in:\n{out}"))
}

#[test]
fn every_check_passes_at_two_percent_loss_and_the_report_shows_the_recoveries() {
    let out = lab(1, None);
    for op in [
        "SEND",
        "RDMA WRITE 64 KiB",
        "WRITE_WITH_IMM",
        "RDMA READ",
        "CMP_AND_SWP",
        "FETCH_AND_ADD",
        "before its receive (RNR NAK",
    ] {
        assert!(
            out.lines().any(|l| l.contains(op) && l.ends_with(": ok")),
            "{op} in:\n{out}"
        );
    }
    assert!(out.contains("What recovered it:"), "{out}");
    assert!(out.contains("over the in-memory fabric"), "{out}");
    assert!(!out.contains("Gbit/s"), "no wall-clock measurement: {out}");
    assert!(count(&out, "Recoveries:") > 0, "{out}");
    assert!(
        out.contains(" 1 RNR waits)"),
        "the SEND before its receive: {out}"
    );
    assert!(
        count(&out, "  retransmissions (against retry_cnt)") > 0,
        "{out}"
    );
}

#[test]
fn the_same_seed_gives_the_same_report_and_capture_and_another_seed_another() {
    let d = dir();
    let (p1, p2, p3) = (
        d.join("s7a.pcapng"),
        d.join("s7b.pcapng"),
        d.join("s8.pcapng"),
    );
    let (o1, o2) = (lab(7, Some(&p1)), lab(7, Some(&p2)));
    assert_eq!(o1, o2, "the same seed, the same report");
    let (b1, b2) = (std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());
    assert!(!b1.is_empty());
    assert!(b1 == b2, "the same seed, the same capture, byte for byte");
    lab(8, Some(&p3));
    assert!(
        std::fs::read(&p3).unwrap() != b1,
        "another seed, another capture"
    );
}

#[test]
fn the_capture_parses_and_shows_a_request_psn_sent_twice() {
    let p = dir().join("s1.pcapng");
    lab(1, Some(&p));
    let records = pcap::read_file(&p).expect("the capture parses");
    assert!(!records.is_empty());
    // Requests device A (127.0.0.1) sent, by PSN: a retransmission sends one again.
    let mut sent: HashMap<u32, usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        let f = Frame::parse(&r.data).unwrap_or_else(|e| panic!("frame {}: {e}", i + 1));
        let d = f.datagram;
        assert!(d.icrc_ok, "frame {}: bad ICRC", i + 1);
        let op = d.repr.roce.bth.opcode.0;
        // RC SEND, WRITE and READ requests (0x00-0x0c), CMP_SWP and FETCH_ADD (0x13, 0x14).
        let request = op <= 0x0c || op == 0x13 || op == 0x14;
        if request && d.repr.ip.src_addr().to_string() == "127.0.0.1" {
            *sent.entry(d.repr.roce.bth.psn.value()).or_default() += 1;
        }
    }
    assert!(!sent.is_empty(), "A's requests are in the capture");
    assert!(
        sent.values().any(|&n| n >= 2),
        "a request PSN sent twice (a retransmission): {sent:?}"
    );
}

/// The counters the report prints agree with the capture of the same run: device A's packets
/// sent are the frames from A in its capture, its packets received the frames to it (the
/// capture sees A's side of the fabric, before A's packets are lost and after B's are).
#[test]
fn the_counters_agree_with_the_capture_of_the_same_run() {
    let path = dir().join("counters.pcapng");
    let out = lab(3, Some(&path));
    // "  packets sent      <A> <B>": the first number is A's.
    let sent = count(&out, "  packets sent");
    let received = count(&out, "  packets received");
    let (mut from_a, mut to_a) = (0u64, 0u64);
    for r in pcap::read_file(&path).unwrap() {
        let d = Frame::parse(&r.data).unwrap().datagram;
        let a: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        from_a += u64::from(d.repr.ip.src_addr() == a);
        to_a += u64::from(d.repr.ip.dst_addr() == a);
    }
    assert!(sent > 0 && received > 0, "{out}");
    assert_eq!(
        (sent, received),
        (from_a, to_a),
        "A's counters against its capture:\n{out}"
    );
}
