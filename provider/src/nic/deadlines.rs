//! The device's timers (IBTA 9.7.6.1: each QP's local ACK timeout and RNR timer, and its held
//! ACK's end, `timer.rs`) in one min-heap of (deadline, QPN), so that the device finds the
//! QPs whose timers are due, and its own next deadline, without looking at every QP: with
//! 1024 QPs, a look at all of them whenever the earliest deadline passed (thousands of times
//! a second, a held ACK lasting 50 µs) was a round's largest cost.
//!
//! Each QP has at most one *live* entry, at the earliest deadline it was known to have. A
//! QP's deadline that moves earlier gets a new live entry; one that moves later, or a timer
//! that stops, leaves the live entry as it is, which then comes due early: the QP is looked
//! at, has nothing due, and its entry is renewed at its real deadline. So the heap's top is
//! never later than the earliest deadline (what a driver needs to sleep on), and an entry
//! that is not live (an older, later one) is dropped when it reaches the top.
//!
//! The engine notes a QP's deadline after everything it does to that QP (a packet, a turn
//! at the transmit, a timeout, a modify). A QP lent out through [`crate::nic::Nic::qp`] may
//! change unseen: it is *lent*, and its deadline is read again before the next look at the
//! heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use rustc_hash::FxHashMap;

/// A QP's place in the heap.
#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    /// The deadline of its live entry.
    live: Option<Instant>,
    /// Lent out since its deadline was last noted.
    lent: bool,
}

/// The QPs' deadlines (see the module comment).
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u32)>>,
    qps: FxHashMap<u32, Entry>,
    lent: Vec<u32>,
    /// The QPs [`Deadlines::expire`] found due (kept to reuse its room).
    due: Vec<u32>,
}

impl Deadlines {
    /// A new QP, with no deadline. Room is made for its entries now, so that noting
    /// deadlines does not allocate (an old entry or two besides its live one).
    pub(super) fn add(&mut self, qpn: u32) {
        self.qps.insert(qpn, Entry::default());
        self.heap.reserve(3);
        self.lent.reserve(1);
        self.due.reserve(1);
    }

    /// A destroyed QP: its entries are dropped as they reach the top.
    pub(super) fn remove(&mut self, qpn: u32) {
        if self.qps.remove(&qpn).is_some_and(|e| e.lent) {
            self.lent.retain(|&q| q != qpn);
        }
    }

    /// QP `qpn`'s earliest deadline is now `at`. A QP with none (a responder's, mostly) costs
    /// no lookup: the rounds note every QP they look at.
    pub(super) fn note(&mut self, qpn: u32, at: Option<Instant>) {
        let Some(at) = at else {
            return;
        };
        let Some(e) = self.qps.get_mut(&qpn) else {
            return;
        };
        if e.live.is_none_or(|live| at < live) {
            e.live = Some(at);
            self.heap.push(Reverse((at, qpn)));
        }
    }

    /// QP `qpn` is lent out: its deadline may change unseen.
    pub(super) fn lend(&mut self, qpn: u32) {
        if let Some(e) = self.qps.get_mut(&qpn) {
            if !e.lent {
                e.lent = true;
                self.lent.push(qpn);
            }
        }
    }

    /// Notes the deadlines of the lent QPs, `deadline(qpn)` each.
    pub(super) fn note_lent(&mut self, deadline: impl Fn(u32) -> Option<Instant>) {
        let lent = std::mem::take(&mut self.lent);
        for &qpn in &lent {
            if let Some(e) = self.qps.get_mut(&qpn) {
                e.lent = false;
            }
            self.note(qpn, deadline(qpn));
        }
        self.lent = lent;
        self.lent.clear();
    }

    /// No later than the earliest deadline of all QPs (`deadline(qpn)` for the lent ones).
    pub(super) fn next(&self, deadline: impl Fn(u32) -> Option<Instant>) -> Option<Instant> {
        let top = self.heap.peek().map(|Reverse((at, _))| *at);
        let lent = self.lent.iter().filter_map(|&q| deadline(q)).min();
        match (top, lent) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes out the live entries due at `now`: the QPs to look at, whose deadlines are
    /// then to be noted again (their live entries are gone).
    pub(super) fn expire(&mut self, now: Instant) -> Vec<u32> {
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        while let Some(&Reverse((at, qpn))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            if let Some(e) = self.qps.get_mut(&qpn) {
                if e.live == Some(at) {
                    e.live = None;
                    due.push(qpn);
                }
            }
        }
        due
    }

    /// Gives back the list [`Deadlines::expire`] returned, for its room.
    pub(super) fn give_back(&mut self, due: Vec<u32>) {
        self.due = due;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn the_top_is_never_later_than_the_earliest_deadline_and_only_live_entries_come_due() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        (1..=3).for_each(|q| d.add(q));
        d.note(1, Some(ms(t0, 67)));
        d.note(2, Some(ms(t0, 30)));
        d.note(3, None);
        assert_eq!(d.next(|_| None), Some(ms(t0, 30)));
        // QP 1's deadline moves earlier (a held ACK): a new live entry; later: none.
        d.note(1, Some(ms(t0, 1)));
        d.note(2, Some(ms(t0, 40)));
        assert_eq!(d.next(|_| None), Some(ms(t0, 1)));
        let due = d.expire(ms(t0, 35));
        assert_eq!(due, [1, 2], "QP 2's live entry comes due early");
        d.give_back(due);
        // Looked at, each is noted again at its real deadline; QP 1's old entry at 67 ms is
        // not live any more and is dropped.
        d.note(1, Some(ms(t0, 100)));
        d.note(2, Some(ms(t0, 40)));
        assert_eq!(d.expire(ms(t0, 70)), [2]);
        assert_eq!(d.expire(ms(t0, 100)), [1]);
        assert_eq!(d.next(|_| None), None);
    }

    #[test]
    fn a_lent_qp_counts_at_its_own_deadline_until_noted_and_a_removed_one_is_forgotten() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        d.add(1);
        d.add(2);
        d.note(2, Some(ms(t0, 50)));
        d.lend(1);
        d.lend(1);
        let deadline = |q| (q == 1).then(|| ms(t0, 5));
        assert_eq!(d.next(deadline), Some(ms(t0, 5)));
        d.note_lent(deadline);
        assert_eq!(d.next(|_| None), Some(ms(t0, 5)));
        d.remove(1);
        d.remove(2);
        assert!(d.expire(ms(t0, 60)).is_empty());
        assert_eq!(d.next(|_| None), None);
    }
}
