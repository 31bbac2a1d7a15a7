//! UD multicast through the safe verbs API over the in-memory fabric (IBTA 10.5): QPs attach
//! to a multicast GID with `QueuePair::attach_mcast`, a datagram sent through an address handle
//! whose GID is the group's, to DestQP 0xFFFFFF, reaches every attached QP whose Q_Key it
//! carries, each completing its own receive WQE; a detached QP no longer gets it.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, ConnectAttr, Gid, QpType, RecvWr, SendFlags, SendOpcode, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

const GROUP: IpAddr = IpAddr::V4(Ipv4Addr::new(239, 1, 32, 1));
const QKEY: u32 = 0x1111_1111;
const MULTICAST_QPN: u32 = 0x00ff_ffff;
/// `EINVAL`.
const EINVAL: i32 = 22;
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const WAIT: Duration = Duration::from_secs(10);
/// How long a receiver that must get nothing is watched.
const QUIET: Duration = Duration::from_millis(200);

fn side(fabric: &Fabric, last: u8, qp_type: QpType, qkey: u32) -> Node {
    let setup = Setup {
        seed: u64::from(last),
        qp_type,
        ..Setup::default()
    };
    let dev = setup.on(fabric, IpAddr::V4(Ipv4Addr::new(10, 0, 32, last)));
    let peer = IpAddr::V4(Ipv4Addr::new(10, 0, 32, 250));
    dev.qp
        .connect(&ConnectAttr {
            dest: peer,
            dest_qp_num: 0x22,
            qkey,
            ..ConnectAttr::default()
        })
        .unwrap();
    Node::new(dev, 1 << 13, RW)
}

fn post_recv(s: &Node, wr_id: u64) {
    let sg_list = vec![s.mem.sge(0, 1024)];
    s.qp.post_recv(&[RecvWr { wr_id, sg_list }]).unwrap();
}

/// Sends `len` bytes of 0x5a from `s` to the group, and waits for the send completion.
fn send_to_group(s: &Node, wr_id: u64, len: u32) {
    s.mem.write(4096, &vec![0x5a; len as usize]).unwrap();
    let ah = s.pd.create_ah(GROUP).unwrap();
    let wr = SendWr {
        flags: SendFlags::SIGNALED,
        ud: Some(ah.ud(MULTICAST_QPN, QKEY)),
        ..SendWr::new(wr_id, SendOpcode::Send, vec![s.mem.sge(4096, len)])
    };
    s.qp.post_send(&[wr]).unwrap();
    assert_eq!(s.cq.wait(1, WAIT).unwrap()[0].status, WcStatus::Success);
}

fn nothing_received(s: &Node) -> bool {
    std::thread::sleep(QUIET);
    let mut wc = [WorkCompletion::error(
        0,
        WcStatus::Success,
        WcOpcode::Recv,
        0,
    )];
    s.cq.poll(&mut wc).unwrap() == 0
}

#[test]
fn every_attached_qp_with_the_q_key_gets_its_own_copy() {
    let fabric = Fabric::new(FabricConfig::default(), 32);
    let sender = side(&fabric, 1, QpType::Ud, QKEY);
    let r1 = side(&fabric, 2, QpType::Ud, QKEY);
    let r2 = side(&fabric, 3, QpType::Ud, QKEY);
    let other_qkey = side(&fabric, 4, QpType::Ud, 0x2222_2222);
    let mgid = Gid::from_ip(GROUP);
    for (i, r) in [&r1, &r2, &other_qkey].into_iter().enumerate() {
        r.qp.attach_mcast(&mgid).unwrap();
        r.qp.attach_mcast(&mgid).unwrap(); // twice: no change
        post_recv(r, 10 + i as u64);
        post_recv(r, 20 + i as u64);
    }

    send_to_group(&sender, 1, 100);
    for (i, r) in [&r1, &r2].into_iter().enumerate() {
        let wc = r.cq.wait(1, WAIT).unwrap()[0];
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len, wc.src_qp),
            (
                10 + i as u64,
                WcStatus::Success,
                40 + 100,
                sender.qp.qp_num()
            )
        );
        let mut buf = vec![0; 140];
        r.mem.read(0, &mut buf).unwrap();
        assert_eq!(buf[32..36], [10, 0, 32, 1], "the GRH's IPv4 source");
        assert_eq!(
            buf[36..40],
            [239, 1, 32, 1],
            "the GRH's destination: the group"
        );
        assert_eq!(buf[40..], [0x5a; 100]);
    }
    assert!(nothing_received(&other_qkey), "a Q_Key mismatch is dropped");

    // Detached, r2 no longer receives; r1 still does.
    r2.qp.detach_mcast(&mgid).unwrap();
    send_to_group(&sender, 2, 60);
    let wc = r1.cq.wait(1, WAIT).unwrap()[0];
    assert_eq!((wc.wr_id, wc.byte_len), (20, 40 + 60));
    assert!(nothing_received(&r2), "a detached QP gets nothing");
}

#[test]
fn attach_and_detach_errors_follow_ibv_attach_mcast() {
    let fabric = Fabric::new(FabricConfig::default(), 33);
    let ud = side(&fabric, 1, QpType::Ud, QKEY);
    let rc = side(&fabric, 2, QpType::Rc, QKEY);
    let mgid = Gid::from_ip(GROUP);
    let v6 = Gid::from_ip("ff0e::1:32".parse().unwrap());
    let einval = |r: softrnic_uapi::Result<()>| r.unwrap_err().errno() == EINVAL;
    assert!(einval(rc.qp.attach_mcast(&mgid)), "not a UD QP");
    let unicast = Gid::from_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 32, 2)));
    assert!(einval(ud.qp.attach_mcast(&unicast)), "not a multicast GID");
    assert!(einval(ud.qp.detach_mcast(&mgid)), "never attached");
    ud.qp.attach_mcast(&mgid).unwrap();
    ud.qp.attach_mcast(&v6).unwrap();
    ud.qp.detach_mcast(&mgid).unwrap();
    assert!(einval(ud.qp.detach_mcast(&mgid)), "detached twice");
    ud.qp.detach_mcast(&v6).unwrap();
}
