//! P_Key checking at the NIC (IBTA 9.6.1.1, 10.9.3): a request whose BTH P_Key does not match
//! the port's default partition is dropped silently and counted (`bad_pkey`), as kernel rxe's
//! `check_keys` does; the limited-membership form of the default partition (0x7fff) matches,
//! since the port's own key is a full member.

mod common;

use std::net::SocketAddr;
use std::time::Instant;

use common::*;
use softrnic_provider::driver::accept;
use softrnic_provider::mr::{Access, MrTable};
use softrnic_provider::nic::Nic;
use softrnic_provider::transport::{seal_as_socket_sent, RecvMeta, RecvPacket};
use softrnic_provider::wc::{WcOpcode, WcStatus, WorkCompletion};
use softrnic_provider::wr::{RecvWr, Sge};

/// An RC SEND ONLY to `qpn` at `psn` with P_Key `pkey` and a 4-byte payload (ICRC unchecked:
/// IPv4 from a UDP socket).
fn send_only(qpn: u32, psn: u32, pkey: u16) -> Vec<u8> {
    let mut b = vec![0x04, 0];
    b.extend_from_slice(&pkey.to_be_bytes());
    b.push(0);
    b.extend_from_slice(&qpn.to_be_bytes()[1..]);
    b.push(0x80);
    b.extend_from_slice(&psn.to_be_bytes()[1..]);
    b.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0, 0]);
    b
}

#[test]
fn a_request_of_another_partition_is_dropped_and_counted() {
    let mrs = std::sync::Arc::new(MrTable::new(16, 5).unwrap());
    let mut buf = vec![0u8; 4096];
    // SAFETY: deregistered (by dropping the NIC and the table) before `buf` is dropped; only
    // the NIC writes it meanwhile, and the test reads it after.
    let keys = unsafe {
        mrs.register(
            PD,
            buf.as_mut_ptr(),
            4096,
            buf.as_ptr() as u64,
            Access::LOCAL_WRITE,
        )
        .unwrap()
    };
    let mut nic = Nic::new(B_ADDR, mrs.clone(), 4);
    let cq = nic.create_cq(16);
    let qpn = nic
        .create_qp(PD, cq, cq, None, caps(), false, 4096)
        .unwrap();
    let c = Connect::default();
    connect(nic.qp(qpn).unwrap(), 0x11, A_ADDR, c, c.b_psn, c.a_psn);
    for id in 0..2 {
        let wr = RecvWr {
            wr_id: id,
            sg_list: vec![Sge {
                addr: buf.as_ptr() as u64,
                length: 64,
                lkey: keys.lkey,
            }],
        };
        nic.qp(qpn).unwrap().post_recv(&wr).unwrap();
    }
    let deliver = |nic: &mut Nic, bytes: &[u8]| {
        let from = SocketAddr::new(A_ADDR, 0xc011);
        let mut bytes = bytes.to_vec();
        assert!(seal_as_socket_sent(from, B_ADDR, &mut bytes));
        let meta = RecvMeta::from_socket(from, B_ADDR, bytes.len());
        let pkt = RecvPacket {
            meta: &meta,
            payload: &bytes,
        };
        let (p, verified) = accept(&pkt).expect("well formed");
        nic.handle_packet_from(Instant::now(), &p, verified, A_ADDR);
    };
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 4];

    deliver(&mut nic, &send_only(qpn, c.a_psn, 0x1234));
    assert_eq!((nic.rx.bad_pkey, nic.rx.delivered), (1, 0));
    assert_eq!(nic.poll_cq(cq, &mut wcs).unwrap(), 0, "nothing received");

    deliver(&mut nic, &send_only(qpn, c.a_psn, 0x7fff));
    assert_eq!((nic.rx.bad_pkey, nic.rx.delivered), (1, 1));
    assert_eq!(nic.poll_cq(cq, &mut wcs).unwrap(), 1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].byte_len),
        (0, WcStatus::Success, 4)
    );
    drop(nic);
    drop(mrs);
    assert_eq!(&buf[..4], &[1, 2, 3, 4]);
}
