//! The ChaCha20 block function (RFC 8439, 2.3), the key table's only source of randomness:
//! its seed is the key, and every use of it names its own nonce, so the streams of one seed
//! never overlap. No clock, no OS randomness: the caller picks the seed.

/// "expand 32-byte k" (RFC 8439, 2.3).
const CONSTANTS: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

fn quarter_round(s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(16);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(12);
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(8);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(7);
}

/// One 64-byte block of the ChaCha20 stream of `key` and `nonce` at `counter`, as 16 words.
pub(super) fn block(key: &[u32; 8], counter: u32, nonce: [u32; 3]) -> [u32; 16] {
    let mut init = [0; 16];
    init[..4].copy_from_slice(&CONSTANTS);
    init[4..12].copy_from_slice(key);
    init[12] = counter;
    init[13..].copy_from_slice(&nonce);
    let mut s = init;
    for _ in 0..10 {
        quarter_round(&mut s, 0, 4, 8, 12);
        quarter_round(&mut s, 1, 5, 9, 13);
        quarter_round(&mut s, 2, 6, 10, 14);
        quarter_round(&mut s, 3, 7, 11, 15);
        quarter_round(&mut s, 0, 5, 10, 15);
        quarter_round(&mut s, 1, 6, 11, 12);
        quarter_round(&mut s, 2, 7, 8, 13);
        quarter_round(&mut s, 3, 4, 9, 14);
    }
    for (w, i) in s.iter_mut().zip(init) {
        *w = w.wrapping_add(i);
    }
    s
}

/// The ChaCha20 key of a 64-bit seed.
pub(super) fn key_of_seed(seed: u64) -> [u32; 8] {
    [seed as u32, (seed >> 32) as u32, 0, 0, 0, 0, 0, 0]
}

/// A stream of random words: the blocks of one key and nonce, counter 0, 1, 2, ...
pub(super) struct Stream {
    key: [u32; 8],
    nonce: [u32; 3],
    counter: u32,
    buf: [u32; 16],
    used: usize,
}

impl Stream {
    pub(super) fn new(key: [u32; 8], nonce: [u32; 3]) -> Stream {
        Stream {
            key,
            nonce,
            counter: 0,
            buf: [0; 16],
            used: 16,
        }
    }

    pub(super) fn next_u32(&mut self) -> u32 {
        if self.used == 16 {
            self.buf = block(&self.key, self.counter, self.nonce);
            // 2^32 blocks (256 GiB of stream) before it repeats: never, for key choices.
            self.counter = self.counter.wrapping_add(1);
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }

    /// A number below `n` (> 0), by Lemire's multiply: the bias is at most `n / 2^32`.
    pub(super) fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0 && n <= u32::MAX as usize);
        ((u64::from(self.next_u32()) * n as u64) >> 32) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8439, 2.3.2 "Test Vector for the ChaCha20 Block Function".
    #[test]
    fn rfc8439_block_test_vector() {
        let key: [u32; 8] = core::array::from_fn(|i| {
            u32::from_le_bytes(core::array::from_fn(|j| (4 * i + j) as u8))
        });
        let out = block(&key, 1, [0x0900_0000, 0x4a00_0000, 0]);
        assert_eq!(
            out,
            [
                0xe4e7_f110,
                0x1559_3bd1,
                0x1fdd_0f50,
                0xc471_20a3,
                0xc7f4_d1c7,
                0x0368_c033,
                0x9aaa_2204,
                0x4e6c_d4c3,
                0x4664_82d2,
                0x09aa_9f07,
                0x05d7_c214,
                0xa202_8bd9,
                0xd19c_12b5,
                0xb94e_16de,
                0xe883_d0cb,
                0x4e3c_50a2,
            ]
        );
    }

    #[test]
    fn below_stays_below() {
        let mut s = Stream::new(key_of_seed(7), [1, 2, 3]);
        for n in [1, 2, 3, 1000, 65536] {
            assert!((0..1000).all(|_| s.below(n) < n));
        }
    }
}
