//! The raw-pointer CRC-32 (`raw.rs`, `clmul.rs`) against `crc32fast`: every length to 300 at
//! every alignment in a cache line, random lengths to 70 000, from random states, each way of
//! computing it forced in turn.

use super::raw::{self, Kernel};
use super::Icrc;

/// A deterministic generator (xorshift64*), enough for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

fn reference(crc: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(bytes);
    h.finalize()
}

/// One way of computing the CRC: `None` if this CPU lacks what it needs.
type Way = unsafe fn(u32, *const u8, usize) -> u32;

fn way(k: Kernel) -> Option<Way> {
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512(crc: u32, p: *const u8, len: usize) -> u32 {
        unsafe { !super::clmul::avx512(!crc, p, len) }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn pclmul(crc: u32, p: *const u8, len: usize) -> u32 {
        unsafe { !super::clmul::pclmul(!crc, p, len) }
    }
    match k {
        Kernel::Portable => Some(raw::portable),
        #[cfg(target_arch = "x86_64")]
        Kernel::Pclmul
            if is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("sse4.1") =>
        {
            Some(pclmul)
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("vpclmulqdq")
                && is_x86_feature_detected!("pclmulqdq")
                && is_x86_feature_detected!("sse4.1") =>
        {
            Some(avx512)
        }
        _ => {
            println!("skipped: this CPU cannot compute the CRC the {k:?} way");
            None
        }
    }
}

const WAYS: [Kernel; 3] = [Kernel::Portable, Kernel::Pclmul, Kernel::Avx512];

/// Way `k` (`f`) from `state` over `buf[align..align + len]` gives crc32fast's CRC.
fn check(k: Kernel, f: Way, state: u32, buf: &[u8], align: usize, len: usize) {
    let bytes = &buf[align..align + len];
    // SAFETY: a slice is valid for reads.
    let got = unsafe { f(state, bytes.as_ptr(), len) };
    assert_eq!(
        got,
        reference(state, bytes),
        "{k:?} len {len} align {align}"
    );
}

#[test]
fn every_length_to_300_at_every_alignment() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut buf = vec![0u8; 64 + 300];
    rng.fill(&mut buf);
    for k in WAYS {
        let Some(f) = way(k) else { continue };
        for align in 0..64 {
            for len in 0..=300 {
                check(k, f, rng.next() as u32, &buf, align, len);
            }
        }
    }
}

#[test]
fn random_lengths_to_70000_from_random_states() {
    let mut rng = Rng(0x0bad_cafe_f00d_d00d);
    let mut buf = vec![0u8; 64 + 70_000];
    rng.fill(&mut buf);
    for k in WAYS {
        let Some(f) = way(k) else { continue };
        for _ in 0..60 {
            let (align, len) = (rng.below(64), rng.below(70_001));
            check(k, f, rng.next() as u32, &buf, align, len);
        }
    }
}

#[test]
fn lengths_around_the_strides() {
    let mut rng = Rng(7);
    let mut buf = vec![0u8; 4200];
    rng.fill(&mut buf);
    for k in WAYS {
        let Some(f) = way(k) else { continue };
        for base in [512, 1024, 2048, 4096] {
            for len in base - 20..=base + 20 {
                let bytes = &buf[3..3 + len];
                // SAFETY: a slice is valid for reads.
                let got = unsafe { f(0xffff_ffff, bytes.as_ptr(), len) };
                assert_eq!(got, reference(0xffff_ffff, bytes), "{k:?} len {len}");
            }
        }
    }
}

#[test]
fn the_detected_way_is_one_this_cpu_has() {
    assert!(way(raw::kernel()).is_some());
    assert_eq!(raw::kernel(), raw::kernel());
}

#[test]
fn slices_and_pointers_mix_on_one_icrc() {
    let mut rng = Rng(99);
    let mut buf = vec![0u8; 10_000];
    rng.fill(&mut buf);
    let mut masked = [0u8; 12];
    for _ in 0..50 {
        let mut icrc = Icrc::start_masked(&mut masked, 0).unwrap();
        let mut whole = Icrc::start_masked(&mut masked, 0).unwrap();
        let mut at = 0;
        while at < buf.len() {
            let n = rng.below(700).min(buf.len() - at);
            let piece = &buf[at..at + n];
            if rng.next() & 1 == 0 {
                icrc.update(piece);
            } else {
                // SAFETY: a slice is valid for reads.
                unsafe { icrc.update_raw(piece.as_ptr(), n) };
            }
            at += n;
        }
        whole.update(&buf);
        assert_eq!(icrc.finish(), whole.finish());
    }
}

#[test]
fn a_check_value() {
    // The CRC-32 check value: of "123456789", from the fresh state.
    for k in WAYS {
        let Some(f) = way(k) else { continue };
        // SAFETY: a slice is valid for reads.
        let got = unsafe { f(0, b"123456789".as_ptr(), 9) };
        assert_eq!(got, 0xCBF4_3926, "{k:?}");
    }
    let long = [0x5au8; 1000];
    let mut icrc = Icrc { crc: 0 };
    // SAFETY: an array is valid for reads.
    unsafe { icrc.update_raw(long.as_ptr(), long.len()) };
    assert_eq!(icrc.finish(), crc32fast::hash(&long));
}

#[test]
#[cfg(target_arch = "x86_64")]
fn the_folding_constants_are_powers_of_x() {
    // x^31 is bit 0 of the reflected form; x^32 mod P is the polynomial without its top
    // term.
    assert_eq!(super::clmul::fold(64)[1], 1);
    assert_eq!(super::clmul::fold(65)[1], 0xEDB8_8320);
    // x^(128+31) and x^(128-33), as products of smaller powers (ident.rs's mul_mod).
    let [h, l] = super::clmul::fold(128);
    let x = |n: usize| super::ident::power(1 << 30, n);
    assert_eq!(h as u32, super::ident::mul_mod(x(100), x(59)));
    assert_eq!(l as u32, super::ident::mul_mod(x(40), x(55)));
    assert_eq!(super::clmul::KRED, [x(95) as u64, x(63) as u64]);
}
