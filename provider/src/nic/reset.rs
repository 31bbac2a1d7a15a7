//! Modifying a QP at the NIC (`ibv_modify_qp(3)`), and what moving it to RESET does beyond
//! the QP itself.
//!
//! IBTA 10.3.1 makes RESET the state of a QP just created: its work queues are empty and it
//! has no history. softrnic's QP forgets its queues and its pending completions there
//! (`qp/modify.rs`); the NIC also removes the QP's completions already queued in its send and
//! receive CQs and not yet polled, as the mlx4 and mlx5 providers do (`mlx4_cq_clean`,
//! `mlx5_cq_clean` in their `modify_qp` to RESET). Otherwise a QP that went to ERR, had its
//! work requests flushed (IBTA 10.3.1 "Error", 11.6.3) and was reset to be used again, would
//! hand its next user those stale flush completions before its own: a reset QP starts anew,
//! its CQs included. Other QPs' completions in the same CQs keep their order.

use super::Nic;
use crate::error::{Error, Result};
use crate::qp::{QpAttr, QpLimits};
use crate::qp_state::{AttrMask, QpState};

impl Nic {
    /// `ibv_modify_qp` of QP `qpn` (see [`crate::qp::Qp::modify`]); on a move to RESET from
    /// another state, also removes the QP's completions from its CQs (module doc).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP, or as [`crate::qp::Qp::modify`]; nothing changes then.
    pub fn modify_qp(
        &mut self,
        qpn: u32,
        attr: &QpAttr,
        mask: AttrMask,
        limits: &QpLimits,
    ) -> Result<()> {
        let e = self
            .qps
            .get_mut(&qpn)
            .ok_or(Error::InvalidArgument("no such QP"))?;
        let was_reset = e.qp.state() == QpState::Reset;
        e.qp.modify(attr, mask, limits)?;
        self.deadlines.note(qpn, e.qp.poll_timeout());
        if !was_reset && e.qp.state() == QpState::Reset {
            for cq in [e.send_cq, e.recv_cq] {
                if let Some(c) = self.cqs.get_mut(&cq.0) {
                    c.remove_qp(qpn);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::Arc;

    use super::*;
    use crate::mr::{Access, MrTable, PdHandle};
    use crate::qp::QpCaps;
    use crate::qp_state::Mtu;
    use crate::wc::{WcOpcode, WcStatus, WorkCompletion};
    use crate::wr::RecvWr;

    const PD: PdHandle = PdHandle(1);
    const LIMITS: QpLimits = QpLimits {
        active_mtu: Mtu::Mtu4096,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 16,
    };

    fn to(nic: &mut Nic, qpn: u32, state: QpState, mask: AttrMask) -> Result<()> {
        let attr = QpAttr {
            qp_state: state,
            qp_access_flags: Access::LOCAL_WRITE,
            ..QpAttr::default()
        };
        nic.modify_qp(qpn, &attr, mask, &LIMITS)
    }

    /// A QP on `cq` in INIT with `n` receives posted.
    fn qp_with_receives(nic: &mut Nic, cq: crate::nic::CqId, n: u64) -> u32 {
        let caps = QpCaps {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qpn = nic.create_qp(PD, cq, cq, None, caps, false, 8).unwrap();
        let init = AttrMask::STATE
            .union(AttrMask::PKEY_INDEX)
            .union(AttrMask::PORT)
            .union(AttrMask::ACCESS_FLAGS);
        to(nic, qpn, QpState::Init, init).unwrap();
        for wr_id in 0..n {
            let wr = RecvWr {
                wr_id,
                sg_list: Vec::new(),
            };
            nic.qp(qpn).unwrap().post_recv(&wr).unwrap();
        }
        qpn
    }

    #[test]
    fn reset_removes_the_qps_completions_from_its_cq_and_only_them() {
        let mrs = Arc::new(MrTable::new(4, 1).unwrap());
        let mut nic = Nic::new(IpAddr::from([127, 0, 31, 1]), mrs, 4);
        let cq = nic.create_cq(16);
        let a = qp_with_receives(&mut nic, cq, 2);
        let b = qp_with_receives(&mut nic, cq, 1);
        // Both to ERR: their receives are flushed into the shared CQ.
        to(&mut nic, a, QpState::Err, AttrMask::STATE).unwrap();
        to(&mut nic, b, QpState::Err, AttrMask::STATE).unwrap();
        assert_eq!(nic.route_completions(), 3);

        to(&mut nic, a, QpState::Reset, AttrMask::STATE).unwrap();
        let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 4];
        assert_eq!(nic.poll_cq(cq, &mut wcs).unwrap(), 1, "only b's is left");
        assert_eq!((wcs[0].qp_num, wcs[0].status), (b, WcStatus::WrFlushErr));

        // Back in use after RESET, a's own completions come first and alone.
        let init = AttrMask::STATE
            .union(AttrMask::PKEY_INDEX)
            .union(AttrMask::PORT)
            .union(AttrMask::ACCESS_FLAGS);
        to(&mut nic, a, QpState::Init, init).unwrap();
        let wr = RecvWr {
            wr_id: 7,
            sg_list: Vec::new(),
        };
        nic.qp(a).unwrap().post_recv(&wr).unwrap();
        to(&mut nic, a, QpState::Err, AttrMask::STATE).unwrap();
        assert_eq!(nic.poll_cq(cq, &mut wcs).unwrap(), 1);
        assert_eq!((wcs[0].qp_num, wcs[0].wr_id), (a, 7));
    }

    #[test]
    fn a_refused_modify_or_unknown_qp_changes_nothing() {
        let mrs = Arc::new(MrTable::new(4, 1).unwrap());
        let mut nic = Nic::new(IpAddr::from([127, 0, 31, 1]), mrs, 4);
        let cq = nic.create_cq(16);
        let a = qp_with_receives(&mut nic, cq, 1);
        to(&mut nic, a, QpState::Err, AttrMask::STATE).unwrap();
        assert_eq!(nic.route_completions(), 1);
        // ERR to RTS is no transition: refused, and the completion stays.
        assert!(to(&mut nic, a, QpState::Rts, AttrMask::STATE).is_err());
        assert!(to(&mut nic, a + 100, QpState::Reset, AttrMask::STATE).is_err());
        let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 4];
        assert_eq!(nic.poll_cq(cq, &mut wcs).unwrap(), 1);
    }
}
