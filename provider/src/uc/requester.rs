//! What UC adds to the requester every transport shares (`qp/requester.rs`; IBTA chapter 9,
//! UC): no READ or atomics, and a send WR completes as soon as its last packet is handed to
//! the driver, since no acknowledgement will come. No AckReq and no retransmit timer: RC's
//! parts (`rc/requester.rs`) ask `ctx.is_reliable()`.

use crate::qp::context::{Events, QpContext};
use crate::qp::requester::Requester;
use crate::wr::SendOpcode;

/// Whether UC has the operation: SEND and RDMA WRITE, each with or without immediate data,
/// and the local operations (the UC opcodes of IBTA table 38 have no READ, no atomic and no
/// SEND with Invalidate).
pub fn supports(op: SendOpcode) -> bool {
    use SendOpcode::*;
    matches!(
        op,
        Send | SendWithImm | RdmaWrite | RdmaWriteWithImm | LocalInv | BindMw
    )
}

impl Requester {
    /// UC: completes, in order, every send WR whose packets have all been handed out (those
    /// before the transmission point), signaled ones with `IBV_WC_SUCCESS`, and forgets their
    /// PSNs (nothing will acknowledge them).
    pub(crate) fn complete_handed_out(&mut self, ctx: &QpContext, ev: &mut Events) {
        while self.cur > 0 {
            let Some(w) = self.sq.pop_front() else { break };
            self.cur -= 1;
            w.complete_ok(ctx.qpn, ev);
        }
        self.una = self.next_psn;
    }
}
