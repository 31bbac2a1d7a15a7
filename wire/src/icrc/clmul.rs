//! CRC-32 by carry-less multiplication on x86_64 (Intel, "Fast CRC Computation for Generic
//! Polynomials Using PCLMULQDQ Instruction", 2009): the folding the ICRC of IBTA A17.4.2 is
//! computed with, reading the bytes through a raw pointer (`raw.rs` says why).
//!
//! # The arithmetic
//!
//! A message is a polynomial over GF(2), and its raw CRC (no initial value, no final xor) is
//! `M(x) * x^32 mod P(x)`. In the reflected bit order of this CRC a 128-bit little-endian
//! register holds the polynomial whose `x^(127 - k)` coefficient is bit `k`: its first 8 bytes
//! (the low quadword) are the high half `H`, its last 8 the low half `L`, `X = H x^64 + L`.
//!
//! *Folding.* A register `X` followed by `D` more bits of message stands for `X x^D`, and
//! `X x^D = H x^(D+64) + L x^D ≡ H (x^(D+64) mod P) + L (x^D mod P)`, a polynomial below
//! degree 128 again, which is xored onto the block `D` bits on. PCLMULQDQ multiplies two
//! quadwords; with a constant `T` of degree below 32 in the low 32 bits of the other (bit `j`
//! the coefficient of `x^(31-j)`), the reflected product is `H T x^33` in the register's
//! terms. So the constants are `x^(D+31) mod P` for `H` and `x^(D-33) mod P` for `L`,
//! computed below at compile time ([`fold`]).
//!
//! *Reduction.* The last register `X` stands for the whole message. Splitting `H` into its
//! high and low 32 bits, `X ≡ H1 (x^96 mod P) + H0 (x^64 mod P) + L =: W`, below degree 64
//! (two 32-by-32-bit products, whose reflected value in a quadword is `H1 T x`: constants
//! `x^95` and `x^63`). The raw CRC of `X` is that of the 8-byte message `W`: eight table
//! lookups (`raw.rs`).
//!
//! The register enters the first block as the CRC does (xored onto its first 4 bytes), and
//! bytes after the last whole block are fed by table ([`super::raw::tail`]).

use core::arch::x86_64::*;

use super::raw::{raw8, tail, POLY};

/// `x^n mod P`, reflected: bit `31 - k` is the coefficient of `x^k`.
const fn xpow(n: u32) -> u32 {
    let mut p: u32 = 1 << 31;
    let mut i = 0;
    while i < n {
        p = (p >> 1) ^ (POLY & (p & 1).wrapping_neg());
        i += 1;
    }
    p
}

/// The constants that fold a register `d` bits on: for its low quadword (`H`), then for its
/// high one (`L`).
pub(super) const fn fold(d: u32) -> [u64; 2] {
    [xpow(d + 31) as u64, xpow(d - 33) as u64]
}

const K128: [u64; 2] = fold(128);
const K256: [u64; 2] = fold(256);
const K384: [u64; 2] = fold(384);
const K512: [u64; 2] = fold(512);
const K1024: [u64; 2] = fold(1024);
const K1536: [u64; 2] = fold(1536);
const K2048: [u64; 2] = fold(2048);
/// For the reduction: `x^95` (for `H1`) and `x^63` (for `H0`).
pub(super) const KRED: [u64; 2] = [xpow(95) as u64, xpow(63) as u64];

#[inline(always)]
fn k128(k: [u64; 2]) -> __m128i {
    // `_mm_set_epi64x` takes the high quadword first.
    unsafe { _mm_set_epi64x(k[1] as i64, k[0] as i64) }
}

/// `X` folded by the constants `k`.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1")]
fn fold16(x: __m128i, k: __m128i) -> __m128i {
    _mm_xor_si128(
        _mm_clmulepi64_si128::<0x00>(x, k),
        _mm_clmulepi64_si128::<0x11>(x, k),
    )
}

/// Reads 16 bytes at `p`.
///
/// # Safety
/// They must be valid for reads.
#[inline]
#[target_feature(enable = "sse4.1")]
unsafe fn load16(p: *const u8) -> __m128i {
    // SAFETY: the caller's contract; the load takes any alignment.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// The raw CRC register `reg` continued over `len` bytes at `p`, 16 bytes at a time with
/// PCLMULQDQ (four registers in flight over 64-byte strides).
///
/// # Safety
/// `p..p + len` must be valid for reads; the CPU must have PCLMULQDQ and SSE4.1.
#[target_feature(enable = "pclmulqdq,sse4.1")]
pub(super) unsafe fn pclmul(reg: u32, mut p: *const u8, mut len: usize) -> u32 {
    if len < 16 {
        // SAFETY: the caller's contract.
        return unsafe { tail(reg, p, len) };
    }
    // SAFETY (every load and step of `p` below): `len` readable bytes remain at `p`, and a
    // load takes 16 of them only while at least 16 remain.
    let mut x = _mm_xor_si128(unsafe { load16(p) }, _mm_cvtsi32_si128(reg as i32));
    p = unsafe { p.add(16) };
    len -= 16;
    if len >= 48 {
        let mut r = [
            x,
            unsafe { load16(p) },
            unsafe { load16(p.add(16)) },
            unsafe { load16(p.add(32)) },
        ];
        p = unsafe { p.add(48) };
        len -= 48;
        let k = k128(K512);
        while len >= 64 {
            for (i, r) in r.iter_mut().enumerate() {
                *r = _mm_xor_si128(fold16(*r, k), unsafe { load16(p.add(16 * i)) });
            }
            p = unsafe { p.add(64) };
            len -= 64;
        }
        x = _mm_xor_si128(
            _mm_xor_si128(fold16(r[0], k128(K384)), fold16(r[1], k128(K256))),
            _mm_xor_si128(fold16(r[2], k128(K128)), r[3]),
        );
    }
    // SAFETY: `len` readable bytes remain at `p`.
    unsafe { finish(x, p, len) }
}

/// Folds the register `x` over the 16-byte blocks of the `len` bytes at `p`, reduces it and
/// feeds the bytes after the last block; returns the raw CRC register.
///
/// # Safety
/// `p..p + len` must be valid for reads; the CPU must have PCLMULQDQ and SSE4.1.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1")]
unsafe fn finish(mut x: __m128i, mut p: *const u8, mut len: usize) -> u32 {
    let k = k128(K128);
    while len >= 16 {
        // SAFETY: 16 of the `len` readable bytes.
        x = _mm_xor_si128(fold16(x, k), unsafe { load16(p) });
        p = unsafe { p.add(16) };
        len -= 16;
    }
    // X = H1 x^96 + H0 x^64 + L ≡ W (module comment).
    let kred = k128(KRED);
    let h1 = _mm_and_si128(x, _mm_set_epi64x(0, 0xffff_ffff));
    let h0 = _mm_srli_epi64::<32>(x);
    let w = _mm_xor_si128(
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(h1, kred),
            _mm_clmulepi64_si128::<0x10>(h0, kred),
        ),
        _mm_srli_si128::<8>(x),
    );
    let reg = raw8(_mm_cvtsi128_si64(w) as u64);
    // SAFETY: the `len` readable bytes left.
    unsafe { tail(reg, p, len) }
}

/// Reads 64 bytes at `p`.
///
/// # Safety
/// They must be valid for reads.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load64(p: *const u8) -> __m512i {
    // SAFETY: the caller's contract; the load takes any alignment.
    unsafe { _mm512_loadu_si512(p.cast()) }
}

/// `Z` (four 128-bit registers) folded by the constants `k` (in every lane), xored onto
/// `next`.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold64(z: __m512i, k: __m512i, next: __m512i) -> __m512i {
    _mm512_ternarylogic_epi64::<0x96>(
        _mm512_clmulepi64_epi128::<0x00>(z, k),
        _mm512_clmulepi64_epi128::<0x11>(z, k),
        next,
    )
}

#[inline]
#[target_feature(enable = "avx512f")]
fn k512(k: [u64; 2]) -> __m512i {
    _mm512_broadcast_i32x4(k128(k))
}

/// The raw CRC register `reg` continued over `len` bytes at `p`, 64 bytes at a time with
/// VPCLMULQDQ (four 512-bit registers in flight over 256-byte strides), from 256 bytes on.
///
/// # Safety
/// `p..p + len` must be valid for reads; the CPU must have AVX-512 (F, VL), VPCLMULQDQ,
/// PCLMULQDQ and SSE4.1.
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.1")]
pub(super) unsafe fn avx512(reg: u32, mut p: *const u8, mut len: usize) -> u32 {
    if len < 256 {
        // Too short for the four wide registers: what setting them up and merging their
        // lanes costs in latency, 128-bit folding does not (64 bytes: about 1.6 times as fast).
        // SAFETY: the caller's contract, and this CPU has what `pclmul` needs.
        return unsafe { pclmul(reg, p, len) };
    }
    // SAFETY (every load and step of `p` below): `len` readable bytes remain at `p`, and a
    // load takes 64 of them only while at least 64 remain.
    let first = _mm512_zextsi128_si512(_mm_cvtsi32_si128(reg as i32));
    let mut r = [
        _mm512_xor_si512(unsafe { load64(p) }, first),
        unsafe { load64(p.add(64)) },
        unsafe { load64(p.add(128)) },
        unsafe { load64(p.add(192)) },
    ];
    p = unsafe { p.add(256) };
    len -= 256;
    let k = k512(K2048);
    while len >= 256 {
        for (i, r) in r.iter_mut().enumerate() {
            *r = fold64(*r, k, unsafe { load64(p.add(64 * i)) });
        }
        p = unsafe { p.add(256) };
        len -= 256;
    }
    let a = fold64(r[0], k512(K1536), r[3]);
    let b = fold64(r[1], k512(K1024), _mm512_setzero_si512());
    let mut z = fold64(r[2], k512(K512), _mm512_xor_si512(a, b));
    let k = k512(K512);
    while len >= 64 {
        z = fold64(z, k, unsafe { load64(p) });
        p = unsafe { p.add(64) };
        len -= 64;
    }
    // The four 128-bit registers of `z` into one: each folded to the last one's place.
    let x = _mm_xor_si128(
        _mm_xor_si128(
            fold16(_mm512_extracti32x4_epi32::<0>(z), k128(K384)),
            fold16(_mm512_extracti32x4_epi32::<1>(z), k128(K256)),
        ),
        _mm_xor_si128(
            fold16(_mm512_extracti32x4_epi32::<2>(z), k128(K128)),
            _mm512_extracti32x4_epi32::<3>(z),
        ),
    );
    // SAFETY: `len` readable bytes remain at `p`.
    unsafe { finish(x, p, len) }
}
