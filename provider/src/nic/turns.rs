//! How the device's QPs share its transmit: whose packets go out next, and how many each may
//! have outstanding.
//!
//! # Turns
//!
//! The QPs take turns at the transmit, each giving up to [`QUANTUM`] packets per turn.
//!
//! Why a quantum and not one packet per QP per turn: the transport sends consecutive packets
//! of one QP to one peer as one segmentation run (UDP GSO, `driver/runs.rs`), one pass through
//! the kernel for a whole 64 KiB WRITE, and packets of different QPs interleaved one by one
//! form no run at all: every packet became a datagram of its own, and, each QP having its own
//! source port and so its own socket, a system call of its own. Four QPs writing 64 KiB
//! messages moved a quarter of what one did. [`QUANTUM`] is a 64 KiB message at the largest
//! path MTU (IBTA 9.7.7: 4096-byte segments), as much as one run carries.
//!
//! # Who is offered a turn
//!
//! As a NIC's doorbells do, an event names the QP that may now have something to send: a
//! post to it or a packet for it, which give it a round of its own (the driver's, with
//! `Nic::poll_transmit_qp`), or one of its timers, which *schedules* it: it joins the end of
//! the *ready* queue (once). A pass offers turns from the front of that queue; a QP
//! that gave a whole quantum goes back to its end (it may have more), one that gave less has
//! nothing more for now and leaves it, until its next event. So the work of a pass is its
//! packets plus one look at each QP something happened to, however many QPs the device has
//! (with 1024 QPs, a pass over all of them after every ACK took as much CPU as sending).
//!
//! A QP may also have work and not send because the device's send window is full (see below).
//! One with packets out learns of room from its own ACKs, which schedule it. One with nothing
//! out *waits for room*: it joins the *waiting* queue, and after the ready QPs a pass offers
//! turns from its front, in the order they began to wait, until the first that still finds
//! no room (the window rule is the same for all of them: where one has none, the next has
//! none either). A pass so looks at one waiting QP more than it serves. Only such a turn
//! offers a waiting QP room to start a message (`rc/requester/window.rs`): one looked at for
//! an event of its own does not go ahead of those that waited longer. A QP that waits to
//! resend a message it began goes to the front.
//!
//! A pass stops when the driver's batch is full; a turn cut short by it is resumed first by
//! the next pass. A full pass ([`crate::nic::Nic::poll_transmit`], after a change through the
//! API) schedules every QP that has something to send, in the order they were created.
//!
//! # The send window
//!
//! The QPs that are sending share the device's send window (`rc/requester/window.rs`).
//! Every full pass over the QPs counts those sending; between passes each QP given a turn or
//! looked at alone is counted as it is found (a QP that starts sending shrinks every share at
//! once: one number all requesters read).

use std::collections::VecDeque;

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

/// What a QP did with its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Turn {
    /// Packets it gave.
    pub gave: usize,
    /// Whether the driver's batch has room for more.
    pub room: bool,
    /// Where it stands now.
    pub after: After,
}

/// Where a QP stands after its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum After {
    /// It gave a whole quantum and may have more: another turn.
    More,
    /// It has nothing out and waits for room in the device's send window; `first`: before
    /// the others (it resends).
    WaitsForRoom { first: bool },
    /// Nothing more until its next event.
    Done,
}

/// Which queues a QP is in (each at most once).
#[derive(Debug, Default, Clone, Copy)]
struct Places {
    ready: bool,
    waiting: bool,
}

/// The QPs to offer turns to, and the order of all of them (for a full pass).
#[derive(Debug, Default)]
pub(super) struct Turns {
    /// Every QP, in the order they were created.
    order: Vec<u32>,
    places: rustc_hash::FxHashMap<u32, Places>,
    ready: VecDeque<u32>,
    waiting: VecDeque<u32>,
}

impl Turns {
    /// A new QP takes its turns. The queues get room for it now, so that scheduling never
    /// allocates.
    pub(super) fn add(&mut self, qpn: u32) {
        self.order.push(qpn);
        self.places.insert(qpn, Places::default());
        let n = self.order.len();
        self.ready.reserve(n - self.ready.len());
        self.waiting.reserve(n - self.waiting.len());
    }

    /// A destroyed QP takes no more turns.
    pub(super) fn remove(&mut self, qpn: u32) {
        if self.places.remove(&qpn).is_some() {
            self.order.retain(|&q| q != qpn);
            self.ready.retain(|&q| q != qpn);
            self.waiting.retain(|&q| q != qpn);
        }
    }

    /// Every QP, in the order they were created.
    #[cfg(test)]
    fn order(&self) -> &[u32] {
        &self.order
    }

    /// Asks every QP, in the order they were created, whether it has something to send, and
    /// schedules those that do (a full pass).
    pub(super) fn schedule_each(&mut self, mut wants: impl FnMut(u32) -> bool) {
        for i in 0..self.order.len() {
            let qpn = self.order[i];
            if wants(qpn) {
                self.schedule(qpn);
            }
        }
    }

    /// QP `qpn` may have something to send: it joins the ready queue, if not in it.
    pub(super) fn schedule(&mut self, qpn: u32) {
        if let Some(p) = self.places.get_mut(&qpn) {
            if !p.ready {
                p.ready = true;
                self.ready.push_back(qpn);
            }
        }
    }

    /// QP `qpn` waits for room in the send window: it joins the end of the waiting queue, or
    /// its front if `first`; a QP already there keeps its place, unless it is to go first.
    pub(super) fn wait(&mut self, qpn: u32, first: bool) {
        let Some(p) = self.places.get_mut(&qpn) else {
            return;
        };
        if p.waiting && first && self.waiting.front() != Some(&qpn) {
            // Rare (a QP going back to resend): a walk of the queue.
            self.waiting.retain(|&q| q != qpn);
            p.waiting = false;
        }
        if !p.waiting {
            p.waiting = true;
            if first {
                self.waiting.push_front(qpn);
            } else {
                self.waiting.push_back(qpn);
            }
        }
    }

    /// Whether a pass would offer anyone a turn.
    pub(super) fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.waiting.is_empty()
    }

    /// One pass: offers turns to the ready QPs, then to the waiting ones (see the module
    /// comment), by calling `turn(qpn, quantum, waited)` (`waited`: the QP comes from the
    /// waiting queue, and is offered room); stops when the batch is full or nobody is left to
    /// offer one to. A device whose window is `full` when the pass begins has no room to
    /// offer (a pass only sends, so it stays full): the waiting QPs are not looked at.
    pub(super) fn pass(&mut self, full: bool, mut turn: impl FnMut(u32, usize, bool) -> Turn) {
        let mut waiting_open = !full;
        loop {
            let (qpn, waited) = if let Some(q) = self.ready.pop_front() {
                (q, false)
            } else if let Some(q) = waiting_open.then(|| self.waiting.pop_front()).flatten() {
                (q, true)
            } else {
                return;
            };
            self.leave(qpn, waited);
            let t = turn(qpn, QUANTUM, waited);
            if !t.room && t.gave < QUANTUM {
                // Cut short by the batch: it goes first in the next pass.
                self.rejoin_front(qpn, waited);
                return;
            }
            match t.after {
                After::More => self.schedule(qpn),
                After::WaitsForRoom { .. } if waited && t.gave == 0 => {
                    // Still no room: neither for the QPs waiting behind it.
                    self.rejoin_front(qpn, true);
                    waiting_open = false;
                }
                After::WaitsForRoom { first } => self.wait(qpn, first),
                After::Done => {}
            }
            if !t.room {
                return;
            }
        }
    }

    /// Marks `qpn` out of the queue it was taken from.
    fn leave(&mut self, qpn: u32, waited: bool) {
        if let Some(p) = self.places.get_mut(&qpn) {
            if waited {
                p.waiting = false;
            } else {
                p.ready = false;
            }
        }
    }

    /// Puts `qpn` back at the front of the queue it was taken from.
    fn rejoin_front(&mut self, qpn: u32, waited: bool) {
        let Some(p) = self.places.get_mut(&qpn) else {
            return;
        };
        let (flag, queue) = if waited {
            (&mut p.waiting, &mut self.waiting)
        } else {
            (&mut p.ready, &mut self.ready)
        };
        if !*flag {
            *flag = true;
            queue.push_front(qpn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QPs with `have[qpn]` packets each, sending into a window with room for `room` more
    /// (all the room there is, `usize::MAX`, if none is given).
    struct Sim {
        have: Vec<usize>,
        room: usize,
        looks: Vec<u32>,
    }

    impl Sim {
        fn new(have: &[usize]) -> Sim {
            Sim {
                have: have.to_vec(),
                room: usize::MAX,
                looks: Vec::new(),
            }
        }

        /// One pass of a batch of `batch` packets: the QPNs of the packets given, in order.
        fn pass(&mut self, turns: &mut Turns, batch: usize) -> Vec<u32> {
            let mut out = Vec::new();
            turns.pass(self.room == 0, |qpn, quantum, _| {
                self.looks.push(qpn);
                let left = &mut self.have[qpn as usize];
                let gave = (*left).min(quantum).min(batch - out.len()).min(self.room);
                *left -= gave;
                self.room -= gave;
                out.extend(std::iter::repeat_n(qpn, gave));
                let after = if *left == 0 {
                    After::Done
                } else if gave == quantum {
                    After::More
                } else if gave == 0 {
                    After::WaitsForRoom { first: false }
                } else {
                    After::Done // (the rest waits for its own ACKs)
                };
                Turn {
                    gave,
                    room: out.len() < batch,
                    after,
                }
            });
            out
        }

        /// Passes until one gives nothing.
        fn drain(&mut self, turns: &mut Turns, batch: usize) -> Vec<Vec<u32>> {
            std::iter::from_fn(|| Some(self.pass(turns, batch)).filter(|p| !p.is_empty())).collect()
        }
    }

    /// `n` QPs, 0 to n-1, all scheduled.
    fn turns(n: u32) -> Turns {
        let mut t = Turns::default();
        (0..n).for_each(|q| t.add(q));
        (0..n).for_each(|q| t.schedule(q));
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
        let passes = Sim::new(&[40, 5, 20]).drain(&mut t, 32);
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
        assert!(t.is_idle());
    }

    #[test]
    fn a_pass_looks_at_the_scheduled_qps_only() {
        // 4 busy QPs among 1000 idle ones: the idle ones are never looked at, and each busy
        // QP sends the same.
        let mut t = Turns::default();
        (0..1004).for_each(|q| t.add(q));
        let busy = [3, 250, 700, 1003];
        let mut have = vec![0; 1004];
        for q in busy {
            have[q as usize] = 64;
            t.schedule(q);
        }
        let mut sim = Sim::new(&have);
        for _ in 0..4 {
            assert_eq!(sim.pass(&mut t, 32).len(), 32);
        }
        assert!(busy.iter().all(|&q| sim.have[q as usize] == 32));
        let mut looked = sim.looks.clone();
        looked.sort_unstable();
        looked.dedup();
        assert_eq!(looked, busy);
        assert_eq!(sim.looks.len(), 8, "a look per quantum");
        // An event schedules a QP once, however many come before its turn.
        t.schedule(3);
        t.schedule(3);
        sim.looks.clear();
        sim.drain(&mut t, 32);
        assert!(sim.have.iter().all(|&n| n == 0) && t.is_idle());
    }

    #[test]
    fn waiting_qps_get_room_in_the_order_they_began_to_wait_and_one_look_past_it() {
        // Room for one quantum; five QPs with a message each.
        let mut t = turns(5);
        let mut sim = Sim::new(&[16; 5]);
        sim.room = 16;
        assert_eq!(runs(&sim.pass(&mut t, 32)), [(0, 16)]);
        // The other four looked once each and now wait, in order; the first of them is
        // looked at once more, as a waiting QP, and finds no room (the window filled during
        // the pass).
        assert_eq!(sim.looks, [0, 1, 2, 3, 4, 1]);
        assert!(!t.is_idle());
        sim.looks.clear();
        assert!(sim.pass(&mut t, 32).is_empty());
        assert!(
            sim.looks.is_empty(),
            "a full window: no waiting QP is looked at"
        );

        // An ACK makes room for two quanta: the first two waiting QPs send, and the third
        // finds none.
        sim.looks.clear();
        sim.room = 32;
        assert_eq!(runs(&sim.pass(&mut t, 64)), [(1, 16), (2, 16)]);
        assert_eq!(sim.looks, [1, 2, 3]);
        // A QP scheduled meanwhile (a post to it) goes before the waiting ones.
        sim.have[0] = 16;
        t.schedule(0);
        sim.room = 32;
        sim.looks.clear();
        assert_eq!(runs(&sim.pass(&mut t, 64)), [(0, 16), (3, 16)]);
        assert_eq!(sim.looks, [0, 3, 4]);
    }

    #[test]
    fn a_qp_that_resends_waits_first() {
        let mut t = Turns::default();
        (0..4).for_each(|q| t.add(q));
        (0..3).for_each(|q| t.wait(q, false));
        t.wait(2, true);
        t.wait(3, true);
        t.wait(3, true);
        let mut sim = Sim::new(&[1; 4]);
        sim.pass(&mut t, 32);
        assert_eq!(sim.looks, [3, 2, 0, 1]);
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
        let passes = Sim::new(&[1, 99, 2]).drain(&mut t, 32);
        assert_eq!(passes, [vec![0, 2, 2]]);
        assert_eq!(t.order(), [0, 2]);
        t.remove(2);
        t.remove(0);
        t.remove(7);
        t.schedule(0);
        assert!(Sim::new(&[1, 1, 1]).drain(&mut t, 32).is_empty());
        assert!(t.order().is_empty());
    }
}
