//! `softrnic demo` end to end over kernel UDP on loopback: two devices, every opcode, every
//! byte verified by the demo itself (it exits non-zero on any difference).

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
