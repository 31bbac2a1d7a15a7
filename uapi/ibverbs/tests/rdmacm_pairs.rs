//! rdma-core's rdma_cm programs, unmodified (Debian's rdmacm-utils), connecting through
//! softrnic's `librdmacm.so.1` and `libibverbs.so.1`: each server and its client run as two
//! processes, on two addresses (127.0.55.1 and 127.0.55.2) and again both on one address
//! (127.0.55.3, one device shared by the two processes), and must exit 0 having done their
//! work: `rping` pings 100 times printing every ping on both sides (`-v -C 100`) and 10
//! times with the largest buffer rping takes (`-S 65535`, 64 KiB - 1: rping refuses 65536)
//! with every ping validated (`-V`); `ucmatose` sets up 4 RC connections and exchanges
//! messages on each (`-c 4`); `udaddy` the same over UD with SIDR; `rdma_server` and
//! `rdma_client` (inline SEND from unregistered memory); `rdma_xserver` and `rdma_xclient`
//! over RC; `cmtime` connects and disconnects 20 QPs at once and reports its table (its
//! server never exits by itself: it is stopped once the client is done); rping's server on
//! the IPv6 wildcard `::`, reached over IPv4 (127.0.55.4 and .5) and over IPv6 (`::1`).
//!
//! The runs take turns (on a 2-core machine a run beside another is slow enough to hit
//! rdma_cm's timeouts). The client is started again, while the server runs, if it ran
//! before the server listened (rejected with reason 8, or unreachable). Skips a program
//! that is not installed.

mod common;

use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One run at a time (module doc).
static TURN: Mutex<()> = Mutex::new(());

/// How long a pair may take, start to end.
const DEADLINE: Duration = Duration::from_secs(120);

/// Server and client addresses: two hosts, and one host.
const TWO_HOSTS: (&str, &str) = ("127.0.55.1", "127.0.55.2");
const ONE_HOST: (&str, &str) = ("127.0.55.3", "127.0.55.3");

/// What a client says when it ran before its server listened.
fn too_early(out: &Output) -> bool {
    let (stdout, stderr) = common::texts(out);
    let text = format!("{stdout}{stderr}");
    ["REJECTED", "UNREACHABLE", "Connection refused"]
        .iter()
        .any(|s| text.contains(s))
}

/// Runs `server server_args` on the device of `addrs.0` and then `client client_args` on
/// that of `addrs.1` (`{server}` and `{port}` in the arguments replaced by the server's
/// address and a free port); the client again while it was too early. Without
/// `server_exits` the server is stopped once the client is done. Both outputs, server's
/// first.
fn pair(
    (server, server_args): (&str, &[&str]),
    (client, client_args): (&str, &[&str]),
    addrs: (&str, &str),
    server_exits: bool,
) -> Option<(Output, Output)> {
    let test = format!("{server}/{client} {addrs:?}");
    let tool = |name| common::program_of(name, &test, "rdmacm-utils");
    let (server_prog, client_prog) = (tool(server)?, tool(client)?);
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let port = common::free_port().to_string();
    let fill = |args: &[&str]| -> Vec<String> {
        args.iter()
            .map(|a| a.replace("{server}", addrs.0).replace("{port}", &port))
            .collect()
    };
    let deadline = Instant::now() + DEADLINE;
    let mut server_child = common::spawn(&server_prog, &fill(server_args), addrs.0);
    let client_out = loop {
        std::thread::sleep(Duration::from_millis(200));
        let out = common::finish(
            common::spawn(&client_prog, &fill(client_args), addrs.1),
            deadline,
        );
        let server_running = server_child.try_wait().ok().flatten().is_none();
        if out.status.success() || !too_early(&out) || !server_running || Instant::now() > deadline
        {
            break out;
        }
    };
    if !server_exits {
        let _ = server_child.kill();
    }
    Some((common::finish(server_child, deadline), client_out))
}

/// Asserts that `out` of `who` exited 0 and printed `expect`.
fn succeeded(who: &str, out: &Output, expect: &str) {
    let (stdout, stderr) = common::texts(out);
    assert!(
        out.status.success(),
        "{who} failed ({}):\n{stdout}{stderr}",
        out.status
    );
    assert!(
        stdout.contains(expect),
        "{who} did not print {expect:?}:\n{stdout}{stderr}"
    );
}

fn rping_100_pings(addrs: (&str, &str)) {
    let Some((server, client)) = pair(
        (
            "rping",
            &["-s", "-a", "{server}", "-p", "{port}", "-v", "-C", "100"],
        ),
        (
            "rping",
            &["-c", "-a", "{server}", "-p", "{port}", "-v", "-C", "100"],
        ),
        addrs,
        true,
    ) else {
        return;
    };
    for (who, out, prefix) in [
        ("rping server", &server, "server ping data: rdma-ping-"),
        ("rping client", &client, "ping data: rdma-ping-"),
    ] {
        succeeded(who, out, prefix);
        let (stdout, _) = common::texts(out);
        let pings = stdout.lines().filter(|l| l.starts_with(prefix)).count();
        assert_eq!(pings, 100, "{who}:\n{stdout}");
        // The last ping's data: rping rotates the alphabet, ping i starting at i mod 62.
        assert!(stdout.contains("rdma-ping-99: "), "{who}:\n{stdout}");
    }
}

#[test]
fn rping_100_pings_two_hosts() {
    rping_100_pings(TWO_HOSTS);
}

#[test]
fn rping_100_pings_one_host() {
    rping_100_pings(ONE_HOST);
}

fn rping_64k_validated(addrs: (&str, &str)) {
    let args = [
        "-a", "{server}", "-p", "{port}", "-S", "65535", "-C", "10", "-V",
    ];
    let server_args: Vec<&str> = ["-s"].iter().chain(&args).copied().collect();
    let client_args: Vec<&str> = ["-c"].iter().chain(&args).copied().collect();
    let Some((server, client)) = pair(
        ("rping", &server_args),
        ("rping", &client_args),
        addrs,
        true,
    ) else {
        return;
    };
    // -V: rping compares every ping's data and exits non-zero on a mismatch.
    succeeded("rping -S 65535 server", &server, "");
    succeeded("rping -S 65535 client", &client, "");
}

#[test]
fn rping_64k_validated_two_hosts() {
    rping_64k_validated(TWO_HOSTS);
}

#[test]
fn rping_64k_validated_one_host() {
    rping_64k_validated(ONE_HOST);
}

/// rping's server listening on the IPv6 wildcard `::` (which covers IPv4 too, as
/// `RDMA_OPTION_ID_AFONLY` is off by default), its client connecting to the server's device
/// address `addrs.0`.
fn rping_on_the_ipv6_wildcard(addrs: (&str, &str)) {
    let tail = ["-p", "{port}", "-C", "3", "-v"];
    let server_args: Vec<&str> = ["-s", "-a", "::"].iter().chain(&tail).copied().collect();
    let client_args: Vec<&str> = ["-c", "-a", "{server}"]
        .iter()
        .chain(&tail)
        .copied()
        .collect();
    let Some((server, client)) = pair(
        ("rping", &server_args),
        ("rping", &client_args),
        addrs,
        true,
    ) else {
        return;
    };
    succeeded(
        "rping server on ::",
        &server,
        "server ping data: rdma-ping-2: ",
    );
    succeeded("rping client", &client, "ping data: rdma-ping-2: ");
}

#[test]
fn rping_on_the_ipv6_wildcard_from_ipv4() {
    rping_on_the_ipv6_wildcard(("127.0.55.4", "127.0.55.5"));
}

#[test]
fn rping_on_the_ipv6_wildcard_over_ipv6() {
    rping_on_the_ipv6_wildcard(("::1", "::1"));
}

/// ucmatose or udaddy (`tool`) with `extra` arguments on both sides.
fn cmatose_style(tool: &str, extra: &[&str], addrs: (&str, &str)) {
    let server_args: Vec<&str> = ["-b", "{server}"].iter().chain(extra).copied().collect();
    let client_args: Vec<&str> = ["-s", "{server}"].iter().chain(extra).copied().collect();
    let Some((server, client)) = pair((tool, &server_args), (tool, &client_args), addrs, true)
    else {
        return;
    };
    for (who, out) in [("server", &server), ("client", &client)] {
        succeeded(&format!("{tool} {who}"), out, "data transfers complete");
        succeeded(&format!("{tool} {who}"), out, "return status 0");
    }
}

#[test]
fn ucmatose_4_connections_two_hosts() {
    cmatose_style("ucmatose", &["-p", "{port}", "-c", "4"], TWO_HOSTS);
}

#[test]
fn ucmatose_4_connections_one_host() {
    cmatose_style("ucmatose", &["-p", "{port}", "-c", "4"], ONE_HOST);
}

// udaddy's port is fixed (7174; its -p is the port space): the two runs have their own
// server addresses.
#[test]
fn udaddy_two_hosts() {
    cmatose_style("udaddy", &[], TWO_HOSTS);
}

#[test]
fn udaddy_one_host() {
    cmatose_style("udaddy", &[], ONE_HOST);
}

fn rdma_server_client(prefix: &str, addrs: (&str, &str)) {
    let (server, client) = (
        format!("rdma_{prefix}server"),
        format!("rdma_{prefix}client"),
    );
    // rdma_xserver listens on every address; rdma_server takes -s too.
    let server_args: &[&str] = if prefix.is_empty() {
        &["-s", "{server}", "-p", "{port}"]
    } else {
        &["-p", "{port}"]
    };
    let Some((s, c)) = pair(
        (&server, server_args),
        (&client, &["-s", "{server}", "-p", "{port}"]),
        addrs,
        true,
    ) else {
        return;
    };
    succeeded(&server, &s, &format!("{server}: end 0"));
    succeeded(&client, &c, &format!("{client}: end 0"));
}

#[test]
fn rdma_server_and_client_two_hosts() {
    rdma_server_client("", TWO_HOSTS);
}

#[test]
fn rdma_server_and_client_one_host() {
    rdma_server_client("", ONE_HOST);
}

#[test]
fn rdma_xserver_and_xclient_two_hosts() {
    rdma_server_client("x", TWO_HOSTS);
}

#[test]
fn rdma_xserver_and_xclient_one_host() {
    rdma_server_client("x", ONE_HOST);
}

fn cmtime_20(addrs: (&str, &str)) {
    let Some((_, client)) = pair(
        ("cmtime", &["-b", "{server}", "-p", "{port}", "-c", "20"]),
        ("cmtime", &["-s", "{server}", "-p", "{port}", "-c", "20"]),
        addrs,
        false,
    ) else {
        return;
    };
    succeeded("cmtime client", &client, "step");
    let (stdout, _) = common::texts(&client);
    for step in ["connect", "disconnect"] {
        let row = stdout
            .lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(step))
            .unwrap_or_else(|| panic!("cmtime: no {step} row:\n{stdout}"));
        let numbers: Vec<f64> = row
            .split(':')
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        assert_eq!(numbers.len(), 4, "cmtime {step} row: {row}");
        eprintln!("cmtime {addrs:?} {row}");
    }
}

#[test]
fn cmtime_20_connections_two_hosts() {
    cmtime_20(TWO_HOSTS);
}

#[test]
fn cmtime_20_connections_one_host() {
    cmtime_20(ONE_HOST);
}
