//! The attributes of a queue pair as verbs passes them: capacities (`ibv_qp_cap`), the
//! attributes of `ibv_modify_qp` (`ibv_qp_attr`, IBTA 11.2.5.2) and the device limits they are
//! checked against.

use std::net::IpAddr;

use super::transmit::{MAX_INLINE, MAX_SGE};
use crate::error::{Error, Result};
use crate::mr::Access;
use crate::qp_state::{Mtu, QpState};

/// Queue capacities (`ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send WRs the SQ holds.
    pub max_send_wr: u32,
    /// Receive WRs the RQ holds.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

impl QpCaps {
    /// Checks the capacities against softrnic's limits. With an SRQ (`has_srq`) the receive
    /// capacities are not used (and not checked), as `ibv_create_qp(3)` says.
    ///
    /// # Errors
    /// `EINVAL` for a capacity of 0 WRs or over a limit.
    pub fn check(&self, max_wr: u32, has_srq: bool) -> Result<()> {
        let caps = if has_srq {
            QpCaps {
                max_recv_wr: 0,
                max_recv_sge: 0,
                ..*self
            }
        } else {
            *self
        };
        caps.check_queues(max_wr, has_srq)
    }

    fn check_queues(&self, max_wr: u32, has_srq: bool) -> Result<()> {
        if self.max_send_wr == 0 && self.max_recv_wr == 0 && !has_srq {
            return Err(Error::InvalidArgument(
                "a QP needs a send or a receive queue",
            ));
        }
        if self.max_send_wr > max_wr || self.max_recv_wr > max_wr {
            return Err(Error::InvalidArgument("more WRs than max_qp_wr"));
        }
        if self.max_send_sge as usize > MAX_SGE || self.max_recv_sge as usize > MAX_SGE {
            return Err(Error::InvalidArgument("more SGEs than max_sge"));
        }
        if self.max_inline_data as usize > MAX_INLINE {
            return Err(Error::InvalidArgument(
                "more inline data than softrnic supports",
            ));
        }
        Ok(())
    }
}

/// The attributes of `ibv_modify_qp` that RC uses (`ibv_qp_attr`); each is read only when its
/// [`AttrMask`](crate::qp_state::AttrMask) bit is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// `qp_state`.
    pub qp_state: QpState,
    /// `cur_qp_state`.
    pub cur_qp_state: QpState,
    /// `path_mtu`.
    pub path_mtu: Mtu,
    /// `qp_access_flags`.
    pub qp_access_flags: Access,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `port_num`.
    pub port_num: u8,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// The peer's address: `ah_attr.grh.dgid` as an IP address (`IBV_QP_AV`).
    pub dest: IpAddr,
    /// `en_sqd_async_notify`: on RTS -> SQD, non-zero asks for `IBV_EVENT_SQ_DRAINED`.
    pub en_sqd_async_notify: u8,
    /// `qkey` (UD).
    pub qkey: u32,
}

impl Default for QpAttr {
    fn default() -> QpAttr {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            qp_access_flags: Access::empty(),
            pkey_index: 0,
            port_num: 1,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            dest: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            en_sqd_async_notify: 0,
            qkey: 0,
        }
    }
}

/// The limits of the device a QP lives on, for checking modify attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpLimits {
    /// The port's active MTU: the largest path MTU.
    pub active_mtu: Mtu,
    /// `max_qp_rd_atom`.
    pub max_rd_atomic: u8,
    /// `max_qp_init_rd_atom`.
    pub max_dest_rd_atomic: u8,
}
