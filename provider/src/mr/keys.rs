//! How the key table makes keys: the layout of a key's 32 bits, the keyed permutation that
//! gives each slot its sequence of keys, and the free list that picks the slot of a new key
//! at random. The module doc of `mr` says what this buys.

use super::chacha::{self, Stream};

/// Nonce of the stream that picks free slots.
const SLOT_NONCE: [u32; 3] = [0x736c_6f74, 0, 0]; // "slot"
/// Nonce of the round keys of the permutation.
const ROUND_KEY_NONCE: [u32; 3] = [0x6b65_7973, 0, 0]; // "keys"
/// Rounds of the Feistel permutation.
const ROUNDS: usize = 8;

/// The permutations' secret: a key per round and one that makes each slot's permutation its
/// own, 288 bits drawn from the seed's ChaCha20 once, when the table is made (a ChaCha20
/// block per registration cost as much as the rest of it).
#[derive(Clone, Copy)]
struct RoundKeys {
    rounds: [u32; ROUNDS],
    slot: u32,
}

/// The bits of the index field of a table of `slots` slots: enough for `0..slots`.
pub(super) const fn index_bits(slots: usize) -> u32 {
    if slots <= 1 {
        0
    } else {
        usize::BITS - (slots - 1).leading_zeros()
    }
}

/// The bits of a key that are not the index: the 8-bit key byte and the random bits above
/// the index, as one number (`byte | random << 8`).
pub(super) const fn free_bits(slots: usize) -> u32 {
    32 - index_bits(slots)
}

/// The 1-based index of the slot `key` names (its field holds `index - 1`), and whether the
/// key's upper 24 bits are all zero (never a valid key: no key below `0x100` is handed out).
pub(super) fn split(key: u32, slots: usize) -> (usize, bool) {
    let mask = (1u32 << index_bits(slots)) - 1;
    (((key >> 8) & mask) as usize + 1, key >> 8 == 0)
}

/// The key of 1-based `index` whose bits outside the index field are `v` (`free_bits` wide).
pub(super) fn compose(index: usize, v: u32, slots: usize) -> u32 {
    let bits = index_bits(slots);
    (v & 0xff) | ((index - 1) as u32) << 8 | (v >> 8) << (8 + bits)
}

/// murmur3's 32-bit finaliser: the round function's mixing, after the round key.
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// A permutation of `0..2^width` for the slot at `index`, keyed by `keys`: a balanced Feistel
/// network (round function: murmur3's finaliser of the half, the round key and the slot's
/// tweak) over the even width at or above `width`, walked again until the value falls below
/// `2^width` (cycle walking, which keeps it a permutation of the smaller domain).
fn permute(x: u32, width: u32, keys: &RoundKeys, index: usize) -> u32 {
    let tweak = fmix32(index as u32 ^ keys.slot);
    let even = width + width % 2;
    let half = even / 2;
    let mask = if half == 32 {
        u32::MAX
    } else {
        (1 << half) - 1
    };
    let limit = 1u64 << width;
    let mut x = x;
    loop {
        let (mut l, mut r) = (((x as u64) >> half) as u32 & mask, x & mask);
        for k in keys.rounds {
            (l, r) = (r, l ^ (fmix32(r.wrapping_add(k) ^ tweak) & mask));
        }
        x = ((l as u64) << half | r as u64) as u32;
        if (x as u64) < limit {
            return x;
        }
    }
}

/// Where a table's keys come from: its seed's ChaCha20 key, and the permutations' secret.
pub(super) struct KeySource {
    key: [u32; 8],
    round_keys: RoundKeys,
}

impl KeySource {
    pub(super) fn new(seed: u64) -> KeySource {
        let key = chacha::key_of_seed(seed);
        let block = chacha::block(&key, 0, ROUND_KEY_NONCE);
        KeySource {
            key,
            round_keys: RoundKeys {
                rounds: core::array::from_fn(|i| block[i]),
                slot: block[ROUNDS],
            },
        }
    }

    /// The stream that picks free slots.
    pub(super) fn slot_stream(&self) -> Stream {
        Stream::new(self.key, SLOT_NONCE)
    }

    /// The `gen`-th key of 1-based `index` in a table of `slots` slots: the slot's permutation
    /// applied to `gen`, so that a slot's keys repeat only after
    /// `2^free_bits` registrations and one of them says nothing about the next. A
    /// generation whose key would have zero upper 24 bits is skipped (returned as the next
    /// generation to use after this one).
    pub(super) fn key(&self, index: usize, gen: u32, slots: usize) -> (u32, u32) {
        let width = free_bits(slots);
        let domain_mask = if width == 32 {
            u32::MAX
        } else {
            (1 << width) - 1
        };
        let mut gen = gen;
        loop {
            let v = permute(gen & domain_mask, width, &self.round_keys, index);
            gen = gen.wrapping_add(1);
            let key = compose(index, v, slots);
            if key >> 8 != 0 {
                return (key, gen);
            }
        }
    }
}

/// The free slots (1-based indices), and the stream that picks which one a new key gets.
pub(super) struct FreeList {
    indices: Vec<u32>,
    rng: Stream,
}

impl FreeList {
    pub(super) fn new(slots: u32, rng: Stream) -> FreeList {
        FreeList {
            indices: (1..=slots).collect(),
            rng,
        }
    }

    /// A free index, chosen uniformly at random; `None` when every slot is taken.
    pub(super) fn take(&mut self) -> Option<u32> {
        if self.indices.is_empty() {
            return None;
        }
        let at = self.rng.below(self.indices.len());
        Some(self.indices.swap_remove(at))
    }

    pub(super) fn put(&mut self, index: u32) {
        self.indices.push(index);
    }

    pub(super) fn len(&self) -> usize {
        self.indices.len()
    }
}

impl Extend<u32> for FreeList {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, iter: I) {
        self.indices.extend(iter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_bits_of_table_sizes() {
        assert_eq!(index_bits(1), 0);
        assert_eq!(index_bits(2), 1);
        assert_eq!(index_bits(8), 3);
        assert_eq!(index_bits(9), 4);
        assert_eq!(index_bits(65536), 16);
    }

    #[test]
    fn compose_and_split_round_trip() {
        for slots in [1, 2, 7, 8, 1000, 65536] {
            for index in [1, slots / 2 + 1, slots] {
                for v in [0x100, 0x1ff, ((1u64 << free_bits(slots)) - 1) as u32] {
                    let key = compose(index, v, slots);
                    assert_eq!(split(key, slots), (index, false), "{slots} {index} {v:#x}");
                    assert_eq!(key & 0xff, v & 0xff, "the key byte is the low byte");
                }
            }
        }
        assert_eq!(split(0x7f, 8), (1, true));
    }

    #[test]
    fn permutation_is_a_bijection_of_odd_and_even_widths() {
        let keys = KeySource::new(3).round_keys;
        for width in [9, 10, 16, 17] {
            let mut seen = vec![false; 1 << width];
            for x in 0..1u32 << width {
                let y = permute(x, width, &keys, 5) as usize;
                assert!(!seen[y], "width {width}: {y:#x} twice");
                seen[y] = true;
            }
        }
    }

    #[test]
    fn each_slot_has_a_permutation_of_its_own() {
        let src = &KeySource::new(4);
        let free = |index| (0..16).map(move |g| src.key(index, g, 65536).0 & !0xff_ff00);
        assert!(free(1).zip(free(2)).filter(|(a, b)| a == b).count() < 4);
    }

    #[test]
    fn a_slots_keys_do_not_repeat_within_its_domain() {
        // 16 index bits leave 16: every key of a slot is distinct for 2^16 generations.
        let src = KeySource::new(11);
        let slots = 65536;
        let mut seen = vec![false; 1 << 16];
        let mut gen = 0;
        for _ in 0..1 << 16 {
            let (key, next) = src.key(17, gen, slots);
            gen = next;
            let (index, _) = split(key, slots);
            assert_eq!(index, 17);
            let v = (key & 0xff) | (key >> 24) << 8;
            assert!(!seen[v as usize], "{key:#x} came back");
            seen[v as usize] = true;
        }
    }
}
