//! rdma-core's rdma_cm tools (Debian's rdmacm-utils) and perftest's `ib_write_bw` load on
//! softrnic's libraries: run with softrnic's directory first in `LD_LIBRARY_PATH`
//! (`libibverbs.so.1`, its `librdmacm.so.1`, the stand-ins) and `LD_BIND_NOW=1`, each must
//! start and print its usage for `-h` (an option none of them takes but perftest, which prints
//! its usage for it too; rping's usage is its two command lines), with no symbol left
//! unresolved. `ldd -r` (the loader's own
//! resolution of every symbol) must find softrnic's `librdmacm.so.1` and `libibverbs.so.1`.
//! The tools use no network here. Skips a tool that is not installed.

mod common;

use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

/// What the dynamic linker says when a program cannot start or a symbol cannot be bound.
const LOADER_ERRORS: &[&str] = &[
    "symbol lookup error",
    "undefined symbol",
    "error while loading shared libraries",
    "not found",
];

/// Runs `/usr/bin/<tool> -h` on softrnic's libraries (Debian package `package`), asserting
/// that it starts and prints its usage (a text containing `usage`, ignoring case), and that
/// `ldd -r` binds every symbol to softrnic's libraries.
fn prints_its_usage(tool: &str, package: &str, usage: &str) {
    let Some(prog) = common::program_of(tool, tool, package) else {
        return;
    };
    let dir = common::lib_dir();
    // argv[0] the bare name, as from a shell: the tools print it in their usage.
    let child = Command::new(&prog)
        .arg0(tool)
        .arg("-h")
        .env("LD_LIBRARY_PATH", dir)
        .env("LD_BIND_NOW", "1")
        .env_remove("SOFTRNIC_ADDR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {tool}: {e}"));
    let out = common::finish(child, Instant::now() + Duration::from_secs(30));
    let (stdout, stderr) = common::texts(&out);
    let text = format!("{stdout}{stderr}");
    for e in LOADER_ERRORS {
        assert!(!text.contains(e), "{tool}: the loader says {e:?}:\n{text}");
    }
    let code = out.status.code();
    assert!(
        code.is_some() && code != Some(127),
        "{tool} did not run ({}):\n{text}",
        out.status
    );
    assert!(
        text.to_lowercase().contains(&usage.to_lowercase()),
        "{tool} -h printed no usage ({}):\n{text}",
        out.status
    );

    let Ok(ldd) = Command::new("ldd")
        .arg("-r")
        .arg(&prog)
        .env("LD_LIBRARY_PATH", dir)
        .output()
    else {
        softrnic_testkit::skip(tool, "no ldd, the binding of each library is not checked");
        return;
    };
    let (stdout, stderr) = common::texts(&ldd);
    let text = format!("{stdout}{stderr}");
    assert!(!text.contains("undefined symbol"), "{tool}:\n{text}");
    for lib in ["librdmacm.so.1", "libibverbs.so.1"] {
        // cmtime and the rsocket tools do not link libibverbs.so.1 themselves.
        if let Some(line) = text.lines().find(|l| l.contains(&format!("{lib} =>"))) {
            assert!(
                line.contains(&dir.display().to_string()),
                "{tool}: {lib} not softrnic's: {line}"
            );
        }
    }
    eprintln!("{tool}: {}", out.status);
}

/// One test per tool: `tool from package, usage text`.
macro_rules! tools {
    ($($tool:ident from $package:literal, $usage:literal;)*) => {$(
        #[test]
        fn $tool() {
            prints_its_usage(stringify!($tool), $package, $usage);
        }
    )*};
}

tools! {
    rping from "rdmacm-utils", "rping -c [-vVd]";
    ucmatose from "rdmacm-utils", "usage: ucmatose";
    udaddy from "rdmacm-utils", "usage: udaddy";
    mckey from "rdmacm-utils", "usage: mckey";
    cmtime from "rdmacm-utils", "usage: cmtime";
    rdma_server from "rdmacm-utils", "usage: rdma_server";
    rdma_client from "rdmacm-utils", "usage: rdma_client";
    rdma_xserver from "rdmacm-utils", "usage: rdma_xserver";
    rdma_xclient from "rdmacm-utils", "usage: rdma_xclient";
    rstream from "rdmacm-utils", "usage: rstream";
    riostream from "rdmacm-utils", "usage: riostream";
    rcopy from "rdmacm-utils", "usage 1: rcopy";
    udpong from "rdmacm-utils", "usage: udpong";
    ib_write_bw from "perftest", "start a server and wait for connection";
}
