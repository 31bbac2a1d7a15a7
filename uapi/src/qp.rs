//! Queue pairs (`ibv_create_qp`, `ibv_modify_qp`, `ibv_post_send`, `ibv_post_recv`,
//! `ibv_attach_mcast`, `ibv_detach_mcast`).

use softrnic_provider::device::{Gid, Limits};
use softrnic_provider::qp::{ConnectAttr, QpAttr, QpCaps};
use softrnic_provider::qp_state::{AttrMask, QpType};
use softrnic_provider::wr::{RecvWr, SendWr};
use softrnic_provider::{Error, Result};

use std::sync::Arc;

use crate::context::{Context, Cq, CqInner, Pd};
use crate::srq::Srq;

/// `ibv_qp_init_attr`.
pub struct QpInitAttr<'a> {
    /// Completions of the send queue.
    pub send_cq: &'a Cq,
    /// Completions of the receive queue.
    pub recv_cq: &'a Cq,
    /// Capacities.
    pub cap: QpCaps,
    /// The transport: RC, UC or UD.
    pub qp_type: QpType,
    /// Every send WR completes, signaled or not.
    pub sq_sig_all: bool,
    /// The shared receive queue the QP takes its receive WQEs from (`cap.max_recv_wr` and
    /// `cap.max_recv_sge` are then ignored, and `post_recv` is `EINVAL`).
    pub srq: Option<&'a Srq>,
}

impl<'a> QpInitAttr<'a> {
    /// The usual RC QP: one CQ for both queues, no SRQ, only signaled send WRs complete.
    pub fn rc(cq: &'a Cq, cap: QpCaps) -> QpInitAttr<'a> {
        QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            cap,
            qp_type: QpType::Rc,
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// A queue pair (`ibv_qp`). It keeps its CQs alive until it is destroyed.
pub struct QueuePair {
    /// The device and number (a handle no one observes).
    qp: QpHandle,
    /// The send and receive CQs, held so that they outlive the QP (dropped after it); an XRC
    /// TGT QP has none.
    _cqs: [Option<Arc<CqInner>>; 2],
}

impl Pd {
    /// `ibv_create_qp`.
    ///
    /// # Errors
    /// `EINVAL` for bad capacities or CQs of another device; `ENOMEM` beyond `max_qp`.
    pub fn create_qp(&self, init: &QpInitAttr<'_>) -> Result<QueuePair> {
        if !Arc::ptr_eq(&init.send_cq.inner.ctx.inner, &self.ctx.inner)
            || !Arc::ptr_eq(&init.recv_cq.inner.ctx.inner, &self.ctx.inner)
        {
            return Err(Error::InvalidArgument("CQ of another device"));
        }
        if init
            .srq
            .is_some_and(|s| !Arc::ptr_eq(&s.ctx.inner, &self.ctx.inner))
        {
            return Err(Error::InvalidArgument("SRQ of another device"));
        }
        let qpn = self.ctx.inner.device.nic().create_qp_of(
            init.qp_type,
            self.handle,
            init.send_cq.inner.id,
            init.recv_cq.inner.id,
            init.srq.map(|s| s.id),
            init.cap,
            init.sq_sig_all,
            Limits::MAX_QP_WR as u32,
        )?;
        Ok(QueuePair {
            qp: QpHandle {
                ctx: self.ctx.clone(),
                qpn,
                qp_type: init.qp_type,
                observer: None,
            },
            _cqs: [
                Some(init.send_cq.inner.clone()),
                Some(init.recv_cq.inner.clone()),
            ],
        })
    }
}

impl QueuePair {
    /// An XRC TGT QP just made in the NIC (`crate::xrc`): no CQs to hold.
    pub(crate) fn xrc_recv(ctx: Context, qpn: u32) -> QueuePair {
        QueuePair {
            qp: QpHandle {
                ctx,
                qpn,
                qp_type: QpType::XrcRecv,
                observer: None,
            },
            _cqs: [None, None],
        }
    }
}

/// A QP named by its device and number: a [`QueuePair`] without its CQs, and what the
/// connection manager holds of an id's QP, which it moves through its states but does not own
/// (the application destroys it).
#[derive(Clone)]
pub(crate) struct QpHandle {
    ctx: Context,
    qpn: u32,
    qp_type: QpType,
    /// Told of each change made through the handle.
    observer: Option<QpObserver>,
}

/// What hears of the changes the connection manager makes to a QP it does not own (the C
/// library keeps the attributes `ibv_query_qp` reports).
pub type QpObserver = Arc<dyn Fn(&QpAttr, AttrMask) + Send + Sync>;

impl QpHandle {
    /// `ibv_modify_qp`, if the QP still exists; the observer, if any, hears of it.
    ///
    /// # Errors
    /// `EINVAL` as `ibv_modify_qp` (see `softrnic_provider::qp_state`), or for a QP gone.
    pub fn modify(&self, attr: &QpAttr, mask: AttrMask) -> Result<()> {
        let limits = self.ctx.inner.limits;
        let mut routed = *attr;
        if mask.contains(AttrMask::AV) {
            routed.dest = self.ctx.route(attr.dest);
        }
        self.ctx
            .inner
            .device
            .nic()
            .modify_qp(self.qpn, &routed, mask, &limits)?;
        if let Some(o) = &self.observer {
            o(attr, mask);
        }
        Ok(())
    }

    /// `ibv_attach_mcast` of the QP (see [`QueuePair::attach_mcast`]).
    ///
    /// # Errors
    /// As [`QueuePair::attach_mcast`].
    pub fn attach_mcast(&self, mgid: &Gid) -> Result<()> {
        self.ctx.inner.device.attach_mcast(self.qpn, mgid)
    }

    /// `ibv_detach_mcast` of the QP (see [`QueuePair::detach_mcast`]).
    ///
    /// # Errors
    /// As [`QueuePair::detach_mcast`].
    pub fn detach_mcast(&self, mgid: &Gid) -> Result<()> {
        self.ctx.inner.device.detach_mcast(self.qpn, mgid)
    }

    /// The handle, with `observer` told of each change.
    pub fn observed(self, observer: Option<QpObserver>) -> QpHandle {
        QpHandle { observer, ..self }
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.qpn
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The QP's state (`Err` once it is gone).
    pub fn state(&self) -> crate::QpState {
        self.ctx
            .inner
            .device
            .nic()
            .qp(self.qpn)
            .map_or(crate::QpState::Err, |q| q.state())
    }
}

impl QueuePair {
    /// This QP as a [`QpHandle`].
    pub(crate) fn handle(&self) -> QpHandle {
        self.qp.clone()
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.qp.ctx
    }

    /// Whether `pd` is of this QP's device.
    pub(crate) fn same_device(&self, pd: &Pd) -> bool {
        Arc::ptr_eq(&pd.ctx.inner, &self.qp.ctx.inner)
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.qp.qp_num()
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp.qp_type()
    }

    /// `ibv_modify_qp`.
    ///
    /// # Errors
    /// `EINVAL` as `ibv_modify_qp` (see `softrnic_provider::qp_state`).
    pub fn modify(&self, attr: &QpAttr, mask: AttrMask) -> Result<()> {
        self.qp.modify(attr, mask)
    }

    /// Connects the QP to its peer: RESET→INIT→RTR→RTS with `attr` (the recipe of
    /// `ibv_rc_pingpong`; see [`ConnectAttr`]; for UC without RC's attributes,
    /// [`ConnectAttr::steps_for`]). A QP already in INIT (moved there to post
    /// receives before the peer is known, as `ibv_rc_pingpong` does) starts at RTR.
    ///
    /// # Errors
    /// `EINVAL` as `ibv_modify_qp` (a QP not in RESET or INIT, an MTU above the port's, ...);
    /// the QP is left in the state it reached.
    pub fn connect(&self, attr: &ConnectAttr) -> Result<()> {
        let skip = usize::from(self.state() == crate::QpState::Init);
        attr.steps_for(self.qp.qp_type)
            .iter()
            .skip(skip)
            .try_for_each(|(a, mask)| self.modify(a, *mask))
    }

    /// The QP's state (`ibv_query_qp`'s `qp_state`).
    pub fn state(&self) -> crate::QpState {
        self.qp.state()
    }

    /// In SQD, whether sent requests are still unacknowledged (`ibv_query_qp`'s
    /// `sq_draining`).
    pub fn sq_draining(&self) -> bool {
        self.qp
            .ctx
            .inner
            .device
            .nic()
            .qp(self.qp.qpn)
            .is_ok_and(|q| q.sq_draining())
    }

    /// `ibv_post_send` of a list of WRs. On an error, the WRs before the failed one are
    /// posted; the error names the failed one's index (`bad_wr`).
    ///
    /// # Errors
    /// (index of the bad WR, why).
    pub fn post_send(&self, wrs: &[SendWr]) -> core::result::Result<(), (usize, Error)> {
        self.qp.ctx.inner.device.post_send(self.qp.qpn, |nic| {
            let (qp, mrs) = nic.qp_and_mrs(self.qp.qpn).map_err(|e| (0, e))?;
            wrs.iter()
                .enumerate()
                .try_for_each(|(i, w)| qp.post_send(w, mrs).map_err(|e| (i, e)))
        })
    }

    /// `ibv_post_recv` of a list of WRs.
    ///
    /// # Errors
    /// `EINVAL` for every WR on a QP created with an SRQ.
    ///
    /// (index of the bad WR, why).
    pub fn post_recv(&self, wrs: &[RecvWr]) -> core::result::Result<(), (usize, Error)> {
        self.qp.ctx.inner.device.post_recv(self.qp.qpn, |nic| {
            let qp = nic.qp(self.qp.qpn).map_err(|e| (0, e))?;
            wrs.iter()
                .enumerate()
                .try_for_each(|(i, w)| qp.post_recv(w).map_err(|e| (i, e)))
        })
    }
}

impl QueuePair {
    /// `ibv_attach_mcast`: attaches this UD QP to the multicast group `mgid` (IBTA 10.5): it
    /// then also receives the datagrams sent to the group (DestQP 0xFFFFFF, to the group's IP
    /// address on RoCE v2), each checked against its Q_Key. Attaching twice is a no-op.
    ///
    /// # Errors
    /// `EINVAL` for a QP that is not UD or a GID that is not multicast (`::ffff:224.0.0.0/100`
    /// or `ff00::/8`); `EOPNOTSUPP` on a transport without multicast.
    pub fn attach_mcast(&self, mgid: &Gid) -> Result<()> {
        self.qp.attach_mcast(mgid)
    }

    /// `ibv_detach_mcast`: detaches this QP from the multicast group `mgid`.
    ///
    /// # Errors
    /// `EINVAL` as [`QueuePair::attach_mcast`], or if the QP is not attached to `mgid`.
    pub fn detach_mcast(&self, mgid: &Gid) -> Result<()> {
        self.qp.detach_mcast(mgid)
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // The responder may owe ACKs for messages whose completions were already polled (a
        // poll routes completions before the progress thread emits the round's ACKs): send
        // them, or the peer's last requests fail with RETRY_EXC_ERR once this QP is gone.
        self.qp.ctx.inner.device.flush();
        let _ = self.qp.ctx.inner.device.destroy_qp(self.qp.qpn);
    }
}
