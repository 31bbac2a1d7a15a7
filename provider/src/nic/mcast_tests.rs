//! The multicast group table and `Nic::attach_mcast` / `detach_mcast`'s checks.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use super::*;
use crate::mr::{MrTable, PdHandle};
use crate::nic::Nic;
use crate::qp::QpCaps;
use crate::qp_state::QpType;

const GROUP: IpAddr = IpAddr::V4(Ipv4Addr::new(239, 1, 32, 1));

fn mgid() -> Gid {
    Gid::from_ip(GROUP)
}

fn nic_with(types: &[QpType]) -> (Nic, Vec<u32>) {
    let mrs = Arc::new(MrTable::new(4, 1).unwrap());
    let mut nic = Nic::new(IpAddr::from([127, 0, 32, 1]), mrs, 8);
    let cq = nic.create_cq(8);
    let caps = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qpns = types
        .iter()
        .map(|&t| {
            nic.create_qp_of(t, PdHandle(1), cq, cq, None, caps, false, 16)
                .unwrap()
        })
        .collect();
    (nic, qpns)
}

#[test]
fn multicast_gids_are_ipv4_mapped_224_slash_4_and_ipv6_ff00_slash_8() {
    assert!(is_multicast_gid(&mgid()));
    assert!(is_multicast_gid(&Gid::from_ip("ff02::1".parse().unwrap())));
    assert!(!is_multicast_gid(&Gid::from_ip(
        "127.0.32.1".parse().unwrap()
    )));
    assert!(!is_multicast_gid(&Gid::from_ip("fe80::1".parse().unwrap())));
    // 224.0.0.0 as an IPv4-compatible (not mapped) address is not multicast.
    let mut raw = [0u8; 16];
    raw[12] = 224;
    assert!(!is_multicast_gid(&Gid::from_raw(raw)));
}

#[test]
fn the_first_attach_joins_and_the_last_detach_leaves() {
    let mut t = McastTable::default();
    assert_eq!(t.attach(17, &mgid()), Membership::Join(GROUP));
    assert_eq!(
        t.attach(17, &mgid()),
        Membership::Unchanged,
        "twice: idempotent"
    );
    assert_eq!(t.attach(18, &mgid()), Membership::Unchanged);
    assert_eq!(t.members(GROUP), [17, 18]);
    assert_eq!(t.detach(17, &mgid()), Ok(Membership::Unchanged));
    assert_eq!(t.detach(17, &mgid()).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(t.detach(18, &mgid()), Ok(Membership::Leave(GROUP)));
    assert!(t.members(GROUP).is_empty());
}

#[test]
fn destroying_a_qp_detaches_it_from_every_group() {
    let other = Gid::from_ip("ff0e::32".parse().unwrap());
    let mut t = McastTable::default();
    t.attach(17, &mgid());
    t.attach(18, &mgid());
    t.attach(17, &other);
    let mut left = Vec::new();
    t.detach_all(17, &mut left);
    assert_eq!(left, [other.to_ip()]);
    assert_eq!(t.members(GROUP), [18]);
    assert!(!t.is_attached(17, &mgid()));
}

#[test]
fn only_a_ud_qp_attaches_and_only_to_a_multicast_gid() {
    let (mut nic, qpns) = nic_with(&[QpType::Ud, QpType::Rc, QpType::Uc]);
    let (ud, rc, uc) = (qpns[0], qpns[1], qpns[2]);
    let einval = |r: Result<Membership>| r.unwrap_err().errno() == libc::EINVAL;
    assert!(einval(nic.attach_mcast(rc, &mgid())), "RC");
    assert!(einval(nic.attach_mcast(uc, &mgid())), "UC");
    assert!(einval(nic.attach_mcast(0x1234, &mgid())), "no such QP");
    let unicast = Gid::from_ip(IpAddr::from([127, 0, 32, 2]));
    assert!(einval(nic.attach_mcast(ud, &unicast)), "not multicast");
    assert!(einval(nic.detach_mcast(ud, &mgid())), "not attached");
    assert_eq!(nic.attach_mcast(ud, &mgid()), Ok(Membership::Join(GROUP)));
    assert!(nic.is_attached(ud, &mgid()));
    assert_eq!(nic.detach_mcast(ud, &mgid()), Ok(Membership::Leave(GROUP)));
    assert!(einval(nic.detach_mcast(ud, &mgid())), "detached twice");
}

#[test]
fn destroy_qp_reports_the_groups_it_empties() {
    let (mut nic, qpns) = nic_with(&[QpType::Ud, QpType::Ud]);
    nic.attach_mcast(qpns[0], &mgid()).unwrap();
    nic.attach_mcast(qpns[1], &mgid()).unwrap();
    let mut left = Vec::new();
    nic.destroy_qp_leaving(qpns[0], &mut left).unwrap();
    assert!(left.is_empty(), "another QP is still attached");
    nic.destroy_qp_leaving(qpns[1], &mut left).unwrap();
    assert_eq!(left, [GROUP]);
}
