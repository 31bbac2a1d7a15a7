//! The shim's dynamic symbols against rdma-core 44's `librdmacm.so.1`: SONAME `librdmacm.so.1`,
//! the version nodes `RDMACM_1.0` to `RDMACM_1.3`, and every symbol of the real library exported
//! with its version and nothing more (Debian links rdma-core's programs with BIND_NOW: one
//! missing symbol and a program does not start). The list below is `nm -D
//! --with-symbol-versions` of Debian bookworm's `librdmacm.so.1.3.44.0`; when the system has a
//! `librdmacm.so.1`, its exports are compared as well.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// rdma-core 44's exports, by version node.
const RDMA_CORE_44: &[(&str, &[&str])] = &[
    (
        "RDMACM_1.0",
        &[
            "raccept",
            "rbind",
            "rclose",
            "rconnect",
            "rdma_accept",
            "rdma_ack_cm_event",
            "rdma_bind_addr",
            "rdma_connect",
            "rdma_create_ep",
            "rdma_create_event_channel",
            "rdma_create_id",
            "rdma_create_qp",
            "rdma_create_qp_ex",
            "rdma_create_srq",
            "rdma_create_srq_ex",
            "rdma_destroy_ep",
            "rdma_destroy_event_channel",
            "rdma_destroy_id",
            "rdma_destroy_qp",
            "rdma_destroy_srq",
            "rdma_disconnect",
            "rdma_event_str",
            "rdma_free_devices",
            "rdma_freeaddrinfo",
            "rdma_get_cm_event",
            "rdma_get_devices",
            "rdma_get_dst_port",
            "rdma_get_request",
            "rdma_get_src_port",
            "rdma_getaddrinfo",
            "rdma_join_multicast",
            "rdma_leave_multicast",
            "rdma_listen",
            "rdma_migrate_id",
            "rdma_notify",
            "rdma_reject",
            "rdma_resolve_addr",
            "rdma_resolve_route",
            "rdma_set_option",
            "rfcntl",
            "rgetpeername",
            "rgetsockname",
            "rgetsockopt",
            "riomap",
            "riounmap",
            "riowrite",
            "rlisten",
            "rpoll",
            "rread",
            "rreadv",
            "rrecv",
            "rrecvfrom",
            "rrecvmsg",
            "rselect",
            "rsend",
            "rsendmsg",
            "rsendto",
            "rsetsockopt",
            "rshutdown",
            "rsocket",
            "rwrite",
            "rwritev",
        ],
    ),
    ("RDMACM_1.1", &["rdma_join_multicast_ex"]),
    ("RDMACM_1.2", &["rdma_establish", "rdma_init_qp_attr"]),
    (
        "RDMACM_1.3",
        &[
            "rdma_get_remote_ece",
            "rdma_reject_ece",
            "rdma_set_local_ece",
        ],
    ),
];

/// The forwarded functions: the lines of `symbols.rs`, (version, name).
macro_rules! rdmacm_functions {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        const FORWARDED: &[(&str, &str)] = &[$(($ver, stringify!($name))),*];
    };
}
include!("../src/symbols.rs");

/// rdma-core 44's exports as a set of (version, name).
fn rdma_core_44() -> BTreeSet<(String, String)> {
    RDMA_CORE_44
        .iter()
        .flat_map(|(v, names)| names.iter().map(move |n| (v.to_string(), n.to_string())))
        .collect()
}

/// The built library, `target/<profile>/deps/libsoftrnic_rdmacm.so` (beside this test).
fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let lib = deps.join("libsoftrnic_rdmacm.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

/// `objdump -T` of `path`, or `None` if binutils is missing.
fn dynamic_symbols(path: &Path) -> Option<String> {
    let out = Command::new("objdump").arg("-T").arg(path).output().ok()?;
    assert!(out.status.success(), "objdump -T {} failed", path.display());
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The defined `RDMACM_*` functions in `objdump -T` output, as (version, name).
fn rdmacm_exports(objdump: &str) -> BTreeSet<(String, String)> {
    objdump
        .lines()
        .filter(|l| l.contains(" DF ") && !l.contains("*UND*"))
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?;
            let ver = f.next()?.trim_matches(|c| c == '(' || c == ')');
            ver.starts_with("RDMACM_")
                .then(|| (ver.to_string(), name.to_string()))
        })
        .collect()
}

#[test]
fn soname_and_version_nodes() {
    let lib = built_library();
    let Ok(out) = Command::new("readelf").arg("-dV").arg(&lib).output() else {
        softrnic_testkit::skip(
            "soname_and_version_nodes",
            "no readelf (apt-get install binutils)",
        );
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [librdmacm.so.1]"), "{text}");
    for (node, _) in RDMA_CORE_44 {
        assert!(
            text.contains(&format!("Name: {node}\n")),
            "version node {node} missing:\n{text}"
        );
    }
    // No link-time dependency on libibverbs: the shim finds it with dlopen.
    assert!(!text.contains("[libibverbs.so.1]"), "{text}");
}

#[test]
fn exports_exactly_rdma_core_44s_symbols_with_their_versions() {
    let Some(ours) = dynamic_symbols(&built_library()) else {
        softrnic_testkit::skip(
            "exports_exactly_rdma_core_44s_symbols_with_their_versions",
            "no objdump (apt-get install binutils)",
        );
        return;
    };
    let ours = rdmacm_exports(&ours);
    let expected = rdma_core_44();
    let missing: Vec<_> = expected.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&expected).collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
    assert!(
        extra.is_empty(),
        "exported but not by rdma-core 44: {extra:?}"
    );
}

#[test]
fn exports_every_symbol_of_the_installed_librdmacm() {
    let test = "exports_every_symbol_of_the_installed_librdmacm";
    let system = Path::new("/usr/lib/x86_64-linux-gnu/librdmacm.so.1");
    if !system.exists() {
        let reason = format!("no {} (apt-get install librdmacm1)", system.display());
        softrnic_testkit::skip(test, &reason);
        return;
    }
    let (Some(ours), Some(theirs)) = (dynamic_symbols(&built_library()), dynamic_symbols(system))
    else {
        softrnic_testkit::skip(test, "no objdump (apt-get install binutils)");
        return;
    };
    let (ours, theirs) = (rdmacm_exports(&ours), rdmacm_exports(&theirs));
    assert!(
        !theirs.is_empty(),
        "no RDMACM_* functions in {}",
        system.display()
    );
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "{} exports, we do not: {missing:?}",
        system.display()
    );
}

#[test]
fn the_forwarded_list_is_every_rdma_call_of_rdma_core_44() {
    let forwarded: BTreeSet<(String, String)> = FORWARDED
        .iter()
        .map(|(v, n)| (v.to_string(), n.to_string()))
        .collect();
    assert_eq!(
        forwarded.len(),
        FORWARDED.len(),
        "a line twice in symbols.rs"
    );
    // The rest, the rsocket family, is the shim's own (src/rsocket.rs).
    let rdma: BTreeSet<_> = rdma_core_44()
        .into_iter()
        .filter(|(_, n)| n.starts_with("rdma_"))
        .collect();
    assert_eq!(
        forwarded, rdma,
        "symbols.rs against rdma-core 44's rdma_* calls"
    );
}
