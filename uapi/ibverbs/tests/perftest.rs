//! perftest's unmodified tools between two processes on softrnic's library (and the vendor
//! stand-ins, `standins/README.md`), one device each, RoCE v2 with the IPv4-mapped GID 1
//! (`-x 1`), over a free TCP port: server and client must exit 0 and print the result table.
//! Each tool has its own pair of `lo` addresses in 127.0.16.x (no other test binds these), and
//! the runs take turns: on a 2-core machine two spinning perftest pairs would starve each
//! other's progress threads. Skips a tool that is not installed (`apt-get install perftest`).
//!
//! With `-R` the tools connect through rdma_cm (softrnic's `librdmacm.so.1`) instead of their
//! TCP exchange: `ib_write_bw`, `ib_read_bw`, `ib_send_lat` and `ib_atomic_bw`, between two
//! addresses and between two processes on one address.

mod common;

use std::sync::Mutex;

/// One run at a time (see the module doc).
static TURN: Mutex<()> = Mutex::new(());

/// Runs `tool` as server on 127.0.16.`host` and client on 127.0.16.`host + 1` with `extra`
/// arguments; the client retries while the server is not listening yet. Both must exit 0 and
/// the client (the server too if `server_reports`) print the table whose header contains
/// `header`; returns the client's result line.
fn perftest(
    tool: &str,
    host: u8,
    extra: &[&str],
    header: &str,
    server_reports: bool,
) -> Option<String> {
    let (server_addr, client_addr) = (format!("127.0.16.{host}"), format!("127.0.16.{}", host + 1));
    perftest_on(
        tool,
        (&server_addr, &client_addr),
        extra,
        header,
        server_reports,
    )
}

/// [`perftest`] with the server on `addrs.0` and the client on `addrs.1`.
fn perftest_on(
    tool: &str,
    (server_addr, client_addr): (&str, &str),
    extra: &[&str],
    header: &str,
    server_reports: bool,
) -> Option<String> {
    let prog = common::program(tool, tool)?;
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let mut args: Vec<String> = ["-x", "1"].iter().map(|s| s.to_string()).collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    // perftest 4.5-0.17 (Debian 12) with -R: the client connects its data QP as soon as the
    // last exchange on the setup connection is done, while the server may not listen for it
    // yet, and this version cannot recover from the REJ (its retry reuses the ids it
    // destroyed). The host agent holds such a REQ a moment for its listener
    // (`provider/src/host/unclaimed.rs`), so the pair must connect at the first try.
    let (server, client) = common::run_pair(&prog, server_addr, client_addr, &args, &[]);
    let mut result = String::new();
    for (who, out) in [("server", &server), ("client", &client)] {
        let label = format!("{who} of {tool} {extra:?}");
        if who == "server" && !server_reports {
            let (stdout, stderr) = common::texts(out);
            let status = out.status;
            assert!(
                status.success(),
                "{label} failed ({status}):\n{stdout}{stderr}"
            );
            continue;
        }
        let row = common::perftest_row(&label, out, header);
        eprintln!("{tool} {who}: {header}... | {row}");
        result = row;
    }
    Some(result)
}

const BW: &str = "BW average[MB/sec]";
const LAT: &str = "t_typical[usec]";

#[test]
fn ib_write_bw() {
    perftest("ib_write_bw", 1, &["-n", "200"], BW, true);
}

/// Many QPs through perftest, under the usual limit of 1024 open files (set here for the
/// tools this test starts; the other tests' tools need far fewer): `-q 1024` makes 1024 QPs
/// on each side and one CQ of 128 x 1024 entries (past the 65535 `max_cqe` once had). (The
/// QPs' datagrams go through the host-local lane, which opens no source-port socket:
/// `uapi/tests/qps_past_fd_limit.rs` has the sockets' limit, over kernel UDP.)
#[test]
fn ib_write_bw_with_1024_qps() {
    softrnic_testkit::rlimit::limit_open_files(1024);
    perftest(
        "ib_write_bw",
        51,
        &["-q", "1024", "-s", "64", "-n", "128"],
        BW,
        true,
    );
}

#[test]
fn ib_send_lat() {
    perftest("ib_send_lat", 3, &["-n", "200"], LAT, true);
}

#[test]
fn ib_read_bw() {
    perftest("ib_read_bw", 5, &["-n", "200"], BW, true);
}

#[test]
fn ib_send_bw() {
    perftest("ib_send_bw", 7, &["-n", "200"], BW, true);
}

#[test]
fn ib_atomic_bw() {
    perftest("ib_atomic_bw", 9, &["-n", "200"], BW, true);
}

/// RDMA WRITEs must land while the application spins on memory: the progress thread's job.
#[test]
fn ib_write_lat() {
    perftest("ib_write_lat", 11, &["-n", "200"], LAT, true);
}

/// The server of READ (and ATOMIC) latency only answers: perftest prints no table there.
#[test]
fn ib_read_lat() {
    perftest("ib_read_lat", 13, &["-n", "200"], LAT, false);
}

#[test]
fn ib_atomic_lat() {
    perftest("ib_atomic_lat", 15, &["-n", "200"], LAT, false);
}

/// `tool -R` (connecting through rdma_cm) between 127.0.16.`host` and 127.0.16.`host + 1`,
/// and again with both on 127.0.16.`host + 20`.
fn through_rdma_cm(tool: &str, host: u8, header: &str) {
    let extra = ["-R", "-n", "200"];
    let one_host = format!("127.0.16.{}", host + 20);
    if perftest(tool, host, &extra, header, true).is_some() {
        perftest_on(tool, (&one_host, &one_host), &extra, header, true);
    }
}

#[test]
fn ib_write_bw_rdma_cm() {
    through_rdma_cm("ib_write_bw", 17, BW);
}

#[test]
fn ib_read_bw_rdma_cm() {
    through_rdma_cm("ib_read_bw", 19, BW);
}

#[test]
fn ib_send_lat_rdma_cm() {
    through_rdma_cm("ib_send_lat", 21, LAT);
}

#[test]
fn ib_atomic_bw_rdma_cm() {
    through_rdma_cm("ib_atomic_bw", 23, BW);
}
