//! Every program in `examples/` run as a program: it must exit 0 and print its `verified:`
//! line. (`cm_ping`, which takes a server and a client process, has its own test,
//! `cm_example.rs`.)
//!
//! `cargo test --all-targets` builds examples only as test harnesses, never as the programs
//! (no `target/<profile>/examples/<name>` to run, or a stale one from an earlier `cargo
//! build`), so, as `cm_example.rs` does, this test compiles each example's source into itself
//! and runs its own binary again, on one test alone, as that example ([`ROLE`]): the example
//! gets a process of its own, its devices and its exit status, as under `cargo run`.

use std::error::Error;
use std::process::Command;

#[allow(dead_code)]
#[path = "../examples/mr_descriptor.rs"]
mod mr_descriptor;
#[allow(dead_code)]
#[path = "../examples/rc_pingpong.rs"]
mod rc_pingpong;
#[allow(dead_code)]
#[path = "../examples/rdma_write.rs"]
mod rdma_write;
#[allow(dead_code)]
#[path = "../examples/relaxed_mr.rs"]
mod relaxed_mr;

#[test]
fn rdma_write_runs() {
    example("rdma_write", rdma_write::main);
}

#[test]
fn rc_pingpong_runs() {
    example("rc_pingpong", rc_pingpong::main);
}

#[test]
fn relaxed_mr_runs() {
    example("relaxed_mr", relaxed_mr::main);
}

#[test]
fn mr_descriptor_runs() {
    example("mr_descriptor", mr_descriptor::main);
}

/// Set to an example's name, this test's binary is that example.
const ROLE: &str = "SOFTRNIC_EXAMPLE";

/// Runs the example `name`, whose `main` is `main`, in a process of its own (this binary on
/// the test `<name>_runs` alone) and checks its exit status and what it printed.
fn example(name: &str, main: fn() -> Result<(), Box<dyn Error>>) {
    if std::env::var(ROLE).as_deref() == Ok(name) {
        let result = main();
        if let Err(e) = &result {
            eprintln!("Error: {e:?}");
        }
        std::process::exit(i32::from(result.is_err()));
    }
    let out = Command::new(std::env::current_exe().expect("the test's own binary"))
        .args([&format!("{name}_runs"), "--exact", "--nocapture", "--quiet"])
        .env(ROLE, name)
        .output()
        .expect("running the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!(
        "{name} ({}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    assert!(
        stdout.lines().any(|l| l.starts_with("verified:")),
        "no verified: line\n{report}"
    );
    println!("{report}");
}
