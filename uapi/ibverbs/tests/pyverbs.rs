//! rdma-core 44's own test suite (Debian's python3-pyverbs: the tests shipped, gzipped, in
//! `/usr/share/doc/rdma-core/tests`) against softrnic's device on 127.0.60.1: the generic
//! tests, that is all but `test_mlx5*`, `test_efa*` and `test_cuda*`, which need those
//! vendors' hardware. Debian's `/usr/bin/python3` runs them (a `python3` earlier on PATH may
//! lack pyverbs), with softrnic's libraries first on `LD_LIBRARY_PATH`.
//!
//! The result is held to a floor that only goes up: `pyverbs_floor.txt` lists the tests that
//! pass on softrnic, and each must still pass. Every test that does not pass is listed on
//! stderr with its outcome, so the output says where softrnic stands. Skips without
//! `/usr/bin/python3`, pyverbs or the shipped tests (`apt-get install python3-pyverbs`).
//!
//! A run takes a minute or two; a hung run is killed after [`HANG_GUARD`]. Run it alone with
//! `cargo test -p softrnic-ibverbs --test pyverbs -- --nocapture` to see the list.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const PYTHON: &str = "/usr/bin/python3";
const SHIPPED: &str = "/usr/share/doc/rdma-core/tests";
const ADDR: &str = "127.0.60.1";

/// The longest a run may take before it is killed (a hung test fails the run, not CI).
const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// The tests of vendors softrnic is not.
const VENDOR_PREFIXES: &[&str] = &["test_mlx5", "test_efa", "test_cuda"];

/// The shipped tests, copied to `dir` and gunzipped, without the vendors' test modules.
fn unpack(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(SHIPPED)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let plain = name.strip_suffix(".gz").unwrap_or(&name).to_string();
        if VENDOR_PREFIXES.iter().any(|p| plain.starts_with(p)) || !path.is_file() {
            continue;
        }
        let target = dir.join(&plain);
        if name.ends_with(".gz") {
            let out = Command::new("gzip").arg("-dc").arg(&path).output()?;
            assert!(out.status.success(), "gzip -dc {}", path.display());
            std::fs::write(&target, out.stdout)?;
        } else {
            std::fs::copy(&path, &target)?;
        }
    }
    Ok(())
}

/// What happened to each test: `ok`, `FAIL`, `ERROR`, `skipped ...`, `expected failure`,
/// by the test's `module.Class.test` name, from unittest's verbose lines: `test_x
/// (tests.module.Class.test_x) ... outcome`, or, for a test with a docstring, that header
/// alone and the docstring's first line ending in ` ... outcome` on the next.
fn outcomes(log: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut header: Option<String> = None;
    for line in log.lines() {
        let (head, outcome) = match line.split_once(" ... ") {
            Some((h, o)) => (h, Some(o)),
            None => (line, None),
        };
        let named = head
            .split_once(" (")
            .and_then(|(_, rest)| rest.strip_suffix(')'))
            .filter(|n| n.starts_with("tests."))
            .map(|n| n.trim_start_matches("tests.").to_string());
        // A test that prints leaves its output where the outcome goes; the outcome then
        // follows on a line of its own.
        let outcome = outcome.map(str::trim).filter(|o| is_outcome(o));
        match (named, outcome) {
            (Some(name), Some(o)) => {
                out.insert(name, o.to_string());
                header = None;
            }
            (Some(name), None) => header = Some(name),
            (None, Some(o)) => {
                if let Some(name) = header.take() {
                    out.insert(name, o.to_string());
                }
            }
            (None, None) if is_outcome(line.trim()) => {
                if let Some(name) = header.take() {
                    out.insert(name, line.trim().to_string());
                }
            }
            (None, None) => {}
        }
    }
    out
}

/// Whether `text` is how unittest reports a test's outcome.
fn is_outcome(text: &str) -> bool {
    [
        "ok",
        "FAIL",
        "ERROR",
        "skipped",
        "expected failure",
        "unexpected success",
    ]
    .iter()
    .any(|o| text.starts_with(o))
}

#[test]
fn rdma_core_tests_hold_the_floor() {
    let test = "rdma_core_tests_hold_the_floor";
    if !Path::new(PYTHON).exists() || !Path::new(SHIPPED).join("run_tests.py").exists() {
        let reason = format!("no {PYTHON} or {SHIPPED} (apt-get install python3-pyverbs)");
        softrnic_testkit::skip(test, &reason);
        return;
    }
    let dir: PathBuf = common::lib_dir().join("pyverbs");
    unpack(&dir.join("tests")).expect("unpacking the shipped tests");
    let started = Instant::now();
    // unittest writes its report to stderr: into a file, which never fills as a pipe would.
    let log_path = dir.join("run.log");
    let log_file = std::fs::File::create(&log_path).expect("creating the log");
    let child = Command::new(PYTHON)
        .arg("tests/run_tests.py")
        .arg("-v")
        .current_dir(&dir)
        .env("LD_LIBRARY_PATH", common::lib_dir())
        .env("SOFTRNIC_ADDR", ADDR)
        .stdout(log_file.try_clone().expect("the log's descriptor"))
        .stderr(log_file)
        .spawn()
        .expect("running python3");
    let out = common::finish(child, started + HANG_GUARD);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let results = outcomes(&log);
    assert!(
        !results.is_empty(),
        "the suite ran no test ({}):\n{log}",
        out.status
    );
    let passed: Vec<&String> = results
        .iter()
        .filter(|(_, o)| *o == "ok")
        .map(|(n, _)| n)
        .collect();
    eprintln!(
        "rdma-core tests on softrnic: {} of {} pass ({:?})",
        passed.len(),
        results.len(),
        started.elapsed()
    );
    for (name, outcome) in results.iter().filter(|(_, o)| *o != "ok") {
        eprintln!("  {name}: {outcome}");
    }
    let floor_text = include_str!("pyverbs_floor.txt");
    let floor: Vec<&str> = floor_text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let lost: Vec<String> = floor
        .iter()
        .filter(|t| results.get(**t).is_none_or(|o| o != "ok"))
        .map(|t| format!("{t}: {}", results.get(*t).map_or("not run", String::as_str)))
        .collect();
    assert!(
        lost.is_empty(),
        "tests of the floor that no longer pass:\n{}",
        lost.join("\n")
    );
}

/// unittest's verbose report, both shapes of line, as Python 3.11 prints them.
#[test]
fn the_report_is_read_test_by_test() {
    let log = "\
test_create_ah (tests.test_addr.AHTest.test_create_ah)
Test ibv_create_ah. ... ok
test_atomic_cmp_and_swap (tests.test_atomic.AtomicTest.test_atomic_cmp_and_swap) ... ERROR
test_xrc_atomic (tests.test_atomic.AtomicTest.test_xrc_atomic) ... skipped 'Create XRCD is not supported'
test_is_fork_initialized (tests.test_fork.ForkAPITest.test_is_fork_initialized) ... is_fork_initialized() = 2
ok
Traceback (most recent call last): ... not a test
";
    let got = outcomes(log);
    let want: BTreeMap<String, String> = [
        ("test_addr.AHTest.test_create_ah", "ok"),
        ("test_atomic.AtomicTest.test_atomic_cmp_and_swap", "ERROR"),
        ("test_fork.ForkAPITest.test_is_fork_initialized", "ok"),
        (
            "test_atomic.AtomicTest.test_xrc_atomic",
            "skipped 'Create XRCD is not supported'",
        ),
    ]
    .into_iter()
    .map(|(n, o)| (n.to_string(), o.to_string()))
    .collect();
    assert_eq!(got, want);
}
