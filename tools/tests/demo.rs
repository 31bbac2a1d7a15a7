//! `softrnic demo` end to end on loopback: two devices, every opcode, every byte verified by
//! the demo itself (it exits non-zero on any difference), the datagrams through the
//! host-local path (shared memory) but for the first few.

use std::process::Command;

fn demo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .arg("demo")
        .args(args)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn assert_all_checks(out: &str) {
    for op in [
        "SEND",
        "RDMA WRITE 64 KiB",
        "WRITE_WITH_IMM",
        "RDMA READ",
        "CMP_AND_SWP",
        "FETCH_AND_ADD",
    ] {
        assert!(
            out.lines().any(|l| l.contains(op) && l.ends_with(": ok")),
            "{op} in:\n{out}"
        );
    }
    assert!(
        out.contains("Gbit/s") && out.contains("us mean round trip"),
        "{out}"
    );
    // Both devices are on this host: nearly everything goes through shared memory.
    let counts: Vec<u64> = out
        .lines()
        .find(|l| l.starts_with("A sent "))
        .unwrap_or_else(|| panic!("no count of A's packets in:\n{out}"))
        .split(' ')
        .filter_map(|w| w.parse().ok())
        .collect();
    let [sent, local] = counts[..] else {
        panic!("two counts in:\n{out}");
    };
    if std::env::var_os("SOFTRNIC_LOCAL").is_some_and(|v| v == "0") {
        assert_eq!(local, 0, "SOFTRNIC_LOCAL=0 sends over UDP:\n{out}");
    } else {
        assert!(
            local > 0 && local <= sent && local >= sent * 9 / 10,
            "{out}"
        );
    }
}

#[test]
fn demo_with_progress_threads() {
    // Addresses of its own, so that no other test holds port 4791 on them.
    assert_all_checks(&demo(&["--a", "127.0.7.1", "--b", "127.0.7.2"]));
}

#[test]
fn demo_with_polling() {
    assert_all_checks(&demo(&[
        "--a",
        "127.0.8.1",
        "--b",
        "127.0.8.2",
        "--polling",
    ]));
}
