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

/// `softrnic perf ARGS --json`, which must succeed: its report.
fn perf_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .arg("perf")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn perf_qps_gives_a_line_per_count_judged_against_the_first() {
    let _one = serial();
    let v = perf_json(&["--qps", "1,4", "--secs", "0.2", "--rounds", "3"]);
    let (one, four) = (&v["rc_write_qps_0"], &v["rc_write_qps_1"]);
    assert_eq!(
        (one["qps"].as_u64(), four["qps"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(
        (one["rounds"].as_u64(), four["rounds"].as_u64()),
        (Some(3), Some(3))
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
    // Every run is probed for the machine's phase; a ratio within one phase says how.
    let probes = four["rounds_copy_gb_per_s"].as_array().unwrap();
    assert_eq!(probes.len(), 3, "{four}");
    if four.get("paired_rounds").is_some() {
        assert!(
            four["phase_copy_gb_per_s"].as_f64().unwrap() > 0.0,
            "{four}"
        );
    }
}

#[test]
fn perf_qps_interleaved_judges_each_slice_against_the_first_count_s() {
    let _one = serial();
    let v = perf_json(&["--qps", "1,4", "--secs", "0.4", "--interleave"]);
    let (one, four) = (&v["rc_write_qps_0"], &v["rc_write_qps_1"]);
    // 0.4 s in slices of 200 ms: two turns each.
    assert_eq!(
        one["rounds_gbit_per_s"].as_array().unwrap().len(),
        2,
        "{one}"
    );
    assert_eq!(four["paired_rounds"], 2, "{four}");
    assert_eq!(four["slice_ms"], 200, "{four}");
    assert!(four["ratio"].as_f64().is_some_and(|r| r > 0.0), "{four}");
    assert!(four["min_per_qp"].as_u64().is_some_and(|n| n > 0), "{four}");
    let both = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--qps", "1,4", "--interleave", "--rounds", "2"])
        .output()
        .unwrap();
    assert!(!both.status.success(), "--interleave takes no --rounds");
    let alone = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--interleave"])
        .output()
        .unwrap();
    assert!(!alone.status.success(), "--interleave needs QP counts");
    assert!(
        String::from_utf8_lossy(&alone.stderr).contains("--qps or --all"),
        "{alone:?}"
    );
}

/// Checks the two `--sizes` lines of `size` in `v`: both name the size, RC WRITE moved data
/// and is judged against the raw line, whose figure is positive and gives the ratio (or, where
/// the kernel refused GSO or GRO, which says so, and there is no ratio).
fn check_size_lines(v: &Value, size: u64) {
    let raw_key = format!("raw_udp_gso_size_{size}");
    let (raw, rc) = (&v[&raw_key], &v[format!("rc_write_size_{size}")]);
    assert_eq!(raw["message_len"], size, "{raw}");
    assert_eq!(rc["message_len"], size, "{rc}");
    assert_eq!(rc["baseline"], raw_key.as_str(), "{rc}");
    let gbit = rc["gbit_per_s"].as_f64().unwrap();
    assert!(gbit > 0.0, "{rc}");
    let Some(raw_gbit) = raw["gbit_per_s"].as_f64() else {
        assert!(raw["unsupported"].is_string(), "{raw}");
        assert!(rc["ratio"].is_null(), "{rc}");
        return;
    };
    assert!(raw_gbit > 0.0, "{raw}");
    let ratio = rc["ratio"].as_f64().unwrap();
    assert!((ratio - gbit / raw_gbit).abs() < 1e-9, "{rc}");
}

#[test]
fn perf_sizes_gives_each_size_its_raw_limit_and_ratio() {
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--sizes", "4096,65536", "--secs", "0.2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (size, segments) in [(4096, 1), (65536, 15)] {
        check_size_lines(&v, size);
        let raw = &v[format!("raw_udp_gso_size_{size}")];
        assert_eq!(raw["segments_per_run"], segments, "{raw}");
    }
    // --sizes alone: no default line, no QP line; and the run's record.
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 5, "{keys:?}");
    assert!(v["run"]["command"]
        .as_str()
        .unwrap()
        .contains("--sizes 4096,65536"));

    let text = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--sizes", "16384", "--secs", "0.1"])
        .output()
        .unwrap();
    assert!(text.status.success(), "{text:?}");
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("raw UDP  4 x 4112 B GSO send, GRO receive (16 KiB WRITE):"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("RC RDMA WRITE 16 KiB, PMTU 4096, 1 QP:"),
        "{text}"
    );
    let gso = !lines[0].contains("not measured");
    assert_eq!(lines[1].contains("x raw_udp_gso_size_16384"), gso, "{text}");

    for bad in ["0", "4096,4096", "4194305"] {
        let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
            .args(["perf", "--sizes", bad])
            .output()
            .unwrap();
        assert!(!out.status.success(), "--sizes {bad} is refused");
    }
}

/// `--all`: the default lines, the sizes and the QP counts, all in one JSON object.
#[test]
fn perf_all_measures_every_set_in_one_run() {
    let _one = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args([
            "perf", "--all", "--sizes", "4096", "--qps", "1,2", "--secs", "0.1", "--iters", "100",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (key, field) in [
        ("raw_udp_bw", "gbit_per_s"),
        ("raw_udp_pingpong", "mean_us"),
        ("raw_udp_rc_pattern", "mean_us"),
        ("rc_write_bw", "gbit_per_s"),
        ("rc_send_pingpong", "mean_us"),
        ("rc_send_pingpong_1t", "mean_us"),
        ("rc_write_qps_0", "gbit_per_s"),
        ("rc_write_qps_1", "gbit_per_s"),
    ] {
        assert!(
            v[key][field].as_f64().is_some_and(|x| x > 0.0),
            "{key}: {}",
            v[key]
        );
    }
    assert_eq!(v["rc_write_bw"]["message_len"], 65536);
    assert_eq!(v["rc_write_qps_1"]["qps"], 2);
    check_size_lines(&v, 4096);
    let run = &v["run"];
    assert!(
        run["command"]
            .as_str()
            .unwrap()
            .starts_with("softrnic perf --all"),
        "{run}"
    );
    assert!(run["unix_time"].as_u64().is_some_and(|t| t > 0), "{run}");
    let bad = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["perf", "--all", "--host"])
        .output()
        .unwrap();
    assert!(
        !bad.status.success(),
        "--all and --host are refused together"
    );
}

#[test]
fn perf_perftest_judges_each_perftest_tool_against_its_raw_baseline() {
    let test = "perf_perftest_judges_each_perftest_tool_against_its_raw_baseline";
    if !std::path::Path::new("/usr/bin/ib_send_lat").exists() {
        softrnic_testkit::skip(
            test,
            "/usr/bin/ib_send_lat missing (apt-get install perftest)",
        );
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
            "--secs",
            "1",
            "--json",
        ])
        .args(["--addrs", "127.0.23.1", "127.0.23.2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("libsoftrnic_ibverbs.so is not in") {
        softrnic_testkit::skip(
            test,
            &format!("the drop-in library is not built ({stderr})"),
        );
        return;
    }
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rtt = v["raw_udp_rtt"]["median_us"].as_f64().unwrap();
    let one_way = v["raw_udp_one_way"]["median_us"].as_f64().unwrap();
    assert_eq!(one_way, rtt / 2.0);
    // The raw ping-pong's own tail, beside which the tools' are read.
    let raw_tail = v["raw_udp_rtt"]["p99_over_median"].as_f64().unwrap();
    assert!(raw_tail >= 1.0, "{v}");
    assert_eq!(v["raw_udp_one_way"]["p99_over_median"], raw_tail);
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
    // ib_write_bw: one QP against the kernel's GSO+GRO figure, more QPs against one QP.
    let raw = v["raw_udp_gso_bw"]["gbit_per_s"].as_f64().unwrap();
    let one = v["perftest_write_bw_q1"]["gbit_per_s"].as_f64().unwrap();
    assert!(raw > 0.0 && one > 0.0, "{v}");
    for (key, baseline, base) in [
        ("perftest_write_bw_q1", "raw_udp_gso_bw", raw),
        ("perftest_write_bw_q4", "perftest_write_bw_q1", one),
        ("perftest_write_bw_q16", "perftest_write_bw_q1", one),
        ("perftest_write_bw_b_q4", "perftest_write_bw_q1", one),
    ] {
        let line = &v[key];
        assert_eq!(line["baseline"], baseline, "{line}");
        let gbit = line["gbit_per_s"].as_f64().unwrap();
        assert!(gbit > 0.0, "{line}");
        assert_eq!(line["rounds_gbit_per_s"].as_array().unwrap().len(), 1);
        let ratio = line["ratio"].as_f64().unwrap();
        if baseline == "raw_udp_gso_bw" || line.get("bracket_agree").is_none() {
            // One round: within one phase or not, the ratio is that of the figures.
            assert!((ratio - gbit / base).abs() < 1e-9, "{line}");
        } else {
            // Judged between the one-QP runs just before and after it, which agreed.
            let before = line["rounds_baseline_before"][0].as_f64().unwrap();
            let after = line["rounds_baseline_after"][0].as_f64().unwrap();
            assert!(before.max(after) <= before.min(after) * 1.2, "{line}");
            assert!(
                (ratio - gbit / ((before + after) / 2.0)).abs() < 1e-9,
                "{line}"
            );
        }
    }
}
