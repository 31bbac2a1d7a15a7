//! The connection recipe of a QP (RC; UC and UD by [`ConnectAttr::steps_for`]): the three
//! `ibv_modify_qp` calls that take it from RESET through INIT and RTR to RTS (IBTA 10.3.1,
//! figure 124's state diagram; the attribute masks are those 11.2.5.2 and `ibv_modify_qp(3)`
//! require for each transition), as rdma-core's `ibv_rc_pingpong` makes them. One place for
//! every caller: the verbs API's `QueuePair::connect`, the engine's tests, the tools.

use std::net::{IpAddr, Ipv4Addr};

use super::attr::QpAttr;
use crate::mr::Access;
use crate::qp_state::{AttrMask, Mtu, QpState, QpType};

/// What connecting an RC QP to its peer needs: the peer's address, QPN and PSN (exchanged out
/// of band), this side's PSN, and the QP's timers, retry counts and rights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttr {
    /// `path_mtu`.
    pub path_mtu: Mtu,
    /// The peer's address (`ah_attr.grh.dgid` as an IP address).
    pub dest: IpAddr,
    /// `dest_qp_num`: the peer's QPN.
    pub dest_qp_num: u32,
    /// `rq_psn`: the PSN the peer starts sending with.
    pub rq_psn: u32,
    /// `sq_psn`: the PSN this side starts sending with.
    pub sq_psn: u32,
    /// `qp_access_flags`: what the peer may do to this side's memory.
    pub qp_access_flags: Access,
    /// `timeout`: local ACK timeout, 4.096 µs · 2^timeout (0: none).
    pub timeout: u8,
    /// `retry_cnt`: retries after a local ACK timeout.
    pub retry_cnt: u8,
    /// `rnr_retry`: retries after an RNR NAK (7: for ever).
    pub rnr_retry: u8,
    /// `min_rnr_timer`: the RNR NAK timer code this side's responder sends.
    pub min_rnr_timer: u8,
    /// `max_rd_atomic`: READs and atomics this side has outstanding.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`: READs and atomics this side's responder keeps.
    pub max_dest_rd_atomic: u8,
    /// The Q_Key of a UD QP (`IBV_QP_QKEY`, at RESET -> INIT).
    pub qkey: u32,
}

impl Default for ConnectAttr {
    /// `ibv_rc_pingpong`'s choices (timeout 14, retry_cnt 7, rnr_retry 7, min_rnr_timer 12),
    /// every remote right, 16 READs/atomics each way, MTU 1024, PSNs 0.
    fn default() -> ConnectAttr {
        ConnectAttr {
            path_mtu: Mtu::Mtu1024,
            dest: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dest_qp_num: 0,
            rq_psn: 0,
            sq_psn: 0,
            qp_access_flags: Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC
                | Access::FLUSH_GLOBAL
                | Access::FLUSH_PERSISTENT,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            qkey: 0x1111_1111,
        }
    }
}

impl ConnectAttr {
    /// The steps for a QP of `qp_type`: [`ConnectAttr::steps`] for RC; for UC the same
    /// without the attributes of acknowledgement and READ/atomics (`timeout`, `retry_cnt`,
    /// `rnr_retry`, `min_rnr_timer`, `max_rd_atomic`, `max_dest_rd_atomic`), which a UC
    /// transition refuses (IBTA 11.2.5.2; the kernel's `qp_state_table`); for UD, which has
    /// no peer, `ibv_ud_pingpong`'s: the Q_Key at INIT, nothing at RTR, `sq_psn` at RTS.
    pub fn steps_for(&self, qp_type: QpType) -> [(QpAttr, AttrMask); 3] {
        let mut steps = self.steps();
        if qp_type == QpType::Ud {
            let [init, rtr, rts] = &mut steps;
            init.0.qkey = self.qkey;
            init.1 = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY;
            rtr.1 = AttrMask::STATE;
            rts.1 = AttrMask::STATE | AttrMask::SQ_PSN;
        } else if qp_type == QpType::Uc {
            let rc_only = AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MIN_RNR_TIMER
                | AttrMask::MAX_QP_RD_ATOMIC
                | AttrMask::MAX_DEST_RD_ATOMIC;
            for (attr, mask) in &mut steps {
                *mask = mask.difference(rc_only);
                attr.qp_access_flags &= Access::LOCAL_WRITE | Access::REMOTE_WRITE;
            }
        }
        steps
    }

    /// The three modifies, in order: RESET→INIT, INIT→RTR, RTR→RTS.
    pub fn steps(&self) -> [(QpAttr, AttrMask); 3] {
        let init = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: self.qp_access_flags,
            pkey_index: 0,
            port_num: 1,
            ..QpAttr::default()
        };
        let rtr = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: self.path_mtu,
            dest_qp_num: self.dest_qp_num,
            rq_psn: self.rq_psn,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            min_rnr_timer: self.min_rnr_timer,
            dest: self.dest,
            ..QpAttr::default()
        };
        let rts = QpAttr {
            qp_state: QpState::Rts,
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            sq_psn: self.sq_psn,
            max_rd_atomic: self.max_rd_atomic,
            ..QpAttr::default()
        };
        [
            (
                init,
                AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
            ),
            (
                rtr,
                AttrMask::STATE
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN
                    | AttrMask::MAX_DEST_RD_ATOMIC
                    | AttrMask::MIN_RNR_TIMER,
            ),
            (
                rts,
                AttrMask::STATE
                    | AttrMask::TIMEOUT
                    | AttrMask::RETRY_CNT
                    | AttrMask::RNR_RETRY
                    | AttrMask::SQ_PSN
                    | AttrMask::MAX_QP_RD_ATOMIC,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::PdHandle;
    use crate::qp::{Qp, QpCaps, QpLimits};

    /// A QP in RESET, and limits with `active_mtu`.
    fn fresh(active_mtu: Mtu) -> (Qp, QpLimits) {
        let limits = QpLimits {
            active_mtu,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
        };
        let caps = QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        (Qp::new(0x11, PdHandle(1), caps, 0xc011, false), limits)
    }

    #[test]
    fn the_steps_take_a_qp_from_reset_to_rts() {
        let (mut qp, limits) = fresh(Mtu::Mtu4096);
        let attr = ConnectAttr {
            dest: "127.0.0.2".parse().unwrap(),
            dest_qp_num: 0x22,
            ..ConnectAttr::default()
        };
        let want = [QpState::Init, QpState::Rtr, QpState::Rts];
        for ((a, mask), state) in attr.steps().iter().zip(want) {
            qp.modify(a, *mask, &limits).unwrap();
            assert_eq!(qp.state(), state);
        }
    }

    #[test]
    fn a_step_out_of_order_is_refused() {
        let (mut qp, limits) = fresh(Mtu::Mtu1024);
        let [_, rtr, _] = ConnectAttr::default().steps();
        assert!(qp.modify(&rtr.0, rtr.1, &limits).is_err(), "RESET to RTR");
        assert_eq!(qp.state(), QpState::Reset);
    }
}
