//! What the engine asks the driver to send: a packet's transport headers as a [`RoceRepr`],
//! and its payload *by reference* to registered memory, so that the driver can send the bytes
//! straight from the region (IBTA 9.4: the payload of a request comes from the local SGEs, of a
//! READ response from the responder's region named by the R_Key).
//!
//! The engine validates every key when it builds the packet; the driver pins the bytes (see
//! [`crate::mr::ReadPin`]) and computes the ICRC over them, through their pointer. If a key
//! died in between (a concurrent deregistration), the pin fails and the packet is dropped: RC
//! retransmission rebuilds it, and that time the engine sees the dead key and completes in
//! error.

use std::net::IpAddr;

use softrnic_wire::bth::BthRepr;
use softrnic_wire::roce::RoceRepr;
use softrnic_wire::{Opcode, Psn};

use crate::mr::{AccessError, MrTable, PdHandle, PinFor};
use crate::wr::Sge;

/// The most SGEs a work request may have (`max_sge`), hence the most pieces of one payload.
pub const MAX_SGE: usize = 32;

/// The most inline data a send work request may carry (`max_inline_data`).
pub const MAX_INLINE: usize = 256;

/// A run of bytes in registered memory: `len` bytes at `va` through `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Chunk {
    /// The lkey (local buffer) or rkey (READ response) of the region.
    pub key: u32,
    /// The address, in the region's iova space.
    pub va: u64,
    /// The length in bytes.
    pub len: u32,
}

/// A payload as a list of chunks of registered memory, in order.
#[derive(Debug, Clone, Copy)]
pub struct Chunks {
    /// The PD the keys must belong to.
    pub pd: PdHandle,
    /// Which right the reads use.
    pub why: PinFor,
    n: u8,
    items: [Chunk; MAX_SGE],
}

impl Chunks {
    /// No chunks yet.
    pub fn new(pd: PdHandle, why: PinFor) -> Chunks {
        Chunks {
            pd,
            why,
            n: 0,
            items: [Chunk::default(); MAX_SGE],
        }
    }

    /// Appends a chunk (at most [`MAX_SGE`]: the caller limits SGE lists to that).
    pub fn push(&mut self, c: Chunk) {
        self.items[self.n as usize] = c;
        self.n += 1;
    }

    /// The chunks.
    pub fn as_slice(&self) -> &[Chunk] {
        &self.items[..self.n as usize]
    }

    /// Empties the list, for chunks to be read with `why` through keys of `pd`.
    pub fn reset(&mut self, pd: PdHandle, why: PinFor) {
        (self.pd, self.why, self.n) = (pd, why, 0);
    }

    /// Appends the chunks of bytes `offset..offset + len` of the message laid out by `sges`
    /// (see [`chunks_of`]).
    pub fn fill_from_sges(&mut self, sges: &[Sge], offset: u32, len: u32) {
        for c in chunks_of(sges, offset, len) {
            self.push(c);
        }
    }
}

/// The chunks of bytes `offset..offset + len` of the message laid out by `sges` (a scatter/
/// gather list, walked in order). Zero-length SGEs give no chunk.
pub fn chunks_of(sges: &[Sge], mut offset: u32, mut len: u32) -> impl Iterator<Item = Chunk> + '_ {
    let mut sges = sges.iter();
    std::iter::from_fn(move || {
        while len > 0 {
            let sge = sges.next()?;
            if offset >= sge.length {
                offset -= sge.length;
                continue;
            }
            let take = (sge.length - offset).min(len);
            let chunk = Chunk {
                key: sge.lkey,
                va: sge.addr + u64::from(offset),
                len: take,
            };
            (len, offset) = (len - take, 0);
            return Some(chunk);
        }
        None
    })
}

/// Writes `data` into bytes `offset..offset + data.len()` of the message laid out by `sges`
/// (keys of `pd`), each chunk needing `LOCAL_WRITE`: a receive buffer, a READ's or an atomic's
/// sink. (Straight from the list: no chunk list is built for a write.)
///
/// # Errors
/// The first failed access check; chunks before it have been written.
pub fn scatter(
    mrs: &MrTable,
    pd: PdHandle,
    sges: &[Sge],
    offset: u32,
    data: &[u8],
) -> Result<(), AccessError> {
    let mut at = 0usize;
    for c in chunks_of(sges, offset, data.len() as u32) {
        let n = c.len as usize;
        mrs.with_local_write(c.key, pd, c.va, n, |mut dst| {
            dst.copy_from(&data[at..at + n])
        })?;
        at += n;
    }
    Ok(())
}

/// Where a packet's payload comes from. (Held by value in small batches: the inline variant's
/// size is the point, no allocation.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
pub enum Payload {
    /// No payload (ACKs, READ requests, atomics, zero-length messages).
    None,
    /// Inline data, copied from the work request at post time (`IBV_SEND_INLINE`).
    Inline {
        /// The bytes (only the first `len` count).
        bytes: [u8; MAX_INLINE],
        /// How many.
        len: u16,
    },
    /// Registered memory.
    Memory(Chunks),
}

impl Payload {
    /// Makes this inline data `part` (at most [`MAX_INLINE`] bytes), reusing the array if it
    /// is inline already: only `part` is copied.
    pub fn set_inline(&mut self, part: &[u8]) {
        if !matches!(self, Payload::Inline { .. }) {
            *self = Payload::Inline {
                bytes: [0; MAX_INLINE],
                len: 0,
            };
        }
        if let Payload::Inline { bytes, len } = self {
            bytes[..part.len()].copy_from_slice(part);
            *len = part.len() as u16;
        }
    }

    /// Makes this an empty chunk list for reads with `why` through keys of `pd`, reusing the
    /// list if it is one already; returns it to be filled.
    pub fn set_memory(&mut self, pd: PdHandle, why: PinFor) -> &mut Chunks {
        if !matches!(self, Payload::Memory(_)) {
            *self = Payload::Memory(Chunks::new(pd, why));
        }
        match self {
            Payload::Memory(c) => {
                c.reset(pd, why);
                c
            }
            _ => unreachable!("just made a chunk list"),
        }
    }
}

/// A packet for the driver to send.
#[derive(Debug, Clone, Copy)]
pub struct Transmit {
    /// The peer's IP address.
    pub dst: IpAddr,
    /// The UDP source port (per QP, A17.2.3).
    pub src_port: u16,
    /// BTH and extension headers; `roce.payload_len` is the payload's length.
    pub roce: RoceRepr,
    /// The payload.
    pub payload: Payload,
}

impl Transmit {
    /// A placeholder to build a packet into.
    pub fn empty() -> Transmit {
        Transmit {
            dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            src_port: 0,
            roce: RoceRepr::new(BthRepr {
                opcode: Opcode::RC_ACKNOWLEDGE,
                solicited: false,
                mig_req: false,
                pkey: 0,
                fecn: false,
                becn: false,
                dest_qp: 0,
                ack_req: false,
                psn: Psn::new(0),
            }),
            payload: Payload::None,
        }
    }
}

/// The packets of one transmit pass, built where the emitter reads them.
///
/// A [`Transmit`] is some 700 bytes (inline data, a chunk list): returned by value through the
/// QP's and the NIC's `poll_transmit` it was copied three or four times per packet, ACKs
/// included, which was the largest single cost of building one. Here each is written once,
/// into a slot kept from pass to pass (no allocation once the queue has grown to a batch).
#[derive(Debug, Default)]
pub struct TxQueue {
    slots: Vec<Transmit>,
    len: usize,
}

impl TxQueue {
    /// An empty queue.
    pub fn new() -> TxQueue {
        TxQueue::default()
    }

    /// Forgets the packets (the slots stay for the next pass).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// How many packets are queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The packets.
    pub fn as_slice(&self) -> &[Transmit] {
        &self.slots[..self.len]
    }

    /// Lets `build` write a packet into the next slot; keeps it if `build` returns `true`.
    pub fn push_with(&mut self, build: impl FnOnce(&mut Transmit) -> bool) -> bool {
        if self.len == self.slots.len() {
            self.slots.push(Transmit::empty());
        }
        let built = build(&mut self.slots[self.len]);
        self.len += usize::from(built);
        built
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_reused_slot_carries_only_the_new_packet() {
        let mut q = TxQueue::new();
        assert!(q.push_with(|t| {
            t.payload.set_inline(b"a longer first packet");
            true
        }));
        q.push_with(|t| {
            let c = t.payload.set_memory(PdHandle(3), PinFor::Local);
            c.push(Chunk {
                key: 1,
                va: 2,
                len: 3,
            });
            c.push(Chunk {
                key: 4,
                va: 5,
                len: 6,
            });
            true
        });
        // A builder that finds nothing leaves no packet behind.
        assert!(!q.push_with(|_| false));
        assert_eq!(q.len(), 2);
        q.clear();
        assert!(q.is_empty());
        q.push_with(|t| {
            t.payload.set_inline(b"hi");
            true
        });
        q.push_with(|t| {
            t.payload
                .set_memory(PdHandle(7), PinFor::Local)
                .push(Chunk {
                    key: 9,
                    va: 8,
                    len: 7,
                });
            true
        });
        let [a, b] = q.as_slice() else {
            panic!("two packets: {:?}", q.as_slice().len())
        };
        match &a.payload {
            Payload::Inline { bytes, len } => assert_eq!(&bytes[..usize::from(*len)], b"hi"),
            p => panic!("{p:?}"),
        }
        match &b.payload {
            Payload::Memory(c) => {
                assert_eq!(c.pd, PdHandle(7));
                assert_eq!(
                    c.as_slice(),
                    &[Chunk {
                        key: 9,
                        va: 8,
                        len: 7
                    }]
                );
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn chunks_of_an_sge_list_follow_the_message_offsets() {
        let sge = |addr, length, lkey| Sge { addr, length, lkey };
        let sges = [
            sge(100, 10, 1),
            sge(0, 0, 9),
            sge(500, 20, 2),
            sge(900, 5, 3),
        ];
        let of = |offset, len| chunks_of(&sges, offset, len).collect::<Vec<_>>();
        let expect = [
            Chunk {
                key: 1,
                va: 105,
                len: 5,
            },
            Chunk {
                key: 2,
                va: 500,
                len: 15,
            },
        ];
        assert_eq!(of(5, 20), expect);
        let mut c = Chunks::new(PdHandle(1), PinFor::Local);
        c.fill_from_sges(&sges, 5, 20);
        assert_eq!(c.as_slice(), &expect);
        assert_eq!(
            of(30, 5),
            [Chunk {
                key: 3,
                va: 900,
                len: 5
            }]
        );
        assert!(of(0, 0).is_empty());
        // Past the end of the list: what there is.
        assert_eq!(of(33, 10).len(), 1);
        assert!(of(35, 10).is_empty());
    }
}
