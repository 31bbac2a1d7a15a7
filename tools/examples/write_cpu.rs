//! RC RDMA WRITE throughput per CPU second on the loopback rig of `softrnic perf` (one thread
//! drives both devices): a figure a loaded machine moves less than wall-clock throughput.
//!
//! `cargo run --release -p softrnic-tools --example write_cpu -- [MSG_BYTES] [SECS]`

use std::time::Duration;

use softrnic_tools::demo::write_stream;
use softrnic_tools::rig::Rig;
use softrnic_uapi::RemoteAddr;

/// CPU time this thread has used (user and system).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let msg: usize = args.next().map_or(65536, |s| s.parse().expect("MSG_BYTES"));
    let secs: f64 = args.next().map_or(3.0, |s| s.parse().expect("SECS"));
    let rig = Rig::new(
        "127.0.0.1".parse().expect("literal"),
        "127.0.0.2".parse().expect("literal"),
        4 << 20,
        softrnic_uapi::Progress::Polling,
    )?;
    let remote = RemoteAddr {
        addr: rig.b.mr.addr(),
        rkey: rig.b.mr.rkey(),
    };
    // Warm-up: first packets, page faults.
    write_stream(&rig.a, remote, msg, Duration::from_millis(200))?;
    let cpu0 = thread_cpu();
    let (bytes, took) = write_stream(&rig.a, remote, msg, Duration::from_secs_f64(secs))?;
    let cpu = thread_cpu() - cpu0;
    println!(
        "{:.2} Gbit/s wall, {:.2} Gbit per CPU second ({:.3} s CPU of {:.3} s, {} bytes)",
        bytes as f64 * 8.0 / took.as_secs_f64() / 1e9,
        bytes as f64 * 8.0 / cpu.as_secs_f64() / 1e9,
        cpu.as_secs_f64(),
        took.as_secs_f64(),
        bytes
    );
    Ok(())
}
