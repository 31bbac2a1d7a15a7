//! Multicast groups of a UD id (`rdma_join_multicast`, `rdma_join_multicast_ex`,
//! `rdma_leave_multicast`), as rdma-core 44's librdmacm and the kernel's `cma.c` give them on
//! RoCE: there is no subnet administrator to ask, so a join completes at once
//! (`MULTICAST_JOIN`), and its event carries what a sender needs: an address vector whose
//! GID is the group's (an IPv4 group as its IPv4-mapped GID, annex A17.4.5.2), QPN 0xFFFFFF
//! and the port space's Q_Key. The id's QP, if it has one, is attached to the group (IBTA
//! 10.5) unless the join is send-only; the device joins the IP group on its interface
//! (`softrnic_provider::transport`), so datagrams to the group reach it.

use std::io;
use std::net::SocketAddr;

use softrnic_provider::device::Gid;
use softrnic_provider::qp_state::QpType;

use super::{einval, errno, os, CmId};
use crate::cm::exchange as x;
use crate::cm::{EventParam, EventType, UdParam};

/// The destination QP of a multicast send (IBTA 10.5.2.3).
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// How an id joins a group (`enum rdma_cm_mc_join_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// `RDMA_MC_JOIN_FLAG_FULLMEMBER`: sends to and receives from the group.
    FullMember,
    /// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`: only sends; the QP is not attached.
    SendOnlyFullMember,
}

/// A group an id joined.
#[derive(Debug, Clone)]
pub(super) struct Membership {
    /// The address the join named (a leave names the same).
    addr: SocketAddr,
    gid: Gid,
    kind: JoinKind,
}

impl CmId {
    /// `rdma_join_multicast_ex`: joins the multicast group `group` (an IPv4 or IPv6
    /// multicast address of the device's family; the port is not used) and reports
    /// `MULTICAST_JOIN`, whose parameters address the group and whose `context` is the one
    /// given; or `MULTICAST_ERROR` if the id's QP cannot be attached.
    ///
    /// # Errors
    /// `EINVAL` for an id that is not UD or not on a device yet (bind it to an address or
    /// resolve one first), or for an address that is not a multicast one of the device's
    /// family; for a synchronous id, the event's error.
    pub fn join_multicast(
        &self,
        group: SocketAddr,
        kind: JoinKind,
        context: usize,
    ) -> io::Result<()> {
        let (gid, qp) = {
            let mut st = self.inner.st();
            let device_ip = st.device.as_ref().map(|d| d.addr);
            let ok = self.inner.qp_type == QpType::Ud
                && group.ip().is_multicast()
                && device_ip.is_some_and(|d| d.is_ipv4() == group.is_ipv4());
            if !ok {
                return Err(einval());
            }
            let gid = Gid::from_ip(group.ip());
            st.groups.push(Membership {
                addr: group,
                gid,
                kind,
            });
            (gid, st.qp.clone())
        };
        let attached = match (qp, kind) {
            (Some(qp), JoinKind::FullMember) => qp.attach_mcast(&gid).map_err(os),
            _ => Ok(()),
        };
        let param = EventParam::Multicast {
            ud: UdParam {
                private_data: Vec::new(),
                dest: group.ip(),
                qp_num: MULTICAST_QPN,
                qkey: x::UDP_QKEY,
            },
            context,
        };
        match attached {
            Ok(()) => self.inner.post(EventType::MulticastJoin, 0, param, None),
            Err(e) => {
                let status = -e.raw_os_error().unwrap_or(libc::EINVAL);
                self.inner
                    .post(EventType::MulticastError, status, param, None);
            }
        }
        self.complete()
    }

    /// `rdma_leave_multicast`: leaves the group an earlier join named `group` (the same
    /// address and port), detaching the id's QP from it.
    ///
    /// # Errors
    /// `EADDRNOTAVAIL` if the id did not join `group`.
    pub fn leave_multicast(&self, group: SocketAddr) -> io::Result<()> {
        let (m, qp) = {
            let mut st = self.inner.st();
            let i = st
                .groups
                .iter()
                .position(|m| m.addr == group)
                .ok_or_else(|| errno(libc::EADDRNOTAVAIL))?;
            (st.groups.remove(i), st.qp.clone())
        };
        if let (Some(qp), JoinKind::FullMember) = (qp, m.kind) {
            // As librdmacm, which ignores the detach's outcome: the QP may be gone, or have
            // been detached by the application.
            let _ = qp.detach_mcast(&m.gid);
        }
        Ok(())
    }
}
