//! `softrnic decode --json` agrees with Wireshark's RoCE dissector (tshark) on the opcode, the
//! destination QP and the PSN of every RoCE frame of the shared kernel-rxe captures, and on
//! which frames are RoCE at all. Skips, saying so, when tshark is not installed (`.ci/run`
//! installs it).

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

const CAPTURES: &[&str] = &[
    "rc_pingpong_2guests.pcap",
    "ib_write_bw_small.pcap",
    "ib_read_bw_small.pcap",
    "ib_atomic_bw_small.pcap",
    "uc_pingpong.pcap",
    "ud_pingpong.pcap",
    "rping_rdmacm.pcap",
];

fn capture_path(name: &str) -> String {
    format!("{}/../wire/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// frame number -> (opcode, dest QP, PSN), per tshark.
fn tshark_view(path: &str) -> BTreeMap<u64, (u64, u64, u64)> {
    let out = Command::new("tshark")
        .args(["-r", path, "-T", "fields", "-E", "separator=,"])
        .args(["-e", "frame.number", "-e", "infiniband.bth.opcode"])
        .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark failed: {out:?}");
    let num = |s: &str| match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    };
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() == 4 && !f[1].is_empty())
                .then(|| (num(f[0]), (num(f[1]), num(f[2]), num(f[3]))))
        })
        .collect()
}

/// frame number -> (opcode, dest QP, PSN), per `softrnic decode --json`.
fn softrnic_view(path: &str) -> BTreeMap<u64, (u64, u64, u64)> {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["decode", "--json", path])
        .output()
        .expect("run softrnic");
    assert!(out.status.success(), "softrnic decode failed: {out:?}");
    let mut frames = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).expect("one JSON object per line");
        assert!(v.get("error").is_none(), "malformed frame: {v}");
        if v["roce"] == true {
            let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"));
            assert_eq!(v["icrc_ok"], true, "{v}");
            frames.insert(n("frame"), (n("opcode"), n("dest_qp"), n("psn")));
        }
    }
    frames
}

#[test]
fn decode_agrees_with_tshark_on_opcode_qpn_and_psn() {
    if Command::new("tshark").arg("--version").output().is_err() {
        softrnic_testkit::skip(
            "decode_agrees_with_tshark_on_opcode_qpn_and_psn",
            "tshark is not installed (apt-get install tshark; .ci/run does)",
        );
        return;
    }
    for name in CAPTURES {
        let path = capture_path(name);
        let theirs = tshark_view(&path);
        let ours = softrnic_view(&path);
        assert!(!ours.is_empty(), "{name}: no RoCE frames decoded");
        assert_eq!(ours, theirs, "{name}: softrnic and tshark disagree");
    }
}
