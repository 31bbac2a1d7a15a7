//! Throughput the kernel reaches when it cuts and joins the datagrams itself: one thread hands
//! it runs of equal segments with UDP GSO (`UDP_SEGMENT`), another reads them back whole with
//! UDP GRO (`UDP_GRO`), the segment size in a control message.
//!
//! This is how softrnic moves a 64 KiB RDMA WRITE (`provider/src/driver/runs.rs`): after the
//! FIRST packet (which carries a RETH, so is longer and goes alone), the MIDDLE and LAST
//! packets are of one length, BTH 12 + 4096 payload + ICRC 4 = 4112 bytes of UDP payload at
//! PMTU 4096, and go out as one run; 15 of them (61,680 bytes) is the most under the 65,507
//! bytes a UDP datagram can hold. The kernel passes such a run through its stack once, and
//! over loopback delivers it still whole to a socket with `UDP_GRO` on. The same bytes sent as
//! separate datagrams (`sendmmsg`, [`super::udp_bandwidth`]) go through the stack once each: this
//! line is the kernel's real limit for the traffic RC WRITE puts on it.
//!
//! Every segment's first byte says the phase it was sent in (warm-up, measured, end), as in
//! [`super::udp_bandwidth`]; the receiver looks at each segment of each run it reads, so a run
//! the kernel joined differently from how it was sent is still counted segment by segment.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use softrnic_provider::transport::udp::{gro_segment_size, MAX_SEGMENTS, UDP_GRO, UDP_SEGMENT};
use softrnic_wire::bth;
use softrnic_wire::icrc::ICRC_LEN;

use super::{
    flow, gbit_per_s, into_map, invalid, loss_ratio, sender_and_receiver, Flow, MAX_DATAGRAM,
};
use crate::perf::sock;
use crate::perf::{size_text, Measurement, Unit};

/// Room for a joined run: the largest UDP payload.
const RUN_MAX: usize = 65_535;
/// Most runs per `sendmmsg` / `recvmmsg`.
const MAX_BATCH: usize = 64;
/// How long a blocking send or receive waits before its thread looks at the clock and at the
/// other thread.
const POLL: Duration = Duration::from_millis(50);
/// How many "end" runs the sender sends after its last measured one.
const END_MARKERS: usize = 4;

/// The first byte of every segment says which phase it was sent in.
const WARMUP: u8 = 0;
const MEASURED: u8 = 1;
const END: u8 = 2;

/// Payload bytes of a full packet at the path MTU the RC lines run at.
pub const PMTU: usize = 4096;
/// A full packet's UDP payload: BTH, [`PMTU`] bytes, ICRC (4112 bytes).
const PACKET_LEN: usize = bth::HEADER_LEN + PMTU + ICRC_LEN;
/// The most such packets one run holds, under the largest UDP payload (15).
const MAX_RUN: usize = MAX_DATAGRAM / PACKET_LEN;

/// What [`udp_gso_bandwidth`] runs.
#[derive(Clone, Debug)]
pub struct GsoConfig {
    /// Where the sender binds (port 0: any free port).
    pub sender: SocketAddr,
    /// Where the receiver binds (port 0: any free port).
    pub receiver: SocketAddr,
    /// UDP payload bytes per segment: a RoCEv2 RDMA WRITE MIDDLE packet at PMTU 4096.
    pub segment_len: usize,
    /// Segments per run (per datagram handed to the kernel).
    pub segments: usize,
    /// Runs per `sendmmsg`, and at most per `recvmmsg`.
    pub batch: usize,
    /// Sent before the measurement starts, and not counted.
    pub warmup: Duration,
    /// How long the sender sends measured runs.
    pub duration: Duration,
    /// Socket buffer asked for on each side (`SO_SNDBUF` / `SO_RCVBUF`).
    pub socket_buffer: usize,
}

impl Default for GsoConfig {
    fn default() -> Self {
        GsoConfig {
            sender: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 1), 0)),
            receiver: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0)),
            segment_len: PACKET_LEN,
            segments: MAX_RUN,
            batch: 8,
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(3),
            socket_buffer: 4 << 20,
        }
    }
}

impl GsoConfig {
    /// The default run, cut to the packets of one RC RDMA WRITE of `len` bytes: a message is
    /// `ceil(len / 4096)` packets, so a run has that many segments, at most 15; a message
    /// shorter than a packet is one segment of its own length (BTH, `len` bytes, ICRC).
    pub fn for_message(len: usize) -> GsoConfig {
        GsoConfig {
            segment_len: bth::HEADER_LEN + len.min(PMTU) + ICRC_LEN,
            segments: len.div_ceil(PMTU).clamp(1, MAX_RUN),
            ..GsoConfig::default()
        }
    }

    /// `raw UDP  15 x 4112 B GSO send, GRO receive`.
    pub fn label(&self) -> String {
        format!(
            "raw UDP  {} x {} GSO send, GRO receive",
            self.segments,
            size_text(self.segment_len)
        )
    }

    /// The report line `raw_udp_gso_bw` when the kernel would not run the test (`why`: it
    /// refuses `UDP_SEGMENT` or `UDP_GRO`): says so, with no figure.
    pub fn refused(&self, why: &io::Error) -> Measurement {
        Measurement {
            key: "raw_udp_gso_bw".into(),
            label: self.label(),
            value: f64::NAN,
            unit: Unit::GbitPerSec,
            detail: format!("not measured: {why}"),
            baseline: None,
            paired: None,
            fields: into_map(json!({
                "segment_len": self.segment_len,
                "segments_per_run": self.segments,
                "gbit_per_s": null,
                "unsupported": why.to_string(),
            })),
        }
    }
}

/// What [`udp_gso_bandwidth`] measured. Only segments sent during the measured phase count.
#[derive(Clone, Debug)]
pub struct GsoResult {
    /// UDP payload bytes per segment.
    pub segment_len: usize,
    /// Segments per run sent.
    pub segments_per_run: usize,
    /// Runs the sender's `sendmmsg` accepted.
    pub sent_runs: u64,
    /// Segments in them.
    pub sent: u64,
    /// Segments the receiver got (datagrams, as the kernel would have cut them).
    pub datagrams: u64,
    /// Messages the receiver read them in: the runs as the kernel delivered them.
    pub runs: u64,
    /// The most segments one message held.
    pub largest_run: u64,
    /// UDP payload bytes the receiver got, summed over the segments.
    pub bytes: u64,
    /// From the receiver's first to its last batch of measured runs.
    pub elapsed: Duration,
    /// Received payload per second over `elapsed` (the first batch, which arrived before
    /// `elapsed` began, left out), in 10^9 bits per second.
    pub gbit_per_s: f64,
    /// `sent - datagrams`: segments dropped by the kernel, mostly at a full receive buffer.
    pub lost: u64,
    /// Send buffer size the kernel granted.
    pub sndbuf: usize,
    /// Receive buffer size the kernel granted.
    pub rcvbuf: usize,
}

impl GsoResult {
    /// `lost / sent`, 0 when nothing was sent.
    pub fn loss_ratio(&self) -> f64 {
        loss_ratio(self.lost, self.sent)
    }

    /// The report line `raw_udp_gso_bw`.
    pub fn measurement(&self) -> Measurement {
        let fields = json!({
            "segment_len": self.segment_len,
            "segments_per_run": self.segments_per_run,
            "gbit_per_s": self.gbit_per_s,
            "bytes": self.bytes,
            "datagrams": self.datagrams,
            "runs": self.runs,
            "largest_run": self.largest_run,
            "sent": self.sent,
            "sent_runs": self.sent_runs,
            "lost": self.lost,
            "loss_percent": self.loss_ratio() * 100.0,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "sndbuf": self.sndbuf,
            "rcvbuf": self.rcvbuf,
        });
        let cfg = GsoConfig {
            segment_len: self.segment_len,
            segments: self.segments_per_run,
            ..GsoConfig::default()
        };
        Measurement {
            key: "raw_udp_gso_bw".into(),
            label: cfg.label(),
            value: self.gbit_per_s,
            unit: Unit::GbitPerSec,
            detail: format!(
                "{} datagrams in {} runs, {:.1}% loss",
                self.datagrams,
                self.runs,
                self.loss_ratio() * 100.0
            ),
            baseline: None,
            paired: None,
            fields: into_map(fields),
        }
    }
}

/// Sends runs from one thread to another over loopback for `cfg.warmup + cfg.duration` and
/// reports what the receiver got during `cfg.duration`. A kernel that refuses `UDP_SEGMENT` or
/// `UDP_GRO` gives an error of kind [`io::ErrorKind::Unsupported`].
pub fn udp_gso_bandwidth(cfg: &GsoConfig) -> io::Result<GsoResult> {
    let run_len = cfg.segment_len.saturating_mul(cfg.segments);
    if cfg.segment_len == 0
        || !(1..=MAX_SEGMENTS).contains(&cfg.segments)
        || run_len > MAX_DATAGRAM
        || !(1..=MAX_BATCH).contains(&cfg.batch)
    {
        return Err(invalid(
            "segment_len must be at least 1, segments 1..=64, a run at most 65507 bytes \
             and batch 1..=64",
        ));
    }
    let Flow {
        tx,
        rx,
        sndbuf,
        rcvbuf,
    } = flow(cfg.sender, cfg.receiver, cfg.socket_buffer, POLL)?;
    let segment = libc::c_int::try_from(cfg.segment_len).unwrap_or(libc::c_int::MAX);
    sock::set_udp_option(&tx, UDP_SEGMENT, segment).map_err(|e| refused("UDP_SEGMENT", e))?;
    sock::set_udp_option(&rx, UDP_GRO, 1).map_err(|e| refused("UDP_GRO", e))?;
    let (sent_runs, got) = sender_and_receiver(
        ("udp-gso-tx", "udp-gro-rx"),
        || send(&tx, cfg),
        |sender_done| receive(&rx, cfg, sender_done),
    )?;

    let sent = sent_runs * cfg.segments as u64;
    Ok(GsoResult {
        segment_len: cfg.segment_len,
        segments_per_run: cfg.segments,
        sent_runs,
        sent,
        datagrams: got.datagrams,
        runs: got.runs,
        largest_run: got.largest_run,
        bytes: got.bytes,
        elapsed: got.elapsed,
        gbit_per_s: gbit_per_s(got.bytes - got.first_batch_bytes, got.elapsed),
        lost: sent.saturating_sub(got.datagrams),
        sndbuf,
        rcvbuf,
    })
}

/// The kernel would not set `option`: an old kernel, or one built without it.
fn refused(option: &str, e: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("the kernel refuses {option} ({e})"),
    )
}

/// The sender: warm-up runs, then measured ones until the deadline, then end markers.
/// Returns how many measured runs the kernel accepted.
fn send(tx: &UdpSocket, cfg: &GsoConfig) -> io::Result<u64> {
    let (seg, run_len) = (cfg.segment_len, cfg.segment_len * cfg.segments);
    let mut buf = vec![WARMUP; run_len];
    // Every access to `buf` from here on goes through `base`, the pointer the kernel reads.
    let base = buf.as_mut_ptr();
    let mark = |phase: u8| {
        for k in 0..cfg.segments {
            // SAFETY: k * seg < run_len: in bounds; no call is running that reads buf.
            unsafe { *base.add(k * seg) = phase };
        }
    };
    let mut iov = libc::iovec {
        iov_base: base.cast(),
        iov_len: run_len,
    };
    // All headers share one iovec: every run of a batch is the same bytes. The socket's
    // UDP_SEGMENT cuts each into `cfg.segments` datagrams.
    let iov_ptr: *mut libc::iovec = &mut iov;
    let mut hdrs: Vec<libc::mmsghdr> = (0..cfg.batch).map(|_| sock::mmsghdr(iov_ptr)).collect();

    let start = Instant::now();
    let measure_from = start + cfg.warmup;
    let end = measure_from + cfg.duration;
    let mut phase = WARMUP;
    let mut sent = 0u64;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if phase == WARMUP && now >= measure_from {
            phase = MEASURED;
            mark(MEASURED);
        }
        // SAFETY: hdrs point to iov, which points to buf; both live until the end of send.
        let n = unsafe { sock::sendmmsg(tx, &mut hdrs)? };
        if phase == MEASURED {
            sent += n as u64;
        }
    }
    // The receiver stops at the first end marker it reads; when all are lost it stops once
    // nothing has come for POLL after the sender is done.
    mark(END);
    let markers = END_MARKERS.min(cfg.batch);
    // SAFETY: as above.
    unsafe { sock::sendmmsg(tx, &mut hdrs[..markers])? };
    drop(buf);
    Ok(sent)
}

/// Room for one `UDP_GRO` control message (an int), aligned as `cmsghdr` must be.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct ControlBuf([u8; 32]);

// SAFETY: CMSG_SPACE only computes a length.
const _: () = assert!(unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize <= 32);

/// What the receiver counted of the measured segments.
struct Received {
    datagrams: u64,
    runs: u64,
    largest_run: u64,
    bytes: u64,
    first_batch_bytes: u64,
    elapsed: Duration,
}

/// The receiver: reads whole runs until an end marker, or until nothing came for POLL after
/// the sender was done.
fn receive(rx: &UdpSocket, cfg: &GsoConfig, sender_done: &AtomicBool) -> io::Result<Received> {
    let mut bufs = vec![0u8; RUN_MAX * cfg.batch];
    // Every access to `bufs` from here on goes through `base`, the pointer the kernel writes.
    let base = bufs.as_mut_ptr();
    let mut controls = vec![ControlBuf([0; 32]); cfg.batch];
    let mut iovs: Vec<libc::iovec> = (0..cfg.batch)
        .map(|i| libc::iovec {
            // SAFETY: i * RUN_MAX < bufs.len(): in bounds.
            iov_base: unsafe { base.add(i * RUN_MAX) }.cast(),
            iov_len: RUN_MAX,
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iovs.iter_mut().map(|v| sock::mmsghdr(v)).collect();
    for (h, c) in hdrs.iter_mut().zip(controls.iter_mut()) {
        h.msg_hdr.msg_control = c.0.as_mut_ptr().cast();
    }

    let mut got = Received {
        datagrams: 0,
        runs: 0,
        largest_run: 0,
        bytes: 0,
        first_batch_bytes: 0,
        elapsed: Duration::ZERO,
    };
    let mut first: Option<Instant> = None;
    loop {
        // The kernel shrinks each msg_controllen to what it wrote: give the room back.
        for h in hdrs.iter_mut() {
            h.msg_hdr.msg_controllen = size_of::<ControlBuf>() as _;
        }
        // SAFETY: hdrs point to iovs, which point into bufs, and to controls; all live until
        // the end of receive and nothing else touches them during the call.
        let Some(n) = (unsafe { sock::recvmmsg(rx, &mut hdrs)? }) else {
            if sender_done.load(Ordering::Acquire) {
                break;
            }
            continue;
        };
        let now = Instant::now();
        let (mut batch_datagrams, mut batch_bytes, mut ended) = (0u64, 0u64, false);
        for (i, h) in hdrs[..n].iter().enumerate() {
            let len = h.msg_len as usize;
            if len == 0 {
                continue;
            }
            // Without a control message the kernel did not join anything: one datagram.
            let seg = gro_segment_size(&h.msg_hdr).unwrap_or(len);
            let mut run_segments = 0u64;
            let mut at = 0;
            while at < len {
                let this = seg.min(len - at);
                // SAFETY: i * RUN_MAX + at < i * RUN_MAX + len <= bufs.len().
                match unsafe { *base.add(i * RUN_MAX + at) } {
                    MEASURED => {
                        run_segments += 1;
                        batch_bytes += this as u64;
                    }
                    END => ended = true,
                    _ => {}
                }
                at += this;
            }
            if run_segments > 0 {
                batch_datagrams += run_segments;
                got.runs += 1;
                got.largest_run = got.largest_run.max(run_segments);
            }
        }
        if batch_datagrams > 0 {
            got.datagrams += batch_datagrams;
            got.bytes += batch_bytes;
            match first {
                None => {
                    first = Some(now);
                    got.first_batch_bytes = batch_bytes;
                }
                Some(t) => got.elapsed = now - t,
            }
        }
        if ended {
            break;
        }
    }
    drop(bufs);
    drop(controls);
    Ok(got)
}
