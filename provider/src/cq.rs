//! Completion queues (IBTA 11.2.8 "Completion queue operations"; 11.4.2.1 "Poll for
//! Completion"). A CQ is a ring of `cqe` entries allocated at creation, so completing never
//! allocates; if the consumer lets it fill, the CQ overflows, which IBTA 11.6.2 makes an
//! asynchronous error ("CQ error") — the completion is not silently dropped: [`Cq::push`] says
//! so, and the CQ stays in error.
//!
//! Completion events (IBTA 11.4.2.2 "Request Completion Notification"): a CQ with a
//! [`Notifier`] that the consumer has armed calls it once for the next completion queued,
//! then is disarmed until armed again (the completion channel of verbs).
//!
//! Resizing (IBTA 11.2.8.3 "Resize Completion Queue"; `ibv_resize_cq(3)`): [`Cq::resize`]
//! allocates the new ring there and then and moves the waiting completions into it, in order,
//! so completing still never allocates.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::Error;
use crate::wc::WorkCompletion;

/// Why a completion could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqOverflow;

/// What an armed CQ calls when a completion arrives (from whichever thread queues it, with
/// the NIC locked: it must only signal, never call back into the device).
#[derive(Clone)]
pub struct Notifier(pub Arc<dyn Fn() + Send + Sync>);

impl core::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Notifier")
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    entries: VecDeque<WorkCompletion>,
    cqe: usize,
    overflowed: bool,
    notifier: Option<Notifier>,
    armed: bool,
}

impl Cq {
    /// A CQ that holds at least `cqe` completions.
    pub fn new(cqe: usize) -> Cq {
        Cq {
            entries: VecDeque::with_capacity(cqe),
            cqe,
            overflowed: false,
            notifier: None,
            armed: false,
        }
    }

    /// Sets (or clears) what [`Cq::arm`] notifies.
    pub fn set_notifier(&mut self, notifier: Option<Notifier>) {
        self.notifier = notifier;
    }

    /// Arms the CQ: the next completion queued calls the notifier once (`ibv_req_notify_cq`;
    /// softrnic treats "solicited only" as "next", a superset of the events it asks for).
    pub fn arm(&mut self) {
        self.armed = true;
    }

    /// Capacity in completions.
    pub fn capacity(&self) -> usize {
        self.cqe
    }

    /// Completions waiting to be polled.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the CQ has overflowed (the async CQ error was raised).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Resizes the CQ to hold `cqe` completions, keeping those waiting, oldest first; returns
    /// the new capacity (exactly `cqe`; `ibv_resize_cq(3)` lets it be more). An overflowed CQ
    /// can be resized too and stays in error: the lost completion is not brought back (rxe
    /// checks nothing but the sizes either).
    ///
    /// # Errors
    /// `EINVAL`, leaving the CQ unchanged, for 0 or fewer than the completions waiting (what
    /// rxe's `rxe_cq_chk_attr` refuses; the device's `max_cqe` is the NIC's to check).
    pub fn resize(&mut self, cqe: usize) -> crate::error::Result<usize> {
        if cqe == 0 {
            return Err(Error::InvalidArgument("cqe must be at least 1"));
        }
        if cqe < self.entries.len() {
            return Err(Error::InvalidArgument(
                "cqe is smaller than the completions in the CQ",
            ));
        }
        let mut ring = VecDeque::with_capacity(cqe);
        ring.extend(self.entries.drain(..));
        self.entries = ring;
        self.cqe = cqe;
        Ok(cqe)
    }

    /// Queues a completion; fails, and marks the CQ in error, when it is full.
    pub fn push(&mut self, wc: WorkCompletion) -> Result<(), CqOverflow> {
        if self.entries.len() >= self.cqe {
            self.overflowed = true;
            return Err(CqOverflow);
        }
        self.entries.push_back(wc);
        if self.armed {
            if let Some(n) = &self.notifier {
                self.armed = false;
                (n.0)();
            }
        }
        Ok(())
    }

    /// Removes the completions of QP `qpn` (a QP reset: `nic/reset.rs`), keeping the order
    /// of the others.
    pub fn remove_qp(&mut self, qpn: u32) {
        self.entries.retain(|wc| wc.qp_num != qpn);
    }

    /// Moves up to `out.len()` completions, oldest first, into `out`; returns how many.
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        let n = out.len().min(self.entries.len());
        for (slot, wc) in out.iter_mut().zip(self.entries.drain(..n)) {
            *slot = wc;
        }
        n
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wc::{WcOpcode, WcStatus};

    fn wc(id: u64) -> WorkCompletion {
        WorkCompletion::error(id, WcStatus::Success, WcOpcode::Send, 7)
    }

    #[test]
    fn polls_in_order_and_partially() {
        let mut cq = Cq::new(4);
        for id in 0..3 {
            cq.push(wc(id)).unwrap();
        }
        let mut out = [wc(99); 2];
        assert_eq!(cq.poll(&mut out), 2);
        assert_eq!([out[0].wr_id, out[1].wr_id], [0, 1]);
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, 2);
        assert_eq!(cq.poll(&mut out), 0);
        assert!(cq.is_empty());
    }

    #[test]
    fn overflow_is_reported_not_silent() {
        let mut cq = Cq::new(2);
        cq.push(wc(1)).unwrap();
        cq.push(wc(2)).unwrap();
        assert_eq!(cq.push(wc(3)), Err(CqOverflow));
        assert!(cq.overflowed());
        assert_eq!(cq.len(), 2, "the queued completions are kept");
    }

    #[test]
    fn an_armed_cq_notifies_once_per_arming() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let mut cq = Cq::new(8);
        cq.set_notifier(Some(Notifier(Arc::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        }))));
        cq.push(wc(1)).unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 0, "not armed");
        cq.arm();
        cq.push(wc(2)).unwrap();
        cq.push(wc(3)).unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 1, "one event per arming");
        cq.arm();
        cq.push(wc(4)).unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 2);
    }

    fn ids(cq: &mut Cq) -> Vec<u64> {
        let mut out = [wc(0); 16];
        let n = cq.poll(&mut out);
        out[..n].iter().map(|w| w.wr_id).collect()
    }

    #[test]
    fn resizing_up_keeps_the_completions_in_order_and_makes_room() {
        let mut cq = Cq::new(3);
        for id in 0..3 {
            cq.push(wc(id)).unwrap();
        }
        assert_eq!(cq.resize(8), Ok(8));
        assert_eq!(cq.capacity(), 8);
        for id in 3..8 {
            cq.push(wc(id)).unwrap();
        }
        assert_eq!(cq.push(wc(8)), Err(CqOverflow), "full at the new size");
        assert_eq!(ids(&mut cq), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn resizing_down_to_what_is_waiting_keeps_it_in_order() {
        let mut cq = Cq::new(8);
        for id in 0..5 {
            cq.push(wc(id)).unwrap();
        }
        let mut out = [wc(0); 2];
        assert_eq!(
            cq.poll(&mut out),
            2,
            "the ring's head is no longer at slot 0"
        );
        assert_eq!(cq.resize(3), Ok(3));
        assert_eq!(cq.push(wc(5)), Err(CqOverflow));
        assert_eq!(ids(&mut cq), [2, 3, 4]);
    }

    #[test]
    fn resizing_below_what_is_waiting_or_to_zero_is_einval_and_changes_nothing() {
        let mut cq = Cq::new(4);
        for id in 0..3 {
            cq.push(wc(id)).unwrap();
        }
        for cqe in [0, 1, 2] {
            assert_eq!(cq.resize(cqe).map_err(|e| e.errno()), Err(22), "cqe {cqe}");
            assert_eq!((cq.capacity(), cq.len()), (4, 3));
        }
        assert_eq!(ids(&mut cq), [0, 1, 2]);
    }

    #[test]
    fn an_overflowed_cq_resizes_and_stays_in_error() {
        let mut cq = Cq::new(1);
        cq.push(wc(1)).unwrap();
        assert_eq!(cq.push(wc(2)), Err(CqOverflow));
        assert_eq!(cq.resize(4), Ok(4));
        assert!(cq.overflowed(), "the lost completion is not brought back");
        assert_eq!(ids(&mut cq), [1]);
    }

    #[test]
    fn a_resized_cq_does_not_allocate_when_completing() {
        let mut cq = Cq::new(2);
        cq.resize(8).unwrap();
        let cap = cq.entries.capacity();
        for id in 0..8 {
            cq.push(wc(id)).unwrap();
        }
        assert_eq!(cq.entries.capacity(), cap);
    }

    #[test]
    fn never_grows_past_its_capacity() {
        let mut cq = Cq::new(8);
        let cap = cq.entries.capacity();
        for round in 0..100 {
            for id in 0..8 {
                cq.push(wc(round * 8 + id)).unwrap();
            }
            let mut out = [wc(0); 8];
            assert_eq!(cq.poll(&mut out), 8);
        }
        assert_eq!(
            cq.entries.capacity(),
            cap,
            "no reallocation on the completion path"
        );
    }
}
