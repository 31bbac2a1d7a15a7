//! `softrnic pingpong` as two real processes over kernel UDP on loopback: a server on
//! 127.0.9.2 picks a free TCP port and prints it; a client on 127.0.9.1 connects; both must
//! exit successfully (every message and the RDMA WRITE verified by the processes themselves)
//! and print `ibv_rc_pingpong`'s report. Bad options must fail cleanly, without a panic.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_softrnic");

/// Kills the child if the test fails before waiting for it.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for `child` at most `limit` (a guard against a hang, not a timing assertion).
fn wait_output(mut guard: Guard, limit: Duration) -> (Output, String) {
    let start = Instant::now();
    let child = guard.0.as_mut().expect("a child");
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        assert!(
            start.elapsed() < limit,
            "the process did not finish in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let child = guard.0.take().expect("a child");
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

/// Runs a server on `server` and a client on `client` with `args` for both; returns the two
/// outputs (server's stdout includes its first line, the listening address).
fn pingpong(server: &str, client: &str, args: &[&str]) -> (String, String) {
    let mut s = Command::new(BIN)
        .args(["pingpong", "--bind", server, "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server runs");
    let mut first = String::new();
    BufReader::new(s.stdout.as_mut().expect("stdout"))
        .read_line(&mut first)
        .expect("the server's first line");
    let mut server_guard = Guard(Some(s));
    let port = first
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| {
            let mut err = String::new();
            if let Some(c) = server_guard.0.as_mut() {
                let _ = c.stderr.as_mut().map(|e| e.read_to_string(&mut err));
            }
            panic!("no port in the server's first line {first:?}; stderr: {err}")
        });
    assert_eq!(first.trim(), format!("listening on {server}:{port}"));
    let c = Command::new(BIN)
        .args(["pingpong", "--bind", client, "--port", &port.to_string()])
        .args(args)
        .arg(server)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client runs");
    let limit = Duration::from_secs(120);
    let (cout, cstdout) = wait_output(Guard(Some(c)), limit);
    let (sout, sstdout) = wait_output(std::mem::replace(&mut server_guard, Guard(None)), limit);
    assert!(
        cout.status.success() && sout.status.success(),
        "client: {:?}\n{cstdout}{}\nserver: {:?}\n{sstdout}{}",
        cout.status,
        String::from_utf8_lossy(&cout.stderr),
        sout.status,
        String::from_utf8_lossy(&sout.stderr)
    );
    (sstdout, cstdout)
}

/// The report lines of one side, checked against the run's parameters.
fn check_report(out: &str, me: &str, peer: &str, size: u64, iters: u64, write: &str) {
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"))
            .to_string()
    };
    assert!(
        line("local address:").ends_with(&format!("GID ::ffff:{me}")),
        "{out}"
    );
    assert!(
        line("remote address:").ends_with(&format!("GID ::ffff:{peer}")),
        "{out}"
    );
    let bytes = line(&format!("{} bytes in ", 2 * size * iters));
    assert!(bytes.ends_with(" Mbit/sec"), "{out}");
    let it = line(&format!("{iters} iters in "));
    assert!(it.ends_with(" usec/iter"), "{out}");
    assert_eq!(
        line("RDMA WRITE of"),
        format!("RDMA WRITE of {size} bytes: {write}")
    );
}

/// The QPN and PSN a side printed for itself or its peer.
fn qpn_psn(out: &str, which: &str) -> String {
    let l = out
        .lines()
        .find(|l| l.trim_start().starts_with(which))
        .unwrap_or_else(|| panic!("no {which} in {out}"));
    l.split(", GID")
        .next()
        .unwrap_or_default()
        .split("QPN")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn pingpong_server_and_client_processes() {
    let (server, client) = pingpong(
        "127.0.9.2",
        "127.0.9.1",
        &["--iters", "300", "--size", "4096"],
    );
    check_report(&server, "127.0.9.2", "127.0.9.1", 4096, 300, "verified");
    check_report(&client, "127.0.9.1", "127.0.9.2", 4096, 300, "done");
    // Each side's view of the other is what the other said of itself.
    assert_eq!(qpn_psn(&server, "remote"), qpn_psn(&client, "local"));
    assert_eq!(qpn_psn(&client, "remote"), qpn_psn(&server, "local"));
}

#[test]
fn pingpong_with_small_mtu_odd_size_and_progress_threads() {
    // 1000 bytes at MTU 256: four packets per message, the last one short.
    let args = [
        "-n",
        "50",
        "-s",
        "1000",
        "-m",
        "256",
        "-r",
        "4",
        "--progress-thread",
    ];
    let (server, client) = pingpong("127.0.9.4", "127.0.9.3", &args);
    check_report(&server, "127.0.9.4", "127.0.9.3", 1000, 50, "verified");
    check_report(&client, "127.0.9.3", "127.0.9.4", 1000, 50, "done");
}

/// 64-byte messages: the client's next SEND goes out ahead of the ACK of the server's answer,
/// so the server sees that receive complete before its own SEND does, and must take it.
#[test]
fn pingpong_with_small_messages_whose_receives_overtake_send_completions() {
    let args = ["-n", "2000", "-s", "64"];
    let (server, client) = pingpong("127.0.9.8", "127.0.9.7", &args);
    check_report(&server, "127.0.9.8", "127.0.9.7", 64, 2000, "verified");
    check_report(&client, "127.0.9.7", "127.0.9.8", 64, 2000, "done");
}

#[test]
fn bad_options_fail_without_a_panic() {
    for args in [
        vec!["--bind", "127.0.9.5", "--mtu", "1000", "--port", "0"],
        vec!["--bind", "127.0.9.5", "--rx-depth", "0", "--port", "0"],
        vec!["--bind", "127.0.9.5", "--gid-idx", "99", "--port", "0"],
        // Nobody listens there (the port was just free).
        vec!["--bind", "127.0.9.6", "--port", "1", "127.0.9.5"],
    ] {
        let out = Command::new(BIN)
            .arg("pingpong")
            .args(&args)
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            err.starts_with("softrnic: ") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}
