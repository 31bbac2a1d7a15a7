//! UC and UD QPs through the safe verbs API over the in-memory fabric: a UC SEND and RDMA
//! WRITE with immediate between connected QPs, and a UD datagram through an address handle
//! (`Pd::create_ah`), received after its 40-byte GRH with the sender's QP number.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, ConnectAttr, QpType, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, WcFlags,
    WcOpcode, WcStatus,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 24, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 24, 2));
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const WAIT: Duration = Duration::from_secs(10);

fn pair(qp_type: QpType) -> (Node, Node) {
    let fabric = Fabric::new(FabricConfig::default(), 24);
    let setup = Setup {
        seed: 5,
        qp_type,
        cqe: 64,
        send_wr: 16,
        recv_wr: 16,
        ..Setup::default()
    };
    let (a, b) = common::pair_on(&fabric, (A, &setup), (B, &setup));
    (Node::new(a, 1 << 14, RW), Node::new(b, 1 << 14, RW))
}

fn send(wr_id: u64, opcode: SendOpcode, s: &Node, len: u32) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        ..SendWr::new(wr_id, opcode, vec![s.mem.sge(0, len)])
    }
}

#[test]
fn uc_send_and_write_with_immediate() {
    let (a, b) = pair(QpType::Uc);
    a.mem.write(0, &[0x5a; 3000]).unwrap();
    let recvs = [0, 1].map(|i| RecvWr {
        wr_id: 10 + i,
        sg_list: vec![b.mem.sge(0, 4096)],
    });
    b.qp.post_recv(&recvs).unwrap();
    let mut write = send(2, SendOpcode::RdmaWriteWithImm, &a, 3000);
    write.remote = RemoteAddr {
        addr: b.mem.addr() + 8192,
        rkey: b.mem.rkey(),
    };
    write.imm_data_or_inv_rkey = 77;
    a.qp.post_send(&[send(1, SendOpcode::Send, &a, 3000), write])
        .unwrap();
    let sent = a.cq.wait(2, WAIT).unwrap();
    assert!(sent.iter().all(|w| w.status == WcStatus::Success));
    let got = b.cq.wait(2, WAIT).unwrap();
    assert_eq!((got[0].wr_id, got[0].byte_len), (10, 3000));
    assert_eq!(
        (got[1].opcode, got[1].imm_data_or_inv_rkey),
        (WcOpcode::RecvRdmaWithImm, 77)
    );
    let mut buf = vec![0; 3000];
    b.mem.read(8192, &mut buf).unwrap();
    assert_eq!(buf, vec![0x5a; 3000]);
}

#[test]
fn ud_datagram_through_an_address_handle() {
    let (a, b) = pair(QpType::Ud);
    a.mem.write(0, &[0xc3; 1000]).unwrap();
    b.qp.post_recv(&[RecvWr {
        wr_id: 20,
        sg_list: vec![b.mem.sge(0, 1040)],
    }])
    .unwrap();
    let ah = a.pd.create_ah(B).unwrap();
    assert!(a.pd.create_ah(IpAddr::V4(Ipv4Addr::UNSPECIFIED)).is_err());
    let wr = SendWr {
        ud: Some(ah.ud(b.qp.qp_num(), ConnectAttr::default().qkey)),
        xrc_srqn: 0,
        ..send(1, SendOpcode::Send, &a, 1000)
    };
    a.qp.post_send(&[wr]).unwrap();
    assert_eq!(a.cq.wait(1, WAIT).unwrap()[0].status, WcStatus::Success);
    let wc = b.cq.wait(1, WAIT).unwrap()[0];
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (20, WcStatus::Success, 1040)
    );
    assert_eq!(wc.src_qp, a.qp.qp_num());
    assert!(wc.wc_flags.contains(WcFlags::GRH));
    let mut buf = vec![0; 1040];
    b.mem.read(0, &mut buf).unwrap();
    assert_eq!(buf[32..36], [10, 0, 24, 1], "the GRH's IPv4 source");
    assert_eq!(buf[40..], [0xc3; 1000]);
}
