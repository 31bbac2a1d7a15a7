//! Requests that arrive a little out of order: held, not NAKed at once.
//!
//! IBTA 9.7.5.1.1 (C9-102) has the responder NAK the first request beyond the expected PSN
//! ("PSN sequence error") and drop the following ones until the expected one comes; the
//! requester then goes back to it and sends everything again (go-back-N). That is right for a
//! lost packet and costly for a reordered one: a link that swaps two packets now and then
//! (a multipath network, a software switch) made the requester resend its whole window each
//! time. Through a userspace link that reordered 5 % of the packets, and lost and duplicated
//! 1 %, `ib_write_bw` moved 50 times less than through the clean link.
//!
//! So a request a few PSNs ahead is held instead ([`SLOTS`] at most, copied), and the NAK
//! waits. When the expected PSN arrives, it is executed and then the held requests that now
//! follow it, in PSN order, exactly as if they had come in order: nothing about a request is
//! decided before its turn. When the holding is full, or a request comes further ahead than
//! it can hold, the gap is taken for a loss: the held requests are dropped and the NAK goes
//! out as C9-102 says (the requester resends them). If nothing more comes, the requester's
//! own retransmit timer ends the wait.
//!
//! The copies are made in buffers kept for the QP (allocated once, on the first reordering),
//! so holding allocates nothing per packet.

use softrnic_wire::roce::{RocePacket, RoceRepr};
use softrnic_wire::Psn;

/// The most requests held: enough for a swap of neighbours, or a packet overtaken by a few.
pub const SLOTS: usize = 4;

/// A held request: its headers and a copy of its payload.
#[derive(Debug)]
struct Held {
    repr: RoceRepr,
    payload: Vec<u8>,
    icrc: u32,
}

/// The requests held while the expected PSN has not arrived.
#[derive(Debug, Default)]
pub(super) struct Reorder {
    held: Vec<Held>,
    /// Buffers of released requests, kept for the next ones.
    spare: Vec<Vec<u8>>,
}

impl Reorder {
    /// Holds `pkt`, which is ahead of `epsn`; `false` if it cannot (too far ahead, or the
    /// holding is full): the gap is then a loss, and the caller NAKs.
    pub(super) fn hold(&mut self, epsn: Psn, pkt: &RocePacket<'_>) -> bool {
        let psn = pkt.repr.bth.psn;
        if psn.distance_from(epsn) as usize > SLOTS {
            return false;
        }
        if self.held.iter().any(|h| h.repr.bth.psn == psn) {
            return true; // a duplicate of one held: nothing more to keep
        }
        if self.held.len() == SLOTS {
            return false;
        }
        let mut payload = self.spare.pop().unwrap_or_default();
        payload.clear();
        payload.extend_from_slice(pkt.payload);
        self.held.push(Held {
            repr: pkt.repr,
            payload,
            icrc: pkt.icrc,
        });
        true
    }

    /// Runs `f` on the held request at `epsn`, if there is one, and releases it; returns
    /// whether there was one.
    pub(super) fn release(&mut self, epsn: Psn, f: impl FnOnce(&RocePacket<'_>)) -> bool {
        let Some(i) = self.held.iter().position(|h| h.repr.bth.psn == epsn) else {
            return false;
        };
        let h = self.held.swap_remove(i);
        f(&RocePacket {
            repr: h.repr,
            payload: &h.payload,
            icrc: h.icrc,
        });
        self.spare.push(h.payload);
        true
    }

    /// Drops every held request (a loss was declared, or the QP was reset).
    pub(super) fn clear(&mut self) {
        self.spare.extend(self.held.drain(..).map(|h| h.payload));
    }

    /// Whether requests are held.
    pub(super) fn is_holding(&self) -> bool {
        !self.held.is_empty()
    }
}
