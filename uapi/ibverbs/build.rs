//! Links `libsoftrnic_ibverbs.so` as `libibverbs.so.1`: the SONAME, and a version script that
//! defines rdma-core 44's symbol version nodes and softrnic's own, `SOFTRNIC_1.0` and
//! `SOFTRNIC_RDMACM_PRIVATE`.
//!
//! The script only defines the nodes. The names are bound to them in the object files by
//! `.symver helper, name@@NODE` directives (see `src/export.rs`): rust-lld leaves the names
//! of a build.rs version script unversioned (rustc's own script claims them), but honours
//! `.symver` aliases whose node the script defines.

use std::fmt::Write as _;
use std::path::PathBuf;

/// The nodes of rdma-core 44's `libibverbs.map.in`, each inheriting from the one before (the
/// real library defines 1.0, 1.1 and 1.5 to 1.14; defining 1.2 to 1.4 as well costs nothing).
const PUBLIC_NODES: &[&str] = &[
    "IBVERBS_1.0",
    "IBVERBS_1.1",
    "IBVERBS_1.2",
    "IBVERBS_1.3",
    "IBVERBS_1.4",
    "IBVERBS_1.5",
    "IBVERBS_1.6",
    "IBVERBS_1.7",
    "IBVERBS_1.8",
    "IBVERBS_1.9",
    "IBVERBS_1.10",
    "IBVERBS_1.11",
    "IBVERBS_1.12",
    "IBVERBS_1.13",
    "IBVERBS_1.14",
];

/// The node of the symbols rdma-core shares with its own providers and tools (`driver.h`).
const PRIVATE_NODE: &str = "IBVERBS_PRIVATE_34";

/// softrnic's own extensions (`include/softrnic/ext.h`): the relaxed MRs of Solaris OFED and
/// the MR descriptors.
const SOFTRNIC_NODE: &str = "SOFTRNIC_1.0";

/// The node of the connection manager's implementation (`src/rdmacm/`), `softrnic_rdma_*`:
/// private to softrnic's `librdmacm.so.1` (`uapi/rdmacm`), which forwards the `rdma_*` calls
/// there.
const RDMACM_NODE: &str = "SOFTRNIC_RDMACM_PRIVATE";

fn main() {
    let mut map = String::new();
    let mut parent: Option<&str> = None;
    for node in PUBLIC_NODES {
        match parent {
            None => writeln!(map, "{node} {{ }};"),
            Some(p) => writeln!(map, "{node} {{ }} {p};"),
        }
        .expect("writing to a String");
        parent = Some(node);
    }
    writeln!(map, "{PRIVATE_NODE} {{ }};").expect("writing to a String");
    writeln!(map, "{SOFTRNIC_NODE} {{ }};").expect("writing to a String");
    writeln!(map, "{RDMACM_NODE} {{ }};").expect("writing to a String");

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let path = out.join("libibverbs.map");
    std::fs::write(&path, map).expect("writing the version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        path.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
