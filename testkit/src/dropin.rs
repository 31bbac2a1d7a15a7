//! Where a test finds softrnic's drop-in libraries: `libibverbs.so.1` (`uapi/ibverbs`),
//! `librdmacm.so.1` (`uapi/rdmacm`), and the stand-ins perftest also loads as `libmlx5.so.1`
//! and `libefa.so.1` (`uapi/ibverbs/standins`). A test that runs unmodified programs on
//! softrnic points `LD_LIBRARY_PATH` at [`lib_dir`].
//!
//! The crate of such a test must list those crates (`softrnic-ibverbs`, `softrnic-rdmacm`,
//! `softrnic-mlx5-standin`, `softrnic-efa-standin`) among its dependencies or
//! dev-dependencies, so that `cargo test` builds them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `target/<profile>`, from the test executable's path (`target/<profile>/deps/<test>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

/// The built library, `target/<profile>/deps/libsoftrnic_ibverbs.so`: the copy `cargo test`
/// rebuilds (it does not refresh the one in `target/<profile>`, which only `cargo build`
/// updates).
pub fn built_library() -> PathBuf {
    profile_dir().join("deps").join("libsoftrnic_ibverbs.so")
}

/// The built `libsoftrnic_rdmacm.so`, softrnic's `librdmacm.so.1`, beside [`built_library`].
pub fn built_rdmacm() -> PathBuf {
    profile_dir().join("deps").join("libsoftrnic_rdmacm.so")
}

/// The other libraries softrnic ships, (built file in `deps/`, name to load as): its
/// `librdmacm.so.1` and the stand-ins for rdma-core's vendor libraries.
const STANDINS: &[(&str, &str)] = &[
    ("libsoftrnic_rdmacm.so", "librdmacm.so.1"),
    ("libsoftrnic_mlx5.so", "libmlx5.so.1"),
    ("libsoftrnic_efa.so", "libefa.so.1"),
];

/// A directory (one per test process) where `libibverbs.so.1` links to the built library,
/// `librdmacm.so.1` to softrnic's, and `libmlx5.so.1`, `libefa.so.1` to the stand-ins: what
/// `LD_LIBRARY_PATH` must name.
///
/// # Panics
/// If one of the libraries was not built (the test's crate does not depend on it).
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = built_library();
        assert!(lib.exists(), "{} not built", lib.display());
        let dir = profile_dir().join(format!("softrnic-libibverbs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating the library directory");
        let link = dir.join("libibverbs.so.1");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).expect("linking libibverbs.so.1");
        for (built, name) in STANDINS {
            let standin = profile_dir().join("deps").join(built);
            assert!(standin.exists(), "{} not built", standin.display());
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&standin, &link).expect("linking a stand-in");
        }
        dir
    })
}
