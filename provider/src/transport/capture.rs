//! A capture of everything a device sends and receives, as it is on the wire: a [`Transport`]
//! that hands every packet to the one it wraps and writes it, as an Ethernet frame, to a
//! pcapng file Wireshark and `softrnic decode` read.
//!
//! One frame per RoCE packet, even where the transport sends a segmentation run as one
//! datagram or receives one (the kernel cuts it; the emitter built each packet, with the IPv4
//! Identification its ICRC covers: [`OutPacket::ident`]). The IP and UDP headers are rebuilt
//! as they were: the addresses, the UDP source port, length, and the IPv4 ID — for a packet
//! received through a socket, which never shows it, the ID its ICRC was computed with
//! ([`IcrcStatus::OkForIdent`]). A received packet the NIC drops carries a comment saying why:
//! its ICRC does not verify, it was cut, or — told by the driver after the packet was handed
//! on ([`Transport::note_dropped`]) — its headers do not parse, no QP has its DestQP, it did
//! not come from its QP's peer, its P_Key is wrong. So received frames are held until the
//! transport is next used (a send, a receive, a wait) and written then, in order. The
//! Ethernet addresses are zero, as on a `tcpdump -i lo` capture.
//!
//! The file is bounded: past [`CaptureConfig::file_bytes`] it is renamed `FILE.1` (the older
//! `.1` to `.2`, and so on, [`CaptureConfig::files`] kept in all) and a new one begins.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use softrnic_wire::bth;
use softrnic_wire::frame::{emit_outer, IpHeader, UdpHeader, ETHERNET_HEADER_LEN};
use softrnic_wire::icrc::{with_ipv4_ident, ICRC_LEN};
use softrnic_wire::pcap::NgWriter;

use super::idents::PortIdents;
use super::{
    Bytes, Clock, IcrcStatus, OutPacket, Ready, RecvBatch, RecvPacket, Transport, TransportStats,
};

/// Where a capture goes and how much of it is kept.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// The file (pcapng).
    pub path: PathBuf,
    /// A file's size before the next one begins.
    pub file_bytes: u64,
    /// How many files are kept: `path`, `path.1`, ... `path.{files - 1}`.
    pub files: usize,
    /// Where the frames' timestamps come from: `None`, the system's clock (since the Unix
    /// epoch); a [`Clock`], its time (the fabric's virtual time, for a capture that is the
    /// same, byte for byte, every time the same run is made).
    pub clock: Option<Clock>,
}

impl CaptureConfig {
    /// 64 MiB files, 4 kept.
    pub fn new(path: impl Into<PathBuf>) -> CaptureConfig {
        CaptureConfig {
            path: path.into(),
            file_bytes: 64 << 20,
            files: 4,
            clock: None,
        }
    }
}

/// What a captured datagram's IP and UDP headers say.
struct Outer {
    from: SocketAddr,
    to: SocketAddr,
    /// The IPv4 Identification (IPv6: unused).
    ident: u16,
    hop_limit: u8,
}

/// A transport whose traffic is captured (see the module doc).
pub struct Capture<T> {
    inner: T,
    sink: Sink,
    /// The frame being built.
    frame: Vec<u8>,
    /// The last batch's received frames, not yet written: a verdict may still come.
    held: Held,
}

impl Held {
    /// Writes the frames held so far to `sink`, each with its comment, and forgets them.
    fn write_to(&mut self, sink: &mut Sink) {
        let mut start = 0;
        for &(end, at, comment) in &self.frames {
            sink.write(at, &self.bytes[start..end], comment);
            start = end;
        }
        self.bytes.clear();
        self.frames.clear();
    }
}

/// The file frames are written to, and its rotation.
struct Sink {
    config: CaptureConfig,
    /// `None` once writing failed (reported once, on standard error).
    out: Option<NgWriter<BufWriter<File>>>,
    written: u64,
}

/// Received frames waiting to be written (see the module doc), in one buffer reused batch
/// after batch: no allocation per packet once it has grown.
#[derive(Default)]
struct Held {
    bytes: Vec<u8>,
    /// Per frame: where it ends in `bytes`, when it came, why it was dropped.
    frames: Vec<(usize, Duration, Option<&'static str>)>,
}

impl<T: Transport> Capture<T> {
    /// Captures what `inner` sends and receives into the file `config` names (created, or
    /// emptied).
    ///
    /// # Errors
    /// When the file cannot be created; `inner` comes back with the error.
    pub fn new(inner: T, config: CaptureConfig) -> Result<Capture<T>, (T, io::Error)> {
        let out = match File::create(&config.path).and_then(|f| NgWriter::new(BufWriter::new(f))) {
            Ok(out) => out,
            Err(e) => return Err((inner, e)),
        };
        Ok(Capture {
            inner,
            sink: Sink {
                config,
                out: Some(out),
                written: 0,
            },
            frame: Vec::with_capacity(ETHERNET_HEADER_LEN + 40 + 8 + 4224),
            held: Held::default(),
        })
    }
}

impl Sink {
    fn write(&mut self, now: Duration, frame: &[u8], comment: Option<&str>) {
        let Some(out) = self.out.as_mut() else { return };
        if let Err(e) = out.write(now, frame, comment) {
            eprintln!(
                "softrnic: capture to {} stopped: {e}",
                self.config.path.display()
            );
            self.out = None;
            return;
        }
        // The block: its 32 bytes of framing, the frame, a comment option.
        self.written += (frame.len() + 32 + comment.map_or(0, |c| c.len() + 8)) as u64;
        if self.written >= self.config.file_bytes {
            if let Err(e) = self.rotate() {
                eprintln!(
                    "softrnic: capture to {} stopped: {e}",
                    self.config.path.display()
                );
                self.out = None;
            }
        }
    }

    /// Closes the full file, shifts the older ones up by one, and begins a new one.
    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut out) = self.out.take() {
            out.get_mut().flush()?;
        }
        let name = |k: usize| {
            let mut p = self.config.path.clone().into_os_string();
            p.push(format!(".{k}"));
            PathBuf::from(p)
        };
        let last = self.config.files.max(1) - 1;
        if last == 0 {
            std::fs::remove_file(&self.config.path)?;
        } else {
            for k in (1..last).rev() {
                let _ = std::fs::rename(name(k), name(k + 1));
            }
            std::fs::rename(&self.config.path, name(1))?;
        }
        self.out = Some(NgWriter::new(BufWriter::new(File::create(
            &self.config.path,
        )?))?);
        self.written = 0;
        Ok(())
    }
}

impl<T: Transport> Capture<T> {
    /// Holds the frame of a received packet (its headers as they were, and why it is dropped
    /// if the NIC drops it on arrival) until it is written.
    fn hold_received(&mut self, p: &RecvPacket<'_>, now: Duration) {
        let m = p.meta;
        let seen = m.ip_header();
        let (mut ident, mut hop_limit) = (0, 64);
        if seen.len() >= 20 && seen[0] >> 4 == 4 {
            ident = u16::from_be_bytes([seen[4], seen[5]]);
            hop_limit = seen[8];
        } else if seen.len() >= 40 && seen[0] >> 4 == 6 {
            hop_limit = seen[7];
        }
        let comment = if m.truncated {
            Some("dropped: longer than the receive buffer")
        } else {
            match p.icrc_status() {
                IcrcStatus::Ok => None,
                IcrcStatus::OkForIdent(id) => {
                    ident = id;
                    None
                }
                IcrcStatus::Bad => Some("dropped: the ICRC does not verify"),
            }
        };
        let d = Outer {
            from: m.src,
            to: SocketAddr::new(m.dst, 4791),
            ident,
            hop_limit,
        };
        // Built where it waits: no copy of its own.
        let start = self.held.bytes.len();
        if build_frame(d, &[Bytes::from(p.payload)], &mut self.held.bytes) {
            if m.intact && !m.truncated {
                // Through the host-local path its sender may have left the ICRC out (nobody
                // checks it there, `Transport::wants_icrc`): the file shows the one it has
                // on a link.
                write_icrc(&mut self.held.bytes[start..], p.payload.len());
            }
            self.held.frames.push((self.held.bytes.len(), now, comment));
        }
    }
}

/// Writes into the last four bytes of `frame` (Ethernet, IP, UDP, then a RoCEv2 UDP payload
/// of `udp_payload` bytes, ICRC last) the ICRC its headers and payload give.
fn write_icrc(frame: &mut [u8], udp_payload: usize) {
    let Some(ip_end) = frame.len().checked_sub(udp_payload + 8) else {
        return;
    };
    if ip_end < ETHERNET_HEADER_LEN {
        return;
    }
    let (head, payload) = frame.split_at_mut(ip_end + 8);
    let Some(body_len) = payload.len().checked_sub(ICRC_LEN) else {
        return;
    };
    let ip = &head[ETHERNET_HEADER_LEN..ip_end];
    let src_port = u16::from_be_bytes([head[ip_end], head[ip_end + 1]]);
    if body_len < bth::HEADER_LEN {
        return;
    }
    let (body, icrc) = payload.split_at_mut(body_len);
    if let Some(c) = super::icrc_under(ip, src_port, body) {
        icrc.copy_from_slice(&c.to_le_bytes());
    }
}

/// Appends to `out` the frame of the datagram `d` with UDP payload `pieces`; false, and `out`
/// as it was, if its headers cannot be written.
fn build_frame(d: Outer, pieces: &[Bytes<'_>], out: &mut Vec<u8>) -> bool {
    let Outer {
        from,
        to,
        ident,
        hop_limit,
    } = d;
    let Some(ip) = IpHeader::udp_socket(from.ip(), to.ip(), hop_limit) else {
        return false;
    };
    let ip = ip.with_ident(ident);
    let udp = UdpHeader {
        src_port: from.port(),
        dst_port: to.port(),
        checksum: 0,
    };
    let payload: usize = pieces.iter().map(|p| p.len()).sum();
    let udp_len = 8 + payload;
    let start = out.len();
    out.resize(start + ETHERNET_HEADER_LEN + ip.header_len() + 8, 0);
    let frame = &mut out[start..];
    // Ethernet: zero addresses, the EtherType of the IP version.
    let ethertype: u16 = if from.is_ipv4() { 0x0800 } else { 0x86dd };
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
    if emit_outer(&ip, &udp, udp_len, &mut frame[ETHERNET_HEADER_LEN..]).is_err() {
        out.truncate(start);
        return false;
    }
    for p in pieces {
        p.append_to(out);
    }
    true
}

/// The IPv4 IDs the datagrams of a batch carried on the wire. A transport whose datagrams
/// carry IDs other than the ones their ICRCs were built for ([`Transport::ipv4_ident`]: a
/// connected socket's counter) numbers them as `idents.rs` says, and moves the ICRC to that
/// ID. After the send the counter stands past the batch's messages, which gives where it
/// started.
fn wire_idents<T: Transport>(t: &T, sent: &[OutPacket<'_>]) -> PortIdents {
    let mut messages: Vec<(u16, u16)> = Vec::new();
    for p in sent.iter().filter(|p| p.segment == 0) {
        match messages.iter_mut().find(|e| e.0 == p.src_port) {
            Some(e) => e.1 += 1,
            None => messages.push((p.src_port, 1)),
        }
    }
    let mut ids = PortIdents::default();
    for (port, n) in messages {
        ids.start(port, t.ipv4_ident(port).map(|next| next.wrapping_sub(n)));
    }
    ids
}

/// The time now, by `clock` or else the system's clock.
fn now(clock: Option<&Clock>) -> Duration {
    match clock {
        Some(c) => c.now(),
        None => SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    }
}

impl<T: Transport> Transport for Capture<T> {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        self.held.write_to(&mut self.sink);
        let n = self.inner.send_batch(pkts)?;
        if self.sink.out.is_some() && n > 0 {
            let (t, local) = (
                now(self.sink.config.clock.as_ref()),
                self.inner.local_addr(),
            );
            let sent = &pkts[..n];
            let mut ids = wire_idents(&self.inner, sent);
            for p in sent {
                // Without a counter the datagram carried the ID its ICRC was built for.
                let ident = ids.next(p.src_port, p.segment, || None).unwrap_or(p.ident);
                let d = Outer {
                    from: SocketAddr::new(local, p.src_port),
                    to: p.dst,
                    ident,
                    hop_limit: 64,
                };
                self.frame.clear();
                if !build_frame(d, p.pieces, &mut self.frame) {
                    continue;
                }
                let at = self.frame.len().saturating_sub(4);
                if ident != p.ident && at > ETHERNET_HEADER_LEN {
                    // The transport moved the ICRC to the ID the datagram carried.
                    let icrc = self.frame[at..].try_into().map_or(0, u32::from_le_bytes);
                    let moved = with_ipv4_ident(icrc, p.ident, ident, p.len());
                    self.frame[at..].copy_from_slice(&moved.to_le_bytes());
                }
                self.sink.write(t, &self.frame, None);
            }
        }
        Ok(n)
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.held.write_to(&mut self.sink);
        let n = self.inner.recv_batch(batch)?;
        if self.sink.out.is_some() && n > 0 {
            let t = now(self.sink.config.clock.as_ref());
            for p in batch.iter() {
                self.hold_received(&p, t);
            }
        }
        Ok(n)
    }

    fn note_dropped(&mut self, index: usize, why: &'static str) {
        if let Some(f) = self.held.frames.get_mut(index) {
            f.2.get_or_insert(why);
        }
    }

    fn release_received(&mut self) {
        self.inner.release_received();
    }

    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready> {
        // About to sleep: what was captured so far reaches the file.
        self.held.write_to(&mut self.sink);
        if let Some(out) = self.sink.out.as_mut() {
            let _ = out.get_mut().flush();
        }
        self.inner.poll(timeout)
    }

    fn local_addr(&self) -> IpAddr {
        self.inner.local_addr()
    }

    fn segment_limits(&self) -> super::SegmentLimits {
        self.inner.segment_limits()
    }

    fn source_port(&mut self, src_port: u16, dst: SocketAddr) -> u16 {
        self.inner.source_port(src_port, dst)
    }

    fn ipv4_ident(&self, src_port: u16) -> Option<u16> {
        self.inner.ipv4_ident(src_port)
    }

    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }

    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        self.inner.join_multicast(group)
    }

    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        self.inner.leave_multicast(group)
    }

    fn adopt_receive_socket(&mut self, rx: std::net::UdpSocket) -> io::Result<()> {
        self.inner.adopt_receive_socket(rx)
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.wait_fd()
    }

    fn sleep_gate(&self) -> Option<std::sync::Arc<super::SleepGate>> {
        self.inner.sleep_gate()
    }
}

impl<T> Drop for Capture<T> {
    fn drop(&mut self) {
        self.held.write_to(&mut self.sink);
        if let Some(out) = self.sink.out.as_mut() {
            let _ = out.get_mut().flush();
        }
    }
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
