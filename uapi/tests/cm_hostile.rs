//! The connection manager under hostile input, end to end: a listener of the safe API
//! (`softrnic_uapi::cm`) on real UDP sockets, and an attacker that is a plain
//! `std::net::UdpSocket` of this process sending crafted RoCEv2 datagrams to
//! `<listener>:4791`, and reading what comes back. The attacker's socket is bound to port
//! 4791 of an address of its own, as a RoCE host's is: the CM answers QP1 of the packet's
//! source address (IBTA 13.5.3, annex A17.4), at port 4791.
//!
//! What a CM must do with what it did not ask for (IBTA vol. 1 chapter 12, and what Linux's
//! `cm.c` and `cma.c` do):
//!
//! * Junk to QP1 — not a UD SEND-only to QP1 with the GSI's Q_Key and the default P_Key
//!   (13.5.3.2), or not a CM MAD of class 0x07 version 2 with a known attribute (13.4.2) —
//!   is dropped: no answer, no event, and real connections go on working.
//! * A REQ for a Service ID nobody listens on is rejected with reason 8, Invalid Service ID
//!   (12.6.7.2).
//! * A repeated REQ is one connection; while the application has not answered it, the
//!   repeat gets an MRA (12.6.6; Linux's rdma_cm arms a delayed MRA of Service Timeout 24
//!   and sends it at the first duplicate).
//! * A flood of REQs fills the listener's backlog and is refused beyond it (REJ reason 3,
//!   No Resources): memory stays bounded.
//! * A DREQ for a connection that does not exist gets a DREP all the same (12.6.10), a REP
//!   for none a REJ reason 6, Invalid Communication ID (12.6.8); RTU, MRA, REJ and DREP for
//!   none are dropped. None reaches the application.
//! * A peer that vanishes mid-handshake: the REQ (or REP) is sent again every
//!   2 · packet lifetime + the peer's CM response timeout, 4.096 µs · 2^n each (12.7.30,
//!   12.7.36), Max CM Retries times; then the id reports `UNREACHABLE`, -ETIMEDOUT, as Linux's
//!   rdma_cm does for `IB_CM_REQ_ERROR` and `IB_CM_REP_ERROR`, and the peer is sent a REJ
//!   reason 4, Timeout. The passive side is tested to the end (the REQ sets the numbers);
//!   the active side only to its first retry, since rdma_cm's numbers (timeout 20, 15
//!   retries) make its whole wait about 77 s.
//!
//! Each test has its own addresses, 127.0.57.1 to .20, and ports; the only timing asserted is
//! the protocol's lower bounds, and every wait has a generous bound against a hang.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use softrnic_provider::cm::{cm_timeout, Config};
use softrnic_provider::gsi;
use softrnic_provider::host::block::QpnBlock;
use softrnic_provider::host::mad_route::comm_id;
use softrnic_uapi::cm::{CmEvent, CmId, ConnParam, EventChannel, EventParam, EventType, PortSpace};
use softrnic_uapi::{
    Access, Cq, Pd, QpCaps, QpInitAttr, QueuePair, RecvWr, SendFlags, SendOpcode, SendWr, Sge,
    WcOpcode, WcStatus,
};
use softrnic_wire::cm::rej::{
    MSG_REJECTED_OTHER, MSG_REJECTED_REQ, REASON_CONSUMER_DEFINED, REASON_INVALID_COMM_ID,
    REASON_INVALID_SERVICE_ID, REASON_NO_RESOURCES, REASON_TIMEOUT,
};
use softrnic_wire::cm::{self as wcm, CmMessage, IpHeader, ReqRepr};
use softrnic_wire::mad::{self, MadRepr, MAD_LEN};
use softrnic_wire::{Psn, ROCE_V2_UDP_PORT};

/// The bound on every wait for something that must come: it only keeps a broken CM from
/// hanging the test, and is never a timing assertion.
const HANG: Duration = Duration::from_secs(30);

/// How long "nothing more comes" is watched for, once what must come has come (a missed
/// straggler can only make such a check pass wrongly, never fail wrongly).
const QUIET_MS: i32 = 200;

/// `rdma_resolve_addr`'s and `rdma_resolve_route`'s timeout (unused: resolution is local).
const RESOLVE: Duration = Duration::from_secs(2);

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 57, last))
}

fn sa(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(ip(last), port)
}

/// The RoCEv2 GID of an IPv4 address: IPv4-mapped.
fn gid(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

// ---- the attacker -------------------------------------------------------------------------

/// A plain UDP socket on port 4791 of its own address, speaking QP1 by hand.
struct Attacker {
    sock: UdpSocket,
    ip: IpAddr,
}

impl Attacker {
    fn bind(last: u8) -> Attacker {
        let sock = UdpSocket::bind(sa(last, ROCE_V2_UDP_PORT)).unwrap();
        sock.set_read_timeout(Some(HANG)).unwrap();
        Attacker { sock, ip: ip(last) }
    }

    /// The UDP payload of `mad` from our QP1 to `to`'s: BTH, DETH, MAD, ICRC.
    fn packet(&self, to: IpAddr, mad: &[u8; MAD_LEN]) -> [u8; gsi::PAYLOAD_LEN] {
        gsi::encode((self.ip, ROCE_V2_UDP_PORT), to, Psn::new(0), mad).unwrap()
    }

    fn send_raw(&self, to: IpAddr, bytes: &[u8]) {
        self.sock.send_to(bytes, (to, ROCE_V2_UDP_PORT)).unwrap();
    }

    fn send(&self, to: IpAddr, tid: u64, msg: &CmMessage) {
        self.send_raw(to, &self.packet(to, &msg.to_mad(tid)));
    }

    /// The next GSI packet received, within `wait`: its source, the MAD's bytes, header and
    /// message. Anything else arriving here is a failure: nobody has reason to send it.
    fn recv_within(&self, wait: Duration) -> Option<Received> {
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 1024];
        let got = self.sock.recv_from(&mut buf);
        self.sock.set_read_timeout(Some(HANG)).unwrap();
        let (n, from) = match got {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(e) => panic!("recv: {e}"),
        };
        let mad = *gsi::decode(&buf[..n]).expect("a GSI packet");
        let (header, msg) = parse(&mad).expect("a CM MAD");
        Some(Received {
            from,
            at: Instant::now(),
            mad,
            header,
            msg,
        })
    }

    /// The next GSI packet, which must come (see [`HANG`]).
    fn recv(&self) -> Received {
        self.recv_within(HANG)
            .expect("an answer within the hang guard")
    }
}

/// A CM MAD the attacker received.
struct Received {
    from: SocketAddr,
    at: Instant,
    mad: [u8; MAD_LEN],
    header: MadRepr,
    msg: CmMessage,
}

fn parse(bytes: &[u8]) -> Option<(MadRepr, CmMessage)> {
    let p = mad::Packet::new_checked(bytes).ok()?;
    let header = MadRepr::parse(&p).ok()?;
    let msg = CmMessage::parse(header.attribute_id, p.data()).ok()?;
    Some((header, msg))
}

/// A REQ as rdma_cm sends it, from the attacker's QP `qpn` (Communication ID `comm`) at
/// `from` to TCP port `port` of `to`: RC, CM response timeouts `timeout`, `retries` Max CM
/// Retries, MTU 1024, and the IP header of annex A11 naming both addresses.
fn req_to(
    from: SocketAddr,
    to: IpAddr,
    port: u16,
    comm: u32,
    qpn: u32,
    timeout: u8,
    retries: u8,
) -> ReqRepr {
    let mut r = ReqRepr::zeroed();
    r.local_comm_id = comm;
    r.service_id = PortSpace::Tcp.service_id(port);
    r.local_ca_guid = 0x0200_5eff_fe00_0001;
    r.local_qpn = qpn;
    r.responder_resources = 1;
    r.initiator_depth = 1;
    r.remote_cm_response_timeout = timeout;
    r.local_cm_response_timeout = timeout;
    r.transport_service_type = wcm::TRANSPORT_RC;
    r.starting_psn = Psn::new(0x1234);
    r.retry_count = 7;
    r.partition_key = 0xffff;
    r.path_mtu = 3; // 1024
    r.rnr_retry_count = 7;
    r.max_cm_retries = retries;
    r.primary_path.local_port_lid = 0xffff;
    r.primary_path.remote_port_lid = 0xffff;
    r.primary_path.local_port_gid = gid(from.ip());
    r.primary_path.remote_port_gid = gid(to);
    r.primary_path.hop_limit = 64;
    r.primary_path.local_ack_timeout = 17;
    IpHeader {
        src_port: from.port(),
        src: from.ip(),
        dst: to,
    }
    .emit(&mut r.private_data)
    .unwrap();
    r.private_data[wcm::ip_service::HEADER_LEN..][..5].copy_from_slice(b"hello");
    r
}

fn rej_of(r: &Received) -> &wcm::RejRepr {
    match &r.msg {
        CmMessage::Rej(rej) => rej,
        m => panic!("not a REJ: {m}"),
    }
}

// ---- the listener's side ------------------------------------------------------------------

/// Waits up to `ms` for an event on `ch`: whether one came (it stays queued).
fn readable_within(ch: &EventChannel, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: ch.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1
}

/// The next event of `ch`, which must come (see [`HANG`]).
fn next(ch: &EventChannel) -> CmEvent {
    assert!(
        readable_within(ch, HANG.as_millis() as i32),
        "no event within the hang guard"
    );
    ch.get_event().unwrap()
}

/// Asserts that no event waits on `ch`, nor comes within [`QUIET_MS`].
fn assert_no_event(ch: &EventChannel, what: &str) {
    if readable_within(ch, QUIET_MS) {
        let e = ch.get_event().unwrap();
        panic!("{what}: unexpected {:?} (status {})", e.event, e.status);
    }
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

/// The QPN block this process holds on the device of `id` (bound): the top bits of every
/// Communication ID its CM makes there, so the host's agent routes a MAD answering such an ID
/// to this process (`host::mad_route`). Found from a QP of the device, whose number is in it.
fn block_of(id: &CmId) -> QpnBlock {
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(1).unwrap();
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, caps())).unwrap();
    QpnBlock::of(qp.qp_num())
}

/// A listener on `at` (TCP port space) with room for `backlog` requests, and its channel.
fn listener(at: SocketAddr, backlog: i32) -> (EventChannel, CmId) {
    let ch = EventChannel::new().unwrap();
    let id = CmId::new(Some(&ch), PortSpace::Tcp).unwrap();
    id.bind_addr(at).unwrap();
    id.listen(backlog).unwrap();
    (ch, id)
}

/// An id from `client` whose address and route to `server` are resolved.
fn resolved(client: SocketAddr, server: SocketAddr) -> (EventChannel, CmId) {
    let ch = EventChannel::new().unwrap();
    let id = CmId::new(Some(&ch), PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(client), server, RESOLVE).unwrap();
    let e = next(&ch);
    assert_eq!((e.event, e.status), (EventType::AddrResolved, 0));
    drop(e);
    id.resolve_route(RESOLVE).unwrap();
    assert_eq!(next(&ch).event, EventType::RouteResolved);
    (ch, id)
}

/// A real connection from `client` to the listener `(sch, lid)` at `server`: both sides reach
/// ESTABLISHED, and a SEND from the client lands in the server's receive buffer.
fn connect_and_send(sch: &EventChannel, lid: &CmId, server: SocketAddr, client: SocketAddr) {
    let (cch, id) = resolved(client, server);
    let (cpd, ccq, cqp) = rc_qp(&id);
    id.connect(&ConnParam::none()).unwrap();
    let req = next(sch);
    assert_eq!(req.event, EventType::ConnectRequest);
    assert!(req.listen_id.as_ref().is_some_and(|l| l.same(lid)));
    let server_id = req.id.clone();
    drop(req);
    let (spd, scq, sqp) = rc_qp(&server_id);
    let smr = spd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
    sqp.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: vec![Sge {
            addr: smr.addr(),
            length: 64,
            lkey: smr.lkey(),
        }],
    }])
    .unwrap();
    server_id.accept(None).unwrap();
    assert_eq!(next(&cch).event, EventType::Established);
    assert_eq!(next(sch).event, EventType::Established);

    let cmr = cpd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
    cmr.write(0, b"still standing").unwrap();
    let mut wr = SendWr::new(
        2,
        SendOpcode::Send,
        vec![Sge {
            addr: cmr.addr(),
            length: 14,
            lkey: cmr.lkey(),
        }],
    );
    wr.flags = SendFlags::SIGNALED;
    cqp.post_send(&[wr]).unwrap();
    let got = scq.wait(1, HANG).unwrap();
    assert_eq!(
        (got[0].status, got[0].opcode),
        (WcStatus::Success, WcOpcode::Recv)
    );
    let mut buf = [0u8; 14];
    smr.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"still standing");
    assert_eq!(ccq.wait(1, HANG).unwrap()[0].status, WcStatus::Success);
    server_id.destroy();
    id.destroy();
}

/// The process's resident set (VmRSS of /proc/self/status), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmRSS in kB");
    kib * 1024
}

/// A DREQ for no connection of the listener process's block `block` at `to`: that CM answers
/// it with a DREP (12.6.10) once it has handled every MAD the attacker sent it before, since
/// the agent hands a process its MADs in order. Returns the DREQ's Communication IDs.
fn dreq_for_nothing(a: &Attacker, to: IpAddr, block: QpnBlock, n: u32, tid: u64) -> (u32, u32) {
    let (ours, theirs) = (0x5eed_0000 | n, comm_id(block, 0x3f_ff00 | n));
    let d = wcm::DreqRepr {
        local_comm_id: ours,
        remote_comm_id: theirs,
        remote_qpn_eecn: 0x77,
        private_data: [0; wcm::dreq::PRIVATE_DATA_LEN],
    };
    a.send(to, tid, &CmMessage::Dreq(d));
    (ours, theirs)
}

/// Asserts that `r` is the DREP answering the DREQ of [`dreq_for_nothing`].
fn assert_drep(r: &Received, (ours, theirs): (u32, u32), tid: u64) {
    let CmMessage::Drep(d) = &r.msg else {
        panic!("not a DREP: {}", r.msg)
    };
    assert_eq!((d.local_comm_id, d.remote_comm_id), (theirs, ours));
    assert_eq!(r.header.transaction_id, tid, "the DREQ's Transaction ID");
}

// ---- the tests ----------------------------------------------------------------------------

/// Junk to QP1 of a listening address: every packet below is dropped, with no answer and no
/// event, and a real connection works afterwards.
#[test]
fn junk_to_qp1_is_dropped_and_connections_still_work() {
    let server = sa(1, 7101);
    let (sch, lid) = listener(server, 4);
    let a = Attacker::bind(3);
    let to = server.ip();
    let block = block_of(&lid);

    // A REQ the listener would report: each packet below spoils one thing of it.
    let req = CmMessage::Req(req_to(
        SocketAddr::new(a.ip, 40001),
        to,
        7101,
        0x0bad_0001,
        0x1001,
        16,
        2,
    ));
    let good_mad = req.to_mad(1);
    let good = a.packet(to, &good_mad);
    let spoilt = |at: usize, v: u8| {
        let mut p = good;
        p[at] = v;
        p
    };
    let with_mad = |f: &dyn Fn(&mut [u8; MAD_LEN])| {
        let mut m = good_mad;
        f(&mut m);
        a.packet(to, &m)
    };
    let junk: Vec<(&str, Vec<u8>)> = vec![
        ("an empty datagram", vec![]),
        ("5 bytes", vec![0x64, 0, 0xff, 0xff, 0]),
        ("text", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("300 bytes of 0xff", vec![0xff; 300]),
        // BTH byte 0: the opcode.
        ("an RC SEND to QP1", spoilt(0, 0x04).to_vec()),
        ("a UD SEND with immediate", spoilt(0, 0x65).to_vec()),
        // BTH bytes 2-3: the P_Key (0xFFFF and the limited 0x7FFF are the default's).
        ("P_Key 0x12ff", spoilt(2, 0x12).to_vec()),
        // BTH bytes 5-7: the destination QP.
        ("to QP0", spoilt(7, 0).to_vec()),
        // DETH bytes 0-3 (12-15 of the packet): the Q_Key, 0x80010000 for QP1.
        ("Q_Key 0x00010000", spoilt(12, 0).to_vec()),
        // No ICRC: the MAD is 4 bytes short; a wrong one (through a UDP socket, one that
        // matches for no IPv4 ID).
        ("no ICRC", good[..good.len() - 4].to_vec()),
        (
            "a wrong ICRC",
            spoilt(good.len() - 1, good[good.len() - 1] ^ 0x10).to_vec(),
        ),
        ("4 bytes past the MAD", [&good[..], &[0; 4]].concat()),
        (
            "MgmtClass 0x03",
            with_mad(&|m| m[1] = 0x03).to_vec(), // routed by its Service ID all the same
        ),
        ("BaseVersion 2", with_mad(&|m| m[0] = 2).to_vec()),
        ("ClassVersion 1", with_mad(&|m| m[2] = 1).to_vec()),
        ("method Get", with_mad(&|m| m[3] = 0x01).to_vec()),
        ("the R bit", with_mad(&|m| m[3] = 0x83).to_vec()),
        (
            "AttributeID 0x0030",
            with_mad(&|m| m[16..18].copy_from_slice(&[0x00, 0x30])).to_vec(),
        ),
        (
            // A LAP (not implemented) naming the listener's block: routed to its process.
            "a LAP",
            with_mad(&|m| {
                m[16..18].copy_from_slice(&mad::ATTR_CM_LAP.to_be_bytes());
                m[28..32].copy_from_slice(&comm_id(block, 7).to_be_bytes());
            })
            .to_vec(),
        ),
    ];
    for (n, (what, bytes)) in (1..).zip(&junk) {
        // Each must be dropped by the GSI or the CM: the REQ inside would otherwise show. A
        // sentinel follows it, whose DREP comes once the junk was handled: if that is the
        // first answer, the junk got none.
        a.send_raw(to, bytes);
        let tid = 0xdead_0000 + u64::from(n);
        let ids = dreq_for_nothing(&a, to, block, n, tid);
        let got = a.recv();
        assert!(
            matches!(got.msg, CmMessage::Drep(_)),
            "{what} was answered: {}",
            got.msg
        );
        assert_drep(&got, ids, tid);
        assert!(sch.try_get_event().is_none(), "{what} was reported");
    }
    assert!(a
        .recv_within(Duration::from_millis(QUIET_MS as u64))
        .is_none());
    assert_no_event(&sch, "junk to QP1");

    // The listener still takes a real connection, which carries a SEND.
    connect_and_send(&sch, &lid, server, sa(2, 0));
    assert_no_event(&sch, "after the connection");
    lid.destroy();
}

/// A REQ nobody is listening for is rejected with reason 8 (Invalid Service ID, 12.6.7.2) at
/// once, by the host's agent: the REJ comes to QP1 of the REQ's source address, port 4791,
/// from port 4791, and names the REQ's Communication ID. So is a REQ for a port listened on
/// whose IP header (annex A11) names another address; one with no IP header at all is
/// rejected by the listener's process (reason 28, consumer defined). None reaches the
/// listener.
#[test]
fn a_req_for_no_listener_gets_rej_8() {
    let (sch, lid) = listener(sa(4, 7201), 4);
    let a = Attacker::bind(5);
    let from = SocketAddr::new(a.ip, 40002);

    let r = req_to(from, ip(4), 7299, 0x0bad_0201, 0x2001, 16, 2);
    a.send(ip(4), 0x201, &CmMessage::Req(r));
    let got = a.recv();
    assert_eq!(got.from, sa(4, ROCE_V2_UDP_PORT));
    let rej = rej_of(&got);
    assert_eq!(
        (rej.reason, rej.remote_comm_id, rej.message_rejected),
        (REASON_INVALID_SERVICE_ID, 0x0bad_0201, MSG_REJECTED_REQ)
    );
    assert_eq!(got.header.transaction_id, 0x201, "the REQ's Transaction ID");

    // Listened on, but the IP header is for 127.0.57.19: not this listener's.
    let r = req_to(from, ip(19), 7201, 0x0bad_0202, 0x2002, 16, 2);
    a.send(ip(4), 0x202, &CmMessage::Req(r));
    let rej = *rej_of(&a.recv());
    assert_eq!(
        (rej.reason, rej.remote_comm_id),
        (REASON_INVALID_SERVICE_ID, 0x0bad_0202)
    );

    // Listened on, with no IP header: the listener cannot tell who connects.
    let mut r = req_to(from, ip(4), 7201, 0x0bad_0203, 0x2003, 16, 2);
    r.private_data = [0; wcm::req::PRIVATE_DATA_LEN];
    a.send(ip(4), 0x203, &CmMessage::Req(r));
    let rej = *rej_of(&a.recv());
    assert_eq!(
        (rej.reason, rej.remote_comm_id),
        (REASON_CONSUMER_DEFINED, 0x0bad_0203)
    );
    assert_no_event(&sch, "refused REQs");
    lid.destroy();
}

/// The same REQ three times to a listener that has not answered it: one connection request,
/// and each repeat gets an MRA for the REQ with Service Timeout 24 (about a minute), the
/// passive side's Communication ID, and the repeat's Transaction ID (12.6.6; Linux's rdma_cm
/// arms such an MRA, `CMA_CM_MRA_SETTING`, and `cm_dup_req_handler` sends it for a duplicate).
#[test]
fn a_repeated_req_is_one_request_and_each_repeat_gets_an_mra() {
    let (sch, lid) = listener(sa(6, 7301), 4);
    let a = Attacker::bind(7);
    let r = req_to(
        SocketAddr::new(a.ip, 40003),
        ip(6),
        7301,
        0x0bad_0301,
        0x3001,
        16,
        2,
    );
    for _ in 0..3 {
        a.send(ip(6), 0x301, &CmMessage::Req(r));
    }
    let mut passive_id = None;
    for _ in 0..2 {
        let got = a.recv();
        let CmMessage::Mra(m) = &got.msg else {
            panic!("not an MRA: {}", got.msg)
        };
        assert_eq!(
            (m.remote_comm_id, m.message_mraed, m.service_timeout),
            (0x0bad_0301, wcm::mra::MSG_MRAED_REQ, 24)
        );
        assert_eq!(got.header.transaction_id, 0x301);
        assert_ne!(m.local_comm_id, 0);
        assert_eq!(*passive_id.get_or_insert(m.local_comm_id), m.local_comm_id);
    }

    let req = next(&sch);
    assert_eq!(req.event, EventType::ConnectRequest);
    let EventParam::Conn(p) = &req.param else {
        panic!("no connection parameters")
    };
    assert_eq!(p.qp_num, 0x3001);
    assert!(p.private_data.starts_with(b"hello"));
    let child = req.id.clone();
    drop(req);
    assert_no_event(&sch, "the repeats");

    // The application's answer is the next thing the attacker hears: no third MRA.
    child.reject(b"no").unwrap();
    let got = a.recv();
    let rej = rej_of(&got);
    assert_eq!(
        (rej.reason, rej.remote_comm_id, rej.local_comm_id),
        (REASON_CONSUMER_DEFINED, 0x0bad_0301, passive_id.unwrap())
    );
    child.destroy();
    lid.destroy();
}

/// 5000 REQs, each from its own QP with its own Communication ID, to a listener of backlog 8
/// that answers none: 8 connection requests, every refusal a REJ reason 3 (No Resources) to
/// a REQ of the flood, each at most once; the process's memory stays bounded. The backlog is
/// still full afterwards, frees up when the application rejects its requests, and a real
/// connection to another listener works.
#[test]
fn a_flood_of_reqs_is_bounded_by_the_backlog() {
    const FLOOD: u32 = 5000;
    const FIRST_ID: u32 = 0x0f00_0000;
    let to = ip(8);
    let (sch, lid) = listener(sa(8, 7401), 8);
    let a = Attacker::bind(9);
    let from = SocketAddr::new(a.ip, 40004);
    let flood_req = |i: u32| req_to(from, to, 7401, FIRST_ID + i, 0x10_0000 + i, 16, 2);
    let before = rss();

    // One thread floods while this one reads the answers, so that they do not overflow the
    // attacker's socket buffer (the flood itself may overflow the listener's: that is the
    // network's loss, which the REQs' senders would retry).
    let sender = {
        let sock = a.sock.try_clone().unwrap();
        let packets: Vec<_> = (0..FLOOD)
            .map(|i| a.packet(to, &CmMessage::Req(flood_req(i)).to_mad(u64::from(i))))
            .collect();
        std::thread::spawn(move || {
            for p in packets {
                // A send the kernel refuses (ENOBUFS) is one more loss.
                let _ = sock.send_to(&p, (to, ROCE_V2_UDP_PORT));
            }
        })
    };
    // The flood's REQs refused, by index; `refusal` counts `got` if it is a REJ reason 3 of
    // one of them.
    let mut refused = std::collections::HashSet::new();
    let mut refusal = |got: &Received| -> bool {
        let CmMessage::Rej(rej) = &got.msg else {
            return false;
        };
        let i = rej.remote_comm_id.wrapping_sub(FIRST_ID);
        if i >= FLOOD || rej.reason != REASON_NO_RESOURCES {
            return false;
        }
        assert_eq!(rej.message_rejected, MSG_REJECTED_REQ);
        assert!(refused.insert(i), "REQ {i} refused twice");
        true
    };
    loop {
        // Once the flood is sent, a second of silence ends it; what comes later is counted
        // too, below.
        let quiet = if sender.is_finished() {
            Duration::from_secs(1)
        } else {
            HANG
        };
        let Some(got) = a.recv_within(quiet) else {
            break;
        };
        assert!(refusal(&got), "not a refusal of the flood: {}", got.msg);
    }
    sender.join().unwrap();
    let grown = rss().saturating_sub(before);

    // The next answer that is not a late refusal of the flood.
    let mut answer = || loop {
        let got = a.recv();
        if !refusal(&got) {
            return got;
        }
    };
    let mut requests = Vec::new();
    while let Some(e) = sch.try_get_event() {
        assert_eq!(e.event, EventType::ConnectRequest);
        requests.push(e);
    }
    assert_no_event(&sch, "the flood");
    assert_eq!(requests.len(), 8, "the backlog");
    let reported: Vec<u32> = requests
        .iter()
        .map(|e| match &e.param {
            EventParam::Conn(p) => p.qp_num - 0x10_0000,
            p => panic!("no connection parameters: {p:?}"),
        })
        .collect();
    assert!(grown < 64 << 20, "RSS grew by {grown} bytes");

    // Still full: one more REQ is refused.
    let extra = req_to(from, to, 7401, 0x0e00_0001, 0x0f_0001, 16, 2);
    a.send(to, 0xe1, &CmMessage::Req(extra));
    let rej = *rej_of(&answer());
    assert_eq!(
        (rej.reason, rej.remote_comm_id),
        (REASON_NO_RESOURCES, 0x0e00_0001)
    );
    // The application rejects what waits: each REJ goes to its REQ, and the backlog frees.
    let children: Vec<CmId> = requests.drain(..).map(|e| e.id.clone()).collect();
    for (c, i) in children.iter().zip(&reported) {
        c.reject(&[]).unwrap();
        let rej = *rej_of(&answer());
        assert_eq!(
            (rej.reason, rej.remote_comm_id),
            (REASON_CONSUMER_DEFINED, FIRST_ID + i)
        );
    }
    assert!(!refused.is_empty(), "no REJ came back");
    for i in &reported {
        assert!(!refused.contains(i), "REQ {i} reported and refused");
    }
    eprintln!(
        "flood: {} of {FLOOD} REQs refused with REJ 3, 8 reported, RSS grew {} KiB",
        refused.len(),
        grown / 1024
    );
    let again = req_to(from, to, 7401, 0x0e00_0002, 0x0f_0002, 16, 2);
    a.send(to, 0xe2, &CmMessage::Req(again));
    let e = next(&sch);
    assert_eq!(e.event, EventType::ConnectRequest);
    drop(e);
    for c in children {
        c.destroy();
    }
    lid.destroy();

    // Another listener, on another address, takes a real connection.
    let (sch2, lid2) = listener(sa(10, 7402), 4);
    connect_and_send(&sch2, &lid2, sa(10, 7402), sa(11, 0));
    lid2.destroy();
}

/// Messages of connections that do not exist: a DREQ gets a DREP (12.6.10, Linux's
/// `cm_issue_drep`), whether its Communication ID names no process (the agent answers) or the
/// listener's (its CM answers); a REP gets a REJ reason 6, Invalid Communication ID (12.6.8,
/// Linux's `cm_rep_handler`); RTU, MRA, REJ and DREP are dropped. The listener hears nothing.
#[test]
fn messages_of_no_connection_are_answered_as_the_spec_says() {
    let to = ip(12);
    let (sch, lid) = listener(sa(12, 7501), 4);
    let a = Attacker::bind(13);
    let block = block_of(&lid);

    // Block 1000: nobody's on this address (blocks are leased lowest first).
    let ids = dreq_for_nothing(&a, to, QpnBlock(1000), 1, 0x501);
    let got = a.recv();
    assert_eq!(got.from, sa(12, ROCE_V2_UDP_PORT), "the agent's socket");
    assert_drep(&got, ids, 0x501);
    let ids = dreq_for_nothing(&a, to, block, 2, 0x502);
    assert_drep(&a.recv(), ids, 0x502);

    let theirs = comm_id(block, 0x3f_fe00);
    let rtu = wcm::RtuRepr {
        local_comm_id: 0x0bad_0501,
        remote_comm_id: theirs,
        private_data: [0; wcm::rtu::PRIVATE_DATA_LEN],
    };
    let mra = wcm::MraRepr {
        local_comm_id: 0x0bad_0501,
        remote_comm_id: theirs,
        message_mraed: wcm::mra::MSG_MRAED_REP,
        service_timeout: 20,
        private_data: [0; wcm::mra::PRIVATE_DATA_LEN],
    };
    let rej = wcm::RejRepr {
        local_comm_id: 0x0bad_0501,
        remote_comm_id: theirs,
        message_rejected: MSG_REJECTED_OTHER,
        reject_info_length: 0,
        reason: REASON_TIMEOUT,
        ari: [0; wcm::rej::ARI_LEN],
        private_data: [0; wcm::rej::PRIVATE_DATA_LEN],
    };
    let drep = wcm::DrepRepr {
        local_comm_id: 0x0bad_0501,
        remote_comm_id: theirs,
        private_data: [0; wcm::drep::PRIVATE_DATA_LEN],
    };
    for m in [
        CmMessage::Rtu(rtu),
        CmMessage::Mra(mra),
        CmMessage::Rej(rej),
        CmMessage::Drep(drep),
    ] {
        a.send(to, 0x503, &m);
    }
    let mut rep = wcm::RepRepr::zeroed();
    rep.local_comm_id = 0x0bad_0502;
    rep.remote_comm_id = theirs;
    rep.local_qpn = 0x5001;
    a.send(to, 0x504, &CmMessage::Rep(rep));
    // The first answer is the REP's: the four before it got none.
    let got = a.recv();
    let r = rej_of(&got);
    assert_eq!(
        (r.reason, r.remote_comm_id, r.local_comm_id),
        (REASON_INVALID_COMM_ID, 0x0bad_0502, theirs)
    );
    assert_eq!(got.header.transaction_id, 0x504);
    assert_no_event(&sch, "messages of no connection");
    lid.destroy();
}

/// The active side of a peer that vanishes: an id connects to an address where the attacker
/// sits on port 4791 and never answers. The REQ is rdma_cm's (CM response timeout 20, 15
/// retries) and comes again, the same MAD, no earlier than 2 · packet lifetime + 4.096 µs ·
/// 2^20 after the connect (12.7.30). With these numbers the id would report UNREACHABLE only
/// after 16 such waits, about 77 s, too long for a test: this one stops after the first
/// retry, and destroying the id rejects the REQ (reason 4, Timeout), as Linux's
/// `cm_destroy_id` does in REQ_SENT.
#[test]
fn an_unanswered_req_is_sent_again_after_the_cm_response_timeout() {
    let a = Attacker::bind(14);
    let (ch, id) = resolved(sa(15, 0), sa(14, 7601));
    let start = Instant::now();
    id.connect(&ConnParam {
        qp_num: 0x6001,
        ..ConnParam::none()
    })
    .unwrap();
    let first = a.recv();
    assert_eq!(first.from.ip(), ip(15));
    let CmMessage::Req(req) = first.msg.clone() else {
        panic!("not a REQ: {}", first.msg)
    };
    assert_eq!(req.service_id, PortSpace::Tcp.service_id(7601));
    assert_eq!(req.local_qpn, 0x6001);
    let h = IpHeader::parse(&req.private_data).unwrap();
    assert_eq!((h.src, h.dst), (ip(15), ip(14)));
    // rdma_cm's numbers (Linux `CMA_CM_RESPONSE_TIMEOUT`, `CMA_MAX_CM_RETRIES`).
    assert_eq!(
        (req.remote_cm_response_timeout, req.max_cm_retries),
        (20, 15)
    );

    let life = Config::new(0, QpnBlock(1), 0).packet_life_time;
    let every = 2 * cm_timeout(life) + cm_timeout(req.remote_cm_response_timeout);
    let give_up = every * (u32::from(req.max_cm_retries) + 1);
    eprintln!("REQ retried every {every:?}; UNREACHABLE after {give_up:?}");

    let retry = a.recv_within(every + HANG).expect("the REQ again");
    assert_eq!(retry.mad, first.mad, "the same REQ, Transaction ID and all");
    assert!(
        retry.at - start >= every,
        "retried after {:?}, before the {every:?} the REQ allows",
        retry.at - start
    );
    assert!(ch.try_get_event().is_none(), "no event while retrying");

    id.destroy();
    let got = a.recv();
    let rej = rej_of(&got);
    assert_eq!(
        (rej.reason, rej.local_comm_id, rej.message_rejected),
        (REASON_TIMEOUT, req.local_comm_id, MSG_REJECTED_OTHER)
    );
}

/// The passive side of a peer that vanishes: the attacker's REQ (CM response timeout 8,
/// about 1 ms, and 2 retries) is accepted, and the attacker never sends the RTU. The REP
/// goes 3 times, each no earlier than the REQ's numbers allow (2 · packet lifetime + 4.096 µs
/// · 2^8 apart), then a REJ reason 4 (Timeout), and the id reports UNREACHABLE with
/// -ETIMEDOUT, as Linux's rdma_cm does for `IB_CM_REP_ERROR`.
#[test]
fn an_accept_whose_rtu_never_comes_is_unreachable() {
    let to = ip(16);
    let (sch, lid) = listener(sa(16, 7602), 4);
    let a = Attacker::bind(17);
    let r = req_to(
        SocketAddr::new(a.ip, 40006),
        to,
        7602,
        0x0bad_0601,
        0x6002,
        8,
        2,
    );
    a.send(to, 0x601, &CmMessage::Req(r));
    let req = next(&sch);
    assert_eq!(req.event, EventType::ConnectRequest);
    let child = req.id.clone();
    drop(req);
    let (_pd, _cq, qp) = rc_qp(&child);

    let life = Config::new(0, QpnBlock(1), 0).packet_life_time;
    let every = 2 * cm_timeout(life) + cm_timeout(r.local_cm_response_timeout);
    let start = Instant::now();
    child.accept(None).unwrap();
    let mut first = None;
    for k in 0..=u32::from(r.max_cm_retries) {
        let got = a.recv();
        let CmMessage::Rep(rep) = &got.msg else {
            panic!("not a REP: {}", got.msg)
        };
        assert_eq!(
            (rep.remote_comm_id, rep.local_qpn),
            (0x0bad_0601, qp.qp_num())
        );
        assert_eq!(got.header.transaction_id, 0x601, "the REQ's Transaction ID");
        assert_eq!(*first.get_or_insert(got.mad), got.mad, "the same REP");
        assert!(
            got.at - start >= every * k,
            "REP {k} after {:?}, before the {:?} the REQ allows",
            got.at - start,
            every * k
        );
    }
    let got = a.recv();
    let rej = rej_of(&got);
    assert_eq!(
        (rej.reason, rej.remote_comm_id),
        (REASON_TIMEOUT, 0x0bad_0601)
    );

    let e = next(&sch);
    let waited = start.elapsed();
    assert!(e.id.same(&child));
    assert_eq!(
        (e.event, e.status),
        (EventType::Unreachable, -libc::ETIMEDOUT)
    );
    let floor = every * (u32::from(r.max_cm_retries) + 1);
    assert!(
        waited >= floor,
        "UNREACHABLE after {waited:?}, before the {floor:?} the retries take"
    );
    drop(e);
    assert_no_event(&sch, "after UNREACHABLE");
    child.destroy();
    lid.destroy();
}
