//! The guest's kernel and initramfs, built once and cached.
//!
//! `testbed/rxe/build-guest.sh` does the work: a Debian bookworm root file system from
//! Debian's mirror (`debootstrap`, a few minutes, once per cache), packed with the guest's
//! PID 1 (`testbed/rxe/init`) into an initramfs. The root file system is kept under
//! [`cache_dir`]; an initramfs is named by a CRC of what went into it (the init, the build
//! script, the extra programs), so a change to any of them builds a new one and an unchanged
//! tree boots the cached one.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The root file system's version: bump it when `build-guest.sh`'s package list changes, so
/// that caches holding the old one build a new one.
const ROOTFS_VERSION: &str = "bookworm-2";

/// What QEMU boots.
#[derive(Debug, Clone)]
pub struct Image {
    /// The kernel (Debian's `linux-image-amd64`).
    pub kernel: PathBuf,
    /// The initramfs holding the whole guest.
    pub initramfs: PathBuf,
}

/// Where guests are cached: `$SOFTRNIC_RXE_CACHE`, or `/var/cache/softrnic/rxe-guest`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("SOFTRNIC_RXE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/softrnic/rxe-guest"))
}

/// The folder holding the guest's scripts (`testbed/rxe`).
fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rxe")
}

impl Image {
    /// The cached image, built first if needed; `extra` holds programs built on this host for
    /// the guest (installed in its `/usr/local/bin`).
    ///
    /// # Errors
    /// When the build fails (no root, no `debootstrap`, no mirror): its output says why.
    pub fn get(extra: Option<&Path>) -> io::Result<Image> {
        let dir = cache_dir().join(ROOTFS_VERSION);
        let init = scripts().join("init");
        let build = scripts().join("build-guest.sh");
        let mut crc = crc32fast::Hasher::new();
        crc.update(&std::fs::read(&init)?);
        crc.update(&std::fs::read(&build)?);
        if let Some(extra) = extra {
            let mut files: Vec<PathBuf> = std::fs::read_dir(extra)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            files.sort();
            for f in files {
                crc.update(f.file_name().unwrap_or_default().as_encoded_bytes());
                crc.update(&std::fs::read(&f)?);
            }
        }
        let initramfs = dir.join(format!("initramfs-{:08x}.cpio.zst", crc.finalize()));
        let kernel = dir.join("vmlinuz");
        if !initramfs.exists() || !kernel.exists() {
            let mut cmd = Command::new(&build);
            cmd.arg(&dir).arg(&init).arg(&initramfs);
            if let Some(extra) = extra {
                cmd.arg(extra);
            }
            let out = cmd.output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "building the guest ({}) failed: {}\n{}\n{}",
                    build.display(),
                    out.status,
                    tail(&out.stdout),
                    tail(&out.stderr)
                )));
            }
            // The initramfs of older trees: never booted again.
            for old in std::fs::read_dir(&dir)?.filter_map(Result::ok) {
                let name = old.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("initramfs-") && old.path() != initramfs {
                    let _ = std::fs::remove_file(old.path());
                }
            }
        }
        Ok(Image { kernel, initramfs })
    }
}

/// Compiles the programs the matrix runs on both sides that no Debian package has
/// (`testbed/rxe/verbs_op.c`: RDMA WRITE WITH IMMEDIATE and ATOMIC WRITE, which perftest 4.5
/// cannot drive) into `dir`, against this host's `libibverbs-dev`. The guest runs the same
/// binary: it is Debian bookworm, as this host must be.
///
/// # Errors
/// When `cc` fails.
pub fn build_programs(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let out = Command::new("cc")
        .args(["-O1", "-Wall", "-Wextra", "-o"])
        .arg(dir.join("verbs_op"))
        .arg(scripts().join("verbs_op.c"))
        .arg("-libverbs")
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "cc verbs_op.c: {}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// The last 30 lines of `bytes`.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
