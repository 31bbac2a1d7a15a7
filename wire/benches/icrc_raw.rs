//! What reading the ICRC's bytes through a raw pointer costs (`Icrc::update_raw`, IBTA
//! A17.4.2) against `crc32fast` over a slice of the same bytes, for payloads of 64 B, 1 KiB,
//! 4 KiB and 64 KiB. The two alternate in the same run, each round timing a batch of each, so
//! that frequency changes and neighbours on the machine weigh on both alike; the figures are
//! medians over the rounds, and the ratio is `update_raw`'s throughput over `crc32fast`'s.
//!
//! `cargo bench -p softrnic-wire --bench icrc_raw` (a few seconds). Without `--bench` (as
//! `cargo test --all-targets` runs it) it does a few rounds and prints nothing.

use std::hint::black_box;
use std::time::Instant;

use softrnic_wire::icrc::Icrc;

const SIZES: [usize; 4] = [64, 1024, 4096, 65536];

/// Bytes hashed per timed batch: enough that the clock's resolution does not matter.
const BATCH_BYTES: usize = 1 << 20;

fn raw_batch(buf: &[u8], reps: usize) -> u32 {
    let mut masked = [0u8; 12];
    let mut icrc = Icrc::start_masked(&mut masked, 0).expect("12 bytes hold a BTH");
    for _ in 0..reps {
        // SAFETY: a slice is valid for reads.
        unsafe { icrc.update_raw(black_box(buf.as_ptr()), black_box(buf.len())) };
    }
    icrc.finish()
}

fn crc32fast_batch(buf: &[u8], reps: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for _ in 0..reps {
        h.update(black_box(buf));
    }
    h.finalize()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let rounds = if bench { 101 } else { 3 };
    // Offset by 1 from the allocation: the payload of a packet is seldom aligned.
    let store: Vec<u8> = (0..SIZES[3] + 1).map(|i| (i * 131 + 7) as u8).collect();
    if bench {
        println!("size      update_raw GB/s   crc32fast GB/s   ratio");
    }
    for &size in &SIZES {
        let buf = &store[1..1 + size];
        let reps = (BATCH_BYTES / size).max(1);
        assert_eq!(raw_batch(buf, 1), {
            let mut h = crc32fast::Hasher::new();
            // The BTH of zeros with its masked byte set, as `start_masked` checksums it.
            h.update(&[0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0][..]);
            h.update(buf);
            h.finalize()
        });
        let (mut raw, mut fast) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            black_box(raw_batch(buf, reps));
            raw.push((reps * size) as f64 / t.elapsed().as_secs_f64() / 1e9);
            let t = Instant::now();
            black_box(crc32fast_batch(buf, reps));
            fast.push((reps * size) as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        let (r, f) = (median(&mut raw), median(&mut fast));
        if bench {
            println!("{size:>6} B  {r:>15.1}   {f:>14.1}   {:>5.2}x", r / f);
        }
    }
}
