//! Requests that arrive out of order: held, and executed in order when the gap fills.
//!
//! IBTA 9.7.5.1.1 (C9-102) has the responder NAK the first request beyond the expected PSN
//! ("PSN sequence error") and drop the following ones until the expected one comes; the
//! requester then goes back to it and sends everything again (go-back-N). That costs a
//! whole window for each lost packet, and as much for a merely reordered one: a link that
//! swaps two packets now and then (a multipath network, a software switch) made the
//! requester resend its window each time. Through a userspace link that reordered 5 % of
//! the packets, and lost and duplicated 1 %, `ib_write_bw` moved 50 times less than through
//! the clean link.
//!
//! So requests ahead of the expected PSN are held (copied), up to [`SLOTS`] of them:
//! * A gap of at most [`WAIT_SLOTS`] requests may be reordering: no NAK yet. If the expected
//!   request comes, it runs, then the held ones that follow it, in PSN order, exactly as if
//!   they had come in order: nothing about a request is decided before its turn.
//! * A longer gap is a loss: the NAK goes out as C9-102 says, but what comes after it is
//!   still held. The requester goes back and resends the lost request first; it runs with
//!   everything held behind it, and the ACK that follows covers them all, so the requester
//!   stops resending about a round trip after it began, instead of resending its window.
//!   (A conforming requester cannot tell the difference: the ACK acknowledges PSNs it sent.)
//! * A request further ahead than [`SLOTS`], or beyond a full holding, is dropped.
//!
//! If nothing more comes, the requester's own retransmit timer ends the wait: its probe, a
//! duplicate here, is answered with the NAK of the gap (`duplicate.rs`). The copies are
//! made in buffers kept for the QP and reused: [`WAIT_SLOTS`] of them stay between gaps (a
//! reordering link costs no allocation per packet), the others are freed once the gap is
//! filled (a loss holds up to [`SLOTS`] × path MTU, 2 MiB at 4096, for a round trip).

use softrnic_wire::roce::{RocePacket, RoceRepr};
use softrnic_wire::Psn;

/// The longest gap taken for reordering rather than loss: enough for a swap of neighbours,
/// or a packet overtaken by a few.
pub const WAIT_SLOTS: usize = 4;

/// The most requests held behind a gap: what a requester of this device has in flight to
/// one QP at most (its send window, `rc/requester/window.rs`), so that after a loss none of
/// what follows it has to be sent again. A peer's window may be larger; what comes beyond
/// is dropped and resent.
pub const SLOTS: usize = crate::rc::WINDOW_PSNS as usize;

/// A held request: its headers and a copy of its payload.
#[derive(Debug)]
struct Held {
    repr: RoceRepr,
    payload: Vec<u8>,
    icrc: u32,
}

/// The requests held while the expected PSN has not arrived, each at its PSN modulo
/// [`SLOTS`] (a held request is less than [`SLOTS`] ahead of the expected PSN, so no two
/// share a place).
#[derive(Debug, Default)]
pub(super) struct Reorder {
    slots: Vec<Option<Held>>,
    held: usize,
    /// The furthest PSN held.
    furthest: Option<Psn>,
    /// Buffers of released requests, kept for the next ones.
    spare: Vec<Vec<u8>>,
}

fn slot_of(psn: Psn) -> usize {
    psn.value() as usize % SLOTS
}

impl Reorder {
    /// Holds `pkt`, which is ahead of `epsn`; `false` if it cannot (too far ahead), and it is
    /// dropped.
    pub(super) fn hold(&mut self, epsn: Psn, pkt: &RocePacket<'_>) -> bool {
        let psn = pkt.repr.bth.psn;
        if psn.distance_from(epsn) as usize >= SLOTS {
            return false;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, || None);
        }
        let slot = &mut self.slots[slot_of(psn)];
        if slot.is_some() {
            return true; // a duplicate of one held: nothing more to keep
        }
        let mut payload = self.spare.pop().unwrap_or_default();
        payload.clear();
        payload.extend_from_slice(pkt.payload);
        *slot = Some(Held {
            repr: pkt.repr,
            payload,
            icrc: pkt.icrc,
        });
        self.held += 1;
        if self
            .furthest
            .is_none_or(|f| psn.distance_from(epsn) > f.distance_from(epsn))
        {
            self.furthest = Some(psn);
        }
        true
    }

    /// Runs `f` on the held request at `epsn`, if there is one, and releases it; returns
    /// whether there was one.
    pub(super) fn release(&mut self, epsn: Psn, f: impl FnOnce(&RocePacket<'_>)) -> bool {
        let Some(slot) = self.slots.get_mut(slot_of(epsn)) else {
            return false;
        };
        let Some(h) = slot.take_if(|h| h.repr.bth.psn == epsn) else {
            return false;
        };
        self.held -= 1;
        f(&RocePacket {
            repr: h.repr,
            payload: &h.payload,
            icrc: h.icrc,
        });
        self.spare.push(h.payload);
        self.trim();
        true
    }

    /// Drops every held request (a fatal error, an RNR NAK).
    pub(super) fn clear(&mut self) {
        for h in self.slots.iter_mut().filter_map(Option::take) {
            self.spare.push(h.payload);
        }
        self.held = 0;
        self.trim();
    }

    /// With nothing held, keeps [`WAIT_SLOTS`] spare buffers, for the next reordering.
    fn trim(&mut self) {
        if self.held == 0 {
            self.furthest = None;
            self.spare.truncate(WAIT_SLOTS);
        }
    }

    /// Whether requests are held.
    pub(super) fn is_holding(&self) -> bool {
        self.held > 0
    }

    /// Whether the gap before the held requests is longer than reordering makes: a loss, to
    /// NAK (`epsn` the expected PSN).
    pub(super) fn gap_is_loss(&self, epsn: Psn) -> bool {
        self.held > WAIT_SLOTS
            || self
                .furthest
                .is_some_and(|f| f.distance_from(epsn) as usize > WAIT_SLOTS)
    }
}
