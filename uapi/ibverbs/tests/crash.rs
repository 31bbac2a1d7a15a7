//! A process of a shared device killed with SIGKILL in the middle of a transfer (the
//! program's own process, `kill -9`): the other processes on its device finish unaffected,
//! its remote peer sees a dead host (`IBV_WC_RETRY_EXC_ERR`), and the program, started
//! again, connects at once. Once with the victim an ordinary member of the device, once with
//! it the process that ran the device's agent (`provider/src/host/agent.rs`), which the
//! survivors must replace. Unmodified programs on 127.0.43.x (one address per test and
//! side): the victim is an `ib_write_bw` server, whose client always has WRITEs in flight
//! (a ping-pong's peer may wait for a receive forever, as RC lets it); the bystanders are
//! `ib_write_lat`s that run for a fixed time (a count of iterations may end before the
//! kill on a fast machine). Skips without `/usr/bin/ib_write_bw` or `/usr/bin/ib_write_lat`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// Whether the abstract Unix socket `name` is bound now (`/proc/net/unix` lists it as
/// `@name`): how the test sees which process leased what on a device.
fn bound(name: &str) -> bool {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let want = format!("@{name}");
    table
        .lines()
        .any(|l| l.split_whitespace().last() == Some(&want))
}

/// Whether a TCP socket listens on `port` (`/proc/net/tcp`, state 0A): a perftest server
/// is ready for its client once it does.
fn listening(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let want = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
    })
}

/// Waits up to 30 s for `what`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pair of `prog`: the server on `server`, then (once it listens) the client on `client`,
/// both with `args` and a free TCP port (`-p`).
fn start_pair(prog: &Path, server: &str, client: &str, args: &[&str]) -> (Child, Child) {
    let (s, args) = start_server(prog, server, args);
    (s, common::spawn(prog, &args, client))
}

/// The server of a pair, listening; the client's arguments.
fn start_server(prog: &Path, server: &str, args: &[&str]) -> (Child, Vec<String>) {
    let port = common::free_port();
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend(["-p".to_string(), port.to_string()]);
    let s = common::spawn(prog, &args, server);
    wait_for("the server to listen", || listening(port));
    args.push(server.into());
    (s, args)
}

/// Both ends of a pair exit 0.
fn assert_finished(name: &str, pair: (Child, Child)) {
    let deadline = Instant::now() + Duration::from_secs(120);
    for (who, child) in [("server", pair.0), ("client", pair.1)] {
        let out = common::finish(child, deadline);
        let (stdout, stderr) = common::texts(&out);
        assert!(
            out.status.success(),
            "{name} {who} failed ({}):\n{stdout}{stderr}",
            out.status
        );
    }
}

/// The programs: the victim's, the bystanders'.
struct Programs {
    write_bw: PathBuf,
    write_lat: PathBuf,
}

impl Programs {
    fn find(test: &str) -> Option<Programs> {
        Some(Programs {
            write_bw: common::program("ib_write_bw", test)?,
            write_lat: common::program("ib_write_lat", test)?,
        })
    }
}

/// How long the bystander pair runs; the victim's start, kill and restart take a few
/// seconds.
const BYSTANDER_SECONDS: u32 = 15;

/// The scenario, on servers' address `s` and clients' address `c`: a bystander pair and a
/// victim pair run at once, the victim server is killed mid-transfer, then started again.
fn kill_mid_transfer(p: &Programs, s: &str, c: &str, victim_runs_the_agent: bool) {
    let agent = format!("softrnic/{s}/agent");
    // Long enough to still run when the victim dies, and to overlap the recovery: a time,
    // not a count of iterations, which a fast machine may finish before the kill.
    let bystander = |p: &Programs| {
        let seconds = BYSTANDER_SECONDS.to_string();
        start_pair(
            &p.write_lat,
            s,
            c,
            &["-x", "1", "-s", "4096", "-D", &seconds],
        )
    };
    // The victim's client says when its run starts (perftest prints the result table's
    // header, then runs).
    let log = common::lib_dir().join(format!("crash-{s}.log"));
    let victim = |p: &Programs| {
        let (server, args) = start_server(&p.write_bw, s, &["-x", "1", "-D", "100"]);
        (server, common::spawn_logged(&p.write_bw, &args, c, &log))
    };
    // The first server on `s` runs the agent, once its device starts (a program may listen
    // for its client before it opens the device).
    let first_server_started = || wait_for("the first server's device", || bound(&agent));
    let (bystander, victim) = if victim_runs_the_agent {
        let v = victim(p);
        first_server_started();
        (bystander(p), v)
    } else {
        let b = bystander(p);
        first_server_started();
        (b, victim(p))
    };
    let (mut victim_server, victim_client) = victim;
    wait_for("the victim's transfer", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("#bytes"))
    });
    // Mid-transfer.
    std::thread::sleep(Duration::from_millis(300));
    let (mut bystander_server, mut bystander_client) = bystander;
    for (who, child) in [
        ("victim server", &mut victim_server),
        ("bystander server", &mut bystander_server),
        ("bystander client", &mut bystander_client),
    ] {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{who} ended early (the bystanders run {BYSTANDER_SECONDS} s)"
        );
    }

    victim_server.kill().expect("SIGKILL"); // the program's own process
    let killed = Instant::now();
    let _ = victim_server.wait();

    // Its peer sees a dead host: its WRITEs are retried, then complete in error.
    let out = common::finish(victim_client, killed + Duration::from_secs(30));
    let waited = killed.elapsed();
    let (_, stderr) = common::texts(&out);
    let stdout = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !out.status.success() && stderr.contains("Failed status 12:"),
        "the victim's client must see IBV_WC_RETRY_EXC_ERR (12) ({}):\n{stdout}{stderr}",
        out.status
    );
    eprintln!("the peer saw the dead host {waited:?} after the kill");

    // The program again, on the same device: it connects and runs at once.
    let restarted = Instant::now();
    let again = start_pair(&p.write_bw, s, c, &["-x", "1", "-n", "100"]);
    assert_finished("restarted pair", again);
    eprintln!(
        "started again, connected and ran in {:?}",
        restarted.elapsed()
    );
    // The other processes did not notice.
    assert_finished("bystander pair", (bystander_server, bystander_client));
}

#[test]
fn kill_9_of_a_member_mid_transfer() {
    let Some(p) = Programs::find("kill_9_of_a_member_mid_transfer") else {
        return;
    };
    kill_mid_transfer(&p, "127.0.43.1", "127.0.43.2", false);
}

#[test]
fn kill_9_of_the_agents_process_mid_transfer() {
    let Some(p) = Programs::find("kill_9_of_the_agents_process_mid_transfer") else {
        return;
    };
    kill_mid_transfer(&p, "127.0.43.3", "127.0.43.4", true);
}
