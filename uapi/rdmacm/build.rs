//! Links `libsoftrnic_rdmacm.so` as `librdmacm.so.1`: the SONAME, and a version script that
//! defines the version nodes of rdma-core 44's `librdmacm.map.in`.
//!
//! The nodes do not inherit from each other as they do there: the dynamic linker matches a
//! symbol's version by name only (the stand-ins, `uapi/ibverbs/standins/standin.rs`, do the
//! same). The script only defines the nodes; the names are bound to them by the `.symver`
//! directives of `src/export.rs` (see `uapi/ibverbs/build.rs` for why a version script alone
//! does not version the names of a Rust cdylib).

use std::path::PathBuf;

/// rdma-core 44's nodes: 1.0 (the CM calls and rsockets), 1.1 (`rdma_join_multicast_ex`),
/// 1.2 (`rdma_establish`, `rdma_init_qp_attr`), 1.3 (the ECE calls).
const NODES: &[&str] = &["RDMACM_1.0", "RDMACM_1.1", "RDMACM_1.2", "RDMACM_1.3"];

fn main() {
    let map: String = NODES.iter().map(|n| format!("{n} {{ }};\n")).collect();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let path = out.join("librdmacm.map");
    std::fs::write(&path, map).expect("writing the version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        path.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librdmacm.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
