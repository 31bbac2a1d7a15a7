//! Latency: two busy-polling threads bounce one datagram back and forth.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::{invalid, join, SetOnDrop, MAX_DATAGRAM};
use crate::perf::rtt::Rtt;
use crate::perf::{size_text, Measurement, Unit};

/// What [`udp_pingpong`] runs.
#[derive(Clone, Debug)]
pub struct LatConfig {
    /// Where the pinging side binds (port 0: any free port).
    pub client: SocketAddr,
    /// Where the echoing side binds (port 0: any free port).
    pub server: SocketAddr,
    /// Payload bytes per datagram, at least 8 (the sequence number).
    pub datagram_len: usize,
    /// Round trips measured.
    pub iters: usize,
    /// Round trips before them, not measured.
    pub warmup: usize,
    /// A round trip that takes longer fails the run (with `TimedOut`).
    pub timeout: Duration,
}

impl Default for LatConfig {
    fn default() -> Self {
        LatConfig {
            client: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 1), 0)),
            server: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0)),
            datagram_len: 64,
            iters: 100_000,
            warmup: 1_000,
            timeout: Duration::from_secs(2),
        }
    }
}

/// What [`udp_pingpong`] measured.
#[derive(Clone, Debug)]
pub struct LatResult {
    /// Payload bytes per datagram.
    pub datagram_len: usize,
    /// The `iters` measured round trips.
    pub rtt: Rtt,
}

impl LatResult {
    /// The report line `raw_udp_pingpong`.
    pub fn measurement(&self) -> Measurement {
        let mut fields = self.rtt.fields();
        fields.insert("datagram_len".into(), self.datagram_len.into());
        Measurement {
            key: "raw_udp_pingpong".into(),
            label: format!(
                "raw UDP  {} busy-poll ping-pong",
                size_text(self.datagram_len)
            ),
            value: self.rtt.mean_us,
            unit: Unit::MeanRttUs,
            detail: self.rtt.detail(),
            baseline: None,
            paired: None,
            fields,
        }
    }
}

/// Bounces a datagram `cfg.warmup + cfg.iters` times between two busy-polling threads and
/// reports the last `cfg.iters` round trips.
pub fn udp_pingpong(cfg: &LatConfig) -> io::Result<LatResult> {
    if !(8..=MAX_DATAGRAM).contains(&cfg.datagram_len) || cfg.iters == 0 {
        return Err(invalid(
            "datagram_len must be 8..=65507 and iters at least 1",
        ));
    }
    let client = UdpSocket::bind(cfg.client)?;
    let server = UdpSocket::bind(cfg.server)?;
    client.connect(server.local_addr()?)?;
    server.connect(client.local_addr()?)?;
    client.set_nonblocking(true)?;
    server.set_nonblocking(true)?;

    let stop = AtomicBool::new(false);
    let rtt_ns = thread::scope(|s| {
        let echoer = thread::Builder::new()
            .name("udp-pp-echo".into())
            .spawn_scoped(s, || echo(&server, cfg.datagram_len, &stop))?;
        let pinger = thread::Builder::new()
            .name("udp-pp-ping".into())
            .spawn_scoped(s, || {
                let _stop = SetOnDrop(&stop);
                ping(&client, cfg)
            });
        let rtt = match pinger {
            Ok(t) => join(t),
            Err(e) => {
                stop.store(true, Ordering::Release);
                Err(e)
            }
        };
        // An echo failure is what made the pinger time out: report it first.
        join(echoer)?;
        rtt
    })?;

    let rtt = Rtt::from_ns(rtt_ns).ok_or_else(|| invalid("no round trip measured"))?;
    Ok(LatResult {
        datagram_len: cfg.datagram_len,
        rtt,
    })
}

/// The pinging side: sends its sequence number, spins until it comes back, records the time.
fn ping(s: &UdpSocket, cfg: &LatConfig) -> io::Result<Vec<u64>> {
    let mut out = vec![0u8; cfg.datagram_len];
    let mut back = vec![0u8; cfg.datagram_len];
    let mut rtt_ns = Vec::with_capacity(cfg.iters);
    for i in 0..cfg.warmup + cfg.iters {
        let seq = (i as u64).to_le_bytes();
        out[..8].copy_from_slice(&seq);
        let t0 = Instant::now();
        let late = || t0.elapsed() > cfg.timeout;
        let (sent, n) = match spin(|| s.send(&out), late)? {
            Some(sent) => (sent, spin(|| s.recv(&mut back), late)?),
            None => (0, None),
        };
        let rtt = t0.elapsed();
        let Some(n) = n else {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("round trip {i} took more than {:?}", cfg.timeout),
            ));
        };
        if sent != out.len() || n != out.len() || back[..8] != seq {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("round trip {i}: sent {sent} bytes, got back {n} not matching"),
            ));
        }
        if i >= cfg.warmup {
            rtt_ns.push(rtt.as_nanos() as u64);
        }
    }
    Ok(rtt_ns)
}

/// The echoing side: sends back every datagram it reads, until `stop`.
fn echo(s: &UdpSocket, len: usize, stop: &AtomicBool) -> io::Result<()> {
    let mut buf = vec![0u8; len];
    let stopped = || stop.load(Ordering::Acquire);
    while let Some(n) = spin(|| s.recv(&mut buf), stopped)? {
        if spin(|| s.send(&buf[..n]), stopped)?.is_none() {
            break;
        }
    }
    Ok(())
}

/// Calls `op` until it does something other than `WouldBlock` or `Interrupted`; every 1024
/// tries asks `give_up`, and returns `None` if it says so. (An OS error does not allocate.)
fn spin<T>(
    mut op: impl FnMut() -> io::Result<T>,
    give_up: impl Fn() -> bool,
) -> io::Result<Option<T>> {
    let mut tries = 0u32;
    loop {
        match op() {
            Ok(v) => return Ok(Some(v)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
        tries = tries.wrapping_add(1);
        if tries % 1024 == 0 && give_up() {
            return Ok(None);
        }
    }
}
