//! Unmodified librpma 1.2 (Debian's `librpma0`) works on softrnic's `libibverbs.so.1` and
//! `librdmacm.so.1`: `tests/c/rpma_test.c`, compiled against the installed `<librpma.h>` and
//! linked with `-lrpma` and softrnic's libraries, runs as a server and a client process.
//! librpma sets the connection up with rdma_cm (`rpma_ep_listen`, `rpma_conn_req_new`,
//! `rpma_conn_req_connect`); the client's private data travels in the REQ and the server's
//! memory region descriptor in the REP's. The client checks
//! `rpma_mr_remote_from_descriptor`'s error cases, then `rpma_read`s known bytes,
//! `rpma_write`s, `rpma_atomic_write`s, `rpma_flush`es (visibility) and reads its writes back;
//! both `rpma_send` a message the other `rpma_recv`s (the server's receive posted before the
//! accept, `rpma_conn_req_recv`). Each completion is checked (status, opcode, op context,
//! bytes); receives go to a CQ of their own, and the client's two CQs share one completion
//! channel (`rpma_conn_wait`). The server then finds the client's writes in its memory and its
//! canaries untouched, and both see the disconnection as `RPMA_CONN_CLOSED`. Twice: server and
//! client on two devices (127.0.52.1, 127.0.52.2), and both on one (127.0.52.3). Skips without
//! `<librpma.h>` (apt-get install librpma-dev).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// The server and client program.
const SOURCE: &str = include_str!("c/rpma_test.c");

/// What the client says on stderr, exiting 2, when its connection was rejected or found no
/// one: the server is not listening yet, so it is started again.
const NOT_LISTENING: &str = "NOT LISTENING";

/// Lines each side must print: the checks it passed, in order.
const SERVER_LINES: &[&str] = &[
    "request's private data: \"rpma_test client\"",
    "event Connection established",
    "recv: completed (RECV)",
    "received \"client: reads, writes, atomic write and flush done\"",
    "memory: the client's writes in place, canaries and read region untouched",
    "send: completed (SEND)",
    "event Connection closed",
    "server: PASS",
];
const CLIENT_LINES: &[&str] = &[
    "event Connection established",
    "descriptor error cases: as documented",
    "read: 256 bytes as the server wrote them",
    "write: completed (RDMA_WRITE)",
    "atomic write: completed (RDMA_WRITE)",
    "flush: completed (RDMA_READ)",
    "read back: the write and the atomic write are visible",
    "received \"server: memory checked, goodbye\"",
    "event Connection closed",
    "client: PASS",
];

/// The program compiled as `name` (one per test: they run in parallel), or `None` to skip.
fn program(name: &str, test: &str) -> Option<PathBuf> {
    common::compile_c_linked(
        name,
        SOURCE,
        test,
        ("librpma.h", "librpma-dev"),
        &[common::built_library(), common::built_rdmacm()],
        &["-lrpma"],
    )
}

/// Asserts that `out` exited 0 and printed `lines` in that order (each the start of a line);
/// `both` (both sides' output) goes with a failure.
fn assert_passed(who: &str, out: &Output, lines: &[&str], both: &str) {
    assert!(
        out.status.success(),
        "{who} failed ({}):\n{both}",
        out.status
    );
    let (stdout, _) = common::texts(out);
    let mut printed = stdout.lines();
    for want in lines {
        assert!(
            printed.any(|l| l.starts_with(want)),
            "{who} did not print {want:?} (in order):\n{both}"
        );
    }
}

/// Both sides' output, for a failure message.
fn report(server: &Output, client: &Output) -> String {
    let (s_out, s_err) = common::texts(server);
    let (c_out, c_err) = common::texts(client);
    format!(
        "--- server ({}):\n{s_out}{s_err}--- client ({}):\n{c_out}{c_err}",
        server.status, client.status
    )
}

/// Runs the server on the device of `server` and the client on that of `client`, connecting
/// to the server's address, with a deadline that kills both if they hang. The client is
/// started again while the server is not listening yet.
fn server_and_client(prog: &Path, server: &str, client: &str) {
    let port = common::free_port().to_string();
    // Generous: one attempt that finds no listener may take REQ's retries (over a minute).
    let deadline = Instant::now() + Duration::from_secs(240);
    let args = |role: &str| vec![role.to_string(), server.to_string(), port.clone()];
    let mut server_child = common::spawn(prog, &args("server"), server);
    let client_out = loop {
        std::thread::sleep(Duration::from_millis(100));
        let out = common::finish(common::spawn(prog, &args("client"), client), deadline);
        let (_, stderr) = common::texts(&out);
        let server_gone = server_child.try_wait().expect("waiting").is_some();
        if out.status.code() != Some(2)
            || !stderr.contains(NOT_LISTENING)
            || server_gone
            || Instant::now() > deadline
        {
            break out;
        }
        eprintln!("client: {}", stderr.trim());
    };
    // A server whose client failed may wait for ever: a while to finish, then killed.
    let server_deadline = if client_out.status.success() {
        deadline
    } else {
        deadline.min(Instant::now() + Duration::from_secs(10))
    };
    let server_out = common::finish(server_child, server_deadline);
    let both = report(&server_out, &client_out);
    assert_passed("client", &client_out, CLIENT_LINES, &both);
    assert_passed("server", &server_out, SERVER_LINES, &both);
    eprintln!("{server} <- {client}: both passed");
}

#[test]
fn librpma_on_two_devices() {
    let Some(prog) = program("rpma_two_devices", "librpma_on_two_devices") else {
        return;
    };
    server_and_client(&prog, "127.0.52.1", "127.0.52.2");
}

#[test]
fn librpma_on_one_device() {
    let Some(prog) = program("rpma_one_device", "librpma_on_one_device") else {
        return;
    };
    server_and_client(&prog, "127.0.52.3", "127.0.52.3");
}
