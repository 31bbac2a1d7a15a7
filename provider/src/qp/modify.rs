//! `ibv_modify_qp` on a QP of any transport (IBTA 11.2.5.2): the attributes checked and
//! applied all or none, and what a state change does (IBTA 10.3: RESET forgets everything, ERR
//! flushes every outstanding WR, SQD drains the send queue). Which transitions and attribute masks are allowed is [`crate::qp_state`]'s.

use softrnic_wire::Psn;

use super::context::{CqSide, Events};
use super::{inbound, Qp, QpAttr, QpLimits};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::mr::Access;
use crate::qp_state::{
    check_modify, local_ack_timeout, rnr_retries, transport_retries, AttrMask, QpState, QpType,
};
use crate::timer::TimerTable;

impl Qp {
    /// `ibv_modify_qp`: checks the transition and the attributes, then applies them all or
    /// none.
    ///
    /// # Errors
    /// `EINVAL` for a refused transition or mask (see [`crate::qp_state`]) or an attribute
    /// value out of range (path MTU above the port's, `max_rd_atomic` above the device's,
    /// `timeout` > 31, `retry_cnt`/`rnr_retry` > 7, `min_rnr_timer` > 31, unknown access
    /// bits, an unspecified peer address).
    pub fn modify(&mut self, attr: &QpAttr, mask: AttrMask, limits: &QpLimits) -> Result<()> {
        let next = check_modify(
            self.qp_type,
            self.state,
            mask,
            attr.cur_qp_state,
            attr.qp_state,
        )?;
        let mut ctx = self.ctx.clone();
        if mask.contains(AttrMask::PATH_MTU) {
            if attr.path_mtu > limits.active_mtu {
                return Err(Error::InvalidArgument(
                    "path MTU above the port's active MTU",
                ));
            }
            ctx.pmtu = attr.path_mtu.bytes();
        }
        if mask.contains(AttrMask::ACCESS_FLAGS) {
            let known = Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC
                | Access::FLUSH_GLOBAL
                | Access::FLUSH_PERSISTENT
                // Applications pass their MRs' flags; on a QP, ON_DEMAND grants nothing and
                // is kept as given, as the kernel (which checks no bit here) does.
                | Access::ON_DEMAND;
            if !known.contains(attr.qp_access_flags) {
                return Err(Error::InvalidArgument("unknown QP access flags"));
            }
            ctx.access = attr.qp_access_flags;
        }
        if mask.contains(AttrMask::AV) {
            if attr.dest.is_unspecified() {
                return Err(Error::InvalidArgument(
                    "the address vector has no destination GID",
                ));
            }
            ctx.dst = attr.dest;
        }
        if mask.contains(AttrMask::DEST_QPN) {
            if attr.dest_qp_num > 0x00ff_ffff {
                return Err(Error::InvalidArgument("dest_qp_num is 24 bits"));
            }
            ctx.dest_qpn = attr.dest_qp_num;
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC) {
            if attr.max_rd_atomic > limits.max_rd_atomic {
                return Err(Error::InvalidArgument(
                    "max_rd_atomic above max_qp_init_rd_atom",
                ));
            }
            ctx.max_rd_atomic = attr.max_rd_atomic;
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            if attr.max_dest_rd_atomic > limits.max_dest_rd_atomic {
                return Err(Error::InvalidArgument(
                    "max_dest_rd_atomic above max_qp_rd_atom",
                ));
            }
            ctx.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if mask.contains(AttrMask::MIN_RNR_TIMER) {
            if attr.min_rnr_timer > 31 {
                return Err(Error::InvalidArgument("min_rnr_timer must be 0..=31"));
            }
            ctx.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask.contains(AttrMask::TIMEOUT) {
            ctx.ack_timeout = local_ack_timeout(attr.timeout)?;
        }
        if mask.contains(AttrMask::RETRY_CNT) {
            transport_retries(attr.retry_cnt)?;
            ctx.retry_cnt = attr.retry_cnt;
        }
        if mask.contains(AttrMask::RNR_RETRY) {
            rnr_retries(attr.rnr_retry)?;
            ctx.rnr_retry = attr.rnr_retry;
        }
        if mask.contains(AttrMask::QKEY) {
            ctx.qkey = attr.qkey;
        }
        if self.qp_type == QpType::Ud {
            ctx.pmtu = crate::ud::max_datagram(limits);
        }
        if mask.contains(AttrMask::PKEY_INDEX) && attr.pkey_index != 0 {
            return Err(Error::InvalidArgument("the P_Key table has one entry"));
        }
        if mask.contains(AttrMask::PORT) && attr.port_num != 1 {
            return Err(Error::InvalidArgument("the device has one port, number 1"));
        }
        if (mask.contains(AttrMask::RQ_PSN) && attr.rq_psn > Psn::MASK)
            || (mask.contains(AttrMask::SQ_PSN) && attr.sq_psn > Psn::MASK)
        {
            return Err(Error::InvalidArgument("PSNs are 24 bits"));
        }
        // Everything checked: apply.
        self.ctx = ctx;
        if mask.contains(AttrMask::RQ_PSN) {
            self.resp.set_epsn(Psn::new(attr.rq_psn));
        }
        if mask.contains(AttrMask::SQ_PSN) {
            self.req.set_sq_psn(Psn::new(attr.sq_psn));
        }
        let prev = self.state;
        self.state = next;
        if prev != next {
            debug_event!(target: "softrnic::qp", qpn = self.ctx.qpn, from = ?prev, to = ?next, "state change");
        }
        match next {
            QpState::Reset if prev != QpState::Reset => {
                self.req.reset();
                self.resp.reset();
                self.rq.clear();
                self.timers = TimerTable::default();
                // The counters are the QP's whole life's, as a device's are.
                self.ev = Events {
                    counters: self.ev.counters,
                    ..Events::default()
                };
            }
            QpState::Rts if prev == QpState::Rtr => self.req.reset_retries(&self.ctx),
            QpState::Err if prev != QpState::Err => self.enter_error(),
            QpState::Sqd if prev == QpState::Rts => {
                self.sqd_notify =
                    mask.contains(AttrMask::EN_SQD_ASYNC_NOTIFY) && attr.en_sqd_async_notify != 0;
                self.sq_draining = true;
                self.check_drained();
            }
            QpState::Sqd
                if mask.contains(AttrMask::RETRY_CNT) || mask.contains(AttrMask::RNR_RETRY) =>
            {
                self.req.reset_retries(&self.ctx);
            }
            _ => {}
        }
        if next != QpState::Rts {
            // ACKs are held in RTS only.
            self.release_acks();
        }
        if next != QpState::Sqd {
            self.sq_draining = false;
            self.sqd_notify = false;
        }
        self.count_window();
        Ok(())
    }

    /// In SQD, once no request is unacknowledged: drained, and the event if asked for.
    pub(super) fn check_drained(&mut self) {
        if self.state == QpState::Sqd && self.sq_draining && !self.req.in_progress() {
            self.sq_draining = false;
            if std::mem::take(&mut self.sqd_notify) {
                self.ev.affiliated.push_back(EventType::SqDrained);
            }
        }
    }

    /// Enters ERR: every outstanding WR completes with `IBV_WC_WR_FLUSH_ERR`. The WQEs still
    /// on an SRQ are not the QP's and stay there; only one taken for a message in progress is
    /// flushed, and `IBV_EVENT_QP_LAST_WQE_REACHED` says that the QP takes no more.
    pub(super) fn enter_error(&mut self) {
        debug_event!(target: "softrnic::qp", qpn = self.ctx.qpn, "enters ERR: outstanding work requests flush");
        self.state = QpState::Err;
        self.sq_draining = false;
        self.sqd_notify = false;
        self.req.flush(&self.ctx, &mut self.ev);
        self.resp.flush(&self.ctx, &mut self.ev);
        self.flush_rq();
        self.timers = TimerTable::default();
        if self.srq.is_some() {
            self.ev.affiliated.push_back(EventType::QpLastWqeReached);
        }
    }

    /// Completes every receive WQE in the receive queue with `IBV_WC_WR_FLUSH_ERR`.
    pub(super) fn flush_rq(&mut self) {
        for wqe in self.rq.drain(..) {
            let wc = inbound::recv_wc(&self.ctx, &wqe, crate::wc::WcStatus::WrFlushErr);
            self.ev.complete(CqSide::Recv, wc);
        }
    }

    /// The device failed (`IBV_EVENT_DEVICE_FATAL`): the QP enters ERR, as if modified to it,
    /// and every outstanding WR completes with `IBV_WC_WR_FLUSH_ERR`.
    pub fn device_failed(&mut self) {
        if self.state != QpState::Err {
            self.enter_error();
        }
    }
}
