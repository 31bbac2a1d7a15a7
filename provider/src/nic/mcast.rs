//! The multicast group table of a NIC (IBTA Vol. 1 10.5, "Multicast"; kernel rxe's
//! `rxe_mcast.c`): which UD QPs are attached to which multicast GID (MGID).
//!
//! * `ibv_attach_mcast` (IBTA 11.3, "Attach QP to Multicast Group"): only a UD QP may be
//!   attached, and only to a multicast GID, else `EINVAL` (the kernel's `ib_attach_mcast`).
//!   Attaching a QP to a group it is already attached to succeeds and changes nothing (rxe's
//!   `rxe_attach_mcg`).
//! * `ibv_detach_mcast`: detaching from a group the QP is not attached to is `EINVAL` (rxe's
//!   `rxe_detach_mcg`).
//! * A multicast GID on RoCE v2 is a multicast IP address (annex A17.4.5.1, the GRH's DGID is
//!   the IP destination): IPv4-mapped `::ffff:224.0.0.0/100` is IPv4 multicast `224.0.0.0/4`,
//!   any other GID is IPv6 and multicast when in `ff00::/8`.
//!
//! The first QP attached to a group makes the device join it on its transport; the last one
//! detached (or destroyed) makes it leave (see [`crate::driver::Device::attach_mcast`]).

use std::net::IpAddr;

use crate::device::Gid;
use crate::error::{Error, Result};

/// The destination QP of a multicast packet (IBTA 10.5: "the DestQP field of the BTH is set
/// to 0xFFFFFF" in packets sent to a multicast group).
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// Whether `gid` is a multicast GID: its IP address (A17) is IPv4 or IPv6 multicast.
pub fn is_multicast_gid(gid: &Gid) -> bool {
    gid.to_ip().is_multicast()
}

/// One multicast group: its MGID and the QPs attached to it.
#[derive(Debug)]
struct Group {
    mgid: Gid,
    ip: IpAddr,
    qpns: Vec<u32>,
}

/// What an attach or detach did to the device's membership of the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// The group's first QP: the device must join the group's IP address.
    Join(IpAddr),
    /// The group's last QP: the device must leave the group's IP address.
    Leave(IpAddr),
    /// Other QPs are (or were) attached too: nothing changes on the network.
    Unchanged,
}

/// The multicast groups with QPs attached. Groups are few, so a list is searched.
#[derive(Debug, Default)]
pub struct McastTable {
    groups: Vec<Group>,
}

impl McastTable {
    /// Attaches `qpn` to `mgid` (already checked to be a multicast GID and a UD QP).
    pub fn attach(&mut self, qpn: u32, mgid: &Gid) -> Membership {
        if let Some(g) = self.groups.iter_mut().find(|g| g.mgid == *mgid) {
            if !g.qpns.contains(&qpn) {
                g.qpns.push(qpn);
            }
            return Membership::Unchanged;
        }
        let ip = mgid.to_ip();
        self.groups.push(Group {
            mgid: *mgid,
            ip,
            qpns: vec![qpn],
        });
        Membership::Join(ip)
    }

    /// Detaches `qpn` from `mgid`.
    ///
    /// # Errors
    /// `EINVAL` if `qpn` is not attached to `mgid`.
    pub fn detach(&mut self, qpn: u32, mgid: &Gid) -> Result<Membership> {
        let not_attached = Error::InvalidArgument("the QP is not attached to the group");
        let gi = self
            .groups
            .iter()
            .position(|g| g.mgid == *mgid)
            .ok_or(not_attached)?;
        let qi = self.groups[gi]
            .qpns
            .iter()
            .position(|&q| q == qpn)
            .ok_or(not_attached)?;
        self.groups[gi].qpns.swap_remove(qi);
        if self.groups[gi].qpns.is_empty() {
            return Ok(Membership::Leave(self.groups.swap_remove(gi).ip));
        }
        Ok(Membership::Unchanged)
    }

    /// Detaches `qpn` from every group (it is being destroyed); appends the IP addresses of
    /// groups left without QPs to `left`.
    pub fn detach_all(&mut self, qpn: u32, left: &mut Vec<IpAddr>) {
        self.groups.retain_mut(|g| {
            g.qpns.retain(|&q| q != qpn);
            if g.qpns.is_empty() {
                left.push(g.ip);
            }
            !g.qpns.is_empty()
        });
    }

    /// The QPs attached to the group whose IP address is `ip` (none if no such group).
    pub fn members(&self, ip: IpAddr) -> &[u32] {
        self.groups
            .iter()
            .find(|g| g.ip == ip)
            .map_or(&[], |g| &g.qpns)
    }

    /// Whether `qpn` is attached to `mgid`.
    pub fn is_attached(&self, qpn: u32, mgid: &Gid) -> bool {
        self.groups
            .iter()
            .any(|g| g.mgid == *mgid && g.qpns.contains(&qpn))
    }
}

#[cfg(test)]
#[path = "mcast_tests.rs"]
mod tests;
