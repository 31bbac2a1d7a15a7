//! The connection manager's example, `examples/cm_ping.rs`, run as its documentation says: a
//! server on 127.0.58.1 and a client from 127.0.58.2, two processes; the client gets each of
//! its 10 messages back in capitals from the server and both exit 0.
//!
//! `cargo test --all-targets` builds the example only as a test harness (`cargo test
//! --examples` runs examples' tests), never as the program, so this test compiles the
//! example's source into itself and runs its own binary again as the example's server and
//! client ([`ROLE`]).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)]
#[path = "../examples/cm_ping.rs"]
mod cm_ping;

/// Set to the example's arguments, this test's binary is the example.
const ROLE: &str = "SOFTRNIC_CM_PING_ROLE";

/// The example with `args`: this test's binary run again on this test alone, as it.
fn example(args: &[&str]) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("the test's own binary"));
    c.args([
        "cm_ping_server_and_client",
        "--exact",
        "--nocapture",
        "--quiet",
    ])
    .env(ROLE, args.join(" "));
    c
}

#[test]
fn cm_ping_server_and_client() {
    if let Ok(role) = std::env::var(ROLE) {
        let result = cm_ping::run(role.split(' ').map(String::from).collect());
        if let Err(e) = &result {
            eprintln!("Error: {e:?}");
        }
        std::process::exit(i32::from(result.is_err()));
    }
    let port = {
        let probe = std::net::TcpListener::bind("127.0.58.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let listen = format!("127.0.58.1:{port}");
    let mut server = example(&["server", &listen])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the server");
    // The client again while the server is not listening yet (REJ 8: refused).
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = loop {
        let out = example(&["client", "127.0.58.2", &listen, "10"])
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
    // (The harness's own "running 1 test" line comes before.)
    let pings: Vec<&str> = stdout.lines().filter(|l| l.starts_with("PING")).collect();
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
