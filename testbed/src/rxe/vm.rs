//! The guest machine: QEMU with software emulation (TCG: these machines have no KVM), one
//! CPU, the kernel and initramfs of [`super::guest::Image`], a virtio NIC on the namespace's
//! tap, and the serial console on a Unix socket (with a copy in a log file, where the
//! guest's `RXE_READY` line shows that rdma_rxe is up).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::console::Console;
use super::guest::Image;
use super::net::{Family, GUEST_V4, GUEST_V6, TAP};

/// A running guest; dropping it stops QEMU.
pub struct Vm {
    qemu: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Vm {
    /// Boots `image` with `eth0` at `mtu`; the console socket and log go in `dir`.
    ///
    /// # Errors
    /// When QEMU cannot start.
    pub fn boot(image: &Image, dir: &Path, mtu: u32) -> io::Result<Vm> {
        std::fs::create_dir_all(dir)?;
        let socket = dir.join("console.sock");
        let log = dir.join("console.log");
        let pidfile = dir.join("qemu.pid");
        stop_leftover(&pidfile);
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(&log);
        let append = format!(
            "console=ttyS0 loglevel=4 panic=-1 rxeip={GUEST_V4} rxeip6={GUEST_V6} rxemtu={mtu}"
        );
        let chardev = format!(
            "socket,id=s0,path={},server=on,wait=off,logfile={}",
            socket.display(),
            log.display()
        );
        let qemu = Command::new("ip")
            .args(["netns", "exec", super::net::netns(), "qemu-system-x86_64"])
            .args(["-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1"])
            .args(["-nographic", "-nodefaults", "-no-reboot"])
            .arg("-kernel")
            .arg(&image.kernel)
            .arg("-initrd")
            .arg(&image.initramfs)
            .args(["-append", &append])
            .args(["-chardev", &chardev, "-serial", "chardev:s0"])
            .args([
                "-netdev",
                &format!("tap,id=n0,ifname={TAP},script=no,downscript=no"),
            ])
            .args(["-device", "virtio-net-pci,netdev=n0,mac=52:54:00:98:00:02"])
            .arg("-pidfile")
            .arg(&pidfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Vm { qemu, socket, log })
    }

    /// Waits up to `timeout` for the guest to say `RXE_READY`, then connects to its console.
    ///
    /// # Errors
    /// `TimedOut` with the console's last lines, or QEMU's exit.
    pub fn ready(&mut self, timeout: Duration) -> io::Result<Console> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = std::fs::read(&self.log).unwrap_or_default();
            if text.windows(9).any(|w| w == b"RXE_READY") {
                return Console::connect(&self.socket);
            }
            if let Some(status) = self.qemu.try_wait()? {
                return Err(io::Error::other(format!("QEMU ended: {status}")));
            }
            if Instant::now() > deadline {
                let text = String::from_utf8_lossy(&text);
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the guest was not ready in {timeout:?}; its console ended with:\n{}",
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The console log: everything the guest printed.
    pub fn log(&self) -> &Path {
        &self.log
    }
}

/// Stops the QEMU of a run that was killed before it could (its pid in `pidfile`): it would
/// hold the tap, and keep the old namespace alive.
fn stop_leftover(pidfile: &Path) {
    let Some(pid) = std::fs::read_to_string(pidfile)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
    else {
        return;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if cmdline.windows(18).any(|w| w == b"qemu-system-x86_64") {
        // SAFETY: kill(2) on a pid whose command line was just seen to be QEMU's.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = std::fs::remove_file(pidfile);
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
    }
}

/// The guest's GID index for `family`'s address: rxe numbers its GIDs in the order the
/// kernel reports addresses, so the harness looks them up (among the first 16) rather than
/// assuming.
///
/// # Errors
/// When the console fails or no GID holds the address.
pub fn gid_index(console: &mut Console, family: Family) -> io::Result<u32> {
    let out = console.run(
        // The table has 1024 entries; the addresses are in the first few.
        "for g in $(seq 0 15); do echo \"$g $(cat /sys/class/infiniband/rxe0/ports/1/gids/$g)\"; done",
        Duration::from_secs(30),
    )?;
    let want = match family.guest() {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped(),
        std::net::IpAddr::V6(a) => a,
    };
    for line in out.text.lines() {
        let mut words = line.split_whitespace();
        let (Some(index), Some(gid)) = (words.next(), words.next()) else {
            continue;
        };
        let bytes: Vec<u8> = gid
            .split(':')
            .filter_map(|h| u16::from_str_radix(h, 16).ok())
            .flat_map(u16::to_be_bytes)
            .collect();
        if bytes.len() == 16 && bytes[..] == want.octets()[..] {
            if let Ok(index) = index.parse() {
                return Ok(index);
            }
        }
    }
    Err(io::Error::other(format!(
        "no GID of rxe0 is {want}; the table:\n{}",
        out.text
    )))
}
