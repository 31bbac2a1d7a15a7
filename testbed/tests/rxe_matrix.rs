//! softrnic against the Linux kernel's Soft-RoCE, every cell of the matrix: {RC, UC, UD and
//! SRQ pingpong, WRITE, WRITE_IMM, READ, SEND, CMP_SWP, FETCH_ADD, ATOMIC_WRITE, rdma_cm} x
//! {softrnic -> rxe, rxe -> softrnic} x {IPv4, IPv6} x {path MTU 1024, 4096}, the same
//! programs on both sides (rdma-core's, perftest's, and `testbed/rxe/verbs_op.c` where
//! neither has the operation), each cell captured and checked (see
//! `softrnic_testbed::rxe::matrix`).
//!
//! The first run builds the guest (debootstrap from Debian's mirror, a few minutes) into
//! `/var/cache/softrnic/rxe-guest` (`SOFTRNIC_RXE_CACHE`); later runs boot it in about 20 s.
//! `SOFTRNIC_RXE_CELLS=<text>` runs only the cells whose line contains `<text>` (e.g.
//! `"READ"` or `"rxe -> softrnic IPv6"`). Each cell's pcap and both sides' output are kept in
//! `target/tmp/rxe-matrix/`.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use softrnic_testbed::rxe::cases::CASES;
use softrnic_testbed::rxe::guest;
use softrnic_testbed::rxe::matrix::{self, Cell, Client, Host};
use softrnic_testbed::rxe::net::Family;
use softrnic_testbed::rxe::Lab;

/// Prints `line` past libtest's capture, so that the matrix shows in `cargo test`'s output.
fn say(line: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// What the matrix needs from this machine, or why it cannot run.
fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (a network namespace, a tap device)".into());
    }
    let tools = [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("debootstrap", "debootstrap"),
        ("tcpdump", "tcpdump"),
        ("cpio", "cpio"),
        ("zstd", "zstd"),
        ("ibv_rc_pingpong", "ibverbs-utils"),
        ("ib_write_bw", "perftest"),
        ("rping", "rdmacm-utils"),
        ("cc", "gcc"),
    ];
    let path = std::env::var("PATH").unwrap_or_default();
    let absent: Vec<&str> = tools
        .iter()
        .filter(|(tool, _)| !path.split(':').any(|d| Path::new(d).join(tool).exists()))
        .map(|(_, package)| *package)
        .collect();
    let mut absent = absent;
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        absent.push("libibverbs-dev");
    }
    (!absent.is_empty()).then(|| format!("apt-get install {}", absent.join(" ")))
}

#[test]
fn softrnic_and_kernel_rxe_interoperate_in_every_cell() {
    if let Some(why) = missing() {
        softrnic_testkit::skip("softrnic_and_kernel_rxe_interoperate_in_every_cell", &why);
        return;
    }
    let only = std::env::var("SOFTRNIC_RXE_CELLS").unwrap_or_default();
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rxe-matrix");
    std::fs::create_dir_all(&out_dir).expect("creating the output folder");
    let programs = out_dir.join("programs");
    guest::build_programs(&programs).expect("building verbs_op");
    let host = Host {
        lib_dir: softrnic_testkit::dropin::lib_dir().to_path_buf(),
        programs: programs.clone(),
        out_dir: out_dir.clone(),
    };
    let t0 = Instant::now();
    let mut lab = Lab::start(&out_dir, &programs, 1024).expect("starting the kernel-rxe guest");
    say(&format!(
        "rxe matrix: guest kernel {} ready after {:.0?}; GID indices IPv4 {}, IPv6 {}",
        lab.kernel,
        t0.elapsed(),
        lab.gids.0,
        lab.gids.1
    ));
    let mut failed = Vec::new();
    let mut ran = 0;
    let mut port = 20_000u16;
    for mtu in [1024, 4096] {
        matrix::set_path_mtu(&mut lab.console, mtu).expect("setting the path MTU");
        for family in [Family::V4, Family::V6] {
            let gid = if family == Family::V4 {
                lab.gids.0
            } else {
                lab.gids.1
            };
            for case in CASES {
                for client in [Client::Softrnic, Client::Rxe] {
                    let cell = Cell {
                        case,
                        client,
                        family,
                        mtu,
                    };
                    let line = cell.to_string();
                    port += 1;
                    if !line.contains(&only) {
                        continue;
                    }
                    ran += 1;
                    let tag = format!("{port}");
                    let outcome = matrix::run(&cell, &mut lab.console, &host, gid, port, &tag)
                        .unwrap_or_else(|e| panic!("{line}: the harness failed: {e}"));
                    let w = &outcome.wire;
                    let summary = format!(
                        "{} packets, {} bad ICRC, largest payload {}, {:.1?}",
                        w.packets, w.bad_icrc, w.max_payload, outcome.took
                    );
                    if outcome.failures.is_empty() {
                        say(&format!("ok   {line}: {summary}"));
                    } else {
                        say(&format!("FAIL {line}: {summary}"));
                        for f in &outcome.failures {
                            say(&format!("       {f}"));
                        }
                        say(&format!("       pcap and logs: {}", outcome.pcap.display()));
                        failed.push(line);
                    }
                }
            }
        }
    }
    say(&format!(
        "rxe matrix: {ran} cells, {} failed, {:.0?}",
        failed.len(),
        t0.elapsed()
    ));
    assert!(ran > 0, "SOFTRNIC_RXE_CELLS={only:?} matches no cell");
    assert!(failed.is_empty(), "cells failed:\n{}", failed.join("\n"));
}
