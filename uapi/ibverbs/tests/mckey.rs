//! rdma-core's `mckey` (Debian's rdmacm-utils), unmodified, through softrnic's
//! `librdmacm.so.1`: a receiver joins an IPv4 multicast group (`rdma_join_multicast_ex`,
//! full member: its UD QP is attached), a sender joins it too (once as a full member, once
//! send-only) and sends 50 datagrams of 1000 bytes to QPN 0xFFFFFF through the address
//! handle of the join event; the receiver must get all 50 completions and both exit 0, with
//! the group's IPv4-mapped GID printed. On two addresses (127.0.56.1 receives, .2 sends)
//! and on one (127.0.56.3: two processes on one device). mckey checks neither the status
//! nor the data of its completions; `softrnic_uapi`'s own multicast tests do.
//!
//! The sender sends 3 s after its join (mckey's pause for a subnet manager); it starts once
//! the receiver has printed its join, so that the group has its member first. Skips
//! without `/usr/bin/mckey`. `join_and_leave_from_c` checks the calls' arguments and the join
//! event's fields from C (`c/rdmacm_join.c`, on 127.0.56.4).

mod common;

use std::time::{Duration, Instant};

fn mckey(receiver: &str, sender: &str, group: &str, send_only: bool, test: &str) {
    let Some(prog) = common::program_of("mckey", test, "rdmacm-utils") else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let args = |addr: &str, extra: &[&str]| -> Vec<String> {
        ["-m", group, "-b", addr, "-C", "50", "-S", "1000"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let log = common::lib_dir().join(format!("mckey-{group}.log"));
    let rx = common::spawn_logged(&prog, &args(receiver, &[]), receiver, &log);
    let joined_line = format!("mckey: joined dgid: ::ffff:{group}");
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains(&joined_line)) {
        assert!(Instant::now() < deadline, "the receiver never joined");
        std::thread::sleep(Duration::from_millis(20));
    }
    let extra: &[&str] = if send_only { &["-s", "-o"] } else { &["-s"] };
    let tx = common::spawn(&prog, &args(sender, extra), sender);
    let tx = common::finish(tx, deadline);
    let rx = common::finish(rx, deadline);
    let rx_stdout = std::fs::read_to_string(&log).unwrap_or_default();
    let (tx_stdout, tx_stderr) = common::texts(&tx);
    let (_, rx_stderr) = common::texts(&rx);
    for (who, status, stdout, stderr) in [
        ("sender", tx.status, tx_stdout, tx_stderr),
        ("receiver", rx.status, rx_stdout, rx_stderr),
    ] {
        assert!(
            status.success()
                && stdout.contains(&joined_line)
                && stdout.contains("data transfers complete")
                && stdout.contains("return status 0"),
            "{who} ({status}):\n{stdout}{stderr}"
        );
    }
}

#[test]
fn mckey_two_hosts() {
    mckey(
        "127.0.56.1",
        "127.0.56.2",
        "239.1.56.1",
        false,
        "mckey_two_hosts",
    );
}

#[test]
fn mckey_one_host_send_only() {
    mckey(
        "127.0.56.3",
        "127.0.56.3",
        "239.1.56.3",
        true,
        "mckey_one_host_send_only",
    );
}

/// The C ABI's argument checks and the synchronous join's event (`c/rdmacm_join.c`).
#[test]
fn join_and_leave_from_c() {
    let test = "join_and_leave_from_c";
    let Some(exe) = common::compile_c_with(
        "rdmacm_join",
        include_str!("c/rdmacm_join.c"),
        test,
        ("rdma/rdma_cma.h", "librdmacm-dev"),
        &[common::built_library(), common::built_rdmacm()],
    ) else {
        return;
    };
    let out = common::run(&exe, &["127.0.56.4", "239.1.56.4"], Some("127.0.56.4"));
    let (stdout, stderr) = common::texts(&out);
    assert!(
        out.status.success() && stdout.contains("ok"),
        "{test} ({}):\n{stdout}{stderr}",
        out.status
    );
}
