//! The library's dynamic symbols against what rdma-core's programs import: SONAME
//! `libibverbs.so.1`, every version node of rdma-core 44, and every `IBVERBS_*` symbol that
//! a binary of ibverbs-utils or perftest imports exported with that version (Debian links them
//! with BIND_NOW: one missing symbol and the program does not start); every `softrnic_rdma_*`
//! that softrnic's `librdmacm.so.1` looks up (`uapi/rdmacm/src/symbols.rs`), with version
//! `SOFTRNIC_RDMACM_PRIVATE`; every public symbol of the installed rdma-core
//! `libibverbs.so.1` with its default version (pyverbs, rdma-core's Python bindings, binds
//! them all when it loads), and of the installed `librdmacm.so.1` in softrnic's; and that perftest's binaries, which also load `libmlx5.so.1`,
//! `libefa.so.1` and `librdmacm.so.1`, resolve every import with softrnic's directory first
//! (the vendor stand-ins, `standins/README.md`, and softrnic's `librdmacm.so.1`).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `objdump -T` of `path`, or `None` if binutils is missing.
fn dynamic_symbols(path: &Path) -> Option<String> {
    let out = Command::new("objdump").arg("-T").arg(path).output().ok()?;
    assert!(out.status.success(), "objdump -T {} failed", path.display());
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `(version, name)` pairs of `IBVERBS_*` symbols in `objdump -T` output, `defined` or
/// undefined ones (imports).
fn ibverbs_symbols(objdump: &str, defined: bool) -> BTreeSet<(String, String)> {
    objdump
        .lines()
        .filter(|l| l.contains("IBVERBS_") && l.contains("*UND*") != defined)
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?;
            let ver = f.next()?.trim_matches(|c| c == '(' || c == ')');
            Some((ver.to_string(), name.to_string()))
        })
        .filter(|(v, n)| v != n)
        .collect()
}

#[test]
fn soname_and_version_nodes() {
    let lib = common::built_library();
    let Ok(out) = Command::new("readelf").arg("-dV").arg(&lib).output() else {
        softrnic_testkit::skip(
            "soname_and_version_nodes",
            "no readelf (apt-get install binutils)",
        );
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libibverbs.so.1]"), "{text}");
    let nodes = (0..=14).map(|i| format!("IBVERBS_1.{i}")).chain([
        "IBVERBS_PRIVATE_34".into(),
        "SOFTRNIC_1.0".into(),
        "SOFTRNIC_RDMACM_PRIVATE".into(),
    ]);
    for node in nodes {
        assert!(
            text.contains(&format!("Name: {node}\n")),
            "version node {node} missing:\n{text}"
        );
    }
}

#[test]
fn every_import_of_the_rdma_core_programs_is_exported_with_its_version() {
    let test = "every_import_of_the_rdma_core_programs_is_exported_with_its_version";
    let Some(ours) = dynamic_symbols(&common::built_library()) else {
        softrnic_testkit::skip(test, "no objdump (apt-get install binutils)");
        return;
    };
    let exported = ibverbs_symbols(&ours, true);
    let mut checked = 0;
    let mut missing = Vec::new();
    let bins = std::fs::read_dir("/usr/bin").expect("/usr/bin");
    for entry in bins.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("ibv_") || name.starts_with("ib_")) {
            continue;
        }
        let Some(theirs) = dynamic_symbols(&entry.path()) else {
            return;
        };
        for import in ibverbs_symbols(&theirs, false) {
            checked += 1;
            if !exported.contains(&import) {
                missing.push(format!("{name}: {}@{}", import.1, import.0));
            }
        }
    }
    if checked == 0 {
        softrnic_testkit::skip(test, "no ibverbs-utils/perftest binaries in /usr/bin");
        return;
    }
    assert!(missing.is_empty(), "not exported:\n{}", missing.join("\n"));
}

/// rdma-core 44's own `libibverbs.so.1`, as Debian installs it.
const RDMA_CORE_LIBIBVERBS: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
/// rdma-core's own `librdmacm.so.1` (Debian's `librdmacm1`).
const RDMA_CORE_LIBRDMACM: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";

/// The public default-version symbols in `objdump -T` output whose version node starts with
/// `node` (`IBVERBS_1.`, `RDMACM_1.`): compatibility versions (`(IBVERBS_1.0)`), the private
/// node shared with rdma-core's providers and the version names themselves (`*ABS*`
/// entries) are left out.
fn default_public_symbols(objdump: &str, node: &str) -> BTreeSet<(String, String)> {
    objdump
        .lines()
        .filter(|l| !l.contains("*UND*") && !l.contains("*ABS*"))
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?;
            let ver = f.next()?;
            ver.starts_with(node)
                .then(|| (ver.to_string(), name.to_string()))
        })
        .collect()
}

/// Checks that the library `ours` exports every default-version public symbol (of version
/// node `node`, `probe` among them) of rdma-core's `theirs`, with its version; the test
/// `test` skips without `theirs` (from Debian package `package`) or objdump.
fn exports_every_symbol_of(
    test: &str,
    ours: &Path,
    theirs: &str,
    package: &str,
    node: &str,
    probe: (&str, &str),
) {
    let theirs_path = Path::new(theirs);
    if !theirs_path.exists() {
        softrnic_testkit::skip(test, &format!("no {theirs} (apt-get install {package})"));
        return;
    }
    let (Some(ours), Some(theirs_dump)) = (dynamic_symbols(ours), dynamic_symbols(theirs_path))
    else {
        softrnic_testkit::skip(test, "no objdump (apt-get install binutils)");
        return;
    };
    let wanted = default_public_symbols(&theirs_dump, node);
    assert!(
        wanted.contains(&(probe.0.into(), probe.1.into())),
        "no default-version symbols read from {theirs}:\n{theirs_dump}"
    );
    let exported = default_public_symbols(&ours, node);
    let missing: Vec<String> = wanted
        .difference(&exported)
        .map(|(v, n)| format!("{n}@@{v}"))
        .collect();
    assert!(missing.is_empty(), "not exported:\n{}", missing.join("\n"));
}

#[test]
fn every_default_version_public_symbol_of_rdma_core_is_exported_with_its_version() {
    exports_every_symbol_of(
        "every_default_version_public_symbol_of_rdma_core_is_exported_with_its_version",
        &common::built_library(),
        RDMA_CORE_LIBIBVERBS,
        "libibverbs1",
        "IBVERBS_1.",
        ("IBVERBS_1.1", "ibv_open_device"),
    );
}

/// The same for `librdmacm.so.1`: every `rdma_*` function (and `rsocket` call) of rdma-core
/// 44's library is one of softrnic's, with its `RDMACM_1.x` version.
#[test]
fn every_default_version_public_symbol_of_librdmacm_is_exported_with_its_version() {
    exports_every_symbol_of(
        "every_default_version_public_symbol_of_librdmacm_is_exported_with_its_version",
        &common::built_rdmacm(),
        RDMA_CORE_LIBRDMACM,
        "librdmacm1",
        "RDMACM_1.",
        ("RDMACM_1.0", "rdma_create_id"),
    );
}

/// The functions softrnic's `librdmacm.so.1` forwards: the lines of its `symbols.rs`.
macro_rules! rdmacm_functions {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        const FORWARDED: &[&str] = &[$(stringify!($name)),*];
    };
}
include!("../../rdmacm/src/symbols.rs");

#[test]
fn every_function_the_rdmacm_shim_looks_up_is_exported() {
    let Some(ours) = dynamic_symbols(&common::built_library()) else {
        softrnic_testkit::skip(
            "every_function_the_rdmacm_shim_looks_up_is_exported",
            "no objdump (apt-get install binutils)",
        );
        return;
    };
    let exported: BTreeSet<&str> = ours
        .lines()
        .filter(|l| l.contains(" DF ") && l.contains(" SOFTRNIC_RDMACM_PRIVATE "))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    let wanted: BTreeSet<String> = FORWARDED.iter().map(|n| format!("softrnic_{n}")).collect();
    let wanted: BTreeSet<&str> = wanted.iter().map(String::as_str).collect();
    assert_eq!(exported, wanted);
}

#[test]
fn perftest_binaries_resolve_every_import_with_the_standins() {
    let test = "perftest_binaries_resolve_every_import_with_the_standins";
    let mut checked = 0;
    for entry in std::fs::read_dir("/usr/bin").expect("/usr/bin").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("ib_") {
            continue;
        }
        // `ldd -r`: the loader's own resolution of every symbol, as BIND_NOW does it.
        let Ok(out) = Command::new("ldd")
            .arg("-r")
            .arg(entry.path())
            .env("LD_LIBRARY_PATH", common::lib_dir())
            .output()
        else {
            softrnic_testkit::skip(test, "no ldd");
            return;
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("undefined symbol"), "{name}:\n{text}");
        let dir = common::lib_dir().display().to_string();
        for lib in [
            "libibverbs.so.1",
            "librdmacm.so.1",
            "libmlx5.so.1",
            "libefa.so.1",
        ] {
            let line = text.lines().find(|l| l.contains(&format!("{lib} =>")));
            if let Some(line) = line {
                assert!(line.contains(&dir), "{name}: {lib} not ours: {line}");
            }
        }
        checked += 1;
    }
    if checked == 0 {
        softrnic_testkit::skip(test, "perftest not installed (apt-get install perftest)");
    }
}
