//! Verifying the ICRC of an IPv4 packet whose Identification the receiver cannot see (IBTA
//! A17.4.2: the ICRC covers the IPv4 Identification, which it does not mask).
//!
//! A UDP socket hands over the payload and the addresses, but not the IP header: of what the
//! ICRC covers, only the 16-bit Identification is unknown (the flags are taken to be DF, as
//! RoCEv2 senders set it; the length, protocol and addresses follow from what the socket
//! says). Since a CRC is linear (see `ident.rs`), the ICRC over the header with ID `i` is
//! the ICRC over it with ID `j` xor `M(raw(i ^ j))`: `raw` the CRC of the two ID bytes, `M`
//! the multiplication by `x^(8n)` for the `n` covered bytes after them. So the receiver
//! computes the ICRC for one ID, and the xor `d` with the received one says which ID would
//! match: `raw(v) = d * x^(-8n)`, one multiplication by a power of `x^-1` (two table lookups,
//! as for `x^(8n)`), then four lookups in tables that reduce a 32-bit value against the 16
//! values `raw` takes on the ID's bits. What remains is 0 exactly when some ID matches, and
//! the lookups give that ID.
//!
//! The price of not seeing the ID: of the 2^32 wrong ICRCs, 2^16 match some ID, so a
//! corrupted packet whose ICRC comes out random is accepted with probability 2^-16 (the
//! ICRC over the real header, with probability 2^-32).

use super::ident::{mul_mod_fast, power, powers, raw_crc16, POLY};
use super::ICRC_LEN;

/// `x^-1` modulo the polynomial. The polynomial `P` has the term 1, so
/// `x * ((P - 1) / x) = P - 1 = 1`: the reflected polynomial shifted by one place, its `x^32`
/// becoming `x^31` (bit 0).
const X_INV: u32 = (POLY << 1) | 1;

/// `x^(-8k)` and `x^(-8 * 256k)`: removes any number of zero bytes below 2^16.
static UNZEROS_LOW: [u32; 256] = powers(power(X_INV, 8));
static UNZEROS_HIGH: [u32; 256] = powers(power(power(X_INV, 8), 256));

/// Bytes of the IPv4 header before the end of the Identification field.
const IDENT_END: usize = 6;

/// The 16 values `raw` takes on the ID's bits, in echelon form: row `p` (if not zero) has
/// bit `p` as its highest, with the ID bits whose `raw` it is the xor of.
const fn echelon() -> [(u32, u16); 32] {
    let mut rows = [(0u32, 0u16); 32];
    let mut b = 0;
    while b < 16 {
        let id = 1u16 << b;
        let (mut v, mut x) = (raw_crc16(id), id);
        let mut p = 32;
        while p > 0 && v != 0 {
            p -= 1;
            if v & (1 << p) != 0 {
                if rows[p].0 == 0 {
                    rows[p] = (v, x);
                    break;
                }
                v ^= rows[p].0;
                x ^= rows[p].1;
            }
        }
        b += 1;
    }
    rows
}

/// `t` reduced against the rows: what is left of it, and the ID bits of the rows taken out. A
/// linear map of `t` (the rows' leading bits are distinct), so it can be tabulated by byte.
const fn reduce(rows: &[(u32, u16); 32], mut t: u32) -> (u32, u16) {
    let mut ident = 0;
    let mut p = 32;
    while p > 0 {
        p -= 1;
        if t & (1 << p) != 0 && rows[p].0 != 0 {
            t ^= rows[p].0;
            ident ^= rows[p].1;
        }
    }
    (t, ident)
}

/// [`reduce`] of each byte `j` of a value, for every byte value: `[j][byte]`.
const fn reduce_tables() -> [[(u32, u16); 256]; 4] {
    let rows = echelon();
    let mut t = [[(0u32, 0u16); 256]; 4];
    let mut j = 0;
    while j < 4 {
        let mut b = 0;
        while b < 256 {
            t[j][b] = reduce(&rows, (b as u32) << (8 * j));
            b += 1;
        }
        j += 1;
    }
    t
}

static REDUCE: [[(u32, u16); 256]; 4] = reduce_tables();

/// The IPv4 Identification for which an IPv4 RoCEv2 packet's ICRC is `wanted` (the one it
/// carries), given that its ICRC is `icrc` with Identification `ident`; `None` when no ID
/// gives `wanted` (the packet is corrupt, or differs from the header `icrc` was computed
/// over in more than its ID). `ip_header_len` is the IPv4 header's length, options included;
/// `udp_payload_len` the UDP payload's, ICRC included.
///
/// A wrong `wanted` is accepted with probability 2^-16 (see the module comment). No
/// allocation; two carry-less multiplications and four table lookups.
pub fn ipv4_ident_matching(
    icrc: u32,
    ident: u16,
    wanted: u32,
    ip_header_len: usize,
    udp_payload_len: usize,
) -> Option<u16> {
    let diff = icrc ^ wanted;
    if diff == 0 {
        return Some(ident);
    }
    let zeros =
        ip_header_len.checked_sub(IDENT_END)? + 8 + udp_payload_len.checked_sub(ICRC_LEN)?;
    if zeros >> 16 != 0 {
        return None; // longer than any IPv4 datagram
    }
    let mut t = mul_mod_fast(UNZEROS_LOW[zeros & 0xff], diff);
    if zeros >> 8 != 0 {
        t = mul_mod_fast(UNZEROS_HIGH[zeros >> 8], t);
    }
    let (mut left, mut v) = (0, 0);
    for (j, table) in REDUCE.iter().enumerate() {
        let (r, x) = table[((t >> (8 * j)) & 0xff) as usize];
        left ^= r;
        v ^= x;
    }
    (left == 0).then_some(ident ^ v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icrc::ident::tests::icrc_with_ident;
    use crate::icrc::ident::{mul_mod, ONE, X8};
    use crate::icrc::with_ipv4_ident;

    #[test]
    fn x_inv_is_the_inverse_of_x() {
        assert_eq!(mul_mod(X_INV, ONE >> 1), ONE);
        assert_eq!(mul_mod(UNZEROS_LOW[1], X8), ONE);
        assert_eq!(mul_mod(UNZEROS_HIGH[3], power(X8, 3 * 256)), ONE);
    }

    #[test]
    fn the_sixteen_id_bits_are_independent() {
        assert_eq!(echelon().iter().filter(|r| r.0 != 0).count(), 16);
    }

    #[test]
    fn the_ident_a_packet_was_sent_with_is_found() {
        for len in [0, 1, 4, 233, 234, 235, 1024, 4096, 9000, 65_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            for ihl in [20, 24, 60] {
                let (base, n) = icrc_with_ident(0, ihl, &payload);
                for id in [0, 1, 0x8000, 0x1234, 0xffff] {
                    let (wanted, _) = icrc_with_ident(id, ihl, &payload);
                    assert_eq!(
                        ipv4_ident_matching(base, 0, wanted, ihl, n),
                        Some(id),
                        "len {len}, ihl {ihl}, id {id:#x}"
                    );
                    // From any ID computed for.
                    let from = with_ipv4_ident(base, 0, 0x5a5a, n);
                    if ihl == 20 {
                        assert_eq!(ipv4_ident_matching(from, 0x5a5a, wanted, ihl, n), Some(id));
                    }
                }
            }
        }
    }

    #[test]
    fn a_wrong_icrc_matches_some_ident_about_once_in_65536() {
        let (base, n) = icrc_with_ident(0, 20, &[0x5a; 1024]);
        // Every single-bit error of the ICRC, and 2^18 pseudo-random ones (a fixed LCG).
        let flips =
            (0..32).filter(|b| ipv4_ident_matching(base, 0, base ^ (1 << b), 20, n).is_some());
        assert_eq!(flips.count(), 0);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut hits = 0;
        for _ in 0..1 << 18 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let wrong = base ^ ((x >> 32) as u32).max(1);
            hits += u32::from(ipv4_ident_matching(base, 0, wrong, 20, n).is_some());
        }
        assert!(hits <= 16, "{hits} of 2^18 (4 expected)");
    }

    #[test]
    fn a_datagram_longer_than_ipv4_allows_matches_nothing() {
        assert_eq!(ipv4_ident_matching(1, 0, 2, 20, 70_000), None);
        assert_eq!(ipv4_ident_matching(1, 0, 2, 20, 3), None);
    }
}
