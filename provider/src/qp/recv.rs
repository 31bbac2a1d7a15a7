//! Where a QP's responder takes its receive WQEs, whatever the transport: from the QP's own
//! receive queue, in the order posted, or, on a QP created with one, from its shared receive
//! queue (IBTA 10.2.9). The RC, UC and UD responders all consume through [`Receives`].

use std::collections::VecDeque;

use crate::srq::Srq;
use crate::wr::RecvWqe;

/// The receive WQEs a request may consume: the QP's receive queue, or its SRQ when it has one
/// (its own queue then stays empty).
pub(crate) struct Receives<'a> {
    rq: &'a mut VecDeque<RecvWqe>,
    srq: Option<&'a mut Srq>,
}

impl<'a> Receives<'a> {
    /// The receive queue `rq`, or `srq` when the QP has one.
    pub(crate) fn new(rq: &'a mut VecDeque<RecvWqe>, srq: Option<&'a mut Srq>) -> Receives<'a> {
        Receives { rq, srq }
    }

    /// Whether a receive WQE is there to take.
    pub(crate) fn ready(&self) -> bool {
        match &self.srq {
            Some(s) => !s.is_empty(),
            None => !self.rq.is_empty(),
        }
    }

    /// Takes the next receive WQE.
    pub(crate) fn take(&mut self) -> Option<RecvWqe> {
        match &mut self.srq {
            Some(s) => s.take(),
            None => self.rq.pop_front(),
        }
    }

    /// Returns a WQE taken for a message that was dropped, unconsumed: one of an SRQ goes back
    /// to its head (for whichever QP comes next); the QP's own is handed back to the caller,
    /// which keeps it for its next message.
    pub(crate) fn give_back(&mut self, wqe: RecvWqe) -> Option<RecvWqe> {
        match &mut self.srq {
            Some(s) => {
                s.give_back(wqe);
                None
            }
            None => Some(wqe),
        }
    }
}
