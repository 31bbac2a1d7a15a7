//! Multicast joins of UD ids over real UDP (the kernel's multicast loopback carries the
//! group's datagrams between two devices of this process): what a member sends reaches the
//! members, a left group no longer does, and the joins that cannot be fail with `EINVAL`.
//! Addresses 127.0.48.16-19, each test its own group.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::*;
use crate::{QpType, WorkCompletion};

fn group(last: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(239, 1, 48, last)), 0)
}

/// The GRH a UD receive buffer starts with (IBTA 11.4.1.2).
const GRH: usize = 40;

/// A UD id of `channel` bound to `local`, with a QP (in RTS) and `recvs` receives posted
/// into the returned region, one 128-byte slot each.
fn ud_member(
    channel: Option<&EventChannel>,
    local: SocketAddr,
    recvs: u64,
) -> (CmId, Pd, Cq, QueuePair, crate::MemoryRegion) {
    let id = CmId::new(channel, PortSpace::Udp).unwrap();
    id.bind_addr(local).unwrap();
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let init = QpInitAttr {
        qp_type: QpType::Ud,
        ..QpInitAttr::rc(&cq, caps())
    };
    let qp = id.create_qp(&pd, &init).unwrap();
    let mr = pd.reg_mr(1024, Access::LOCAL_WRITE).unwrap();
    for i in 0..recvs {
        let sge = Sge {
            addr: mr.addr() + 128 * i,
            length: 128,
            lkey: mr.lkey(),
        };
        qp.post_recv(&[RecvWr {
            wr_id: i,
            sg_list: vec![sge],
        }])
        .unwrap();
    }
    (id, pd, cq, qp, mr)
}

/// The join event of `ch`, checked: the group's GID as the destination, QPN 0xFFFFFF, the
/// UDP port space's Q_Key, and the join's context.
fn joined(ch: &EventChannel, g: SocketAddr, context: usize) {
    let e = next(ch);
    assert_eq!((e.event, e.status), (EventType::MulticastJoin, 0));
    let EventParam::Multicast { ud, context: c } = &e.param else {
        panic!("no multicast parameters: {:?}", e.param)
    };
    assert_eq!(
        (ud.dest, ud.qp_num, ud.qkey, *c),
        (g.ip(), MULTICAST_QPN, exchange::UDP_QKEY, context)
    );
}

/// Sends `data` to the group `g` from `qp` (its MR `mr` holds the bytes at 0).
fn send_to_group(pd: &Pd, qp: &QueuePair, mr: &crate::MemoryRegion, g: SocketAddr, data: &[u8]) {
    mr.write(0, data).unwrap();
    let ah = pd.create_ah(g.ip()).unwrap();
    let mut wr = SendWr::new(
        9,
        SendOpcode::Send,
        vec![Sge {
            addr: mr.addr(),
            length: data.len() as u32,
            lkey: mr.lkey(),
        }],
    );
    wr.ud = Some(ah.ud(MULTICAST_QPN, exchange::UDP_QKEY));
    qp.post_send(&[wr]).unwrap();
}

#[test]
fn a_member_gets_what_is_sent_to_the_group_until_it_leaves() {
    let g = group(1);
    let rch = EventChannel::new().unwrap();
    let (rx, _rpd, rcq, _rqp, rmr) = ud_member(Some(&rch), addr(16, 0), 2);
    rx.join_multicast(g, JoinKind::FullMember, 0x77).unwrap();
    joined(&rch, g, 0x77);
    // The sender only sends: its QP stays out of the group.
    let tch = EventChannel::new().unwrap();
    let (tx, tpd, _tcq, tqp, tmr) = ud_member(Some(&tch), addr(17, 0), 1);
    tx.join_multicast(g, JoinKind::SendOnlyFullMember, 0)
        .unwrap();
    joined(&tch, g, 0);

    send_to_group(&tpd, &tqp, &tmr, g, b"to the group");
    let wc = rcq.wait(1, Duration::from_secs(20)).unwrap();
    assert_eq!(
        (wc[0].status, wc[0].src_qp, wc[0].byte_len),
        (WcStatus::Success, tqp.qp_num(), (GRH + 12) as u32)
    );
    let mut got = [0u8; 12];
    rmr.read(GRH, &mut got).unwrap();
    assert_eq!(&got, b"to the group");

    rx.leave_multicast(g).unwrap();
    let e = rx.leave_multicast(g).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "left twice");
    send_to_group(&tpd, &tqp, &tmr, g, b"after leave!");
    std::thread::sleep(Duration::from_millis(300));
    let mut wcs = [WorkCompletion::error(
        0,
        WcStatus::Success,
        WcOpcode::Recv,
        0,
    )];
    assert_eq!(rcq.poll(&mut wcs).unwrap(), 0, "a left member got {wcs:?}");
    tx.leave_multicast(g).unwrap();
    tx.destroy();
    rx.destroy();
}

#[test]
fn a_synchronous_id_joins_with_its_event() {
    let g = group(2);
    let (id, _pd, _cq, _qp, _mr) = ud_member(None, addr(18, 0), 0);
    id.join_multicast(g, JoinKind::FullMember, 5).unwrap();
    let e = id.take_event().expect("the join's event");
    assert_eq!((e.event, e.status), (EventType::MulticastJoin, 0));
    assert!(matches!(e.param, EventParam::Multicast { context: 5, .. }));
    drop(e);
    id.leave_multicast(g).unwrap();
    id.destroy();
}

#[test]
fn joins_that_cannot_be_are_einval() {
    let einval = |r: std::io::Result<()>, what: &str| {
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL), "{what}");
    };
    let g = group(3);
    let ch = EventChannel::new().unwrap();
    let rc = CmId::new(Some(&ch), PortSpace::Tcp).unwrap();
    rc.bind_addr(addr(19, 0)).unwrap();
    einval(rc.join_multicast(g, JoinKind::FullMember, 0), "an RC id");
    let unbound = CmId::new(Some(&ch), PortSpace::Udp).unwrap();
    einval(
        unbound.join_multicast(g, JoinKind::FullMember, 0),
        "an id on no device",
    );
    let ud = CmId::new(Some(&ch), PortSpace::Udp).unwrap();
    ud.bind_addr(addr(19, 0)).unwrap();
    einval(
        ud.join_multicast(addr(18, 0), JoinKind::FullMember, 0),
        "a unicast address",
    );
    let v6: SocketAddr = "[ff0e::1]:0".parse().unwrap();
    einval(
        ud.join_multicast(v6, JoinKind::FullMember, 0),
        "an IPv6 group on an IPv4 device",
    );
    let e = ud.leave_multicast(g).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "never joined");
    for id in [rc, unbound, ud] {
        id.destroy();
    }
}
