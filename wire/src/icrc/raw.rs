//! CRC-32 over bytes reached through a raw pointer: the ICRC of RoCEv2 (IBTA A17.4.2) over a
//! payload that stays in registered memory.
//!
//! The ICRC is the CRC-32 of IEEE 802.3 (polynomial `0x04C11DB7`, reflected, initial value
//! and final xor all ones), as `crc32fast` computes it. A sender checksums the payload where
//! the application registered it, and the application may write those bytes meanwhile (a
//! buffer reused before its completion, or one a peer's RDMA WRITE fills). A `&[u8]` over
//! them would assert that nothing changes them while it lives, which is then false: undefined
//! behaviour in Rust's model, whether or not the optimiser exploits it. So the bytes are read
//! here only by loads through the raw pointer (vector loads, `ptr::read_unaligned`, or
//! `ptr::copy_nonoverlapping` into a buffer of our own), never through a reference; what a
//! racing write does to the value is unspecified, as with a NIC's DMA engine.
//!
//! Three ways to compute it, chosen once per process from what the CPU has:
//!
//! * carry-less multiplication (`clmul.rs`): PCLMULQDQ over 16-byte blocks, or VPCLMULQDQ
//!   with AVX-512 over 64-byte ones, reading straight from the pointer;
//! * anywhere else, copies of at most [`CHUNK`] bytes into a buffer on the stack, each fed
//!   to `crc32fast`.
//!
//! The state between calls is the CRC value so far (what `crc32fast::Hasher::finalize` would
//! return), so the pieces of one packet can come from slices and pointers alike.

use core::mem::MaybeUninit;
use core::ptr;
use std::sync::OnceLock;

/// The reflected polynomial: bit `31 - k` is the coefficient of `x^k` (`x^32` implied).
pub(super) const POLY: u32 = 0xEDB8_8320;

/// The most bytes the portable way copies at once.
pub(super) const CHUNK: usize = 4096;

/// How the CRC is computed on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernel {
    /// Copies fed to `crc32fast`.
    Portable,
    /// PCLMULQDQ and SSE4.1.
    Pclmul,
    /// VPCLMULQDQ and AVX-512 (F, VL), with PCLMULQDQ and SSE4.1.
    Avx512,
}

/// The kernel for this CPU, asked of it once.
pub(super) fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Kernel {
    if !(is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("sse4.1")) {
        Kernel::Portable
    } else if is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("vpclmulqdq")
    {
        Kernel::Avx512
    } else {
        Kernel::Pclmul
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Kernel {
    Kernel::Portable
}

/// The CRC `crc` continued over `len` bytes at `ptr`.
///
/// # Safety
/// `ptr..ptr + len` must be valid for reads (see [`crate::icrc::Icrc::update_raw`]).
pub(super) unsafe fn update(crc: u32, ptr: *const u8, len: usize) -> u32 {
    // SAFETY (all arms): the caller's contract; the kernel's features were detected.
    match kernel() {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => unsafe { !super::clmul::avx512(!crc, ptr, len) },
        #[cfg(target_arch = "x86_64")]
        Kernel::Pclmul => unsafe { !super::clmul::pclmul(!crc, ptr, len) },
        _ => unsafe { portable(crc, ptr, len) },
    }
}

/// The CRC `crc` continued over `bytes`: as [`update`], but the portable way needs no copy.
pub(super) fn update_slice(crc: u32, bytes: &[u8]) -> u32 {
    if kernel() == Kernel::Portable {
        let mut h = crc32fast::Hasher::new_with_initial(crc);
        h.update(bytes);
        h.finalize()
    } else {
        // SAFETY: a slice is valid for reads of its length.
        unsafe { update(crc, bytes.as_ptr(), bytes.len()) }
    }
}

/// The portable way: `len` bytes at `ptr` copied [`CHUNK`] at a time into a buffer on the
/// stack, and fed to `crc32fast` from there.
///
/// # Safety
/// `ptr..ptr + len` must be valid for reads.
pub(super) unsafe fn portable(crc: u32, mut ptr: *const u8, mut len: usize) -> u32 {
    let mut buf = MaybeUninit::<[u8; CHUNK]>::uninit();
    let at = buf.as_mut_ptr().cast::<u8>();
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    while len > 0 {
        let n = len.min(CHUNK);
        // SAFETY: `n` bytes at `ptr` are readable (the contract) and `buf` holds `CHUNK`, its
        // own: no overlap. The slice covers only the `n` bytes the copy initialised.
        unsafe {
            ptr::copy_nonoverlapping(ptr, at, n);
            h.update(core::slice::from_raw_parts(at, n));
            ptr = ptr.add(n);
        }
        len -= n;
    }
    h.finalize()
}

/// `TABLES[k][b]`: the raw CRC (no initial value, no final xor) of byte `b` followed by `k`
/// zero bytes: slicing by 8, for what the carry-less kernels leave (under 16 bytes, and
/// their last 64-bit remainder).
static TABLES: [[u32; 256]; 8] = tables();

const fn tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut k = 0;
        while k < 8 {
            c = (c >> 1) ^ (POLY & (c & 1).wrapping_neg());
            k += 1;
        }
        t[0][b] = c;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// The raw CRC of the 8 bytes of `w` (least significant first): the 64-bit message's
/// polynomial times `x^32`, modulo the polynomial.
#[inline]
pub(super) fn raw8(w: u64) -> u32 {
    let b = w.to_le_bytes();
    TABLES[7][b[0] as usize]
        ^ TABLES[6][b[1] as usize]
        ^ TABLES[5][b[2] as usize]
        ^ TABLES[4][b[3] as usize]
        ^ TABLES[3][b[4] as usize]
        ^ TABLES[2][b[5] as usize]
        ^ TABLES[1][b[6] as usize]
        ^ TABLES[0][b[7] as usize]
}

/// The raw CRC register `reg` continued over `len` bytes at `ptr` by table lookups, 8 bytes
/// at a time then one (for short pieces and the carry-less kernels' last bytes).
///
/// # Safety
/// `ptr..ptr + len` must be valid for reads.
#[inline]
pub(super) unsafe fn tail(mut reg: u32, mut ptr: *const u8, mut len: usize) -> u32 {
    while len >= 8 {
        // SAFETY: 8 readable bytes at `ptr` (the contract), read at any alignment.
        let w = u64::from_le_bytes(unsafe { ptr::read_unaligned(ptr.cast::<[u8; 8]>()) });
        reg = raw8(w ^ reg as u64);
        // SAFETY: within the readable range, or one past it.
        ptr = unsafe { ptr.add(8) };
        len -= 8;
    }
    while len > 0 {
        // SAFETY: as above, one byte.
        let b = unsafe { ptr::read(ptr) };
        reg = (reg >> 8) ^ TABLES[0][((reg ^ b as u32) & 0xff) as usize];
        ptr = unsafe { ptr.add(1) };
        len -= 1;
    }
    reg
}
