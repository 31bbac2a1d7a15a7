//! rdma-core's unmodified `ibv_srq_pingpong -g 1` between two processes on softrnic's library,
//! one device each (`SOFTRNIC_ADDR` 127.0.19.1 for the server, 127.0.19.2 for the client:
//! addresses of `lo` no other test binds), over a free TCP port: 16 RC QPs per side take their
//! receives from one SRQ (`ibv_create_srq`, `ibv_post_srq_recv`, `ibv_create_qp` with
//! `init_attr->srq`, `ibv_destroy_srq` after the QPs). Both must exit 0 and print their
//! throughput lines; with `-c` (data checked) and `-e` (completion channels) too. Skips
//! without `/usr/bin/ibv_srq_pingpong`.

mod common;

use std::time::{Duration, Instant};

const SERVER: &str = "127.0.19.1";
const CLIENT: &str = "127.0.19.2";

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
            "{who} of ibv_srq_pingpong {extra:?} failed ({}):\n{stdout}{stderr}",
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
fn srq_pingpong_between_two_processes() {
    let Some(prog) = common::program("ibv_srq_pingpong", "srq_pingpong_between_two_processes")
    else {
        return;
    };
    // The defaults: 16 QPs, one SRQ of 500 WQEs, 1000 iterations of 4096 bytes.
    pingpong(&prog, &[]);
    pingpong(&prog, &["-c"]);
    pingpong(&prog, &["-e", "-n", "200", "-c"]);
    pingpong(&prog, &["-s", "8192", "-n", "200", "-c"]);
    pingpong(&prog, &["-q", "4", "-s", "65536", "-n", "100", "-c"]);
}
