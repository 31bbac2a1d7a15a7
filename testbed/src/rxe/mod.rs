//! Kernel Soft-RoCE (`rdma_rxe`) as softrnic's peer, in the test suite.
//!
//! A Debian guest ([`guest`]) boots under QEMU ([`vm`]) on a bridge in a private network
//! namespace ([`net`]); `rdma_rxe` in it is the peer. softrnic runs unmodified rdma-core and
//! perftest programs on its drop-in `libibverbs.so.1` inside the namespace; the guest runs the
//! same programs on rxe, driven through its serial console ([`console`]). [`matrix`] runs
//! every case ([`cases`]) both ways, over IPv4 and IPv6, at path MTU 1024 and 4096, with the link
//! captured ([`capture`]) and every packet's ICRC checked by softrnic's wire layer.
//!
//! Needs root (namespaces, the tap), `qemu-system-x86_64`, `debootstrap` and Debian's mirror
//! (the first build), `tcpdump`, `cpio` and `zstd`, and `cc` with `libibverbs-dev`. `testbed/tests/rxe_matrix.rs` is the test.

pub mod capture;
pub mod cases;
pub mod console;
pub mod guest;
pub mod matrix;
pub mod net;
pub mod vm;

use std::io;
use std::path::Path;
use std::time::Duration;

/// The guest, up and reachable, on its link; dropping it stops the guest and removes the
/// namespace.
pub struct Lab {
    /// The guest's console.
    pub console: console::Console,
    /// The guest's GID index for IPv4 and for IPv6.
    pub gids: (u32, u32),
    /// The guest's kernel release.
    pub kernel: String,
    // Drops after the console: QEMU, then the namespace.
    _vm: vm::Vm,
    _net: NetGuard,
}

/// Removes the namespace when dropped.
struct NetGuard;

impl Drop for NetGuard {
    fn drop(&mut self) {
        net::destroy();
    }
}

impl Lab {
    /// Builds (or takes from the cache) the guest, with the programs in `programs` (see
    /// [`guest::build_programs`]), creates the link at path MTU `mtu`, boots the guest (its
    /// console log in `dir`) and waits until rxe is up.
    ///
    /// # Errors
    /// Whatever failed, with what the failing step said.
    pub fn start(dir: &Path, programs: &Path, mtu: u32) -> io::Result<Lab> {
        let image = guest::Image::get(Some(programs))?;
        net::create(matrix::link_mtu(mtu))?;
        let net = NetGuard;
        let mut vm = vm::Vm::boot(&image, dir, matrix::link_mtu(mtu))?;
        let mut console = vm.ready(Duration::from_secs(300))?;
        let kernel = console
            .run("uname -r", Duration::from_secs(20))?
            .text
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let gids = matrix::guest_gids(&mut console)?;
        Ok(Lab {
            console,
            gids,
            kernel,
            _vm: vm,
            _net: net,
        })
    }
}
