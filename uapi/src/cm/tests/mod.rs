//! Ids of two devices of this process (two loopback addresses, as two hosts) connecting
//! through the real CM thread, agent and sockets. Each test uses its own addresses
//! (127.0.48.x) and ports.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::*;
use crate::{Access, Cq, Pd, QpCaps, QpInitAttr, QueuePair, RecvWr, SendFlags, SendOpcode};
use crate::{SendWr, Sge};
use crate::{WcOpcode, WcStatus};

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 48, last)), port)
}

const WAIT: Duration = Duration::from_secs(2);

/// Waits until an event waits on `ch`, leaving it queued; the bound only keeps a broken CM
/// from hanging the test.
fn wait_readable(ch: &EventChannel) {
    let mut p = libc::pollfd {
        fd: ch.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, 20_000) };
    assert_eq!(n, 1, "no event within 20 s");
}

/// The next event of `ch` (see [`wait_readable`]).
fn next(ch: &EventChannel) -> CmEvent {
    wait_readable(ch);
    ch.get_event().unwrap()
}

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// A PD, a CQ and an RC QP of `id`'s device for `id` (in INIT).
fn rc_qp(id: &CmId) -> (Pd, Cq, QueuePair) {
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let qp = id.create_qp(&pd, &QpInitAttr::rc(&cq, caps())).unwrap();
    (pd, cq, qp)
}

/// A listener on `server` and a client id from `client` with its route resolved.
fn pair(server: SocketAddr, client: SocketAddr) -> (EventChannel, CmId, EventChannel, CmId) {
    let sch = EventChannel::new().unwrap();
    let listener = CmId::new(Some(&sch), PortSpace::Tcp).unwrap();
    listener.bind_addr(server).unwrap();
    listener.listen(4).unwrap();
    let cch = EventChannel::new().unwrap();
    let id = CmId::new(Some(&cch), PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(client), server, WAIT).unwrap();
    let e = next(&cch);
    assert_eq!((e.event, e.status), (EventType::AddrResolved, 0));
    drop(e);
    assert_eq!(id.src_addr().map(|a| a.ip()), Some(client.ip()));
    id.resolve_route(WAIT).unwrap();
    assert_eq!(next(&cch).event, EventType::RouteResolved);
    (sch, listener, cch, id)
}

#[test]
fn connect_send_and_disconnect() {
    let (sch, listener, cch, client) = pair(addr(2, 7001), addr(1, 0));
    let (cpd, ccq, cqp) = rc_qp(&client);
    assert_eq!(cqp.state(), crate::QpState::Init);
    let offer = ConnParam {
        private_data: b"hello from the client".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        ..ConnParam::none()
    };
    client.connect(&offer).unwrap();

    let req = next(&sch);
    assert_eq!(req.event, EventType::ConnectRequest);
    assert!(req.listen_id.as_ref().is_some_and(|l| l.same(&listener)));
    let EventParam::Conn(p) = &req.param else {
        panic!("no connection parameters")
    };
    assert_eq!(
        p.private_data.len(),
        56,
        "a REQ's 92 bytes less the IP header"
    );
    assert!(p.private_data.starts_with(b"hello from the client"));
    assert_eq!(p.qp_num, cqp.qp_num());
    let server = req.id.clone();
    assert_eq!(server.dst_addr().map(|a| a.ip()), Some(addr(1, 0).ip()));
    drop(req);
    let (spd, scq, sqp) = rc_qp(&server);
    let smr = spd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
    sqp.post_recv(&[RecvWr {
        wr_id: 9,
        sg_list: vec![Sge {
            addr: smr.addr(),
            length: 64,
            lkey: smr.lkey(),
        }],
    }])
    .unwrap();
    let answer = ConnParam {
        private_data: b"welcome".to_vec(),
        ..ConnParam::none()
    };
    server.accept(Some(&answer)).unwrap();

    let est = next(&cch);
    assert_eq!((est.event, est.status), (EventType::Established, 0));
    let EventParam::Conn(p) = &est.param else {
        panic!("no connection parameters")
    };
    assert!(p.private_data.starts_with(b"welcome"));
    assert_eq!(p.qp_num, sqp.qp_num());
    drop(est);
    assert_eq!(cqp.state(), crate::QpState::Rts);
    assert_eq!(next(&sch).event, EventType::Established);
    assert_eq!(sqp.state(), crate::QpState::Rts);

    // The QPs the CM connected carry a SEND.
    let cmr = cpd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
    cmr.write(0, b"over the connection").unwrap();
    let mut wr = SendWr::new(
        1,
        SendOpcode::Send,
        vec![Sge {
            addr: cmr.addr(),
            length: 19,
            lkey: cmr.lkey(),
        }],
    );
    wr.flags = SendFlags::SIGNALED;
    cqp.post_send(&[wr]).unwrap();
    let got = scq.wait(1, Duration::from_secs(20)).unwrap();
    assert_eq!(
        (got[0].status, got[0].opcode),
        (WcStatus::Success, WcOpcode::Recv)
    );
    let mut buf = [0u8; 19];
    smr.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"over the connection");
    assert_eq!(
        ccq.wait(1, Duration::from_secs(20)).unwrap()[0].status,
        WcStatus::Success
    );

    client.disconnect().unwrap();
    assert_eq!(cqp.state(), crate::QpState::Err);
    assert_eq!(next(&sch).event, EventType::Disconnected);
    server.disconnect().unwrap();
    assert_eq!(next(&cch).event, EventType::Disconnected);
    server.destroy();
    client.destroy();
    listener.destroy();
}

#[test]
fn a_rejected_request_reports_the_reason_and_private_data() {
    let (sch, listener, cch, client) = pair(addr(4, 7002), addr(3, 0));
    client
        .connect(&ConnParam {
            qp_num: 0x77,
            ..ConnParam::none()
        })
        .unwrap();
    let req = next(&sch);
    let server = req.id.clone();
    drop(req);
    server.reject(b"not today").unwrap();
    let rej = next(&cch);
    assert_eq!((rej.event, rej.status), (EventType::Rejected, 28));
    let EventParam::Conn(p) = &rej.param else {
        panic!("no parameters")
    };
    assert!(p.private_data.starts_with(b"not today"));
    drop(rej);
    server.destroy();
    client.destroy();
    listener.destroy();
}

#[test]
fn a_request_for_no_listener_is_rejected_with_reason_8() {
    // A listener on another port of the same address starts the server's device.
    let (_sch, listener, cch, _) = pair(addr(6, 7003), addr(5, 0));
    let id = CmId::new(Some(&cch), PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(addr(5, 0)), addr(6, 7999), WAIT)
        .unwrap();
    drop(next(&cch));
    id.resolve_route(WAIT).unwrap();
    drop(next(&cch));
    id.connect(&ConnParam {
        qp_num: 0x78,
        ..ConnParam::none()
    })
    .unwrap();
    let rej = next(&cch);
    assert_eq!((rej.event, rej.status), (EventType::Rejected, 8));
    drop(rej);
    id.destroy();
    listener.destroy();
}

/// A listener destroyed with a connection request still queued: the request's new id goes
/// with it (its peer hears a REJ), and the destroy returns, as the kernel's
/// `ucma_cleanup_ctx_events` does it.
#[test]
fn destroying_a_listener_with_a_request_queued_rejects_it() {
    let (sch, listener, cch, id) = pair(addr(21, 7010), addr(20, 0));
    id.connect(&ConnParam {
        qp_num: 0x79,
        ..ConnParam::none()
    })
    .unwrap();
    wait_readable(&sch); // the request, not taken
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        listener.destroy();
        let _ = done_tx.send(());
    });
    done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the listener's destroy returned");
    let rej = next(&cch);
    assert_eq!(rej.event, EventType::Rejected);
    drop(rej);
    id.destroy();
    drop(sch);
}

#[test]
fn listening_twice_on_a_port_is_eaddrinuse() {
    let a = CmId::new(None, PortSpace::Tcp).unwrap();
    a.bind_addr(addr(7, 7004)).unwrap();
    a.listen(0).unwrap();
    let b = CmId::new(None, PortSpace::Tcp).unwrap();
    b.bind_addr(addr(7, 7004)).unwrap();
    assert_eq!(
        b.listen(0).unwrap_err().raw_os_error(),
        Some(libc::EADDRINUSE)
    );
    // Another port space is another Service ID.
    let c = CmId::new(None, PortSpace::Udp).unwrap();
    c.bind_addr(addr(7, 7004)).unwrap();
    c.listen(0).unwrap();
    a.destroy();
    b.destroy();
    c.destroy();
}

/// Synchronous ids: each call returns once its event came; `get_request` hands out the
/// requests of a synchronous listener.
#[test]
fn synchronous_ids_connect() {
    let listener = CmId::new(None, PortSpace::Tcp).unwrap();
    listener.bind_addr(addr(9, 7005)).unwrap();
    listener.listen(1).unwrap();
    let server = std::thread::spawn(move || {
        let req = listener.get_request().unwrap();
        let id = req.id.clone();
        drop(req);
        id.accept(None).unwrap();
        assert_eq!(
            id.take_event().map(|e| e.event),
            Some(EventType::Established)
        );
        (listener, id)
    });
    let client = CmId::new(None, PortSpace::Tcp).unwrap();
    client
        .resolve_addr(Some(addr(8, 0)), addr(9, 7005), WAIT)
        .unwrap();
    client.resolve_route(WAIT).unwrap();
    let (_pd, _cq, qp) = rc_qp(&client);
    client.connect(&ConnParam::none()).unwrap();
    assert_eq!(qp.state(), crate::QpState::Rts);
    let (listener, id) = server.join().unwrap();
    id.destroy();
    client.destroy();
    listener.destroy();
}

/// Synchronous ids disconnect as librdmacm's: `disconnect` returns with `DISCONNECTED` as
/// the id's event. The client's comes with the DREP, which the server sends when it
/// disconnects in turn; the server's came with the client's DREQ, and the server's
/// `disconnect` takes it from the id's channel, where it was left.
#[test]
fn synchronous_ids_disconnect_with_their_event() {
    let listener = CmId::new(None, PortSpace::Tcp).unwrap();
    listener.bind_addr(addr(15, 7008)).unwrap();
    listener.listen(1).unwrap();
    let server = std::thread::spawn(move || {
        let req = listener.get_request().unwrap();
        let id = req.id.clone();
        drop(req);
        let (_pd, _cq, qp) = rc_qp(&id);
        id.accept(None).unwrap();
        assert_eq!(
            id.take_event().map(|e| e.event),
            Some(EventType::Established)
        );
        // The client's DREQ makes the id's channel readable.
        wait_readable(&id.channel());
        id.disconnect().unwrap();
        assert_eq!(
            id.take_event().map(|e| e.event),
            Some(EventType::Disconnected)
        );
        assert_eq!(qp.state(), crate::QpState::Err);
        id.destroy();
        listener
    });
    let client = CmId::new(None, PortSpace::Tcp).unwrap();
    client
        .resolve_addr(Some(addr(14, 0)), addr(15, 7008), WAIT)
        .unwrap();
    client.resolve_route(WAIT).unwrap();
    let (_pd, _cq, qp) = rc_qp(&client);
    client.connect(&ConnParam::none()).unwrap();
    client.disconnect().unwrap();
    assert_eq!(
        client.take_event().map(|e| e.event),
        Some(EventType::Disconnected)
    );
    assert_eq!(qp.state(), crate::QpState::Err);
    let listener = server.join().unwrap();
    client.destroy();
    listener.destroy();
}

/// UD: SIDR resolves the listener's QP and Q_Key.
#[test]
fn ud_ids_resolve_the_peer_qp_with_sidr() {
    let sch = EventChannel::new().unwrap();
    let listener = CmId::new(Some(&sch), PortSpace::Udp).unwrap();
    listener.bind_addr(addr(11, 7006)).unwrap();
    listener.listen(0).unwrap();
    let cch = EventChannel::new().unwrap();
    let id = CmId::new(Some(&cch), PortSpace::Udp).unwrap();
    id.resolve_addr(Some(addr(10, 0)), addr(11, 7006), WAIT)
        .unwrap();
    drop(next(&cch));
    id.resolve_route(WAIT).unwrap();
    drop(next(&cch));
    id.connect(&ConnParam {
        private_data: b"ud?".to_vec(),
        ..ConnParam::none()
    })
    .unwrap();
    let req = next(&sch);
    assert_eq!(req.event, EventType::ConnectRequest);
    let EventParam::Ud(p) = &req.param else {
        panic!("no UD parameters")
    };
    assert!(p.private_data.starts_with(b"ud?"));
    let server = req.id.clone();
    drop(req);
    server
        .accept(Some(&ConnParam {
            qp_num: 0x4321,
            ..ConnParam::none()
        }))
        .unwrap();
    let est = next(&cch);
    assert_eq!(est.event, EventType::Established);
    let EventParam::Ud(p) = &est.param else {
        panic!("no UD parameters")
    };
    assert_eq!((p.qp_num, p.qkey), (0x4321, exchange::UDP_QKEY));
    assert_eq!(p.dest, addr(11, 0).ip());
    drop(est);
    server.destroy();
    id.destroy();
    listener.destroy();
}

/// A non-blocking channel fd: `EAGAIN` with no event, as librdmacm's.
#[test]
fn a_nonblocking_channel_says_eagain() {
    let ch = EventChannel::new().unwrap();
    // SAFETY: fcntl on the channel's own fd.
    unsafe { libc::fcntl(ch.fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let e = ch.get_event().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
}

/// Resources offered on both sides let the passive side RDMA READ the active side's memory
/// (rping's first step): the QPs' `max_rd_atomic` and `max_dest_rd_atomic` come from the
/// exchange.
#[test]
fn the_passive_side_reads_with_the_resources_exchanged() {
    let (sch, listener, cch, client) = pair(addr(13, 7007), addr(12, 0));
    let (cpd, _ccq, _cqp) = rc_qp(&client);
    let cmr = cpd
        .reg_mr(64, Access::LOCAL_WRITE | Access::REMOTE_READ)
        .unwrap();
    cmr.write(0, b"read me").unwrap();
    let one = ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        ..ConnParam::none()
    };
    client.connect(&one).unwrap();
    let req = next(&sch);
    let server = req.id.clone();
    drop(req);
    let (spd, scq, sqp) = rc_qp(&server);
    server.accept(Some(&one)).unwrap();
    assert_eq!(next(&cch).event, EventType::Established);
    assert_eq!(next(&sch).event, EventType::Established);
    let smr = spd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
    let mut wr = SendWr::new(
        5,
        SendOpcode::RdmaRead,
        vec![Sge {
            addr: smr.addr(),
            length: 7,
            lkey: smr.lkey(),
        }],
    );
    wr.flags = SendFlags::SIGNALED;
    wr.remote = crate::RemoteAddr {
        addr: cmr.addr(),
        rkey: cmr.rkey(),
    };
    sqp.post_send(&[wr]).unwrap();
    let got = scq.wait(1, Duration::from_secs(20)).unwrap();
    assert_eq!(got[0].status, WcStatus::Success);
    let mut buf = [0u8; 7];
    smr.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"read me");
    server.destroy();
    client.destroy();
    listener.destroy();
}

mod multicast;
