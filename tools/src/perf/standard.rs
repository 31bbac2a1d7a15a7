//! The lines `softrnic perf` measures by default: each RC figure beside the raw kernel UDP
//! baseline it is judged against.
//!
//! The baseline is raw kernel UDP over loopback ([`raw_udp`]): for throughput, runs of 15
//! segments of a RoCEv2 WRITE packet's length sent with UDP GSO and read whole with UDP GRO (as
//! softrnic moves a 64 KiB WRITE), beside 4 KiB datagrams with `sendmmsg`/`recvmmsg` (what the
//! kernel does a datagram at a time); a 64-byte busy-poll ping-pong for latency. softrnic
//! carries RoCEv2 over the same kernel UDP, so these are the ceilings for RC RDMA WRITE
//! throughput and RC SEND ping-pong latency. A kernel without UDP GSO or GRO gets a line that
//! says so, and RC WRITE is then compared with the `sendmmsg` line.
//!
//! The RC lines (`rc_write_bw`, `rc_send_pingpong`, `rc_send_pingpong_1t`) run two devices in
//! this process, driven from the poll loop (`Progress::Polling`), as the raw baseline's
//! threads busy-poll too.

use std::io;
use std::time::Duration;

use super::{loopback_rig, raw_udp, rc_write_line, rtt, warmup, Measurement, Unit};
use crate::demo;

/// The latency tests run in this many rounds, each round a share of every test's round trips
/// in turn. This machine's speed drifts by tens of percent over seconds (the host schedules
/// its vCPUs), and a ratio of two figures taken seconds apart would measure the drift as well;
/// in rounds, every test sees the same stretches of fast and slow.
pub const LATENCY_ROUNDS: usize = 5;

/// Runs every measurement, one after the other, so that none disturbs another: each
/// throughput test for `duration`, the latency tests `iters` round trips each, in
/// [`LATENCY_ROUNDS`] interleaved rounds.
pub fn run(duration: Duration, iters: usize) -> io::Result<Vec<Measurement>> {
    let bw = raw_udp::udp_bandwidth(&raw_udp::BwConfig {
        duration,
        warmup: warmup(duration),
        ..Default::default()
    })?;
    let gso_cfg = raw_udp::GsoConfig {
        duration,
        warmup: warmup(duration),
        ..Default::default()
    };
    let gso = match raw_udp::udp_gso_bandwidth(&gso_cfg) {
        Ok(r) => r.measurement(),
        Err(e) if e.kind() == io::ErrorKind::Unsupported => gso_cfg.refused(&e),
        Err(e) => return Err(e),
    };
    // RC WRITE against the kernel's real limit for the same packets, where it has one.
    let write_baseline = if gso.value.is_finite() {
        "raw_udp_gso_bw"
    } else {
        "raw_udp_bw"
    };
    let mut rig = loopback_rig()?;
    let gbit = demo::write_throughput(&rig, demo::WRITE_MSG, duration)?;
    let mut ns: [Vec<u64>; 4] = Default::default();
    for round in 0..LATENCY_ROUNDS {
        // The rounds share the round trips out; the first ones take the remainder.
        let iters = iters / LATENCY_ROUNDS + usize::from(round < iters % LATENCY_ROUNDS);
        if iters == 0 {
            continue;
        }
        let lat = raw_udp::udp_pingpong(&raw_udp::LatConfig {
            iters,
            ..Default::default()
        })?;
        let pattern = raw_udp::udp_rc_pattern_pingpong(&raw_udp::PatternConfig {
            iters,
            ..Default::default()
        })?;
        let rtt = demo::pingpong_threads(&mut rig, iters, 1)?;
        let rtt1 = demo::pingpong(&rig, iters)?;
        for (all, one) in ns.iter_mut().zip([lat.rtt, pattern.rtt, rtt, rtt1]) {
            all.extend(one.ns);
        }
    }
    let [lat, pattern, rtt, rtt1] = ns.map(rtt::Rtt::from_ns);
    let none = || io::Error::new(io::ErrorKind::InvalidInput, "no round trip to measure");
    let lat = raw_udp::LatResult {
        datagram_len: raw_udp::LatConfig::default().datagram_len,
        rtt: lat.ok_or_else(none)?,
    };
    let pattern = raw_udp::PatternResult {
        rtt: pattern.ok_or_else(none)?,
    };
    let (rtt, rtt1) = (rtt.ok_or_else(none)?, rtt1.ok_or_else(none)?);
    // How the devices receive: a packet ring where the process may, else their sockets.
    let ring = rig.a.ctx.device().transport_stats().rx_from_ring;
    let how = if ring {
        "inline, a busy-polling thread per device, receiving from a packet ring"
    } else {
        "inline, a busy-polling thread per device, receiving from a socket"
    };
    Ok(vec![
        bw.measurement(),
        gso,
        lat.measurement(),
        pattern.measurement(),
        rc_write_line("rc_write_bw", demo::WRITE_MSG, gbit, write_baseline),
        rc_pingpong_line("rc_send_pingpong", "RC SEND 64 B ping-pong", &rtt, how),
        rc_pingpong_line(
            "rc_send_pingpong_1t",
            "RC SEND 64 B ping-pong, 1 thread",
            &rtt1,
            "inline, one thread polls both devices",
        ),
    ])
}

/// An RC ping-pong line, judged against the raw UDP ping-pong.
fn rc_pingpong_line(key: &str, label: &str, rtt: &rtt::Rtt, how: &str) -> Measurement {
    Measurement {
        key: key.to_owned(),
        label: label.to_owned(),
        value: rtt.mean_us,
        unit: Unit::MeanRttUs,
        detail: format!("{how}; {}", rtt.detail()),
        baseline: Some("raw_udp_pingpong".into()),
        paired: None,
        fields: rtt.fields(),
    }
}
