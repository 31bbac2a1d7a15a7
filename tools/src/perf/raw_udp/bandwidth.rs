//! Throughput: one thread floods datagrams with `sendmmsg`, another reads them with `recvmmsg`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    flow, gbit_per_s, into_map, invalid, loss_ratio, sender_and_receiver, Flow, MAX_DATAGRAM,
};
use crate::perf::sock;
use crate::perf::{size_text, Measurement, Unit};

/// Most datagrams per `sendmmsg` / `recvmmsg` (the kernel's `UIO_MAXIOV`).
const MAX_BATCH: usize = 1024;
/// How long a blocking send or receive of [`udp_bandwidth`] waits before its thread looks at
/// the clock and at the other thread.
const POLL: Duration = Duration::from_millis(50);
/// How many "end" datagrams the sender sends after its last measured one.
const END_MARKERS: usize = 8;

/// The first byte of every bandwidth datagram says which phase it was sent in.
const WARMUP: u8 = 0;
const MEASURED: u8 = 1;
const END: u8 = 2;

/// What [`udp_bandwidth`] runs.
#[derive(Clone, Debug)]
pub struct BwConfig {
    /// Where the sender binds (port 0: any free port).
    pub sender: SocketAddr,
    /// Where the receiver binds (port 0: any free port).
    pub receiver: SocketAddr,
    /// Payload bytes per datagram.
    pub datagram_len: usize,
    /// Datagrams per `sendmmsg` / `recvmmsg`.
    pub batch: usize,
    /// Sent before the measurement starts, and not counted.
    pub warmup: Duration,
    /// How long the sender sends measured datagrams.
    pub duration: Duration,
    /// Socket buffer asked for on each side (`SO_SNDBUF` / `SO_RCVBUF`).
    pub socket_buffer: usize,
}

impl Default for BwConfig {
    fn default() -> Self {
        BwConfig {
            sender: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 1), 0)),
            receiver: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0)),
            datagram_len: 4096,
            batch: 32,
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(3),
            socket_buffer: 4 << 20,
        }
    }
}

/// What [`udp_bandwidth`] measured. Only datagrams sent during the measured phase count.
#[derive(Clone, Debug)]
pub struct BwResult {
    /// Payload bytes per datagram.
    pub datagram_len: usize,
    /// Datagrams the sender's `sendmmsg` accepted.
    pub sent: u64,
    /// Datagrams the receiver got.
    pub datagrams: u64,
    /// Payload bytes the receiver got.
    pub bytes: u64,
    /// From the receiver's first to its last batch of measured datagrams.
    pub elapsed: Duration,
    /// Received payload per second over `elapsed` (the datagrams of the first batch, which
    /// arrived before `elapsed` began, left out), in 10^9 bits per second.
    pub gbit_per_s: f64,
    /// `sent - datagrams`: dropped by the kernel, mostly at a full receive buffer.
    pub lost: u64,
    /// Send buffer size the kernel granted.
    pub sndbuf: usize,
    /// Receive buffer size the kernel granted.
    pub rcvbuf: usize,
}

impl BwResult {
    /// `lost / sent`, 0 when nothing was sent.
    pub fn loss_ratio(&self) -> f64 {
        loss_ratio(self.lost, self.sent)
    }

    /// The report line `raw_udp_bw`.
    pub fn measurement(&self) -> Measurement {
        let fields = json!({
            "datagram_len": self.datagram_len,
            "gbit_per_s": self.gbit_per_s,
            "bytes": self.bytes,
            "datagrams": self.datagrams,
            "sent": self.sent,
            "lost": self.lost,
            "loss_percent": self.loss_ratio() * 100.0,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "sndbuf": self.sndbuf,
            "rcvbuf": self.rcvbuf,
        });
        Measurement {
            key: "raw_udp_bw".into(),
            label: format!(
                "raw UDP  {} sendmmsg/recvmmsg",
                size_text(self.datagram_len)
            ),
            value: self.gbit_per_s,
            unit: Unit::GbitPerSec,
            detail: format!(
                "{} datagrams, {:.1}% loss",
                self.datagrams,
                self.loss_ratio() * 100.0
            ),
            baseline: None,
            paired: None,
            fields: into_map(fields),
        }
    }
}

/// Floods datagrams from one thread to another over loopback for `cfg.warmup + cfg.duration`
/// and reports what the receiver got during `cfg.duration`.
pub fn udp_bandwidth(cfg: &BwConfig) -> io::Result<BwResult> {
    if !(1..=MAX_DATAGRAM).contains(&cfg.datagram_len) || !(1..=MAX_BATCH).contains(&cfg.batch) {
        return Err(invalid("datagram_len must be 1..=65507 and batch 1..=1024"));
    }
    let Flow {
        tx,
        rx,
        sndbuf,
        rcvbuf,
    } = flow(cfg.sender, cfg.receiver, cfg.socket_buffer, POLL)?;
    let (sent, got) = sender_and_receiver(
        ("udp-bw-tx", "udp-bw-rx"),
        || send(&tx, cfg),
        |sender_done| receive(&rx, cfg, sender_done),
    )?;

    Ok(BwResult {
        datagram_len: cfg.datagram_len,
        sent,
        datagrams: got.datagrams,
        bytes: got.bytes,
        elapsed: got.elapsed,
        gbit_per_s: gbit_per_s(got.bytes - got.first_batch_bytes, got.elapsed),
        lost: sent.saturating_sub(got.datagrams),
        sndbuf,
        rcvbuf,
    })
}

/// The sender: warm-up datagrams, then measured ones until the deadline, then end markers.
/// Returns how many measured datagrams the kernel accepted.
fn send(tx: &UdpSocket, cfg: &BwConfig) -> io::Result<u64> {
    let mut buf = vec![WARMUP; cfg.datagram_len];
    // Every access to `buf` from here on goes through `base`, the pointer the kernel reads.
    let base = buf.as_mut_ptr();
    let mut iov = libc::iovec {
        iov_base: base.cast(),
        iov_len: cfg.datagram_len,
    };
    // All headers share one iovec: every datagram of a batch is the same bytes.
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
            // SAFETY: base points to buf's first byte; no call is running that reads it.
            unsafe { *base = MEASURED };
        }
        // SAFETY: hdrs point to iov, which points to buf; both live until the end of send.
        let n = unsafe { sock::sendmmsg(tx, &mut hdrs)? };
        if phase == MEASURED {
            sent += n as u64;
        }
    }
    // The receiver stops at the first end marker it reads; when all are lost it stops once
    // nothing has come for POLL after the sender is done.
    // SAFETY: as above.
    unsafe { *base = END };
    let markers = END_MARKERS.min(cfg.batch);
    // SAFETY: as above.
    unsafe { sock::sendmmsg(tx, &mut hdrs[..markers])? };
    drop(buf);
    Ok(sent)
}

/// What the receiver counted of the measured datagrams.
struct Received {
    datagrams: u64,
    bytes: u64,
    first_batch_bytes: u64,
    elapsed: Duration,
}

/// The receiver: reads until an end marker, or until nothing came for POLL after the sender
/// was done.
fn receive(rx: &UdpSocket, cfg: &BwConfig, sender_done: &AtomicBool) -> io::Result<Received> {
    let len = cfg.datagram_len;
    let mut bufs = vec![0u8; len * cfg.batch];
    // Every access to `bufs` from here on goes through `base`, the pointer the kernel writes.
    let base = bufs.as_mut_ptr();
    let mut iovs: Vec<libc::iovec> = (0..cfg.batch)
        .map(|i| libc::iovec {
            // SAFETY: i * len < bufs.len(): in bounds.
            iov_base: unsafe { base.add(i * len) }.cast(),
            iov_len: len,
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iovs.iter_mut().map(|v| sock::mmsghdr(v)).collect();

    let mut got = Received {
        datagrams: 0,
        bytes: 0,
        first_batch_bytes: 0,
        elapsed: Duration::ZERO,
    };
    let mut first: Option<Instant> = None;
    loop {
        // SAFETY: hdrs point to iovs, which point into bufs; all live until the end of receive
        // and nothing else touches them during the call.
        let Some(n) = (unsafe { sock::recvmmsg(rx, &mut hdrs)? }) else {
            if sender_done.load(Ordering::Acquire) {
                break;
            }
            continue;
        };
        let now = Instant::now();
        let (mut batch_datagrams, mut batch_bytes, mut ended) = (0u64, 0u64, false);
        for (i, h) in hdrs[..n].iter().enumerate() {
            if h.msg_len == 0 {
                continue;
            }
            // SAFETY: i * len < bufs.len(), and the datagram had at least one byte.
            match unsafe { *base.add(i * len) } {
                MEASURED => {
                    batch_datagrams += 1;
                    batch_bytes += u64::from(h.msg_len);
                }
                END => ended = true,
                _ => {}
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
    Ok(got)
}
