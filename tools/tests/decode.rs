//! `softrnic decode` on a real capture: one object per frame in order, non-RoCE frames marked,
//! the rdma_cm handshake of rping decoded down to its CM messages.

use std::process::Command;

use serde_json::Value;

fn decode_json(name: &str) -> Vec<Value> {
    let path = format!("{}/../wire/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["decode", "--json", &path])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn rping_capture_decodes_to_its_cm_handshake() {
    let frames = decode_json("rping_rdmacm.pcap");
    let records = softrnic_wire::pcap::read_file(format!(
        "{}/../wire/tests/data/rping_rdmacm.pcap",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert_eq!(frames.len(), records.len(), "one object per frame");
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f["frame"], i + 1);
    }
    let cm: Vec<(u64, String)> = frames
        .iter()
        .filter_map(|f| {
            let s = f["cm"]["summary"].as_str()?;
            Some((
                f["frame"].as_u64().unwrap(),
                s.split(' ').nth(1)?.to_string(),
            ))
        })
        .collect();
    let expect = [
        (1, "REQ"),
        (2, "REP"),
        (3, "RTU"),
        (64, "DREQ"),
        (65, "DREP"),
    ];
    assert_eq!(
        cm,
        expect.map(|(n, m)| (n, m.to_string())).to_vec(),
        "the CM messages of rping's connection setup and teardown"
    );
    let req = &frames[0];
    assert_eq!(req["opcode_name"], "UD_SEND_ONLY");
    assert_eq!(req["deth"]["qkey"], 0x8001_0000u32);
    assert_eq!(req["mad"]["attribute"], "REQ");
}

#[test]
fn text_output_has_a_line_per_frame_and_marks_non_roce() {
    let path = format!(
        "{}/../wire/tests/data/ib_atomic_bw_small.pcap",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["decode", &path])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("not RoCE"), "{}", lines[0]);
    let fetch_add = lines.iter().find(|l| l.contains("RC_FETCH_ADD")).unwrap();
    assert!(
        fetch_add.contains("AtomicETH") && fetch_add.ends_with(" ok"),
        "{fetch_add}"
    );
    let ack = lines
        .iter()
        .find(|l| l.contains("RC_ATOMIC_ACKNOWLEDGE"))
        .unwrap();
    assert!(
        ack.contains("AETH ACK") && ack.contains("AtomicAckETH"),
        "{ack}"
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["decode", "/nonexistent.pcap"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("/nonexistent.pcap") && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn a_real_gso_run_captured_on_lo_splits_with_the_kernels_ip_ids() {
    let frames = decode_json("softrnic_lo_gso.pcap");
    let seen: Vec<(u64, Option<u64>, &str, bool)> = frames
        .iter()
        .map(|f| {
            (
                f["frame"].as_u64().unwrap(),
                f["seg"].as_u64(),
                f["opcode_name"].as_str().unwrap(),
                f["icrc_ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, Some(1), "RC_SEND_FIRST", true),
            (1, Some(2), "RC_SEND_MIDDLE", true),
            (1, Some(3), "RC_SEND_LAST", true),
            (2, None, "RC_ACKNOWLEDGE", true),
            (3, None, "RC_RDMA_WRITE_FIRST", true),
        ]
    );
    let lens: Vec<u64> = frames[..3]
        .iter()
        .map(|f| f["payload_len"].as_u64().unwrap())
        .collect();
    assert_eq!(lens, [4096, 4096, 1808]);
}

mod capture;

/// `softrnic decode ARGS FILE`'s standard output.
fn decode(args: &[&str], file: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["decode"])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_gso_super_packet_decodes_as_its_segments_with_good_icrcs() {
    // A SEND of 4 packets at PMTU 1024 from a connected socket whose IP IDs start at 0xfffe
    // (wrapping inside the run), as one super-packet, then the ACK.
    let sup = capture::run(&capture::send(0xfffe, 500, 1024, 4));
    let ack = capture::ack(503, capture::ACK);
    let path = capture::write_pcap("gso_run.pcap", &[sup, ack]);
    let lines: Vec<Value> = decode(&["--json"], &path)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    for (k, v) in lines[..4].iter().enumerate() {
        assert_eq!(v["frame"], 1);
        assert_eq!(
            (v["seg"].as_u64(), v["segs"].as_u64()),
            (Some(k as u64 + 1), Some(4))
        );
        assert_eq!(v["psn"], 500 + k as u64);
        assert_eq!(v["payload_len"], 1024);
        assert_eq!(v["icrc_ok"], true, "{v}");
        assert!(v.get("error").is_none());
    }
    assert_eq!(lines[0]["opcode_name"], "RC_SEND_FIRST");
    assert_eq!(lines[3]["opcode_name"], "RC_SEND_LAST");
    assert_eq!(
        (lines[4]["frame"].as_u64(), lines[4].get("seg")),
        (Some(2), None)
    );

    let text = decode(&[], &path);
    let text: Vec<&str> = text.lines().collect();
    assert!(
        text[0].trim_start().starts_with("1.1 ") && text[0].ends_with(" ok"),
        "{text:?}"
    );
    assert!(text[3].trim_start().starts_with("1.4 ") && text[3].contains("RC_SEND_LAST"));
    assert!(!text.iter().any(|l| l.contains("malformed")), "{text:?}");
}
