//! `softrnic perf` as a user runs it, on tiny runs: the text report has one line per
//! measurement, `--json` has every field. No assertion is about how fast anything is.
//! (Cargo runs test binaries one after another, and the tests here one at a time, so no two
//! runs share the two cores.)

use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn perf_json_has_baselines_and_rc_lines_with_ratios() {
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--secs", "0.2", "--iters", "200", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();

    let bw = &v["raw_udp_bw"];
    for f in ["gbit_per_s", "loss_percent", "elapsed_s"] {
        assert!(bw[f].is_f64(), "{f} in {bw}");
    }
    for f in ["bytes", "datagrams", "sent", "lost", "datagram_len"] {
        assert!(bw[f].is_u64(), "{f} in {bw}");
    }
    assert!(bw["bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        bw["bytes"].as_u64().unwrap(),
        bw["datagrams"].as_u64().unwrap() * 4096
    );

    // The GSO baseline, or (an old kernel) a line saying why it is missing.
    let gso = &v["raw_udp_gso_bw"];
    let write_base = if gso["gbit_per_s"].is_f64() {
        for f in ["bytes", "datagrams", "runs", "sent", "lost", "segment_len"] {
            assert!(gso[f].is_u64(), "{f} in {gso}");
        }
        assert_eq!(
            gso["bytes"].as_u64().unwrap(),
            gso["datagrams"].as_u64().unwrap() * 4112
        );
        "raw_udp_gso_bw"
    } else {
        assert!(gso["unsupported"].is_string(), "{gso}");
        "raw_udp_bw"
    };

    let pp = &v["raw_udp_pingpong"];
    assert_eq!(pp["iters"], 200);
    for f in ["mean_us", "median_us", "p99_us"] {
        assert!(pp[f].is_f64(), "{f} in {pp}");
    }
    assert!(pp["median_us"].as_f64() <= pp["p99_us"].as_f64());

    for (key, field, base) in [
        ("raw_udp_rc_pattern", "mean_us", "raw_udp_pingpong"),
        ("rc_write_bw", "gbit_per_s", write_base),
        ("rc_send_pingpong", "mean_us", "raw_udp_pingpong"),
        ("rc_send_pingpong_1t", "mean_us", "raw_udp_pingpong"),
    ] {
        let rc = &v[key];
        assert!(rc[field].as_f64().is_some_and(|x| x > 0.0), "{key}: {rc}");
        assert_eq!(rc["baseline"], base);
        if key.starts_with("rc_send_pingpong") || key == "raw_udp_rc_pattern" {
            assert_eq!(rc["iters"], 200, "{key}: {rc}");
            assert!(rc["median_us"].as_f64() <= rc["p99_us"].as_f64(), "{rc}");
        }
        let ratio = rc[field].as_f64().unwrap() / v[base][field].as_f64().unwrap();
        assert!((rc["ratio"].as_f64().unwrap() - ratio).abs() < 1e-9, "{rc}");
    }
}

#[test]
fn perf_text_prints_one_line_per_measurement() {
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--secs", "0.1", "--iters", "100"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(
        lines[0].starts_with("raw UDP  4 KiB sendmmsg/recvmmsg:"),
        "{text}"
    );
    assert!(lines[0].contains(" Gbit/s ("), "{text}");
    assert!(
        lines[1].starts_with("raw UDP  15 x 4112 B GSO send, GRO receive:"),
        "{text}"
    );
    let gso = lines[1].contains(" runs, ");
    assert!(gso || lines[1].contains("not measured"), "{text}");
    assert!(
        lines[2].starts_with("raw UDP  64 B busy-poll ping-pong:"),
        "{text}"
    );
    assert!(lines[2].contains(" us mean RTT (median "), "{text}");
    assert!(lines[3].starts_with("raw UDP  RC's datagrams"), "{text}");
    assert!(lines[3].contains("x raw_udp_pingpong"), "{text}");
    assert!(lines[4].starts_with("RC RDMA WRITE 64 KiB"), "{text}");
    let write_base = if gso {
        "x raw_udp_gso_bw"
    } else {
        "x raw_udp_bw"
    };
    assert!(lines[4].contains(write_base), "{text}");
    for (line, name) in [
        (5, "RC SEND 64 B ping-pong:"),
        (6, "RC SEND 64 B ping-pong, 1 thread:"),
    ] {
        assert!(lines[line].starts_with(name), "{text}");
        assert!(lines[line].contains("; median "), "{text}");
        assert!(lines[line].contains("x raw_udp_pingpong"), "{text}");
    }
}

#[test]
fn perf_refuses_zero_seconds() {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--secs", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
}

/// `--host` runs process pairs through the hidden `perf-pair` command: every line is there,
/// each pair count moved data, a pair started right after a kill -9 connected, and the
/// shared lines carry their ratio to their baseline.
#[test]
fn perf_host_json_has_every_pair_count_and_the_pingpong_pair() {
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args([
            "perf", "--host", "--rounds", "1", "--secs", "0.2", "--iters", "100", "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (key, pairs) in [
        ("host_write_1_pair", 1),
        ("host_write_2_pairs", 2),
        ("host_write_4_pairs", 4),
        ("host_write_8_pairs", 8),
    ] {
        let m = &v[key];
        assert_eq!(m["pairs"], pairs, "{m}");
        assert!(m["gbit_per_s"].as_f64().unwrap() > 0.0, "{m}");
        assert_eq!(m["rounds_gbit_per_s"].as_array().unwrap().len(), 1);
        if pairs > 1 {
            assert_eq!(m["baseline"], "host_write_1_pair");
            assert!(m["ratio"].as_f64().unwrap() > 0.0, "{m}");
        }
    }
    assert_eq!(
        v["host_write_2_pairs_apart"]["baseline"],
        "host_write_1_pair"
    );
    for key in ["host_pingpong_alone", "host_pingpong_shared"] {
        assert!(v[key]["us_per_iter"].as_f64().unwrap() > 0.0, "{}", v[key]);
    }
    assert_eq!(v["host_pingpong_shared"]["baseline"], "host_pingpong_alone");
    // A pair started after kill -9 of the agents' pair connected (else the run fails).
    for key in ["host_start_beside_a_pair", "host_start_after_kill"] {
        assert!(v[key]["ms"].as_f64().unwrap() > 0.0, "{}", v[key]);
    }
    assert_eq!(
        v["host_start_after_kill"]["baseline"],
        "host_start_beside_a_pair"
    );
}

#[test]
fn perf_qps_gives_a_line_per_count_judged_against_the_first() {
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--qps", "1,4", "--secs", "0.2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (one, four) = (&v["rc_write_qps_0"], &v["rc_write_qps_1"]);
    assert_eq!(
        (one["qps"].as_u64(), four["qps"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(four["baseline"], "rc_write_qps_0");
    assert!(four["ratio"].as_f64().is_some_and(|r| r > 0.0), "{four}");
    // Every QP wrote: the device shared its transmit between them.
    assert!(four["min_per_qp"].as_u64().is_some_and(|n| n > 0), "{four}");
    assert!(four["messages"].as_u64() >= four["min_per_qp"].as_u64().map(|n| 4 * n));
    let bad = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--qps", "0"])
        .output()
        .unwrap();
    assert!(!bad.status.success(), "a count of 0 is refused");
}

#[test]
fn perf_perftest_judges_each_perftest_tool_against_the_raw_ping_pong() {
    if !std::path::Path::new("/usr/bin/ib_send_lat").exists() {
        eprintln!("SKIPPED: /usr/bin/ib_send_lat missing (apt-get install perftest)");
        return;
    }
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args([
            "perf",
            "--perftest",
            "--iters",
            "200",
            "--rounds",
            "1",
            "--json",
        ])
        .args(["--addrs", "127.0.23.1", "127.0.23.2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("libsoftrnic_ibverbs.so is not in") {
        eprintln!("SKIPPED: the drop-in library is not built ({stderr})");
        return;
    }
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rtt = v["raw_udp_rtt"]["median_us"].as_f64().unwrap();
    let one_way = v["raw_udp_one_way"]["median_us"].as_f64().unwrap();
    assert_eq!(one_way, rtt / 2.0);
    for (key, baseline) in [
        ("perftest_send_lat", "raw_udp_one_way"),
        ("perftest_write_lat", "raw_udp_one_way"),
        ("perftest_read_lat", "raw_udp_rtt"),
    ] {
        let line = &v[key];
        assert_eq!(line["baseline"], baseline, "{line}");
        let typical = line["typical_us"].as_f64().unwrap();
        let base = v[baseline]["median_us"].as_f64().unwrap();
        assert!(
            typical > 0.0 && line["min_us"].as_f64().unwrap() <= typical,
            "{line}"
        );
        let ratio = line["ratio"].as_f64().unwrap();
        assert!((ratio - typical / base).abs() < 1e-9, "{line}");
        let tail = line["p99_over_typical"].as_f64().unwrap();
        assert!((tail - line["p99_us"].as_f64().unwrap() / typical).abs() < 1e-9);
    }
}
