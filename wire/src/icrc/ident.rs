//! The ICRC of an IPv4 packet whose Identification changes (IBTA A17.4.2: the ICRC covers the
//! IPv4 Identification field, which it does not mask).
//!
//! A sender that cannot know a packet's IP ID when it computes the ICRC (a connected UDP socket
//! numbers its datagrams from a value the kernel chose) can correct the ICRC afterwards without
//! reading the packet again, because a CRC is linear: for two messages of the same length,
//! `crc(a) ^ crc(b) = raw(a ^ b)`, where `raw` is the CRC without its initial value and final
//! xor. Two packets that differ only in their IDs differ by the 16 bits `from ^ to` followed by
//! `n` zero bytes (the rest of the covered packet), whose raw CRC is `raw(from ^ to) * x^(8n)`
//! modulo the CRC polynomial: a table lookup and one or two carry-less multiplications.

/// CRC-32 (IEEE 802.3) in reflected form: bit 31 holds the coefficient of x^0.
pub(super) const POLY: u32 = 0xEDB8_8320;

/// Bytes of an IPv4 header after the Identification field (a UDP socket's header has no
/// options), plus the UDP header, which the ICRC covers before the UDP payload.
const COVERED_AFTER_IDENT: usize = (20 - 6) + 8;

/// `a * b` modulo the CRC polynomial (reflected representation), a bit at a time: for the
/// tables, built at compile time.
pub(super) const fn mul_mod(a: u32, mut b: u32) -> u32 {
    let mut p = 0;
    let mut i = 0;
    while i < 32 {
        if a & (1 << (31 - i)) != 0 {
            p ^= b;
        }
        b = times_x(b);
        i += 1;
    }
    p
}

/// `b * x` modulo the polynomial.
const fn times_x(b: u32) -> u32 {
    (b >> 1) ^ (POLY & (b & 1).wrapping_neg())
}

/// `v * x^4` modulo the polynomial for `v` of degree below 4 (its bits 0..4): what shifting
/// four bits out of a reflected value brings back in.
static TIMES_X4: [u32; 16] = {
    let mut t = [0u32; 16];
    let mut v = 0;
    while v < 16 {
        let mut c = v as u32;
        let mut k = 0;
        while k < 4 {
            c = times_x(c);
            k += 1;
        }
        t[v] = c;
        v += 1;
    }
    t
};

/// [`mul_mod`] for a receiver's every packet (`solve.rs`), four bits of `a` at a time: `b`'s
/// 16 multiples of degree below 4, then eight Horner steps of a table lookup and two xors
/// (the bit loop's 32 dependent steps cost about three times as much).
pub(super) fn mul_mod_fast(a: u32, b: u32) -> u32 {
    let mut m = [0u32; 16];
    // m[v] = v(x) * b, where v's bit 3 is x^0 (a reflected nibble: bit 3 - k is x^k).
    let bx = [
        times_x(times_x(times_x(b))),
        times_x(times_x(b)),
        times_x(b),
        b,
    ];
    for (v, slot) in m.iter_mut().enumerate() {
        *slot = (0..4)
            .filter(|k| v & (1 << k) != 0)
            .fold(0, |acc, k| acc ^ bx[k]);
    }
    // a's highest-degree nibble (x^28..x^31) is its bits 0..4: Horner from there.
    let mut p = 0u32;
    for j in 0..8 {
        let nibble = (a >> (4 * j)) & 0xf;
        p = (p >> 4) ^ TIMES_X4[(p & 0xf) as usize] ^ m[nibble as usize];
    }
    p
}

/// x^0, the polynomial 1, in reflected form.
pub(super) const ONE: u32 = 1 << 31;

/// `base^n` modulo the polynomial.
pub(super) const fn power(base: u32, n: usize) -> u32 {
    let mut p = ONE;
    let mut i = 0;
    while i < n {
        p = mul_mod(p, base);
        i += 1;
    }
    p
}

/// `base^k` modulo the polynomial, for `k` in `0..256`.
pub(super) const fn powers(base: u32) -> [u32; 256] {
    let mut t = [0u32; 256];
    t[0] = ONE;
    let mut k = 1;
    while k < 256 {
        t[k] = mul_mod(t[k - 1], base);
        k += 1;
    }
    t
}

/// x^8: eight zero bits shifted in (in reflected form x^k is bit 31 - k).
pub(super) const X8: u32 = 1 << (31 - 8);

/// `x^(8k)` and `x^(8 * 256k)`: any number of zero bytes below 2^16 in two factors.
static ZEROS_LOW: [u32; 256] = powers(X8);
static ZEROS_HIGH: [u32; 256] = powers(power(X8, 256));

/// The raw CRC (no initial value, no final xor) of the two bytes of `v`, big-endian (as an IP
/// Identification travels).
pub(super) const fn raw_crc16(v: u16) -> u32 {
    let bytes = v.to_be_bytes();
    let mut c = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        c ^= bytes[i] as u32;
        let mut k = 0;
        while k < 8 {
            c = (c >> 1) ^ (POLY & (c & 1).wrapping_neg());
            k += 1;
        }
        i += 1;
    }
    c
}

/// The ICRC of an IPv4 RoCEv2 packet whose ICRC is `icrc` when its IP Identification is
/// `from`, had it carried `to` instead. `udp_payload_len` is the UDP payload's length, ICRC
/// included (the packet's IP header has no options, as a UDP socket's never has).
pub fn with_ipv4_ident(icrc: u32, from: u16, to: u16, udp_payload_len: usize) -> u32 {
    let diff = from ^ to;
    if diff == 0 {
        return icrc;
    }
    let zeros = COVERED_AFTER_IDENT + udp_payload_len.saturating_sub(super::ICRC_LEN);
    let mut d = raw_crc16(diff);
    d = mul_mod_fast(ZEROS_LOW[zeros & 0xff], d);
    let high = (zeros >> 8) & 0xff;
    if high != 0 {
        d = mul_mod_fast(ZEROS_HIGH[high], d);
    }
    icrc ^ d
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::icrc::compute;

    /// An IPv4 header of `ihl` bytes (options zero) with Identification `id` and DF, then a
    /// UDP datagram with a BTH and `payload` after it: the ICRC, and the UDP payload's length
    /// (ICRC included).
    pub(in crate::icrc) fn icrc_with_ident(id: u16, ihl: usize, payload: &[u8]) -> (u32, usize) {
        let udp_len = 8 + 12 + payload.len() + 4;
        let mut ip = vec![0u8; ihl];
        ip[0] = 0x40 | (ihl / 4) as u8;
        ip[2..4].copy_from_slice(&((ihl + udp_len) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[127, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[127, 0, 0, 2]);
        let mut udp = vec![0xc0, 0x05, 0x12, 0xb7];
        udp.extend_from_slice(&(udp_len as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(&[0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 7]);
        udp.extend_from_slice(payload);
        (compute(&ip, &udp).unwrap(), udp_len - 8)
    }

    #[test]
    fn an_icrc_moved_to_another_ident_equals_one_computed_with_it() {
        // Lengths across both tables' ranges, IDs with carries and every bit.
        for len in [0, 1, 4, 64, 233, 234, 235, 1000, 4096, 9000, 60_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            for (from, to) in [(0, 1), (0, 0xffff), (0x1234, 0x1235), (0xfffe, 0x0001)] {
                let (icrc, _) = icrc_with_ident(from, 20, &payload);
                let moved = with_ipv4_ident(icrc, from, to, 12 + len + 4);
                assert_eq!(
                    moved,
                    icrc_with_ident(to, 20, &payload).0,
                    "len {len}, {from}->{to}"
                );
            }
        }
    }

    #[test]
    fn the_same_ident_leaves_the_icrc_alone() {
        assert_eq!(with_ipv4_ident(0xdead_beef, 9, 9, 80), 0xdead_beef);
    }

    #[test]
    fn the_fast_multiplication_is_the_bit_loop() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let (a, b) = ((x >> 32) as u32, x as u32);
            assert_eq!(mul_mod_fast(a, b), mul_mod(a, b), "{a:#x} * {b:#x}");
        }
    }

    #[test]
    fn mul_mod_is_multiplication() {
        let x0 = 1u32 << 31;
        assert_eq!(mul_mod(x0, 0x1234_5678), 0x1234_5678, "1 * b = b");
        // x^8 * x^8 = x^16
        assert_eq!(mul_mod(1 << 23, 1 << 23), 1 << 15);
        assert_eq!(ZEROS_LOW[1], 1 << 23);
    }
}
