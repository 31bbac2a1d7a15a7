//! Seed pages through the connection manager, from C: `tests/c/rdmacm_seed.c`, compiled
//! against the installed `<rdma/rdma_cma.h>` and `<rdma/rdma_verbs.h>` and linked with
//! softrnic's `libibverbs.so.1` and `librdmacm.so.1`, runs as a server process and a client
//! process, each on the device of its own `SOFTRNIC_ADDR`. It proves the acceptance list of
//! the connection manager's issue:
//!
//! - the server makes its endpoint with `rdma_getaddrinfo` and `rdma_create_ep`, then
//!   `rdma_listen`, `rdma_get_request` (an id with a QP), `rdma_reg_read` of two pages of
//!   known content between two unregistered canary pages, and `rdma_accept` with the
//!   region's address, rkey and length in the private data;
//! - the client makes its endpoint the same way and `rdma_connect`s; `rdma_post_read` of the
//!   whole region completes with `IBV_WC_SUCCESS`, the `wr_id` is the context pointer it
//!   gave, and the bytes are the server's;
//! - a READ that runs 64 bytes past the region's end completes with
//!   `IBV_WC_REM_ACCESS_ERR` (its `wr_id` again the context), and after the client's
//!   disconnect the server finds the region and both canaries unchanged;
//! - both sides `rdma_disconnect` (a synchronous id returns with the `DISCONNECTED` event in
//!   `id->event`), `rdma_dereg_mr` and `rdma_destroy_ep`, and exit 0.
//!
//! Twice: server and client on two addresses (127.0.51.1 and 127.0.51.2), and both on one
//! (127.0.51.3), where the two processes share the device. The client is started again while
//! the server does not listen yet (it then exits 2); both processes are killed at a deadline,
//! so a hang fails the test. Skips (`softrnic_testkit::skip`) without cc or librdmacm's
//! headers.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// The C program: `rdmacm_seed server ADDR PORT` and `rdmacm_seed client ADDR PORT`.
const PROGRAM: &str = include_str!("c/rdmacm_seed.c");

/// What the client's exit status 2 means: nobody listened at the port yet.
const NOT_LISTENING_YET: i32 = 2;

/// When both processes are killed, all retries of the client included: a guard against a
/// hang, not a measure of speed (the machine may be loaded, and a REQ that finds no device
/// yet goes again only after the CM's response timeout).
const HANG_GUARD: Duration = Duration::from_secs(90);

/// What each side must have printed: one line per thing it checked (see the program).
const SERVER_CHECKS: &[&str] = &[
    "server: rdma_get_request gave an id with a QP",
    "server: rdma_reg_read registered 8192 bytes",
    "server: accepted, the region's address, rkey and length in the private data",
    "server: the seed and the canaries around it are unchanged",
    "server: disconnected",
    "server: ok",
];
const CLIENT_CHECKS: &[&str] = &[
    "client: connected; the region is 8192 bytes",
    "client: rdma_post_read of 8192 bytes: IBV_WC_SUCCESS, wr_id is the context, \
     the bytes are the seed",
    "client: rdma_post_read of 128 bytes from 64 before the region's end: \
     IBV_WC_REM_ACCESS_ERR, wr_id is the context",
    "client: disconnected",
    "client: ok",
];

/// The program compiled as `name` (one per test: the tests run at once), or `None`, the test
/// `test` skipping, without cc or headers.
fn compile(name: &str, test: &str) -> Option<std::path::PathBuf> {
    common::compile_c_with(
        name,
        PROGRAM,
        test,
        ("rdma/rdma_cma.h", "librdmacm-dev"),
        &[common::built_library(), common::built_rdmacm()],
    )
}

/// Runs the server on the device of `server` and the client on that of `client`, with a
/// port free on `server`: the client again while it reports that nobody listens yet, until
/// the server has exited or the hang guard runs out. Their outputs, server's first.
fn run_both(exe: &Path, server: &str, client: &str) -> (Output, Output) {
    let port = common::free_port().to_string();
    let deadline = Instant::now() + HANG_GUARD;
    let args = |side: &str| vec![side.to_string(), server.to_string(), port.clone()];
    let mut server_child = common::spawn(exe, &args("server"), server);
    let client_out = loop {
        let out = common::finish(common::spawn(exe, &args("client"), client), deadline);
        let server_gone = server_child.try_wait().expect("waiting").is_some();
        if out.status.code() != Some(NOT_LISTENING_YET) || server_gone || Instant::now() > deadline
        {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (common::finish(server_child, deadline), client_out)
}

/// Asserts that `out` (of `who`) exited 0 having printed each of `checks`, and shows them.
fn assert_checked(who: &str, out: &Output, checks: &[&str]) {
    let (stdout, stderr) = common::texts(out);
    assert!(
        out.status.success(),
        "{who} failed ({}):\n{stdout}{stderr}",
        out.status
    );
    for check in checks {
        assert!(
            stdout.lines().any(|l| l.starts_with(check)),
            "{who} did not print {check:?}:\n{stdout}{stderr}"
        );
    }
    eprint!("{stdout}");
}

/// The whole exchange between a server on `server` and a client on `client`.
fn seed_pages(test: &str, name: &str, server: &str, client: &str) {
    let Some(exe) = compile(name, test) else {
        return;
    };
    let (server_out, client_out) = run_both(&exe, server, client);
    // The client's failure first: it usually explains the server's.
    let (server_text, server_err) = common::texts(&server_out);
    let client_context = format!("the server said:\n{server_text}{server_err}");
    let (stdout, stderr) = common::texts(&client_out);
    assert!(
        client_out.status.success(),
        "client failed ({}):\n{stdout}{stderr}{client_context}",
        client_out.status
    );
    assert_checked("client", &client_out, CLIENT_CHECKS);
    assert_checked("server", &server_out, SERVER_CHECKS);
}

#[test]
fn seed_pages_between_two_addresses() {
    seed_pages(
        "seed_pages_between_two_addresses",
        "rdmacm_seed_two",
        "127.0.51.1",
        "127.0.51.2",
    );
}

#[test]
fn seed_pages_on_one_address() {
    seed_pages(
        "seed_pages_on_one_address",
        "rdmacm_seed_one",
        "127.0.51.3",
        "127.0.51.3",
    );
}
