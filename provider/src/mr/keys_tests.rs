//! Guessing keys: the brute force that found a live R_Key of the old layout, and the number
//! of guesses the layout of `keys.rs` asks for, measured.

use super::*;
use crate::device::Limits;

const PD: PdHandle = PdHandle(1);
const QPN: u32 = 0x11;
const WRITABLE: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

/// Registers `buf` for remote writes, iova = its address.
fn reg(t: &MrTable, buf: &mut [u8]) -> MrKeys {
    // SAFETY: every test keeps its buffer alive until after the table is dropped.
    unsafe {
        t.register(
            PD,
            buf.as_mut_ptr(),
            buf.len(),
            buf.as_ptr() as u64,
            WRITABLE,
        )
    }
    .unwrap()
}

/// Whether a peer's RDMA WRITE of one byte at `va` through `rkey` would land: the
/// responder's own check (`with_remote_write`), on the QP's PD.
fn lands(t: &MrTable, rkey: u32, va: u64) -> bool {
    t.with_remote_write(rkey, PD, QPN, va, 1, |_| ()).is_ok()
}

/// The old layout (`index << 8 | key byte`, indices handed out from 1) fell to every key
/// byte of the first indices: 7 x 256 guesses. Against seven live REMOTE_WRITE regions of a
/// device-sized table, with the peer's PD and QP right, none of those guesses lands, for
/// every seed tried.
#[test]
fn the_old_brute_force_over_indices_and_key_bytes_finds_nothing() {
    let mut bufs = vec![[0u8; 64]; 7];
    for seed in 0..8 {
        let t = MrTable::new(Limits::MAX_MR as u32, seed).unwrap();
        let live: Vec<(u32, u64)> = bufs
            .iter_mut()
            .map(|b| (reg(&t, b).rkey, b.as_ptr() as u64))
            .collect();
        for &(rkey, va) in &live {
            assert!(lands(&t, rkey, va), "the region itself is reachable");
        }
        for index in 1..=7u32 {
            for byte in 0..=0xffu32 {
                let guess = index << 8 | byte;
                for &(_, va) in &live {
                    assert!(!lands(&t, guess, va), "seed {seed}: {guess:#x} landed");
                }
            }
        }
    }
}

/// The strongest guesser short of the seed knows the layout and the index of a live region
/// (its own earlier key at that index, say) and tries every value of the other bits in a
/// random order. Under 16 index bits the expected number of guesses is (2^16 + 1) / 2:
/// measured over 64 regions, the mean falls within 4 standard errors of it.
#[test]
fn guessing_a_known_index_takes_half_the_free_bits_space() {
    let slots = Limits::MAX_MR as usize;
    let width = keys::free_bits(slots);
    assert_eq!(width, 16, "the layout this test measures");
    let space = 1u64 << width;
    let t = MrTable::new(slots as u32, 0xc0ffee).unwrap();
    let mut buf = [0u8; 8];
    let va = buf.as_ptr() as u64;
    // The guesser's order: a fixed random permutation of the free bits, from its own stream.
    let mut order: Vec<u32> = (0..space as u32).collect();
    let mut rng = chacha::Stream::new(chacha::key_of_seed(99), [0, 0, 1]);
    const TRIALS: u64 = 64;
    let mut total = 0u64;
    for _ in 0..TRIALS {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let k = reg(&t, &mut buf);
        let index = t.index_of(k.rkey);
        let guesses = order
            .iter()
            .position(|&v| lands(&t, keys::compose(index, v, slots), va))
            .expect("every value of the free bits was tried") as u64
            + 1;
        total += guesses;
        t.deregister(k.rkey).unwrap();
    }
    let mean = total as f64 / TRIALS as f64;
    let expected = (space as f64 + 1.0) / 2.0;
    // A uniform position in 1..=N: standard deviation N / sqrt(12).
    let standard_error = space as f64 / 12f64.sqrt() / (TRIALS as f64).sqrt();
    assert!(
        (mean - expected).abs() < 4.0 * standard_error,
        "mean {mean:.0} guesses, expected {expected:.0} ± {standard_error:.0}"
    );
}

/// Guessing without the index: against a full table (every index live, the guesser's best
/// case) a uniformly random 32-bit key lands with probability 2^-16, so the guesses until
/// one lands are geometric with mean 2^16. Measured over 48 hits.
#[test]
fn random_keys_against_a_full_table_land_once_in_2_to_the_16() {
    let slots = 1usize << 16;
    let t = MrTable::new(slots as u32, 5).unwrap();
    let mut buf = [0u8; 8];
    let va = buf.as_ptr() as u64;
    for _ in 0..slots {
        reg(&t, &mut buf);
    }
    let mut rng = chacha::Stream::new(chacha::key_of_seed(123), [0, 0, 2]);
    const HITS: u64 = 48;
    let mut guesses = 0u64;
    for _ in 0..HITS {
        loop {
            guesses += 1;
            if lands(&t, rng.next_u32(), va) {
                break;
            }
        }
    }
    let mean = guesses as f64 / HITS as f64;
    let expected = 65536.0;
    // Geometric: standard deviation about its mean.
    let standard_error = expected / (HITS as f64).sqrt();
    assert!(
        (mean - expected).abs() < 4.0 * standard_error,
        "mean {mean:.0} guesses, expected {expected:.0} ± {standard_error:.0}"
    );
}
