//! `softrnic demo`: two devices in one process (127.0.0.1 and 127.0.0.2 by default) connect RC
//! QPs and run SEND, RDMA WRITE, WRITE with immediate, RDMA READ, compare-and-swap and
//! fetch-and-add, verifying every byte; then a short RDMA WRITE throughput run and a SEND
//! ping-pong, reported.
//!
//! With faults ([`run_lab`], `softrnic demo --loss 2% --seed N`), the same operations run over
//! the in-memory fabric, which loses, reorders and duplicates packets, on its virtual clock:
//! the report says what the devices did to recover, and the same seed gives the same run.

use std::io::{self, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use softrnic_provider::counters::DeviceCounters;
use softrnic_provider::transport::{CaptureConfig, Fabric, FabricConfig, FabricStats};
use softrnic_uapi::{
    Progress, RemoteAddr, SendFlags, SendOpcode, WcFlags, WcOpcode, WcStatus, WorkCompletion,
};

use crate::perf::rtt::Rtt;
use crate::rig::{all_succeeded, err, wr, Rig, Side};

/// What the demo found.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// One line per verified operation.
    pub checks: Vec<String>,
    /// RDMA WRITE throughput, Gbit/s of payload.
    pub write_gbit_s: f64,
    /// RC SEND 64-byte ping-pong mean round trip, microseconds.
    pub pingpong_us: f64,
    /// Packets device A sent, and how many of them went through B's inbox in shared memory
    /// instead of UDP (the host-local path, `provider/src/transport/udp/local/`).
    pub a_sent: (u64, u64),
}

const MEM: usize = 4 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

fn check(what: &str, ok: bool, checks: &mut Vec<String>) -> io::Result<()> {
    if !ok {
        return Err(io::Error::other(format!("{what}: bytes differ")));
    }
    checks.push(format!("{what}: ok"));
    Ok(())
}

fn read(s: &Side, off: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut v = vec![0; len];
    s.mr.read(off, &mut v)
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(v)
}

fn write(s: &Side, off: usize, data: &[u8]) -> io::Result<()> {
    s.mr.write(off, data)
        .map_err(|e| io::Error::other(e.to_string()))
}

/// Runs the demo between `a` and `b`.
pub fn run(a: IpAddr, b: IpAddr, progress: Progress) -> io::Result<DemoReport> {
    let rig = Rig::new(a, b, MEM, progress)?;
    let checks = verify(&rig)?;
    let write_gbit_s = write_throughput(&rig, WRITE_MSG, Duration::from_millis(1000))?;
    let pingpong_us = pingpong(&rig, 2000)?.mean_us;
    let (c, _) = rig.a.ctx.device().observe();
    Ok(DemoReport {
        checks,
        write_gbit_s,
        pingpong_us,
        a_sent: (c.sent_pkts, c.local_sent),
    })
}

/// Runs each verified operation once, from A to B: a line per operation.
fn verify(rig: &Rig) -> io::Result<Vec<String>> {
    let (sa, sb) = (&rig.a, &rig.b);
    let remote = |off: usize| RemoteAddr {
        addr: sb.mr.iova() + off as u64,
        rkey: sb.mr.rkey(),
    };
    let mut checks = Vec::new();

    // SEND: 10000 bytes into a posted receive.
    let data = pattern(10000, 1);
    write(sa, 0, &data)?;
    sb.post_recv(100, 0, 16384)?;
    sa.post(wr(
        1,
        SendOpcode::Send,
        vec![sa.mr.sge(0, 10000)],
        remote(0),
    ))?;
    sa.wait(1)?;
    let r = sb.wait(1)?;
    check(
        "SEND 10000 B",
        r[0].opcode == WcOpcode::Recv && r[0].byte_len == 10000 && read(sb, 0, 10000)? == data,
        &mut checks,
    )?;

    // RDMA WRITE: 64 KiB.
    let data = pattern(65536, 2);
    write(sa, 65536, &data)?;
    sa.post(wr(
        2,
        SendOpcode::RdmaWrite,
        vec![sa.mr.sge(65536, 65536)],
        remote(65536),
    ))?;
    sa.wait(1)?;
    check(
        "RDMA WRITE 64 KiB",
        read(sb, 65536, 65536)? == data,
        &mut checks,
    )?;

    // RDMA WRITE with immediate.
    sb.post_recv(101, 0, 0)?;
    let mut w = wr(
        3,
        SendOpcode::RdmaWriteWithImm,
        vec![sa.mr.sge(65536, 1000)],
        remote(200_000),
    );
    w.imm_data_or_inv_rkey = 0x1234_5678;
    sa.post(w)?;
    sa.wait(1)?;
    let r = sb.wait(1)?;
    let imm_ok = r[0].opcode == WcOpcode::RecvRdmaWithImm
        && r[0].wc_flags.contains(WcFlags::WITH_IMM)
        && r[0].imm_data_or_inv_rkey == 0x1234_5678;
    check(
        "RDMA WRITE_WITH_IMM 1000 B",
        imm_ok && read(sb, 200_000, 1000)? == data[..1000],
        &mut checks,
    )?;

    // RDMA READ: 64 KiB back from B.
    let data = pattern(65536, 3);
    write(sb, 300_000, &data)?;
    sa.post(wr(
        4,
        SendOpcode::RdmaRead,
        vec![sa.mr.sge(400_000, 65536)],
        remote(300_000),
    ))?;
    sa.wait(1)?;
    check(
        "RDMA READ 64 KiB",
        read(sa, 400_000, 65536)? == data,
        &mut checks,
    )?;

    // Atomics on an 8-byte word at B.
    write(sb, 500_000, &100u64.to_ne_bytes())?;
    let mut w = wr(
        5,
        SendOpcode::AtomicCmpAndSwp,
        vec![sa.mr.sge(500_000, 8)],
        remote(500_000),
    );
    w.compare_add = 100;
    w.swap = 250;
    sa.post(w)?;
    sa.wait(1)?;
    let ok = read(sa, 500_000, 8)? == 100u64.to_ne_bytes()
        && read(sb, 500_000, 8)? == 250u64.to_ne_bytes();
    check("ATOMIC CMP_AND_SWP 100 -> 250", ok, &mut checks)?;
    let mut w = wr(
        6,
        SendOpcode::AtomicFetchAndAdd,
        vec![sa.mr.sge(500_008, 8)],
        remote(500_000),
    );
    w.compare_add = 5;
    sa.post(w)?;
    sa.wait(1)?;
    let ok = read(sa, 500_008, 8)? == 250u64.to_ne_bytes()
        && read(sb, 500_000, 8)? == 255u64.to_ne_bytes();
    check("ATOMIC FETCH_AND_ADD +5", ok, &mut checks)?;
    Ok(checks)
}

/// Bytes per message of the demo's and `softrnic perf`'s WRITE throughput lines.
pub const WRITE_MSG: usize = 65536;

/// RDMA WRITE of `msg`-byte messages, 16 outstanding, for `dur`: Gbit/s of payload.
pub fn write_throughput(rig: &Rig, msg: usize, dur: Duration) -> io::Result<f64> {
    let remote = RemoteAddr {
        addr: rig.b.mr.addr(),
        rkey: rig.b.mr.rkey(),
    };
    let (bytes, took) = write_stream(&rig.a, remote, msg, dur)?;
    Ok(bytes as f64 * 8.0 / took.as_secs_f64() / 1e9)
}

/// RDMA WRITEs of `msg`-byte messages from `side`'s buffer to `remote` (which must have `msg`
/// bytes), 16 outstanding, for `dur`: the bytes written and the time taken, from the first
/// post to the last completion. The messages take turns over the buffer's first MiB (16 of
/// 64 KiB), or all start at its beginning when one is larger than that.
///
/// # Errors
/// An empty message, one the buffer cannot hold, or a WRITE that fails.
pub fn write_stream(
    side: &Side,
    remote: RemoteAddr,
    msg: usize,
    dur: Duration,
) -> io::Result<(u64, Duration)> {
    const SOURCE: usize = 1 << 20;
    const DEPTH: u64 = 16;
    let len = match u32::try_from(msg) {
        Ok(len) if msg > 0 && msg <= side.mr.len() => len,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a WRITE of {msg} bytes from a buffer of {}", side.mr.len()),
            ))
        }
    };
    let slots = (SOURCE / msg).max(1);
    let mut posted = 0u64;
    let mut done = 0u64;
    let start = Instant::now();
    while start.elapsed() < dur || done < posted {
        while posted - done < DEPTH && start.elapsed() < dur {
            let off = (posted as usize % slots) * msg;
            side.post(wr(
                posted,
                SendOpcode::RdmaWrite,
                vec![side.mr.sge(off, len)],
                remote,
            ))?;
            posted += 1;
        }
        done += side.wait(1)?.len() as u64;
    }
    Ok((done * msg as u64, start.elapsed()))
}

/// Round trips run before the measured ones (page faults, first packets).
fn warmup(iters: usize) -> usize {
    (iters / 10).min(1000)
}

/// Receives each side keeps posted during a ping-pong, as ibv_rc_pingpong keeps `rx_depth`:
/// a receive is re-posted after the answer goes out, off the round trip's path, and the peer's
/// next message still finds one waiting.
const RX_DEPTH: u64 = 4;

/// One side of a ping-pong: its SEND work request, built once, and room for completions.
struct Pinger<'a> {
    side: &'a Side,
    /// Every this-many-th SEND is signaled (1: all of them).
    signal_every: u64,
    send: softrnic_uapi::SendWr,
    /// The receive re-posted after each one used (kept, like `send`, so that a round trip
    /// allocates nothing).
    recv: softrnic_uapi::RecvWr,
    wcs: [WorkCompletion; 16],
    /// Receive completions seen before they were waited for.
    early: usize,
}

impl<'a> Pinger<'a> {
    /// Posts [`RX_DEPTH`] receives of 64 bytes at `off + 4096`; sends come from `off`.
    fn new(side: &'a Side, off: usize, signal_every: u64) -> io::Result<Pinger<'a>> {
        let mut p = Pinger {
            side,
            signal_every: signal_every.max(1),
            send: inline_send(side, 0, off),
            recv: softrnic_uapi::RecvWr {
                wr_id: 0,
                sg_list: vec![side.mr.sge(off + 4096, 64)],
            },
            wcs: [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16],
            early: 0,
        };
        for i in 0..RX_DEPTH {
            p.repost(i)?;
        }
        Ok(p)
    }

    /// Posts the inline 64-byte SEND `id`, signaled if it is an `signal_every`-th one.
    fn send(&mut self, id: u64) -> io::Result<()> {
        self.send.wr_id = id;
        self.send.flags = if (id + 1) % self.signal_every == 0 {
            SendFlags::SIGNALED | SendFlags::INLINE
        } else {
            SendFlags::INLINE
        };
        self.side
            .qp
            .post_send(std::slice::from_ref(&self.send))
            .map_err(|(_, e)| err(e))
    }

    /// Polls until a receive completes (send completions are skipped), driving the peer's
    /// progress between empty polls if this thread runs both; fails on an error completion
    /// or after 10 s without one.
    fn wait_recv(&mut self) -> io::Result<()> {
        // The clock is read only once the wait is long (a round trip reads it no more than the
        // raw baseline does).
        let mut start = None;
        let mut empty = 0u32;
        while self.early == 0 {
            let k = self.side.cq.poll(&mut self.wcs).map_err(err)?;
            let wcs = &self.wcs[..k];
            all_succeeded(wcs)?;
            self.early += wcs.iter().filter(|w| w.opcode == WcOpcode::Recv).count();
            if k == 0 {
                if let Some(p) = &self.side.peer {
                    p.progress();
                }
                empty = empty.wrapping_add(1);
                if empty % 1024 == 0
                    && start.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(10)
                {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no completion in 10 s",
                    ));
                }
            }
        }
        self.early -= 1;
        Ok(())
    }

    /// Posts the receive buffer again as WR `id` (after [`Pinger::wait_recv`] used it).
    fn repost(&mut self, id: u64) -> io::Result<()> {
        self.recv.wr_id = id;
        self.side
            .qp
            .post_recv(std::slice::from_ref(&self.recv))
            .map_err(|(_, e)| err(e))
    }
}

/// RC SEND 64-byte ping-pong, `iters` measured round trips, one thread driving both sides.
pub fn pingpong(rig: &Rig, iters: usize) -> io::Result<Rtt> {
    let off = 1 << 20;
    let (mut a, mut b) = (Pinger::new(&rig.a, off, 1)?, Pinger::new(&rig.b, off, 1)?);
    let mut ns = Vec::with_capacity(iters);
    for i in 0..(warmup(iters) + iters) as u64 {
        let t0 = Instant::now();
        a.send(i)?;
        // B: wait for the ping (and A's send completion comes with the pong).
        b.wait_recv()?;
        b.send(i)?;
        a.wait_recv()?;
        ns.push(t0.elapsed().as_nanos() as u64);
        b.repost(i)?;
        a.repost(i)?;
    }
    measured(ns, iters)
}

/// RC SEND 64-byte ping-pong, `iters` measured round trips, each side busy-polled by its own
/// thread (as the raw UDP baseline runs). Every `signal_every`-th SEND is signaled (1: all,
/// as ibv_rc_pingpong and perftest's ib_send_lat do); the others complete without a
/// completion and ask their peer for no ACK. In polling mode the rig's sides stop driving
/// each other's progress for the run.
pub fn pingpong_threads(rig: &mut Rig, iters: usize, signal_every: u64) -> io::Result<Rtt> {
    let total = warmup(iters) + iters;
    let peers = (rig.a.peer.take(), rig.b.peer.take());
    let r = std::thread::scope(|s| {
        let off = 1 << 20;
        let (mut a, mut b) = (
            Pinger::new(&rig.a, off, signal_every)?,
            Pinger::new(&rig.b, off, signal_every)?,
        );
        let echo = s.spawn(move || -> io::Result<()> {
            for i in 0..total as u64 {
                b.wait_recv()?;
                b.send(i)?;
                b.repost(i)?;
            }
            Ok(())
        });
        let mut ns = Vec::with_capacity(total);
        let pinged = (0..total as u64).try_for_each(|i| {
            let t0 = Instant::now();
            a.send(i)?;
            a.wait_recv()?;
            ns.push(t0.elapsed().as_nanos() as u64);
            a.repost(i)
        });
        echo.join()
            .map_err(|_| io::Error::other("echo thread panicked"))??;
        pinged.and_then(|()| measured(ns, iters))
    });
    (rig.a.peer, rig.b.peer) = peers;
    r
}

/// The statistics of the last `iters` round trips of `ns`.
fn measured(mut ns: Vec<u64>, iters: usize) -> io::Result<Rtt> {
    let ns = ns.split_off(ns.len() - iters);
    Rtt::from_ns(ns).ok_or_else(|| io::Error::other("no round trip measured"))
}

/// A signaled, inline 64-byte SEND from `off`.
fn inline_send(s: &Side, id: u64, off: usize) -> softrnic_uapi::SendWr {
    let mut w = wr(
        id,
        SendOpcode::Send,
        vec![s.mr.sge(off, 64)],
        RemoteAddr { addr: 0, rkey: 0 },
    );
    w.flags = SendFlags::SIGNALED | SendFlags::INLINE;
    w
}

/// Prints the report.
pub fn print(r: &DemoReport, out: &mut dyn Write) -> io::Result<()> {
    for c in &r.checks {
        writeln!(out, "  {c}")?;
    }
    writeln!(
        out,
        "RC RDMA WRITE 64 KiB, 16 outstanding: {:.2} Gbit/s",
        r.write_gbit_s
    )?;
    writeln!(
        out,
        "RC SEND 64 B ping-pong:               {:.1} us mean round trip",
        r.pingpong_us
    )?;
    let (sent, local) = r.a_sent;
    writeln!(
        out,
        "A sent {sent} packets, {local} of them through B's inbox in shared memory (both \
         devices are on this host; SOFTRNIC_LOCAL=0 sends every one over UDP)"
    )
}

/// The faults of `softrnic demo`'s teaching lab: the verified operations run over the
/// in-memory fabric, which loses, reorders and duplicates packets by draws from `seed`.
#[derive(Debug, Clone, Default)]
pub struct Lab {
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet is held back behind later ones.
    pub reorder: f64,
    /// Probability that a packet arrives twice.
    pub duplicate: f64,
    /// The seed of the fabric's fault draws.
    pub seed: u64,
    /// A capture of everything device A sends (lost packets too) and receives.
    pub pcap: Option<PathBuf>,
}

/// One-way delay of the lab's fabric (virtual time), so that a capture's timestamps show
/// packets in flight.
const LAB_DELAY_NS: u64 = 2_000;

/// What the lab found: the checks, and what the fabric did and the devices counted.
#[derive(Debug, Clone)]
pub struct LabReport {
    /// One line per verified operation.
    pub checks: Vec<String>,
    /// What the fabric did to the packets.
    pub fabric: FabricStats,
    /// Device A's counters (the requester).
    pub a: DeviceCounters,
    /// Device B's counters (the responder).
    pub b: DeviceCounters,
    /// Virtual time the run took, nanoseconds.
    pub virtual_ns: u64,
}

impl LabReport {
    /// What recovered the run, summed over both devices: retransmissions (each counted
    /// against `retry_cnt`: after a local ACK timeout, a sequence NAK, or a READ response
    /// beyond the oldest), sequence NAKs sent, duplicate requests answered again, and RNR
    /// NAKs received (each a wait before the SEND goes again).
    pub fn recoveries(&self) -> u64 {
        [&self.a, &self.b]
            .iter()
            .map(|c| {
                c.completer_retry_err + c.out_of_seq_request + c.duplicate_request + c.rcvd_rnr_err
            })
            .sum()
    }
}

/// Runs the verified operations between `a` and `b` over a faulty in-memory fabric, on its
/// virtual clock, one thread driving both devices: the same `lab` gives the same run, report
/// and capture, byte for byte.
///
/// # Errors
/// An operation failing or its bytes differing, or the capture file not created.
pub fn run_lab(a: IpAddr, b: IpAddr, lab: &Lab) -> io::Result<LabReport> {
    let fabric = Fabric::new(
        FabricConfig {
            loss: lab.loss,
            reorder: lab.reorder,
            duplicate: lab.duplicate,
            delay_ns: LAB_DELAY_NS,
            ..FabricConfig::default()
        },
        lab.seed,
    );
    let capture = lab.pcap.as_ref().map(|p| CaptureConfig {
        clock: Some(fabric.clock()),
        ..CaptureConfig::new(p)
    });
    let rig = Rig::on_fabric(&fabric, a, b, MEM, capture)?;
    let mut checks = verify(&rig)?;
    checks.push(send_before_its_receive(&rig, &fabric)?);
    let (ca, _) = rig.a.ctx.device().observe();
    let (cb, _) = rig.b.ctx.device().observe();
    let virtual_ns = fabric.now();
    drop(rig); // the capture's last frames reach its file
    Ok(LabReport {
        checks,
        fabric: fabric.stats(),
        a: ca,
        b: cb,
        virtual_ns,
    })
}

/// A SEND posted before its receive, for the lab: the responder answers with an RNR NAK,
/// the requester waits (`min_rnr_timer`) and sends again, and once the receive is posted
/// the SEND lands. The receive is posted as soon as the responder has sent an RNR NAK (or
/// after 100 ms of virtual time, if the faults kept it from ever seeing the SEND).
fn send_before_its_receive(rig: &Rig, fabric: &Fabric) -> io::Result<String> {
    let (sa, sb) = (&rig.a, &rig.b);
    let data = pattern(64, 4);
    write(sa, 600_000, &data)?;
    let nowhere = RemoteAddr { addr: 0, rkey: 0 };
    sa.post(wr(
        7,
        SendOpcode::Send,
        vec![sa.mr.sge(600_000, 64)],
        nowhere,
    ))?;
    let step = crate::rig::FABRIC_STEP.as_nanos() as u64;
    for _ in 0..100_000 {
        if sb.ctx.device().observe().0.send_rnr_err > 0 {
            break;
        }
        sa.ctx.progress();
        sb.ctx.progress();
        fabric.advance_to(fabric.now() + step);
    }
    sb.post_recv(102, 700_000, 64)?;
    sa.wait(1)?;
    let r = sb.wait(1)?;
    let mut checks = Vec::new();
    check(
        "SEND 64 B before its receive (RNR NAK, wait, again)",
        r[0].opcode == WcOpcode::Recv && r[0].byte_len == 64 && read(sb, 700_000, 64)? == data,
        &mut checks,
    )?;
    Ok(checks.remove(0))
}

/// A line of the lab's table: its label, and how to read it off a device's counters.
type Row = (&'static str, fn(&DeviceCounters) -> u64);

/// Prints the lab's report: the checks, what the fabric did, and what recovered it.
pub fn print_lab(r: &LabReport, out: &mut dyn Write) -> io::Result<()> {
    for c in &r.checks {
        writeln!(out, "  {c}")?;
    }
    let f = &r.fabric;
    writeln!(
        out,
        "The fabric: {} packets sent, {} lost, {} duplicated, {} held back (reordered); {:.3} ms of virtual time",
        f.sent,
        f.lost,
        f.duplicated,
        f.reordered,
        r.virtual_ns as f64 / 1e6
    )?;
    writeln!(
        out,
        "What recovered it:                          A (requester)  B (responder)"
    )?;
    let rows: [Row; 9] = [
        ("packets sent", |c| c.sent_pkts),
        ("packets received", |c| c.rcvd_pkts),
        ("retransmissions (against retry_cnt)", |c| {
            c.completer_retry_err
        }),
        ("  local ACK timeouts that resent", |c| c.timeout_resends),
        ("  sequence NAKs received (resend from PSN)", |c| {
            c.rcvd_seq_err
        }),
        ("sequence NAKs sent (a gap seen)", |c| c.out_of_seq_request),
        ("duplicate requests (answered again)", |c| {
            c.duplicate_request
        }),
        ("RNR NAKs received (a wait, then again)", |c| c.rcvd_rnr_err),
        ("RNR NAKs sent", |c| c.send_rnr_err),
    ];
    for (name, get) in rows {
        writeln!(out, "  {name:<42}{:>13}{:>15}", get(&r.a), get(&r.b))?;
    }
    let sum = |get: fn(&DeviceCounters) -> u64| get(&r.a) + get(&r.b);
    writeln!(
        out,
        "Recoveries: {} ({} retransmissions, {} sequence NAKs, {} duplicates answered again, {} RNR waits)",
        r.recoveries(),
        sum(|c| c.completer_retry_err),
        sum(|c| c.out_of_seq_request),
        sum(|c| c.duplicate_request),
        sum(|c| c.rcvd_rnr_err),
    )
}
