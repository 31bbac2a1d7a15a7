//! Tests of the CM: each rule of the state machine between two CMs that hand each other
//! MADs directly, then many connections over the in-memory fabric with loss, duplication,
//! reordering and corruption of the GSI's packets.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use softrnic_wire::cm::rej::{
    REASON_CONSUMER_DEFINED, REASON_INVALID_SERVICE_ID, REASON_NO_RESOURCES, REASON_STALE_CONN,
    REASON_TIMEOUT,
};
use softrnic_wire::cm::{self, CmMessage, RepRepr, ReqRepr, SidrRepRepr, SidrReqRepr};
use softrnic_wire::mad::MAD_LEN;
use softrnic_wire::{Psn, ROCE_V2_UDP_PORT};

use super::*;
use crate::gsi;
use crate::host::mad_route;
use crate::transport::Bytes;
use crate::transport::{
    Fabric, FabricConfig, FabricEndpoint, IcrcStatus, OutPacket, RecvBatch, Transport,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const SERVICE: u64 = 0x0106_4e20;

fn cm(block: u16) -> Cm {
    Cm::new(Config::new(
        0x0200_00ff_fe00_0000 | u64::from(block),
        QpnBlock(block),
        7,
    ))
}

/// A REQ for `SERVICE` from QP `qpn`: RC, 3 retries, response timeouts of about 4 ms.
fn req(qpn: u32) -> ReqRepr {
    let mut r = ReqRepr::parse(&cm::req::Packet::new_unchecked(&[0u8; cm::MSG_LEN][..])).unwrap();
    r.service_id = SERVICE;
    r.local_qpn = qpn;
    r.starting_psn = Psn::new(100);
    r.transport_service_type = cm::TRANSPORT_RC;
    r.max_cm_retries = 3;
    r.remote_cm_response_timeout = 10;
    r.local_cm_response_timeout = 10;
    r.primary_path.local_ack_timeout = 14;
    r.private_data[..5].copy_from_slice(b"hello");
    r
}

fn rep(qpn: u32) -> RepRepr {
    let mut r = RepRepr::parse(&cm::rep::Packet::new_unchecked(&[0u8; cm::MSG_LEN][..])).unwrap();
    r.local_qpn = qpn;
    r.starting_psn = Psn::new(200);
    r
}

/// The messages `from` has to send, parsed, with where they go.
fn sent(from: &mut Cm) -> Vec<(IpAddr, [u8; MAD_LEN])> {
    std::iter::from_fn(|| from.poll_transmit().map(|t| (t.to, t.mad))).collect()
}

fn msg(mad: &[u8; MAD_LEN]) -> CmMessage {
    super::parse(mad).expect("a CM MAD").1
}

fn events(cm: &mut Cm) -> Vec<Event> {
    std::iter::from_fn(|| cm.poll_event()).collect()
}

/// Hands every MAD `from` (at `from_addr`) has to `to`; returns them.
fn deliver(now: Instant, from: &mut Cm, from_addr: IpAddr, to: &mut Cm) -> Vec<CmMessage> {
    sent(from)
        .into_iter()
        .map(|(_, mad)| {
            to.handle(now, from_addr, &mad);
            msg(&mad)
        })
        .collect()
}

/// A listening on nothing, B on `SERVICE`; A's REQ from QP 0x11 reported by B: both IDs.
fn requested(now: Instant, a: &mut Cm, b: &mut Cm) -> (ConnId, ConnId) {
    b.listen(SERVICE, 0).unwrap();
    let ca = a.connect(now, B, req(0x11)).unwrap();
    deliver(now, a, A, b);
    let Some(Event::Request {
        conn: cb,
        from,
        req: r,
    }) = b.poll_event()
    else {
        panic!("no request")
    };
    assert_eq!(
        (from, r.local_qpn, &r.private_data[..5]),
        (A, 0x11, &b"hello"[..])
    );
    (ca, cb)
}

/// A and B connected: A active (QP 0x11), B passive (QP 0x22); returns both IDs.
fn connected(now: Instant, a: &mut Cm, b: &mut Cm) -> (ConnId, ConnId) {
    let (ca, cb) = requested(now, a, b);
    b.accept(now, cb, rep(0x22)).unwrap();
    deliver(now, b, B, a);
    let Some(Event::Reply { conn, rep: r }) = a.poll_event() else {
        panic!("no reply")
    };
    assert_eq!((conn, r.local_qpn, r.remote_comm_id), (ca, 0x22, ca.0));
    a.ready_to_use(ca, b"rtu").unwrap();
    deliver(now, a, A, b);
    assert_eq!(b.poll_event(), Some(Event::Established { conn: cb }));
    assert_eq!(a.state(ca), Some(State::Established));
    (ca, cb)
}

#[test]
fn connect_and_disconnect_through_timewait() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let (ca, cb) = connected(t0, &mut a, &mut b);
    assert_eq!(mad_route::comm_id_block(ca.0), QpnBlock(1));
    assert_eq!(mad_route::comm_id_block(cb.0), QpnBlock(2));
    assert_eq!(
        a.poll_timeout(),
        None,
        "nothing to wait for once established"
    );
    a.disconnect(t0, ca, b"bye").unwrap();
    deliver(t0, &mut a, A, &mut b);
    let Some(Event::DisconnectRequested { conn, private_data }) = b.poll_event() else {
        panic!("no DREQ")
    };
    assert_eq!((conn, &private_data[..3]), (cb, &b"bye"[..]));
    b.disconnect(t0, cb, &[]).unwrap();
    let drep = deliver(t0, &mut b, B, &mut a);
    assert!(matches!(drep[..], [CmMessage::Drep(_)]));
    assert_eq!(a.poll_event(), Some(Event::Disconnected { conn: ca }));
    assert_eq!(
        (a.state(ca), b.state(cb)),
        (Some(State::TimeWait), Some(State::TimeWait))
    );
    let end = a.poll_timeout().unwrap();
    a.handle_timeout(end);
    b.handle_timeout(b.poll_timeout().unwrap());
    assert_eq!(events(&mut a), [Event::TimewaitExit { conn: ca }]);
    assert_eq!(events(&mut b), [Event::TimewaitExit { conn: cb }]);
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(a.stats().unknown + b.stats().unknown, 0);
}

/// perftest's `-R` never destroys the id of its first connection and exits: Linux then
/// destroys it (DREQ). A CM whose process goes ends every connection so, and rejects the REQ
/// it has not answered; the peer hears of both at once.
#[test]
fn destroying_everything_ends_each_connection_as_the_peer_expects() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let (ca, cb) = connected(t0, &mut a, &mut b);
    let ca2 = a.connect(t0, B, req(0x33)).unwrap();
    deliver(t0, &mut a, A, &mut b);
    let Some(Event::Request { conn: cb2, .. }) = b.poll_event() else {
        panic!("no second request")
    };
    b.destroy_all(t0);
    let out = deliver(t0, &mut b, B, &mut a);
    assert!(matches!(out[..], [CmMessage::Dreq(_), CmMessage::Rej(_)]));
    let got = events(&mut a);
    let Event::Rejected { conn, rej } = &got[1] else {
        panic!("not a REJ: {got:?}")
    };
    assert_eq!((*conn, rej.reason), (ca2, REASON_CONSUMER_DEFINED));
    assert!(matches!(got[0], Event::DisconnectRequested { conn, .. } if conn == ca));
    assert_eq!((b.state(cb), b.state(cb2)), (Some(State::DreqSent), None));
    assert_eq!(events(&mut b), [], "no events once destroyed");
}

#[test]
fn a_req_for_no_listener_gets_rej_8_and_the_active_side_reports_it() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let ca = a.connect(t0, B, req(0x11)).unwrap();
    deliver(t0, &mut a, A, &mut b);
    assert!(b.is_empty(), "nothing kept for a REQ nobody wants");
    let rej = deliver(t0, &mut b, B, &mut a);
    let [CmMessage::Rej(r)] = rej[..] else {
        panic!("{rej:?}")
    };
    assert_eq!(
        (r.reason, r.remote_comm_id),
        (REASON_INVALID_SERVICE_ID, ca.0)
    );
    assert!(matches!(a.poll_event(), Some(Event::Rejected { conn, .. }) if conn == ca));
    assert!(a.is_empty());
}

#[test]
fn a_rejected_req_carries_the_private_data() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let (ca, cb) = requested(t0, &mut a, &mut b);
    assert_eq!(
        b.reject(cb, REASON_CONSUMER_DEFINED, &[], &[7; 149]),
        Err(CmError::PrivateDataTooLong)
    );
    b.reject(cb, REASON_CONSUMER_DEFINED, &[], b"busy").unwrap();
    deliver(t0, &mut b, B, &mut a);
    let Some(Event::Rejected { conn, rej }) = a.poll_event() else {
        panic!()
    };
    assert_eq!(
        (conn, rej.reason, &rej.private_data[..4]),
        (ca, 28, &b"busy"[..])
    );
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(b.accept(t0, cb, rep(1)), Err(CmError::NotFound));
}

#[test]
fn a_duplicate_req_is_one_connection_and_gets_an_mra_which_stretches_the_wait() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    b.listen(SERVICE, 0).unwrap();
    let ca = a.connect(t0, B, req(0x11)).unwrap();
    let (_, first) = sent(&mut a)[0];
    b.handle(t0, A, &first);
    b.handle(t0, A, &first);
    assert_eq!(events(&mut b).len(), 1, "one connection");
    assert_eq!(b.stats().duplicates, 1);
    let answers = deliver(t0, &mut b, B, &mut a);
    let [CmMessage::Mra(m)] = answers[..] else {
        panic!("{answers:?}")
    };
    assert_eq!((m.remote_comm_id, m.service_timeout), (ca.0, 24));
    // The REQ is not retried before 2 packet lifetimes + 4.096 µs · 2^24 (about a minute).
    let wait = a.poll_timeout().unwrap() - t0;
    assert!(wait > cm_timeout(24), "{wait:?}");
}

#[test]
fn a_lost_rtu_is_recovered_by_the_rep_retry() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let (ca, cb) = requested(t0, &mut a, &mut b);
    b.accept(t0, cb, rep(0x22)).unwrap();
    deliver(t0, &mut b, B, &mut a);
    a.poll_event().unwrap();
    a.ready_to_use(ca, &[]).unwrap();
    assert_eq!(sent(&mut a).len(), 1, "the RTU, lost");
    let t1 = b.poll_timeout().unwrap();
    b.handle_timeout(t1);
    let again = deliver(t1, &mut b, B, &mut a);
    assert!(matches!(again[..], [CmMessage::Rep(_)]));
    let rtu = deliver(t1, &mut a, A, &mut b);
    assert!(matches!(rtu[..], [CmMessage::Rtu(_)]), "the RTU again");
    assert_eq!(b.poll_event(), Some(Event::Established { conn: cb }));
}

#[test]
fn an_unanswered_req_times_out_after_its_retries_with_a_rej() {
    let t0 = Instant::now();
    let mut a = cm(1);
    let ca = a.connect(t0, B, req(0x11)).unwrap();
    let mut now = t0;
    let mut reqs = sent(&mut a).len();
    while let Some(t) = a.poll_timeout() {
        now = t;
        a.handle_timeout(now);
        for (to, mad) in sent(&mut a) {
            assert_eq!(to, B);
            match msg(&mad) {
                CmMessage::Req(_) => reqs += 1,
                CmMessage::Rej(r) => assert_eq!(r.reason, REASON_TIMEOUT),
                m => panic!("{m:?}"),
            }
        }
    }
    assert_eq!(reqs, 4, "the REQ and its 3 retries");
    // 4 waits of 2 · 2^16 + 2^10 times 4.096 µs.
    assert_eq!(now - t0, 4 * (2 * cm_timeout(16) + cm_timeout(10)));
    assert_eq!(events(&mut a), [Event::TimedOut { conn: ca }]);
    assert!(a.is_empty());
}

#[test]
fn a_req_from_a_still_connected_qp_is_stale_and_releases_the_old_connection() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let (_, cb) = connected(t0, &mut a, &mut b);
    // A restarted: a new CM, the same QPN.
    let mut a2 = Cm::new(Config::new(a.ca_guid(), QpnBlock(1), 1000));
    let c2 = a2.connect(t0, B, req(0x11)).unwrap();
    deliver(t0, &mut a2, A, &mut b);
    let out = sent(&mut b);
    let kinds: Vec<u16> = out.iter().map(|(_, m)| msg(m).attribute_id()).collect();
    assert_eq!(
        kinds,
        [0x12, 0x15],
        "REJ to the new REQ, DREQ to the old connection"
    );
    let CmMessage::Rej(r) = msg(&out[0].1) else {
        panic!()
    };
    assert_eq!((r.reason, r.remote_comm_id), (REASON_STALE_CONN, c2.0));
    assert_eq!(b.state(cb), Some(State::DreqSent));
}

#[test]
fn bad_and_unknown_mads_are_counted_and_answered_as_the_spec_says() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    for junk in [&[][..], &[0u8; 10], &[1u8; MAD_LEN], &[0u8; MAD_LEN + 1]] {
        b.handle(t0, A, junk);
    }
    let mut wrong_class = CmMessage::Req(req(1)).to_mad(1);
    wrong_class[1] = 0x03;
    b.handle(t0, A, &wrong_class);
    assert_eq!(b.stats().malformed, 5);
    // A DREQ for no connection gets a DREP; RTU, DREP, MRA and REJ for none are dropped.
    let (ca, _) = connected(t0, &mut a, &mut cm(3));
    let mut c = cm(4);
    a.disconnect(t0, ca, &[]).unwrap();
    let answers = deliver(t0, &mut a, A, &mut c);
    assert!(matches!(answers[..], [CmMessage::Dreq(_)]));
    let drep = deliver(t0, &mut c, B, &mut cm(5));
    assert!(matches!(drep[..], [CmMessage::Drep(_)]));
    assert_eq!(c.stats().unknown, 1);
    assert!(c.is_empty() && b.is_empty());
    assert_eq!(a.state(ConnId(1)), None);
    assert_eq!(a.disconnect(t0, ConnId(1), &[]), Err(CmError::NotFound));
    assert_eq!(
        a.ready_to_use(ca, &[]),
        Err(CmError::State(State::DreqSent))
    );
}

#[test]
fn a_req_from_another_address_is_not_a_duplicate() {
    // Every address of one host may share its GUID: the peer's address tells them apart.
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    b.listen(SERVICE, 0).unwrap();
    a.connect(t0, B, req(0x11)).unwrap();
    let (_, mad) = sent(&mut a)[0];
    b.handle(t0, A, &mad);
    b.handle(t0, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), &mad);
    assert_eq!(events(&mut b).len(), 2);
}

#[test]
fn a_flood_of_reqs_fills_the_backlog_then_is_refused() {
    let t0 = Instant::now();
    let mut b = cm(2);
    b.listen(SERVICE, 8).unwrap();
    let mut a = cm(1);
    for qpn in 0..1000 {
        a.connect(t0, B, req(0x100 + qpn)).unwrap();
    }
    deliver(t0, &mut a, A, &mut b);
    assert_eq!(events(&mut b).len(), 8);
    assert_eq!(b.len(), 8, "bounded");
    assert_eq!(b.stats().refused, 992);
    let refusals = sent(&mut b);
    assert!(refusals
        .iter()
        .all(|(_, m)| matches!(msg(m), CmMessage::Rej(r) if r.reason == REASON_NO_RESOURCES)));
}

#[test]
fn sidr_resolves_and_retries() {
    let t0 = Instant::now();
    let (mut a, mut b) = (cm(1), cm(2));
    let mut q = SidrReqRepr::parse(&cm::sidr_req::Packet::new_unchecked(&[0u8; 232][..])).unwrap();
    q.service_id = SERVICE;
    let every = Duration::from_millis(100);
    // Nobody listens: status 1.
    let id = a.sidr_request(t0, B, q, every, 2).unwrap();
    deliver(t0, &mut a, A, &mut b);
    deliver(t0, &mut b, B, &mut a);
    let Some(Event::SidrReply { id: got, rep }) = a.poll_event() else {
        panic!()
    };
    assert_eq!((got, rep.status), (id, cm::sidr_rep::STATUS_UNSUPPORTED));
    // Listened for: reported once, answered, and a retried request gets the same answer.
    b.listen(SERVICE, 0).unwrap();
    let id = a.sidr_request(t0, B, q, every, 2).unwrap();
    let (_, first) = sent(&mut a)[0];
    b.handle(t0, A, &first);
    let Some(Event::SidrRequest { id: bid, from, .. }) = b.poll_event() else {
        panic!()
    };
    assert_eq!(from, A);
    let mut r = SidrRepRepr::parse(&cm::sidr_rep::Packet::new_unchecked(&[0u8; 232][..])).unwrap();
    r.qpn = 0x33;
    r.q_key = 0x0123_4567;
    b.sidr_reply(t0, bid, r).unwrap();
    assert_eq!(b.sidr_reply(t0, bid, r), Err(CmError::Answered));
    sent(&mut b); // lost
    a.handle_timeout(t0 + every);
    deliver(t0 + every, &mut a, A, &mut b);
    assert_eq!(b.poll_event(), None, "a retry is not a new request");
    deliver(t0 + every, &mut b, B, &mut a);
    let Some(Event::SidrReply { id: got, rep }) = a.poll_event() else {
        panic!()
    };
    assert_eq!((got, rep.qpn, rep.q_key), (id, 0x33, 0x0123_4567));
    // Unanswered: given up after the retries.
    let mut c = cm(3);
    let id = c.sidr_request(t0, B, q, every, 2).unwrap();
    while let Some(t) = c.poll_timeout() {
        c.handle_timeout(t);
    }
    assert_eq!(sent(&mut c).len(), 3);
    assert_eq!(events(&mut c), [Event::SidrTimedOut { id }]);
    b.handle_timeout(t0 + super::sidr::SIDR_REPLY_KEPT + every);
    assert!(b.is_empty(), "the kept reply is forgotten");
}

/// One side of the fabric test: a CM on an endpoint, with an application that accepts every
/// request, completes every reply, and answers every disconnect request.
struct Node {
    cm: Cm,
    ep: FabricEndpoint,
    seen: Vec<Event>,
}

impl Node {
    /// Sends what the CM has to send through the GSI.
    fn flush(&mut self) {
        let me = self.ep.local_addr();
        while let Some(t) = self.cm.poll_transmit() {
            let payload = gsi::encode((me, 0xc001), t.to, Psn::new(0), &t.mad).unwrap();
            let pieces: [&[u8]; 1] = [&payload];
            let pieces = pieces.map(Bytes::from);
            let p = OutPacket {
                dst: SocketAddr::new(t.to, ROCE_V2_UDP_PORT),
                src_port: 0xc001,
                pieces: &pieces,
                segment: 0,
                ident: 0,
            };
            self.ep.send_batch(&[p]).unwrap();
        }
    }

    /// Takes in what arrived, and plays the application.
    fn receive(&mut self, now: Instant, batch: &mut RecvBatch) {
        while self.ep.recv_batch(batch).unwrap() > 0 {
            for p in batch.iter() {
                if p.icrc_status() != IcrcStatus::Ok {
                    continue; // corrupted on the way
                }
                if let Ok(mad) = gsi::decode(p.payload) {
                    self.cm.handle(now, p.meta.src.ip(), mad);
                }
            }
        }
        self.cm.handle_timeout(now);
        while let Some(e) = self.cm.poll_event() {
            match e {
                Event::Request { conn, req, .. } => {
                    self.cm.accept(now, conn, rep(req.local_qpn + 1)).unwrap()
                }
                Event::Reply { conn, .. } => self.cm.ready_to_use(conn, &[]).unwrap(),
                Event::DisconnectRequested { conn, .. } => {
                    self.cm.disconnect(now, conn, &[]).unwrap()
                }
                _ => {}
            }
            self.seen.push(e);
        }
    }
}

/// Runs the fabric until nothing is in flight and no timer is armed before `until`.
fn run(fabric: &Fabric, t0: Instant, nodes: &mut [Node], until: Duration) {
    let mut batch = RecvBatch::new(16, 512);
    loop {
        for n in nodes.iter_mut() {
            n.flush();
        }
        let at = |i: Instant| (i - t0).as_nanos() as u64;
        let next = nodes
            .iter()
            .filter_map(|n| n.cm.poll_timeout().map(at))
            .chain(fabric.next_arrival())
            .min();
        match next {
            Some(t) if t <= until.as_nanos() as u64 => fabric.advance_to(t.max(fabric.now())),
            _ => return,
        }
        let now = t0 + Duration::from_nanos(fabric.now());
        for n in nodes.iter_mut() {
            n.receive(now, &mut batch);
        }
    }
}

#[test]
fn connections_survive_loss_duplication_reordering_and_corruption_of_mads() {
    let config = FabricConfig {
        loss: 0.2,
        duplicate: 0.2,
        reorder: 0.3,
        corrupt: 0.05,
        delay_ns: 20_000,
        ..FabricConfig::default()
    };
    for seed in 1..=5 {
        let fabric = Fabric::new(config, seed);
        let t0 = Instant::now();
        let node = |addr, block| Node {
            cm: cm(block),
            ep: fabric.attach(addr).unwrap(),
            seen: Vec::new(),
        };
        let mut nodes = [node(A, 1), node(B, 2)];
        nodes[1].cm.listen(SERVICE, 0).unwrap();
        let mut r = req(0);
        r.max_cm_retries = 15;
        let ids: Vec<ConnId> = (0..20)
            .map(|i| {
                r.local_qpn = 0x400 + 2 * i;
                nodes[0].cm.connect(t0, B, r).unwrap()
            })
            .collect();
        run(&fabric, t0, &mut nodes, Duration::from_secs(60));
        let count = |n: &Node, f: &dyn Fn(&Event) -> bool| n.seen.iter().filter(|e| f(e)).count();
        let replies = count(&nodes[0], &|e| matches!(e, Event::Reply { .. }));
        let requests = count(&nodes[1], &|e| matches!(e, Event::Request { .. }));
        let established = count(&nodes[1], &|e| matches!(e, Event::Established { .. }));
        assert_eq!(
            (replies, requests, established),
            (20, 20, 20),
            "seed {seed}"
        );
        for id in &ids {
            assert_eq!(nodes[0].cm.state(*id), Some(State::Established));
            nodes[0]
                .cm
                .disconnect(t0 + Duration::from_nanos(fabric.now()), *id, &[])
                .unwrap();
        }
        run(&fabric, t0, &mut nodes, Duration::from_secs(300));
        let disconnected = count(&nodes[0], &|e| matches!(e, Event::Disconnected { .. }));
        let asked = count(&nodes[1], &|e| {
            matches!(e, Event::DisconnectRequested { .. })
        });
        let exits: Vec<usize> = nodes
            .iter()
            .map(|n| count(n, &|e| matches!(e, Event::TimewaitExit { .. })))
            .collect();
        assert_eq!(
            (disconnected, asked, exits),
            (20, 20, vec![20, 20]),
            "seed {seed}"
        );
        assert!(
            nodes.iter().all(|n| n.cm.is_empty()),
            "seed {seed}: all forgotten"
        );
        // A: Reply, Disconnected, TimewaitExit; B: Request, Established, DisconnectRequested,
        // TimewaitExit; and nothing else (no timeout, no reject).
        let all: Vec<usize> = nodes.iter().map(|n| n.seen.len()).collect();
        assert_eq!(all, [20 * 3, 20 * 4], "seed {seed}");
        let s = fabric.stats();
        assert!(s.lost > 0 && s.duplicated > 0 && s.reordered > 0, "{s:?}");
        let dups: u64 = nodes.iter().map(|n| n.cm.stats().duplicates).sum();
        assert!(dups > 0, "seed {seed}: duplicates reached the CMs");
    }
}
