//! The NIC's XRC objects ([`crate::xrc`]): XRC domains, XRC SRQs and XRC TGT QPs
//! (`ibv_open_xrcd(3)`, `ibv_create_srq_ex(3)`, `ibv_create_qp_ex(3)`). XRC INI QPs are made
//! by [`Nic::create_qp_of`] like any QP of a PD.

use super::{src_port_of, Nic, QpEntry, SRQ_LIMITS};
use crate::device::Limits;
use crate::error::{Error, Result};
use crate::mr::PdHandle;
use crate::nic::CqId;
use crate::qp::{Qp, QpCaps};
use crate::qp_state::QpType;
use crate::srq::{Srq, SrqAttr, SrqId};
use crate::xrc::{XrcSrq, XrcdId};

/// The CQ handle an XRC TGT QP's entry names for both sides: none (its completions go to
/// its SRQs' CQs), and never handed out (CQ handles count up from 1).
const NO_CQ: CqId = CqId(u32::MAX);

impl Nic {
    /// `ibv_open_xrcd`: a new XRC domain.
    pub fn open_xrcd(&mut self) -> XrcdId {
        loop {
            self.next_xrcd = self.next_xrcd.wrapping_add(1).max(1);
            if self.xrcds.insert(self.next_xrcd) {
                return XrcdId(self.next_xrcd);
            }
        }
    }

    /// `ibv_close_xrcd`.
    ///
    /// # Errors
    /// `EBUSY` while an XRC SRQ or XRC TGT QP belongs to it; `EINVAL` for an unknown domain.
    pub fn close_xrcd(&mut self, xrcd: XrcdId) -> Result<()> {
        if !self.xrcds.contains(&xrcd.0) {
            return Err(Error::InvalidArgument("no such XRC domain"));
        }
        if self.srqs.any(|s| s.xrc().is_some_and(|x| x.xrcd == xrcd))
            || self.qps.values().any(|e| e.qp.xrcd() == Some(xrcd))
        {
            return Err(Error::Busy("an XRC SRQ or QP still uses the XRC domain"));
        }
        self.xrcds.remove(&xrcd.0);
        Ok(())
    }

    /// `ibv_create_srq_ex` with `IBV_SRQT_XRC`: an SRQ of `pd` in the XRC domain `xrcd` whose
    /// receives complete on `cq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown domain or CQ or attributes beyond the device's; `ENOMEM` beyond
    /// `max_srq`.
    pub fn create_xrc_srq(
        &mut self,
        pd: PdHandle,
        attr: &SrqAttr,
        xrcd: XrcdId,
        cq: CqId,
    ) -> Result<SrqId> {
        if !self.xrcds.contains(&xrcd.0) {
            return Err(Error::InvalidArgument("no such XRC domain"));
        }
        if !self.cqs.contains_key(&cq.0) {
            return Err(Error::InvalidArgument("no such CQ"));
        }
        let srq = Srq::new(pd, attr, &SRQ_LIMITS)?.with_xrc(XrcSrq { xrcd, cq });
        self.srqs.insert(srq, Limits::MAX_SRQ as usize)
    }

    /// `ibv_create_qp_ex` with `IBV_QPT_XRC_RECV`: an XRC TGT QP of the domain `xrcd`, in
    /// RESET. It has no PD (each request uses its SRQ's), no CQ and no queues.
    ///
    /// # Errors
    /// `EINVAL` for an unknown domain; `ENOMEM` beyond `max_qp`.
    pub fn create_xrc_recv_qp(&mut self, xrcd: XrcdId) -> Result<u32> {
        if !self.xrcds.contains(&xrcd.0) {
            return Err(Error::InvalidArgument("no such XRC domain"));
        }
        let qpn = self.alloc_qpn()?;
        let port = src_port_of(qpn);
        let caps = QpCaps {
            max_send_wr: 0,
            max_recv_wr: 0,
            max_send_sge: 0,
            max_recv_sge: 0,
            max_inline_data: 0,
        };
        let qp = Qp::new_of(QpType::XrcRecv, qpn, PdHandle(0), caps, port, false).with_xrcd(xrcd);
        let entry = QpEntry {
            qp,
            send_cq: NO_CQ,
            recv_cq: NO_CQ,
            sending: false,
        };
        self.insert_qp(qpn, entry);
        Ok(qpn)
    }
}
