//! A private network namespace for the tests that need their own `lo` (root and the `ip`
//! command): created with `lo` up, deleted on drop, entered by one thread at a time.

use std::os::fd::AsRawFd;
use std::process::Command;

/// Whether `cmd arg` runs and succeeds (`ip -V`: the command is installed).
pub fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs a command, which must succeed.
pub fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
pub struct Netns(pub String);

impl Netns {
    /// `softrnic-{tag}-{pid}`, with its `lo` up.
    pub fn new(tag: &str) -> Netns {
        let ns = Netns(format!("softrnic-{tag}-{}", std::process::id()));
        run(&["ip", "netns", "add", &ns.0]);
        run(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Moves the calling thread into the namespace `name`.
pub fn enter(name: &str) {
    let file = std::fs::File::open(format!("/run/netns/{name}")).expect("netns file");
    // SAFETY: a valid descriptor of a network namespace; setns changes only this thread.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
}
