//! Local operations on the send queue (RC and UC): `IBV_WR_BIND_MW` and `IBV_WR_LOCAL_INV` (IBTA Vol. 1,
//! 10.6.7.2 "Binding a memory window", 10.6.7.2.4 / 11.4.1.1 "Local Invalidate"; kernel rxe's
//! `rxe_do_local_ops` in `rxe_req.c`).
//!
//! They send no packet. A local operation runs when transmission reaches it, so after every
//! WR posted before it has been sent (and, with `IBV_SEND_FENCE`, after the READs and atomics
//! before it have completed): a bind is in force for every request posted after it. Its
//! completion still comes in send queue order, when every WR before it has completed.
//!
//! A failure completes the WR with `IBV_WC_MW_BIND_ERR` (bind) or `IBV_WC_LOC_QP_OP_ERR`
//! (invalidate), as rxe does, and moves the QP to ERR. If WRs before it are still in flight,
//! it waits until they complete, so that the error completion keeps its place in the order.

use super::Requester;
use crate::error::{Error, Result};
use crate::mr::MrTable;
use crate::qp::context::{Events, QpContext};
use crate::qp::send_queue::SendWqe;
use crate::wc::WcStatus;
use crate::wr::{RemoteAddr, SendFlags, SendOpcode, SendWr, SgeList};

impl Requester {
    /// `ibv_post_send` of a BIND_MW or LOCAL_INV: checked and queued.
    ///
    /// # Errors
    /// `EINVAL` for a BIND_MW without its bind.
    pub(crate) fn post_local(&mut self, ctx: &QpContext, wr: &SendWr) -> Result<()> {
        if wr.opcode == SendOpcode::BindMw && wr.bind_mw.is_none() {
            return Err(Error::InvalidArgument("BIND_MW without bind_mw"));
        }
        self.sq.push_back(SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            signaled: ctx.sq_sig_all || wr.flags.contains(SendFlags::SIGNALED),
            fence: wr.flags.contains(SendFlags::FENCE),
            solicited: false,
            sges: SgeList::new(),
            inline: None,
            total: 0,
            imm: wr.imm_data_or_inv_rkey,
            remote: RemoteAddr::default(),
            compare_add: 0,
            swap: 0,
            bind: wr.bind_mw,
            ud: None,
            xrc_srqn: 0,
            started: false,
            first_psn: self.max_psn,
            npkts: 0,
        });
        Ok(())
    }

    /// Executes the local operation at `cur`, if there is one and its turn has come; returns
    /// whether transmission moved past it.
    pub(super) fn run_local_op(
        &mut self,
        ctx: &QpContext,
        start_new: bool,
        mrs: &MrTable,
        ev: &mut Events,
    ) -> bool {
        let Some(w) = self.sq.get(self.cur) else {
            return false;
        };
        if !w.is_local() || self.rc.rnr_wait {
            return false;
        }
        if w.started {
            // Executed before a go-back moved transmission behind it: never twice.
            self.cur += 1;
            return true;
        }
        if !start_new || (w.fence && self.rd_atomic_in_flight() > 0) {
            return false;
        }
        let outcome = match (w.opcode, &w.bind) {
            (SendOpcode::BindMw, Some(bind)) => mrs
                .bind_window(ctx.pd, ctx.qpn, bind)
                .map(drop)
                .map_err(|_| WcStatus::MwBindErr),
            (SendOpcode::LocalInv, _) => mrs
                .invalidate(ctx.pd, w.imm, None)
                .map_err(|_| WcStatus::LocQpOpErr),
            _ => Err(WcStatus::LocQpOpErr),
        };
        match outcome {
            Ok(()) => {
                let w = &mut self.sq[self.cur];
                w.started = true;
                w.first_psn = self.max_psn;
                self.cur += 1;
                self.complete_done_local_ops(ctx, ev);
                true
            }
            Err(_) if self.cur > 0 => false, // retried when the WRs before it complete
            Err(status) => {
                self.fail_front(ctx, status, ev);
                false
            }
        }
    }

    /// Completes the local operations at the front that have run: nothing before them is
    /// left, so their turn to complete has come.
    pub(crate) fn complete_done_local_ops(&mut self, ctx: &QpContext, ev: &mut Events) {
        while let Some(w) = self.sq.front() {
            if !(w.is_local() && w.started) {
                break;
            }
            let w = self.sq.pop_front().expect("just looked");
            w.complete_ok(ctx.qpn, ev);
            self.cur = self.cur.saturating_sub(1);
        }
    }
}
