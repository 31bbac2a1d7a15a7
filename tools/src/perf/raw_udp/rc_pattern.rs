//! The kernel's share of an RC SEND ping-pong: the datagrams softrnic's UDP transport exchanges
//! for one round trip, sent and received the way it does, with no RDMA protocol at all.
//!
//! Per hop, an RC SEND ping-pong that ACKs every message puts two datagrams on the wire: the
//! SEND (BTH, 64 bytes of payload, ICRC: 80 bytes) and the ACK of the message that came the
//! other way (BTH, AETH, ICRC: 20 bytes), the answer first, in one `sendmmsg` from the QP's own socket, connected to
//! the peer's port-4791 socket, which a busy poller drains with `recvfrom` or `recvmmsg`, with
//! source addresses, asking for as many as the transport's [`RecvPacing`] says. This baseline
//! does exactly that and nothing else, so the gap between it and the plain ping-pong
//! ([`super::udp_pingpong`]) is what the packet pattern costs in the kernel. (softrnic's own
//! RC ping-pong sends half those ACKs, as its responders coalesce them, and with a packet ring
//! receives without system calls: it may come below this line.)

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use softrnic_provider::transport::udp::RecvPacing;

use super::{invalid, join, SetOnDrop};
use crate::perf::rtt::Rtt;
use crate::perf::{Measurement, Unit};

/// BTH + 64 bytes + ICRC.
const ANSWER_LEN: usize = 80;
/// BTH + AETH + ICRC.
const ACK_LEN: usize = 20;
/// Datagrams one `recvmmsg` may take, as the transport's batch.
const BATCH: usize = 64;
const SLOT: usize = 4096;

/// What [`udp_rc_pattern_pingpong`] runs.
#[derive(Clone, Debug)]
pub struct PatternConfig {
    /// The pinging side's address.
    pub client: IpAddr,
    /// The echoing side's address.
    pub server: IpAddr,
    /// Round trips measured.
    pub iters: usize,
    /// Round trips before them, not measured.
    pub warmup: usize,
    /// A round trip that takes longer fails the run (with `TimedOut`).
    pub timeout: Duration,
}

impl Default for PatternConfig {
    fn default() -> Self {
        PatternConfig {
            client: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            server: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            iters: 100_000,
            warmup: 1_000,
            timeout: Duration::from_secs(2),
        }
    }
}

/// The round trips measured.
#[derive(Clone, Debug)]
pub struct PatternResult {
    /// Their statistics.
    pub rtt: Rtt,
}

impl PatternResult {
    /// The report line, judged against the plain UDP ping-pong.
    pub fn measurement(&self) -> Measurement {
        Measurement {
            key: "raw_udp_rc_pattern".into(),
            label: "raw UDP  RC's datagrams (80 B + 20 B ACK a hop)".to_owned(),
            value: self.rtt.mean_us,
            unit: Unit::MeanRttUs,
            detail: format!("sendmmsg/recvmmsg as softrnic; {}", self.rtt.detail()),
            baseline: Some("raw_udp_pingpong".into()),
            paired: None,
            fields: self.rtt.fields(),
        }
    }
}

/// One side: the socket it receives on and the one it sends from.
struct Side {
    rx: UdpSocket,
    tx: UdpSocket,
}

impl Side {
    fn bind(ip: IpAddr) -> io::Result<Side> {
        let rx = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        let tx = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(Side { rx, tx })
    }
}

/// Runs the ping-pong (module doc).
pub fn udp_rc_pattern_pingpong(cfg: &PatternConfig) -> io::Result<PatternResult> {
    if cfg.iters == 0 || cfg.client.is_ipv4() != cfg.server.is_ipv4() {
        return Err(invalid(
            "iters must be at least 1, both addresses of one family",
        ));
    }
    let (ping, echo) = (Side::bind(cfg.client)?, Side::bind(cfg.server)?);
    let (to_echo, to_ping) = (echo.rx.local_addr()?, ping.rx.local_addr()?);
    let stop = AtomicBool::new(false);
    let ns = thread::scope(|s| {
        let echoer = s.spawn(|| -> io::Result<()> {
            echo.tx.connect(to_ping)?;
            let mut io = Io::new();
            let stopped = || stop.load(Ordering::Acquire);
            while let Some(seq) = io.wait_answer(&echo.rx, &stopped)? {
                io.send(&echo.tx, seq)?;
            }
            Ok(())
        });
        let pinger = s.spawn(|| -> io::Result<Vec<u64>> {
            let _stop = SetOnDrop(&stop);
            ping.tx.connect(to_echo)?;
            let mut io = Io::new();
            let mut ns = Vec::with_capacity(cfg.iters);
            for i in 0..(cfg.warmup + cfg.iters) as u64 {
                let t0 = Instant::now();
                io.send(&ping.tx, i)?;
                let late = || t0.elapsed() > cfg.timeout;
                match io.wait_answer(&ping.rx, &late)? {
                    Some(seq) if seq == i => {}
                    Some(seq) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("round trip {i}: answer {seq} came back"),
                        ))
                    }
                    None => {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("round trip {i} took more than {:?}", cfg.timeout),
                        ))
                    }
                }
                if i as usize >= cfg.warmup {
                    ns.push(t0.elapsed().as_nanos() as u64);
                }
            }
            Ok(ns)
        });
        let ns = join(pinger);
        join(echoer)?;
        ns
    })?;
    let rtt = Rtt::from_ns(ns).ok_or_else(|| invalid("no round trip measured"))?;
    Ok(PatternResult { rtt })
}

/// One thread's buffers and message headers, made before the measured loop.
struct Io {
    answer: [u8; ANSWER_LEN],
    ack: [u8; ACK_LEN],
    slots: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// How many datagrams the next receive asks for, as in softrnic's transport.
    pacing: RecvPacing,
}

impl Io {
    fn new() -> Io {
        // SAFETY: all-zero is a valid value of these plain-data C structs.
        let (addr, iov, hdr) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed(), std::mem::zeroed()) };
        Io {
            answer: [0; ANSWER_LEN],
            ack: [0; ACK_LEN],
            slots: vec![0; BATCH * SLOT],
            addrs: vec![addr; BATCH],
            iovs: vec![iov; BATCH],
            hdrs: vec![hdr; BATCH],
            pacing: RecvPacing::after(0),
        }
    }

    /// The answer carrying `seq`, then an ACK, in one `sendmmsg` to the peer `tx` is
    /// connected to.
    fn send(&mut self, tx: &UdpSocket, seq: u64) -> io::Result<()> {
        self.pacing.sent(2);
        self.answer[..8].copy_from_slice(&seq.to_le_bytes());
        let mut iov = [
            libc::iovec {
                iov_base: self.answer.as_mut_ptr().cast(),
                iov_len: ANSWER_LEN,
            },
            libc::iovec {
                iov_base: self.ack.as_mut_ptr().cast(),
                iov_len: ACK_LEN,
            },
        ];
        // SAFETY: all-zero is a valid mmsghdr.
        let mut hdrs: [libc::mmsghdr; 2] = unsafe { std::mem::zeroed() };
        for (h, v) in hdrs.iter_mut().zip(iov.iter_mut()) {
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
        }
        let mut sent = 0;
        while sent < 2 {
            // SAFETY: the headers point to `iov` and the buffers, all alive and only read
            // during the call.
            let r = unsafe {
                libc::sendmmsg(
                    tx.as_raw_fd(),
                    hdrs[sent..].as_mut_ptr(),
                    (2 - sent) as _,
                    libc::MSG_DONTWAIT as _,
                )
            };
            if r > 0 {
                sent += r as usize;
                continue;
            }
            let err = io::Error::last_os_error();
            if !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
                return Err(err);
            }
        }
        Ok(())
    }

    /// Busy-polls `rx` with `recvmmsg` until an answer arrives (ACKs are dropped): its
    /// sequence number, or `None` once `give_up` says so (asked every 1024 empty polls).
    fn wait_answer(
        &mut self,
        rx: &UdpSocket,
        give_up: &dyn Fn() -> bool,
    ) -> io::Result<Option<u64>> {
        let mut tries = 0u32;
        loop {
            let want = self.pacing.want().min(BATCH);
            let r = if want == 1 {
                self.recv_one(rx)
            } else {
                self.recv_many(rx, want)
            };
            self.pacing.received(r.max(0) as usize);
            if r > 0 {
                let answer = (0..r as usize).find(|&i| self.hdrs[i].msg_len as usize == ANSWER_LEN);
                if let Some(i) = answer {
                    let mut seq = [0u8; 8];
                    seq.copy_from_slice(&self.slots[i * SLOT..i * SLOT + 8]);
                    return Ok(Some(u64::from_le_bytes(seq)));
                }
                continue;
            }
            let err = io::Error::last_os_error();
            if r < 0 && !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
                return Err(err);
            }
            tries = tries.wrapping_add(1);
            if tries % 1024 == 0 && give_up() {
                return Ok(None);
            }
        }
    }

    /// One `recvfrom` (with the source address) into slot 0, as softrnic asks for a single
    /// datagram; its length goes to `hdrs[0].msg_len`. Datagrams received (1 or 0), or -1
    /// with `errno` set.
    fn recv_one(&mut self, rx: &UdpSocket) -> isize {
        let mut addr_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: slot 0 and addrs[0] are valid for writes of the lengths passed and nothing
        // else touches them during the call.
        let r = unsafe {
            libc::recvfrom(
                rx.as_raw_fd(),
                self.slots.as_mut_ptr().cast(),
                SLOT,
                libc::MSG_DONTWAIT,
                (&mut self.addrs[0] as *mut libc::sockaddr_storage).cast(),
                &mut addr_len,
            )
        };
        if r >= 0 {
            self.hdrs[0].msg_len = r as u32;
            return 1;
        }
        -1
    }

    /// One `recvmmsg` of at most `want` datagrams into the slots: how many, or -1 with `errno`
    /// set.
    fn recv_many(&mut self, rx: &UdpSocket, want: usize) -> isize {
        for i in 0..want {
            self.iovs[i] = libc::iovec {
                iov_base: self.slots[i * SLOT..].as_mut_ptr().cast(),
                iov_len: SLOT,
            };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
        }
        // SAFETY: every header points into this struct's slots, addresses and iovecs, which
        // nothing else touches during the call.
        unsafe {
            libc::recvmmsg(
                rx.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                want as _,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            ) as isize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_measures_every_round_trip() {
        let cfg = PatternConfig {
            client: IpAddr::V4(Ipv4Addr::new(127, 0, 30, 1)),
            server: IpAddr::V4(Ipv4Addr::new(127, 0, 30, 2)),
            iters: 200,
            warmup: 10,
            timeout: Duration::from_secs(5),
        };
        let r = udp_rc_pattern_pingpong(&cfg).unwrap();
        assert_eq!(r.rtt.ns.len(), 200);
        let m = r.measurement();
        assert_eq!(m.baseline.as_deref(), Some("raw_udp_pingpong"));
        assert!(m.value > 0.0);
    }

    #[test]
    fn mixed_families_are_refused() {
        let cfg = PatternConfig {
            server: "::1".parse().unwrap(),
            ..PatternConfig::default()
        };
        assert!(udp_rc_pattern_pingpong(&cfg).is_err());
    }
}
