//! `softrnic run [--addr IP] [--lib DIR] -- PROGRAM ARGS`: runs an unmodified verbs program on
//! softrnic. It makes a private directory holding softrnic's drop-in
//! `libibverbs.so.1` (and, when they are built, its drop-in `librdmacm.so.1` and the stand-in
//! `libmlx5.so.1` / `libefa.so.1` that perftest loads), puts it first in `LD_LIBRARY_PATH`, sets
//! `SOFTRNIC_ADDR` if `--addr` is given (the program's device is then the one that owns that
//! address), runs the program, removes the directory and exits with the program's status.
//!
//! The libraries are looked for in `--lib DIR`, else beside the `softrnic` executable and in
//! its `deps/` folder (where `cargo build` and `cargo test` leave them): `cargo build --release
//! -p softrnic-ibverbs -p softrnic-rdmacm -p softrnic-mlx5-standin -p softrnic-efa-standin`.

use std::ffi::OsString;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The libraries a program may load from softrnic: (file cargo builds, name programs load,
/// required).
const LIBRARIES: [(&str, &str, bool); 4] = [
    ("libsoftrnic_ibverbs.so", "libibverbs.so.1", true),
    ("libsoftrnic_rdmacm.so", "librdmacm.so.1", false),
    ("libsoftrnic_mlx5.so", "libmlx5.so.1", false),
    ("libsoftrnic_efa.so", "libefa.so.1", false),
];

/// What `softrnic run` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The local address whose device the program uses (`SOFTRNIC_ADDR`).
    pub addr: Option<IpAddr>,
    /// Where the built libraries are (default: beside the executable).
    pub lib: Option<PathBuf>,
    /// The capture file (`SOFTRNIC_PCAP`), if any.
    pub pcap: Option<PathBuf>,
    /// The program and its arguments.
    pub program: Vec<OsString>,
}

/// The folders searched for the built libraries, in order.
pub fn search_dirs(lib: Option<&Path>, exe: &Path) -> Vec<PathBuf> {
    match lib {
        Some(dir) => vec![dir.to_path_buf()],
        None => exe
            .parent()
            .map(|d| vec![d.to_path_buf(), d.join("deps")])
            .unwrap_or_default(),
    }
}

/// Finds each library in the first folder of `dirs` that has it: (path, name to load it by).
///
/// # Errors
/// `NotFound`, saying how to build it, if `libsoftrnic_ibverbs.so` is nowhere.
pub fn find_libraries(dirs: &[PathBuf]) -> io::Result<Vec<(PathBuf, &'static str)>> {
    let mut found = Vec::new();
    for (file, soname, required) in LIBRARIES {
        match dirs.iter().map(|d| d.join(file)).find(|p| p.is_file()) {
            Some(p) => found.push((p, soname)),
            None if required => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "{file} is not in {}; build it with `cargo build --release -p \
                         softrnic-ibverbs -p softrnic-rdmacm -p softrnic-mlx5-standin -p \
                         softrnic-efa-standin`, or give --lib DIR",
                        dirs.iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                ))
            }
            None => {}
        }
    }
    Ok(found)
}

/// A private directory of symlinks, removed on drop.
struct LibDir(PathBuf);

impl LibDir {
    fn new(libs: &[(PathBuf, &str)]) -> io::Result<LibDir> {
        let dir = std::env::temp_dir().join(format!("softrnic-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let d = LibDir(dir);
        for (path, soname) in libs {
            let link = d.0.join(soname);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(std::fs::canonicalize(path)?, &link)?;
        }
        Ok(d)
    }
}

impl Drop for LibDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the program on softrnic and returns its exit status.
///
/// # Errors
/// No program given, the library not found, or the program could not be started.
pub fn run(o: &Options) -> io::Result<ExitStatus> {
    let Some((program, args)) = o.program.split_first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no program given: softrnic run [--addr IP] -- PROGRAM ARGS",
        ));
    };
    let exe = std::env::current_exe()?;
    let libs = find_libraries(&search_dirs(o.lib.as_deref(), &exe))?;
    let dir = LibDir::new(&libs)?;
    let mut path = OsString::from(&dir.0);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new(program);
    cmd.args(args).env("LD_LIBRARY_PATH", path);
    if let Some(addr) = o.addr {
        cmd.env("SOFTRNIC_ADDR", addr.to_string());
    }
    if let Some(pcap) = &o.pcap {
        cmd.env("SOFTRNIC_PCAP", pcap);
    }
    cmd.status().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("starting {}: {e}", Path::new(program).display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_are_looked_for_beside_the_executable_and_in_deps() {
        let exe = Path::new("/x/target/release/softrnic");
        assert_eq!(
            search_dirs(None, exe),
            [
                PathBuf::from("/x/target/release"),
                PathBuf::from("/x/target/release/deps")
            ]
        );
        assert_eq!(
            search_dirs(Some(Path::new("/lib")), exe),
            [PathBuf::from("/lib")]
        );
    }

    #[test]
    fn a_missing_library_says_how_to_build_it_and_optional_ones_may_be_missing() {
        let empty = std::env::temp_dir().join(format!("softrnic-run-test-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let e = find_libraries(std::slice::from_ref(&empty)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e
            .to_string()
            .contains("cargo build --release -p softrnic-ibverbs"));
        std::fs::write(empty.join("libsoftrnic_ibverbs.so"), b"").unwrap();
        let found = find_libraries(std::slice::from_ref(&empty)).unwrap();
        assert_eq!(
            found,
            [(empty.join("libsoftrnic_ibverbs.so"), "libibverbs.so.1")]
        );
        // softrnic's librdmacm.so.1, when built, goes beside it under rdma-core's name.
        std::fs::write(empty.join("libsoftrnic_rdmacm.so"), b"").unwrap();
        let found = find_libraries(std::slice::from_ref(&empty)).unwrap();
        assert_eq!(
            found,
            [
                (empty.join("libsoftrnic_ibverbs.so"), "libibverbs.so.1"),
                (empty.join("libsoftrnic_rdmacm.so"), "librdmacm.so.1")
            ]
        );
        std::fs::remove_dir_all(&empty).unwrap();
    }
}
