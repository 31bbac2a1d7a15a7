//! What the key table's data path costs per access: a peer's RDMA WRITE placed into a
//! region (`with_remote_write`, the responder's path) and a local read out of one
//! (`with_local_read`), for 64 B, 4 KiB and 64 KiB, the check and lock included. The figure
//! to compare when the way the table reaches memory changes (`mr/bytes.rs`).
//!
//! `cargo bench -p softrnic-provider --bench mr_copy` (about 2 s). Without `--bench` (as
//! `cargo test --all-targets` runs it) it does a few accesses and prints nothing.

use std::hint::black_box;
use std::time::Instant;

use softrnic_provider::mr::{Access, MrTable, PdHandle};

const PD: PdHandle = PdHandle(1);
const LEN: usize = 1 << 20;

/// Nanoseconds per call of `f`, over `n` calls.
fn ns_per(n: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    (0..n).for_each(|_| f());
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    // About 0.3 s per figure at 64 KiB, less below.
    let calls = |size: usize| {
        if timed {
            (1 << 30) / (size as u32 + 4096)
        } else {
            16
        }
    };
    let t = MrTable::new(16, 1).unwrap();
    let mut region = vec![0u8; LEN];
    let va = region.as_mut_ptr() as u64;
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    // SAFETY: `region` outlives `t`, and nothing else holds a reference into it meanwhile.
    let k = unsafe { t.register(PD, region.as_mut_ptr(), LEN, va, access) }.unwrap();
    let src = vec![0x5au8; 64 << 10];
    let mut dst = vec![0u8; 64 << 10];
    for size in [64, 4096, 64 << 10] {
        let write = ns_per(calls(size), || {
            t.with_remote_write(k.rkey, PD, 1, va + 4096, size, |mut m| {
                m.copy_from(black_box(&src[..size]))
            })
            .unwrap()
        });
        let read = ns_per(calls(size), || {
            t.with_local_read(k.lkey, PD, va + 4096, size, |b| {
                b.copy_to(black_box(&mut dst[..size]))
            })
            .unwrap()
        });
        if timed {
            println!("{size:>6} B: remote write {write:8.1} ns, local read {read:8.1} ns");
        }
    }
    drop(t);
    black_box(&region);
}
