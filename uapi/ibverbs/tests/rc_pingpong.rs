//! rdma-core's unmodified `ibv_rc_pingpong -g 1` between two processes on softrnic's library,
//! one device each (`SOFTRNIC_ADDR` 127.0.13.1 for the server, 127.0.13.2 for the client:
//! addresses of `lo` no other test or `softrnic demo` binds), over a free TCP port: both must
//! exit 0 and print their throughput lines; with `-e` too (completion channels). Skips without `/usr/bin/ibv_rc_pingpong`.

mod common;

use std::time::{Duration, Instant};

const SERVER: &str = "127.0.13.1";
const CLIENT: &str = "127.0.13.2";

/// Runs server and client with `extra` arguments; the client retries while the server is not
/// listening yet.
fn pingpong(prog: &std::path::Path, extra: &[&str]) {
    let port = common::free_port(SERVER).to_string();
    let mut args: Vec<String> = ["-g", "1", "-p", &port]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let server = common::spawn(prog, &args, SERVER);
    let mut client_args = args.clone();
    client_args.push(SERVER.into());
    let client = loop {
        std::thread::sleep(Duration::from_millis(100));
        let out = common::finish(common::spawn(prog, &client_args, CLIENT), deadline);
        let (_, stderr) = common::texts(&out);
        if out.status.success() || !stderr.contains("Couldn't connect") || Instant::now() > deadline
        {
            break out;
        }
    };
    let server = common::finish(server, deadline);
    for (who, out) in [("server", &server), ("client", &client)] {
        let (stdout, stderr) = common::texts(out);
        assert!(
            out.status.success(),
            "{who} of ibv_rc_pingpong {extra:?} failed ({}):\n{stdout}{stderr}",
            out.status
        );
        assert!(
            stdout.contains(" bytes in ") && stdout.contains("Mbit/sec"),
            "{who}: no throughput line:\n{stdout}{stderr}"
        );
        assert!(
            stdout.contains(" iters in "),
            "{who}: no iteration line:\n{stdout}"
        );
        eprintln!("{who} {extra:?}: {}", stdout.lines().last().unwrap_or(""));
    }
}

#[test]
fn rc_pingpong_between_two_processes() {
    let Some(prog) = common::program("ibv_rc_pingpong", "rc_pingpong_between_two_processes") else {
        return;
    };
    pingpong(&prog, &["-n", "100"]);
    pingpong(&prog, &["-n", "100", "-c"]);
    pingpong(&prog, &["-s", "65536", "-n", "100", "-c"]);
    // -e: completion channels (ibv_req_notify_cq, poll on the channel, ibv_get_cq_event).
    pingpong(&prog, &["-e", "-n", "100", "-c"]);
    pingpong(&prog, &["-e", "-s", "65536", "-n", "100"]);
}
