//! `softrnic run`: an unmodified verbs program runs on softrnic's drop-in library, on the
//! device of `--addr`, and the program's exit status comes back. Skips
//! (`softrnic_testkit::skip`) when Debian's ibverbs-utils or the built library is missing.

use std::process::Command;

fn softrnic() -> Command {
    Command::new(env!("CARGO_BIN_EXE_softrnic"))
}

#[test]
fn ibv_devinfo_runs_on_softrnic_and_sees_the_address_device() {
    let test = "ibv_devinfo_runs_on_softrnic_and_sees_the_address_device";
    if !std::path::Path::new("/usr/bin/ibv_devinfo").exists() {
        softrnic_testkit::skip(
            test,
            "/usr/bin/ibv_devinfo missing (apt-get install ibverbs-utils)",
        );
        return;
    }
    let out = softrnic()
        .args(["run", "--addr", "127.0.21.1", "--", "ibv_devinfo", "-v"])
        .output()
        .expect("runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if stderr.contains("libsoftrnic_ibverbs.so is not in") {
        softrnic_testkit::skip(
            test,
            &format!("the drop-in library is not built ({stderr})"),
        );
        return;
    }
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("hca_id:\tsoftrnic_lo"), "{stdout}");
    assert!(
        stdout.contains("::ffff:127.0.21.1"),
        "the --addr GID: {stdout}"
    );
    assert!(stdout.contains("PORT_ACTIVE"), "{stdout}");
}

#[test]
fn the_programs_exit_status_comes_back() {
    let out = softrnic()
        .args(["run", "--", "sh", "-c", "exit 7"])
        .output()
        .expect("runs");
    if String::from_utf8_lossy(&out.stderr).contains("libsoftrnic_ibverbs.so is not in") {
        softrnic_testkit::skip(
            "the_programs_exit_status_comes_back",
            "the drop-in library is not built",
        );
        return;
    }
    assert_eq!(out.status.code(), Some(7));
}

#[test]
fn without_a_library_it_says_how_to_build_one() {
    let out = softrnic()
        .args(["run", "--lib", "/nonexistent", "--", "true"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cargo build --release -p softrnic-ibverbs"),
        "{stderr}"
    );
}
