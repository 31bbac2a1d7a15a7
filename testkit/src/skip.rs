//! Skipping a test that cannot run here, visibly, and only where skipping is allowed.
//!
//! Some tests need what a machine may lack: root, `CAP_NET_RAW`, a kernel feature, an
//! installed program or header. Such a test calls [`skip`] and returns. Two things make that
//! call more than a `return`:
//!
//! - **The skip is seen.** libtest captures what a passing test prints and throws it away, so
//!   a test that said "skipped" with `eprintln!` and returned looked exactly like one that
//!   passed. The capture only reaches the `print!`/`eprint!` family of macros, though: they
//!   go through the test thread's output capture, while a write to the handle
//!   `std::io::stderr()` goes straight to file descriptor 2. [`skip`] writes its line,
//!   `SKIPPED <test>: <reason>`, that way, so it appears in `cargo test`'s output between the
//!   `test ... ok` lines, without `--nocapture`.
//! - **A skip can be forbidden.** Where everything a test needs is known to be present — CI
//!   runs as root and installs every package the tests use (`.ci/run`) — a skip is a bug
//!   in the test or the setup. With the environment variable `SOFTRNIC_NO_SKIP` set to
//!   anything but empty or `0`, [`skip`] panics instead, saying what the test could not do
//!   and that `SOFTRNIC_NO_SKIP` forbids skipping; the test fails.
//!
//! ```no_run
//! # fn have_tshark() -> bool { false }
//! // In a test:
//! if !have_tshark() {
//!     softrnic_testkit::skip("decodes_like_tshark", "tshark is not installed");
//!     return;
//! }
//! ```
//!
//! A test that can never run on the machines the project tests on (it needs hardware, say)
//! is no skip: it is `#[ignore = "why"]`, and runs only when asked for (`--ignored`).

use std::ffi::OsStr;
use std::io::Write;

/// The environment variable that, set to anything but empty or `0`, turns every skip into a
/// failure.
pub const NO_SKIP: &str = "SOFTRNIC_NO_SKIP";

/// Says on standard error, past libtest's capture, that the test `test` skips for `reason`;
/// the caller then returns. With [`NO_SKIP`] set (not empty, not `0`) it panics instead.
///
/// # Panics
///
/// When [`NO_SKIP`] forbids skipping: the test cannot run here, and that is a failure.
pub fn skip(test: &str, reason: &str) {
    if forbidden(std::env::var_os(NO_SKIP).as_deref()) {
        panic!("{}", refusal(test, reason));
    }
    // One write of the whole line: tests running at once share the descriptor, and a line
    // written in pieces could interleave with another test's.
    let line = format!("SKIPPED {test}: {reason}\n");
    // Nothing useful can be done if standard error is gone; the skip itself still holds.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Whether [`NO_SKIP`], with the value `value` (`None`: unset), forbids skipping.
fn forbidden(value: Option<&OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// The panic message of a forbidden skip.
fn refusal(test: &str, reason: &str) -> String {
    format!(
        "{test} cannot run here: {reason}. It would skip, but {NO_SKIP} is set, which \
         forbids skipping: provide what the test needs, or unset {NO_SKIP}."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Output};

    /// Set in the environment of [`child`] when a test below runs it.
    const CHILD: &str = "SOFTRNIC_TESTKIT_SKIP_CHILD";

    /// [`child`]'s name, as the test binary's filter matches it.
    const CHILD_NAME: &str = "skip::tests::child";

    #[test]
    fn only_a_value_other_than_empty_or_zero_forbids() {
        assert!(!forbidden(None));
        assert!(!forbidden(Some(OsStr::new(""))));
        assert!(!forbidden(Some(OsStr::new("0"))));
        assert!(forbidden(Some(OsStr::new("1"))));
        assert!(forbidden(Some(OsStr::new("yes"))));
    }

    /// Skips, when run by the tests below (in a process of its own, with an environment they
    /// chose); does nothing when the whole suite runs it.
    #[test]
    fn child() {
        if std::env::var_os(CHILD).is_some() {
            skip(CHILD_NAME, "the parent test asked for a skip");
        }
    }

    /// This test binary running only [`child`], with [`NO_SKIP`] set to `no_skip` (`None`:
    /// unset), its output captured by libtest as in any `cargo test`.
    fn run_child(no_skip: Option<&str>) -> Output {
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        cmd.args(["--exact", CHILD_NAME, "--test-threads=1"])
            .env(CHILD, "1")
            .env_remove("RUST_TEST_NOCAPTURE");
        match no_skip {
            Some(v) => cmd.env(NO_SKIP, v),
            None => cmd.env_remove(NO_SKIP),
        };
        cmd.output().expect("running the test binary")
    }

    #[test]
    fn a_skip_passes_and_shows_past_the_capture() {
        for no_skip in [None, Some(""), Some("0")] {
            let out = run_child(no_skip);
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert!(out.status.success(), "{no_skip:?}:\n{stdout}{stderr}");
            assert!(stdout.contains("1 passed"), "{no_skip:?}:\n{stdout}");
            let line = format!("SKIPPED {CHILD_NAME}: the parent test asked for a skip\n");
            assert!(stderr.contains(&line), "{no_skip:?}:\n{stderr}");
        }
    }

    #[test]
    fn a_forbidden_skip_fails_and_says_why() {
        let out = run_child(Some("1"));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!out.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("1 failed"), "{stdout}");
        let said = format!("{stdout}{stderr}");
        let why = refusal(CHILD_NAME, "the parent test asked for a skip");
        assert!(said.contains(&why), "{said}");
        assert!(!stderr.contains("SKIPPED"), "{stderr}");
    }
}
