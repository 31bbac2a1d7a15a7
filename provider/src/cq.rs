//! Completion queues (IBTA 11.2.8 "Completion queue operations"; 11.4.2.1 "Poll for
//! Completion"). A CQ is a ring of `cqe` entries allocated at creation, so completing never
//! allocates; if the consumer lets it fill, the CQ overflows, which IBTA 11.6.2 makes an
//! asynchronous error ("CQ error") — the completion is not silently dropped: [`Cq::push`] says
//! so, and the CQ stays in error.
//!
//! Completion events (IBTA 11.4.2.2 "Request Completion Notification"): a CQ with a
//! [`Notifier`] that the consumer has armed calls it once for the next completion queued,
//! then is disarmed until armed again (the completion channel of verbs).

use std::collections::VecDeque;
use std::sync::Arc;

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
