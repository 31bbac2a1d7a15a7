//! XRC domains, XRC SRQs and XRC TGT QPs (`ibv_open_xrcd(3)`, `ibv_close_xrcd`,
//! `ibv_create_srq_ex(3)` with `IBV_SRQT_XRC`, `ibv_get_srq_num(3)`, `ibv_create_qp_ex(3)` with
//! `IBV_QPT_XRC_RECV`; IBTA annex A14). XRC INI QPs are made by [`Pd::create_qp`] with
//! `QpType::XrcSend`, and name the target's SRQ in each `SendWr::xrc_srqn`.

use softrnic_provider::srq::SrqAttr;
use softrnic_provider::xrc::XrcdId;
use softrnic_provider::{Error, Result};

use crate::context::{Context, Cq, Pd};
use crate::qp::QueuePair;
use crate::srq::Srq;

/// An XRC domain (`ibv_xrcd`). Dropping it closes it; see [`Xrcd::close`] for the case where
/// an XRC SRQ or QP still belongs to it.
pub struct Xrcd {
    ctx: Context,
    id: XrcdId,
    /// Cleared once closed, so that `Drop` does not close it again.
    live: bool,
}

impl Context {
    /// `ibv_open_xrcd`: a new XRC domain.
    pub fn open_xrcd(&self) -> Xrcd {
        let id = self.inner.device.nic().open_xrcd();
        Xrcd {
            ctx: self.clone(),
            id,
            live: true,
        }
    }
}

impl Xrcd {
    /// `ibv_create_qp_ex` with `IBV_QPT_XRC_RECV`: an XRC TGT QP of this domain, in RESET.
    ///
    /// # Errors
    /// `ENOMEM` beyond `max_qp`.
    pub fn create_recv_qp(&self) -> Result<QueuePair> {
        let qpn = self.ctx.inner.device.nic().create_xrc_recv_qp(self.id)?;
        Ok(QueuePair::xrc_recv(self.ctx.clone(), qpn))
    }

    /// `ibv_close_xrcd`, reporting failure.
    ///
    /// # Errors
    /// `EBUSY` while an XRC SRQ or QP belongs to it: the domain is given back, unharmed.
    pub fn close(mut self) -> core::result::Result<(), (Xrcd, Error)> {
        let r = self.ctx.inner.device.nic().close_xrcd(self.id);
        match r {
            Ok(()) => {
                self.live = false;
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Xrcd {
    fn drop(&mut self) {
        if self.live {
            let _ = self.ctx.inner.device.nic().close_xrcd(self.id);
        }
    }
}

impl Pd {
    /// `ibv_create_srq_ex` with `IBV_SRQT_XRC`: an SRQ of this PD in `xrcd` whose receives
    /// complete on `cq`.
    ///
    /// # Errors
    /// As [`Pd::create_srq`]; `EINVAL` for a domain or CQ of another device.
    pub fn create_xrc_srq(&self, attr: &SrqAttr, xrcd: &Xrcd, cq: &Cq) -> Result<Srq> {
        if !std::sync::Arc::ptr_eq(&xrcd.ctx.inner, &self.ctx.inner)
            || !std::sync::Arc::ptr_eq(&cq.inner.ctx.inner, &self.ctx.inner)
        {
            return Err(Error::InvalidArgument("XRC domain or CQ of another device"));
        }
        let nic = &mut self.ctx.inner.device.nic();
        let id = nic.create_xrc_srq(self.handle, attr, xrcd.id, cq.inner.id)?;
        Ok(Srq::from_id(self.ctx.clone(), id))
    }
}

impl Srq {
    /// `ibv_get_srq_num`: the number an XRC requester names this SRQ by.
    pub fn number(&self) -> u32 {
        self.id.0
    }
}
