//! Registration + deregistration cycles per second, normal regions (`reg_mr_raw` + `dereg`)
//! against relaxed ones (`reg_mr_relaxed_raw` + `dereg_relaxed`, with `flush_relaxed_mr` every
//! `FLUSH_EVERY` cycles, its cost included), for 4 KiB and 1 MiB regions, on one device over
//! the in-memory fabric (no I/O: registration is all that is measured). Each size runs twice:
//! registering one buffer over and over (relaxed registration takes its marked region back),
//! and `FLUSH_EVERY` buffers in turn (it never can). A normal registration checks and faults
//! in every page (`madvise(MADV_POPULATE_*)`, provider `mr/pages.rs`), so its cost grows with
//! the size, as `ibv_reg_mr`'s pinning does.
//!
//! `cargo bench -p softrnic-uapi --bench regbench` (about 2 s). Without `--bench` (as
//! `cargo test --all-targets` runs it) it does a few cycles of each and prints nothing.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{Access, Context, OpenOptions, Pd, Progress};

const FLUSH_EVERY: usize = 256;
const ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// Cycles per second of `cycle` over `time` (checked every 1024 cycles), or `n` cycles.
fn rate(time: Option<Duration>, mut cycle: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    let mut n = 0;
    loop {
        for _ in 0..1024 {
            cycle(n);
            n += 1;
        }
        match time {
            Some(t) if start.elapsed() < t => {}
            _ => break,
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Which buffer each cycle registers.
#[derive(Clone, Copy)]
enum Reuse {
    /// The same buffer every cycle: a relaxed registration takes the region its last cycle
    /// marked back (until a flush), as the FMR cache of Solaris relaxed regions did.
    Same,
    /// `FLUSH_EVERY` buffers in turn, one flush per turn: no relaxed registration ever finds
    /// its pages marked, so every one takes a new key and checks its pages as a normal one.
    NoneBeforeFlush,
}

impl Reuse {
    fn buffers(self) -> usize {
        match self {
            Reuse::Same => 1,
            Reuse::NoneBeforeFlush => FLUSH_EVERY,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Reuse::Same => "same buffer",
            Reuse::NoneBeforeFlush => "no reuse",
        }
    }
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    let time = timed.then_some(Duration::from_millis(400));
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let addr = IpAddr::V4(Ipv4Addr::new(10, 0, 18, 1));
    let opts = OpenOptions {
        progress: Progress::Polling,
        key_seed: 1,
    };
    let ctx = Context::open_on(Box::new(fabric.attach(addr).expect("attach")), opts)
        .expect("open the device");
    for size in [4096usize, 1 << 20] {
        for reuse in [Reuse::Same, Reuse::NoneBeforeFlush] {
            let (normal, relaxed) = compare(&ctx, time, size, reuse);
            if timed {
                println!(
                    "{:>5} KiB, {:<11}: normal {:>11.0} reg+dereg/s   relaxed {:>11.0} reg+dereg_relaxed/s (flush every {FLUSH_EVERY})   ratio {:.2}x",
                    size / 1024,
                    reuse.name(),
                    normal,
                    relaxed,
                    relaxed / normal
                );
            }
        }
    }
    threads(&ctx, time, timed);
}

/// Normal and relaxed cycles per second over `reuse.buffers()` buffers of `size` bytes.
fn compare(ctx: &Context, time: Option<Duration>, size: usize, reuse: Reuse) -> (f64, f64) {
    let layout = Layout::from_size_align(size, 4096).expect("layout");
    let bufs: Vec<*mut u8> = (0..reuse.buffers())
        .map(|_| {
            // SAFETY: non-zero size.
            let buf = unsafe { alloc_zeroed(layout) };
            assert!(!buf.is_null());
            buf
        })
        .collect();
    let normal = {
        let pd = ctx.alloc_pd();
        rate(time, |n| {
            let buf = bufs[n % bufs.len()];
            // SAFETY: `buf` outlives the region (deregistered in the same cycle).
            let mr = unsafe { pd.reg_mr_raw(buf, size, ACCESS) }.expect("reg_mr");
            black_box(mr.rkey());
            mr.dereg().map_err(|(_, e)| e).expect("dereg_mr");
        })
    };
    let relaxed = {
        let pd: Pd = ctx.alloc_pd();
        let r = rate(time, |n| {
            let buf = bufs[n % bufs.len()];
            // SAFETY: `buf` outlives the flush below, which covers every region.
            let mr = unsafe { pd.reg_mr_relaxed_raw(buf, size, ACCESS) }.expect("reg_mr_relaxed");
            black_box(mr.rkey());
            mr.dereg_relaxed()
                .map_err(|(_, e)| e)
                .expect("dereg_mr_relaxed");
            if n % FLUSH_EVERY == FLUSH_EVERY - 1 {
                pd.flush_relaxed_mr();
            }
        });
        pd.flush_relaxed_mr();
        r
    };
    for buf in bufs {
        // SAFETY: allocated above with this layout; every region over it is gone or flushed.
        unsafe { dealloc(buf, layout) };
    }
    (normal, relaxed)
}

/// The same 4 KiB cycles from two threads at once, each with its own PD and buffer: normal
/// registration shares the table's free list, relaxed registration takes keys from each PD's
/// own pool.
fn threads(ctx: &Context, time: Option<Duration>, timed: bool) {
    const SIZE: usize = 4096;
    let run = |relaxed: bool| -> f64 {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let pd = ctx.alloc_pd();
                    s.spawn(move || {
                        let layout = Layout::from_size_align(SIZE, 4096).expect("layout");
                        // SAFETY: non-zero size.
                        let buf = unsafe { alloc_zeroed(layout) };
                        assert!(!buf.is_null());
                        let r = rate(time, |n| {
                            if relaxed {
                                // SAFETY: `buf` outlives the flushes below.
                                let mr = unsafe { pd.reg_mr_relaxed_raw(buf, SIZE, ACCESS) }
                                    .expect("reg_mr_relaxed");
                                black_box(mr.rkey());
                                mr.dereg_relaxed().map_err(|(_, e)| e).expect("dereg");
                                if n % FLUSH_EVERY == FLUSH_EVERY - 1 {
                                    pd.flush_relaxed_mr();
                                }
                            } else {
                                // SAFETY: `buf` outlives the region.
                                let mr =
                                    unsafe { pd.reg_mr_raw(buf, SIZE, ACCESS) }.expect("reg_mr");
                                black_box(mr.rkey());
                                mr.dereg().map_err(|(_, e)| e).expect("dereg");
                            }
                        });
                        pd.flush_relaxed_mr();
                        // SAFETY: allocated above; every region over it is gone or flushed.
                        unsafe { dealloc(buf, layout) };
                        r
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).sum()
        })
    };
    let (normal, relaxed) = (run(false), run(true));
    if timed {
        println!(
            "    4 KiB, 2 threads: normal {normal:>12.0} reg+dereg/s   relaxed {relaxed:>12.0} reg+dereg_relaxed/s   ratio {:.2}x",
            relaxed / normal
        );
    }
}
