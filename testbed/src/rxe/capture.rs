//! What crossed the link during one cell: `tcpdump` on the bridge writes a pcap, then every
//! RoCEv2 packet in it is parsed by softrnic's own wire layer and its ICRC recomputed. The
//! summary says whether the operation under test really crossed, in which IP family, with
//! which largest payload (the path MTU at work), and whether any ICRC was wrong, from either
//! side.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use softrnic_wire::frame::Frame;
use softrnic_wire::opcode::{Operation, Transport};

use super::net::{netns, BRIDGE};

/// A capture in progress; [`Capture::finish`] stops it and reads it.
pub struct Capture {
    tcpdump: Child,
    path: PathBuf,
}

impl Capture {
    /// Starts capturing RoCEv2 (UDP port 4791) on the bridge into `path`, and returns once
    /// `tcpdump` has opened it.
    ///
    /// # Errors
    /// When `tcpdump` cannot start or does not open its file within 10 s.
    pub fn start(path: &Path) -> io::Result<Capture> {
        let _ = std::fs::remove_file(path);
        // --immediate-mode: without it libpcap's ring may hand a short run to tcpdump only
        // after it was told to stop.
        let tcpdump = Command::new("ip")
            .args([
                "netns",
                "exec",
                netns(),
                "tcpdump",
                "--immediate-mode",
                "-U",
                "-s",
                "0",
            ])
            .args(["-i", BRIDGE, "-w"])
            .arg(path)
            .arg("udp port 4791")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut capture = Capture {
            tcpdump,
            path: path.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(path).map_or(0, |m| m.len()) < 24 {
            if let Some(status) = capture.tcpdump.try_wait()? {
                return Err(io::Error::other(format!("tcpdump ended: {status}")));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other("tcpdump did not open its file in 10 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The file is open; give the socket a moment to be attached before traffic starts.
        std::thread::sleep(Duration::from_millis(200));
        Ok(capture)
    }

    /// Stops the capture (SIGINT: tcpdump flushes and closes the file) and reads it.
    ///
    /// # Errors
    /// When the pcap cannot be read.
    pub fn finish(mut self) -> io::Result<Wire> {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.tcpdump.id() as i32, libc::SIGINT) };
        let _ = self.tcpdump.wait();
        Wire::read(&self.path)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.tcpdump.kill();
        let _ = self.tcpdump.wait();
    }
}

/// The RoCEv2 packets of one capture, summed up.
#[derive(Debug, Clone, Default)]
pub struct Wire {
    /// Packets parsed as RoCEv2.
    pub packets: usize,
    /// Of those, the ones whose ICRC did not match.
    pub bad_icrc: usize,
    /// Frames on port 4791 the wire layer refused, with the first error.
    pub unparsed: usize,
    /// The first refusal's reason.
    pub unparsed_why: Option<String>,
    /// Packets by source address.
    pub by_source: BTreeMap<IpAddr, usize>,
    /// Packets by (transport, operation).
    pub operations: BTreeMap<String, usize>,
    /// Packets over IPv6.
    pub ipv6: usize,
    /// The largest payload of any packet.
    pub max_payload: usize,
}

impl Wire {
    /// Reads and sums up the pcap at `path`.
    ///
    /// # Errors
    /// When it cannot be read.
    pub fn read(path: &Path) -> io::Result<Wire> {
        let mut wire = Wire::default();
        for record in softrnic_wire::pcap::read_file(path)? {
            match Frame::parse(&record.data) {
                Ok(frame) => {
                    let d = frame.datagram;
                    wire.packets += 1;
                    wire.bad_icrc += usize::from(!d.icrc_ok);
                    *wire.by_source.entry(d.repr.ip.src_addr()).or_default() += 1;
                    wire.ipv6 += usize::from(d.repr.ip.src_addr().is_ipv6());
                    wire.max_payload = wire.max_payload.max(d.payload.len());
                    if let Some(info) = d.repr.roce.bth.opcode.info() {
                        *wire
                            .operations
                            .entry(key(info.transport, info.operation))
                            .or_default() += 1;
                    }
                }
                Err(e) => {
                    wire.unparsed += 1;
                    wire.unparsed_why.get_or_insert_with(|| e.to_string());
                }
            }
        }
        Ok(wire)
    }

    /// How many packets of `operation` over `transport` crossed.
    pub fn count(&self, transport: Transport, operation: Operation) -> usize {
        self.operations
            .get(&key(transport, operation))
            .copied()
            .unwrap_or(0)
    }
}

/// The map key of an operation.
fn key(transport: Transport, operation: Operation) -> String {
    format!("{transport:?} {operation:?}")
}
