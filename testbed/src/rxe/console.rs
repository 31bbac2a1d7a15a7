//! The guest's serial console as a remote shell: a command is typed in, followed by an `echo`
//! of a marker that carries its exit status; its output is whatever comes back before the
//! marker. No network and no daemon are needed in the guest, so the link under test carries
//! nothing but the test's own traffic.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// A connection to the guest's console (QEMU's `-chardev socket`).
pub struct Console {
    stream: UnixStream,
    /// Distinguishes one command's marker from another's.
    serial: u64,
}

/// What a command printed and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    /// Its exit status, as the guest's shell saw it.
    pub status: i32,
    /// What it printed (standard output and error), carriage returns removed.
    pub text: String,
}

impl Console {
    /// Connects to the console socket at `path`.
    ///
    /// # Errors
    /// When the socket cannot be reached.
    pub fn connect(path: &Path) -> io::Result<Console> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut console = Console { stream, serial: 0 };
        console.drain();
        console.run("stty -echo", Duration::from_secs(30))?;
        Ok(console)
    }

    /// Throws away whatever the console printed before now.
    fn drain(&mut self) {
        let mut buf = [0u8; 4096];
        while matches!(self.stream.read(&mut buf), Ok(n) if n > 0) {}
    }

    /// Runs `command` in the guest's shell and waits up to `timeout` for it to end.
    ///
    /// # Errors
    /// `TimedOut` if it did not end in time (it may still be running), or the socket's error.
    pub fn run(&mut self, command: &str, timeout: Duration) -> io::Result<Output> {
        self.drain();
        self.serial += 1;
        // The marker is split in the command so that the shell's echo of the line, if any,
        // does not contain it.
        let tag = format!("{:x}-{}", std::process::id(), self.serial);
        let line = format!("{command}\necho \"__E\"\"ND_{tag} $?\"\n");
        self.stream.write_all(line.as_bytes())?;
        let marker = format!("__END_{tag} ");
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(at) = find(&got, marker.as_bytes()) {
                let rest = &got[at + marker.len()..];
                if let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                    let status = String::from_utf8_lossy(&rest[..end])
                        .trim()
                        .parse()
                        .unwrap_or(-1);
                    let text = String::from_utf8_lossy(&got[..at]).replace('\r', "");
                    return Ok(Output { status, text });
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the guest did not finish `{command}` in {timeout:?}; it printed: {}",
                        String::from_utf8_lossy(&got[got.len().saturating_sub(2000)..])
                    ),
                ));
            }
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
