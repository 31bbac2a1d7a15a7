//! softrnic's `librdmacm.so.1` (`uapi/rdmacm`) forwards the `rdma_*` calls of a C program to
//! their implementations in softrnic's `libibverbs.so.1`: a program compiled against the
//! installed `<rdma/rdma_cma.h>` and linked with the shim (so it imports the versioned
//! `rdma_*@RDMACM_1.0` as programs linked against rdma-core do) calls a few of them, on
//! softrnic's library directory. Without softrnic's `libibverbs.so.1` the shim must say so,
//! once, and fail with `ENOSYS`.

mod common;

use std::process::Command;

/// The program: one line per call, saying what came back.
const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

int main(void)
{
    const char *name = rdma_event_str(RDMA_CM_EVENT_ESTABLISHED);
    printf("event_str %s\n", name ? name : "NULL");

    struct rdma_addrinfo hints = { .ai_flags = RAI_NUMERICHOST }, *res = NULL;
    errno = 0;
    int ret = rdma_getaddrinfo("127.0.49.1", "7471", &hints, &res);
    if (ret == 0) {
        struct sockaddr_in *sin = (struct sockaddr_in *)res->ai_dst_addr;
        printf("getaddrinfo family %d port %d qp_type %d port_space 0x%x\n", res->ai_family,
               ntohs(sin->sin_port), res->ai_qp_type, res->ai_port_space);
        rdma_freeaddrinfo(res);
    } else {
        printf("getaddrinfo %d errno %d\n", ret, errno);
    }

    errno = 0;
    struct rdma_event_channel *channel = rdma_create_event_channel();
    if (channel) {
        printf("create_event_channel fd %s\n", channel->fd >= 0 ? "ok" : "negative");
        rdma_destroy_event_channel(channel);
    } else {
        printf("create_event_channel NULL errno %d\n", errno);
    }
    return 0;
}
"#;

/// What the program prints on softrnic's `libibverbs.so.1`.
const FORWARDED: &[&str] = &[
    "event_str RDMA_CM_EVENT_ESTABLISHED",
    // AF_INET, RC, RDMA_PS_TCP.
    "getaddrinfo family 2 port 7471 qp_type 2 port_space 0x106",
    "create_event_channel fd ok",
];

/// What it prints when the shim cannot find the implementations: every call fails, with
/// ENOSYS (rdma_event_str returns NULL).
const NOT_FORWARDED: &[&str] = &[
    "event_str NULL",
    "getaddrinfo -1 errno 38",
    "create_event_channel NULL errno 38",
];

/// The shim's message when `libibverbs.so.1` is not softrnic's.
const MESSAGE: &str = "librdmacm.so.1 (softrnic) needs softrnic's libibverbs.so.1";

/// The program, compiled as `name` (one per test: the tests run in parallel) and linked with
/// the shim; `None` (having said why) to skip.
fn program(name: &str, test: &str) -> Option<std::path::PathBuf> {
    common::compile_c_with(
        name,
        PROGRAM,
        test,
        ("rdma/rdma_cma.h", "librdmacm-dev"),
        &[common::built_rdmacm()],
    )
}

#[test]
fn the_shim_forwards_to_softrnics_libibverbs() {
    let Some(exe) = program(
        "rdmacm_forward",
        "the_shim_forwards_to_softrnics_libibverbs",
    ) else {
        return;
    };
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", common::lib_dir())
        .env("LD_BIND_NOW", "1")
        .output()
        .expect("running the program");
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{}:\n{stdout}{stderr}", out.status);
    assert!(!stderr.contains(MESSAGE), "{stderr}");
    assert_eq!(stdout.lines().collect::<Vec<_>>(), FORWARDED, "{stderr}");
}

#[test]
fn without_softrnics_libibverbs_the_shim_says_so_once_and_fails_with_enosys() {
    let test = "without_softrnics_libibverbs_the_shim_says_so_once_and_fails_with_enosys";
    let Some(exe) = program("rdmacm_alone", test) else {
        return;
    };
    // A directory with the shim alone: the shim's dlopen("libibverbs.so.1") then finds the
    // system's (rdma-core's, which has no softrnic_* symbols), or none at all.
    let alone =
        common::lib_dir().with_file_name(format!("softrnic-rdmacm-alone-{}", std::process::id()));
    std::fs::create_dir_all(&alone).expect("creating the directory");
    let link = alone.join("librdmacm.so.1");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(common::built_rdmacm(), &link).expect("linking the shim");
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &alone)
        .env("LD_BIND_NOW", "1")
        .output()
        .expect("running the program");
    let _ = std::fs::remove_dir_all(&alone);
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{}:\n{stdout}{stderr}", out.status);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        NOT_FORWARDED,
        "{stderr}"
    );
    assert_eq!(stderr.matches(MESSAGE).count(), 1, "one message:\n{stderr}");
    eprintln!("the shim said: {}", stderr.trim());
}
