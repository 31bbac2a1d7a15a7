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
//! A receiver's socket buffer holds what its senders have in flight until it reads it, and
//! overflows, dropping whole runs, when they have more: every RC QP's window
//! ([`WINDOW_PSNS`]) fits, but four QPs' windows to one peer did not, and the losses and
//! go-back-N retransmissions that followed made four QPs slower than one. So the device
//! shares one window of [`DEVICE_WINDOW_PSNS`] between the QPs that are sending
//! ([`window_share`]): each gets an equal part, at most a QP's own window, at least one
//! packet (so that a QP whose peer stopped answering holds up none of the others; with 1024
//! QPs sending, that is 4 MiB in flight at the largest path MTU). Every full pass over the QPs
//! counts those sending; between passes a QP found sending that was not is counted at once
//! and shrinks every share (one number all requesters read, [`WindowShare`]), one that
//! stopped only at the next pass.

use crate::rc::{WindowShare, WINDOW_PSNS};

/// Most packets one QP gives per turn.
pub const QUANTUM: usize = 16;

/// PSNs the device's QPs may have outstanding together (beyond each one's packet): 4 MiB of
/// 4096-byte packets, half what a receive socket's buffer holds (`SO_RCVBUF`, 4 MiB asked,
/// which the kernel doubles for its overhead).
pub const DEVICE_WINDOW_PSNS: u32 = 1024;

/// The window of each of `sending` QPs (see the module comment).
pub fn window_share(sending: usize) -> u32 {
    let n = u32::try_from(sending.max(1)).unwrap_or(u32::MAX);
    (DEVICE_WINDOW_PSNS / n).clamp(1, WINDOW_PSNS)
}

/// The device's send window: how many QPs share it and the share each QP's requester reads.
#[derive(Debug, Default)]
pub(super) struct DeviceWindow {
    share: WindowShare,
    sending: usize,
}

impl DeviceWindow {
    /// The share a new QP reads.
    pub(super) fn share(&self) -> WindowShare {
        self.share.clone()
    }

    /// A full pass found `sending` QPs sending.
    pub(super) fn recount(&mut self, sending: usize) {
        self.sending = sending;
        self.share.set(window_share(sending));
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
            self.share.set(window_share(self.sending));
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
    fn the_window_is_shared_between_the_qps_sending() {
        assert_eq!(window_share(0), WINDOW_PSNS);
        assert_eq!(
            window_share(1),
            WINDOW_PSNS,
            "a QP's own window is the limit"
        );
        assert_eq!(window_share(4), DEVICE_WINDOW_PSNS / 4);
        assert_eq!(window_share(16), DEVICE_WINDOW_PSNS / 16);
        assert_eq!(window_share(5000), 1, "a packet each at least");
    }

    #[test]
    fn a_qp_that_starts_sending_shrinks_every_share_at_once() {
        let mut w = DeviceWindow::default();
        let (a, b) = (w.share(), w.share());
        w.recount(1);
        assert_eq!(a.get(), WINDOW_PSNS);
        let mut counted = [true, false, false, false];
        for c in &mut counted[1..] {
            w.update(c, true);
        }
        assert_eq!(
            (a.get(), b.get()),
            (DEVICE_WINDOW_PSNS / 4, DEVICE_WINDOW_PSNS / 4)
        );
        w.update(&mut counted[3], true);
        assert_eq!(a.get(), DEVICE_WINDOW_PSNS / 4, "counted once");
        w.update(&mut counted[3], false);
        w.update(&mut counted[2], false);
        assert_eq!(b.get(), WINDOW_PSNS.min(DEVICE_WINDOW_PSNS / 2));
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
