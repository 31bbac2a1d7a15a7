//! How the device's QPs share its transmit: whose packets go out next, and how many each may
//! have outstanding.
//!
//! # Turns
//!
//! The QPs take turns at the transmit, each giving up to [`QUANTUM`] packets per turn, in a
//! fixed round-robin order that a pass resumes where the last one stopped.
//!
//! Why a quantum and not one packet per QP per turn: the transport sends consecutive packets
//! of one QP to one peer as one segmentation run (UDP GSO, `driver/runs.rs`), one pass through
//! the kernel for a whole 64 KiB WRITE, and packets of different QPs interleaved one by one
//! form no run at all: every packet became a datagram of its own, and, each QP having its own
//! source port and so its own socket, a system call of its own. Four QPs writing 64 KiB
//! messages moved a quarter of what one did. [`QUANTUM`] is a 64 KiB message at the largest
//! path MTU (IBTA 9.7.7: 4096-byte segments), as much as one run carries.
//!
//! Why resume: a pass stops when the driver's batch is full, and a pass that always started
//! at the first QP would serve the first QPs first in every round and look again at every
//! idle QP before the busy ones; resuming makes the work of a round its packets plus at most
//! one look at each QP, and shares the transmit evenly between busy QPs.
//!
//! # The send window
//!
//! The QPs that are sending share the device's send window (`rc/requester/window.rs`).
//! Every full pass over the QPs counts those sending; between passes a QP found sending that
//! was not is counted at once and shrinks every share (one number all requesters read), one
//! that stopped only at the next pass.

use crate::rc::DeviceWindow;

/// Most packets one QP gives per turn.
pub const QUANTUM: usize = 16;

/// The QPs sending, which share the device's window.
#[derive(Debug, Default)]
pub(super) struct Senders {
    window: DeviceWindow,
    sending: usize,
}

impl Senders {
    /// The window the QPs take their places in.
    pub(super) fn window(&self) -> &DeviceWindow {
        &self.window
    }

    /// A full pass found `sending` QPs sending.
    pub(super) fn recount(&mut self, sending: usize) {
        self.sending = sending;
        self.window.share_between(sending);
    }

    /// Keeps the count of a QP that was `counted` and now is or is not `sending`.
    pub(super) fn update(&mut self, counted: &mut bool, sending: bool) {
        if *counted != sending {
            *counted = sending;
            self.sending = if sending {
                self.sending + 1
            } else {
                self.sending.saturating_sub(1)
            };
            self.window.share_between(self.sending);
        }
    }
}

/// The round-robin order of the device's QPNs and where the next pass starts.
#[derive(Debug, Default)]
pub(super) struct Turns {
    order: Vec<u32>,
    next: usize,
}

impl Turns {
    /// A new QP takes its turns (at the end of the order).
    pub(super) fn add(&mut self, qpn: u32) {
        self.order.push(qpn);
    }

    /// A destroyed QP takes no more turns.
    pub(super) fn remove(&mut self, qpn: u32) {
        if let Some(i) = self.order.iter().position(|&q| q == qpn) {
            self.order.swap_remove(i);
            if self.next >= self.order.len() {
                self.next = 0;
            }
        }
    }

    /// One pass: offers each QP its turn, from where the last pass stopped, by calling
    /// `turn(qpn, quantum)`, which returns how many packets it gave and whether there is
    /// room for more; stops when there is no room or once every QP in a row gave none.
    pub(super) fn pass(&mut self, mut turn: impl FnMut(u32, usize) -> (usize, bool)) {
        let n = self.order.len();
        let mut idle = 0;
        while idle < n {
            let qpn = self.order[self.next];
            let (gave, room) = turn(qpn, QUANTUM);
            idle = if gave == 0 { idle + 1 } else { 0 };
            if !room && gave < QUANTUM {
                // Cut short by the batch: this QP goes first in the next pass.
                return;
            }
            self.next = (self.next + 1) % n;
            if !room {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs passes of a batch of `room` packets over QPs that have `have[i]` packets each;
    /// returns the QPNs of the packets in the order they were given.
    fn drain(turns: &mut Turns, have: &mut [usize], room: usize) -> Vec<Vec<u32>> {
        let mut passes = Vec::new();
        loop {
            let mut out = Vec::new();
            turns.pass(|qpn, quantum| {
                let left = &mut have[qpn as usize];
                let gave = (*left).min(quantum).min(room - out.len());
                *left -= gave;
                out.extend(std::iter::repeat_n(qpn, gave));
                (gave, out.len() < room)
            });
            if out.is_empty() {
                return passes;
            }
            passes.push(out);
        }
    }

    fn turns(n: u32) -> Turns {
        let mut t = Turns::default();
        (0..n).for_each(|q| t.add(q));
        t
    }

    /// A pass as (QPN, packets) runs.
    fn runs(pass: &[u32]) -> Vec<(u32, usize)> {
        let mut runs: Vec<(u32, usize)> = Vec::new();
        for &q in pass {
            match runs.last_mut() {
                Some((p, n)) if *p == q => *n += 1,
                _ => runs.push((q, 1)),
            }
        }
        runs
    }

    #[test]
    fn each_qp_gives_a_quantum_in_turn_and_the_next_pass_resumes() {
        assert_eq!(QUANTUM, 16, "the figures below assume it");
        let mut t = turns(3);
        let passes = drain(&mut t, &mut [40, 5, 20], 32);
        let got: Vec<_> = passes.iter().map(|p| runs(p)).collect();
        assert_eq!(
            got,
            [
                // QP 2's turn is cut short by the batch: it goes first in the next pass.
                vec![(0, 16), (1, 5), (2, 11)],
                // QP 0's next turn, then QPs 1 and 2 have nothing and QP 0's comes again.
                vec![(2, 9), (0, 23)],
                vec![(0, 1)],
            ]
        );
    }

    #[test]
    fn busy_qps_share_the_transmit_evenly_however_many_are_idle() {
        // 4 busy QPs among 1000 idle ones, batches of 32: every pass gives two QPs a full
        // quantum each and stops, and over the passes each busy QP sends the same.
        let mut t = turns(1004);
        let mut have = vec![0; 1004];
        for q in [3, 250, 700, 1003] {
            have[q] = 64;
        }
        let mut looks = 0;
        let mut sent = vec![0; 1004];
        for _ in 0..4 {
            let mut out = 0;
            t.pass(|qpn, quantum| {
                looks += 1;
                let gave = have[qpn as usize].min(quantum).min(32 - out);
                have[qpn as usize] -= gave;
                sent[qpn as usize] += gave;
                out += gave;
                (gave, out < 32)
            });
            assert_eq!(out, 32);
        }
        assert_eq!([sent[3], sent[250], sent[700], sent[1003]], [32; 4]);
        // Two cycles of the order, each QP looked at once in each.
        assert_eq!(looks, 2 * 1004);
    }

    #[test]
    fn a_qp_that_starts_sending_shrinks_every_share_at_once() {
        use crate::rc::{DEVICE_WINDOW_PSNS, WINDOW_PSNS};
        let mut s = Senders::default();
        let w = s.window().clone();
        s.recount(1);
        assert_eq!(w.share(), WINDOW_PSNS);
        let mut counted = [true, false, false, false];
        for c in &mut counted[1..] {
            s.update(c, true);
        }
        assert_eq!(w.share(), DEVICE_WINDOW_PSNS / 4);
        s.update(&mut counted[3], true);
        assert_eq!(w.share(), DEVICE_WINDOW_PSNS / 4, "counted once");
        s.update(&mut counted[3], false);
        s.update(&mut counted[2], false);
        assert_eq!(w.share(), DEVICE_WINDOW_PSNS / 2);
    }

    #[test]
    fn removing_a_qp_keeps_the_others_turns() {
        let mut t = turns(3);
        t.remove(1);
        let passes = drain(&mut t, &mut [1, 99, 2], 32);
        assert_eq!(passes, [vec![0, 2, 2]]);
        t.remove(2);
        t.remove(0);
        t.remove(7);
        assert!(drain(&mut t, &mut [1, 1, 1], 32).is_empty());
    }
}
