//! The connection manager's example, `examples/cm_ping.rs`, run as its documentation says: a
//! server on 127.0.58.1 and a client from 127.0.58.2, two processes; the client gets each of
//! its 10 messages back in capitals from the server and both exit 0. `cargo test
//! --all-targets` builds the example; without it the test skips.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/examples/cm_ping`, beside this test's `deps/` directory.
fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("examples/cm_ping");
    path.exists().then_some(path)
}

#[test]
fn cm_ping_server_and_client() {
    let Some(prog) = example() else {
        softrnic_testkit::skip(
            "cm_ping_server_and_client",
            "build the example first (cargo test --all-targets)",
        );
        return;
    };
    let port = {
        let probe = std::net::TcpListener::bind("127.0.58.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let listen = format!("127.0.58.1:{port}");
    let mut server = Command::new(&prog)
        .args(["server", &listen])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the server");
    // The client again while the server is not listening yet (REJ 8: refused).
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = loop {
        let out = Command::new(&prog)
            .args(["client", "127.0.58.2", &listen, "10"])
            .output()
            .expect("running the client");
        let refused = String::from_utf8_lossy(&out.stderr).contains("Rejected");
        if out.status.success() || !refused || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success(),
        "client ({}):\n{stdout}{}",
        client.status,
        String::from_utf8_lossy(&client.stderr)
    );
    let pings: Vec<&str> = stdout.lines().collect();
    let want: Vec<String> = (0..10).map(|i| format!("PING {i}")).collect();
    assert_eq!(pings, want);
    while server.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = server.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("echoed 10 messages"),
        "server ({}):\n{text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
