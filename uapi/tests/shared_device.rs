//! One device, many contexts in one process: every `Context::open` of an address shares the
//! running device (one NIC, key table and UDP socket), and each context keeps its own PDs,
//! MRs, CQs, QPs, SRQs and asynchronous events. Over real kernel UDP on loopback
//! (127.0.40.x), each device with its progress thread.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_uapi::{
    Access, AsyncEvent, Context, Element, EventType, OpenOptions, Progress, QpInitAttr, RecvWr,
    RemoteAddr, SendFlags, SendOpcode, SendWr, SrqAttr, SrqAttrMask, WcOpcode, WcStatus,
};

const LEN: usize = 4096;
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);
const WAIT: Duration = Duration::from_secs(10);

fn addr(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 40, host))
}

fn open(host: u8) -> Context {
    let opts = OpenOptions {
        progress: Progress::Thread,
        key_seed: u64::from(host),
    };
    Context::open(addr(host), opts).expect("a UDP device on 127.0.40.x")
}

/// A PD, CQ, RC QP and region of its own on context `ctx`.
fn node(ctx: Context) -> Node {
    let setup = Setup {
        cqe: 64,
        send_wr: 16,
        recv_wr: 16,
        ..Setup::default()
    };
    Node::new(setup.with(ctx), LEN, ALL)
}

/// Two nodes on two contexts of the device at 127.0.40.`host`, their QPs connected to each
/// other through it.
fn pair_on(host: u8) -> (Node, Node) {
    let (a, b) = (node(open(host)), node(open(host)));
    common::connect(&a.dev, addr(host), &b.dev, addr(host));
    (a, b)
}

fn wr(opcode: SendOpcode, from: &Node, len: u32, remote: RemoteAddr) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        remote,
        ..SendWr::new(1, opcode, vec![from.mem.sge(0, len)])
    }
}

fn at(to: &Node, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: to.mem.addr() + offset,
        rkey: to.mem.rkey(),
    }
}

fn done(n: &Node) -> softrnic_uapi::WorkCompletion {
    n.cq.wait(1, WAIT).unwrap()[0]
}

fn bytes(n: &Node, offset: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    n.mem.read(offset, &mut v).unwrap();
    v
}

/// SEND, WRITE, READ, CMP_SWP and FETCH_ADD from `a` to `b`, every byte checked.
fn every_operation(a: &Node, b: &Node) {
    // SEND into a posted receive.
    a.mem.write(0, b"two contexts, one device").unwrap();
    let recv = RecvWr {
        wr_id: 9,
        sg_list: vec![b.mem.sge(1024, 64)],
    };
    b.qp.post_recv(&[recv]).unwrap();
    a.qp.post_send(&[wr(SendOpcode::Send, a, 24, at(b, 0))])
        .unwrap();
    assert_eq!(done(a).status, WcStatus::Success);
    let wc = done(b);
    assert_eq!(
        (wc.status, wc.opcode, wc.byte_len),
        (WcStatus::Success, WcOpcode::Recv, 24)
    );
    assert_eq!(bytes(b, 1024, 24), b"two contexts, one device");

    // WRITE.
    a.mem.write(0, &[0x5a; 512]).unwrap();
    a.qp.post_send(&[wr(SendOpcode::RdmaWrite, a, 512, at(b, 2048))])
        .unwrap();
    assert_eq!(done(a).status, WcStatus::Success);
    assert_eq!(bytes(b, 2048, 512), vec![0x5a; 512]);

    // READ back what b holds at 1024.
    a.qp.post_send(&[wr(SendOpcode::RdmaRead, a, 24, at(b, 1024))])
        .unwrap();
    assert_eq!(done(a).status, WcStatus::Success);
    assert_eq!(bytes(a, 0, 24), b"two contexts, one device");

    // CMP_SWP then FETCH_ADD on b's word at 3072 (zero), the old values into a.
    let cas = SendWr {
        compare_add: 0,
        swap: 40,
        ..wr(SendOpcode::AtomicCmpAndSwp, a, 8, at(b, 3072))
    };
    a.qp.post_send(&[cas]).unwrap();
    assert_eq!(done(a).status, WcStatus::Success);
    assert_eq!(bytes(a, 0, 8), 0u64.to_ne_bytes());
    let add = SendWr {
        compare_add: 2,
        ..wr(SendOpcode::AtomicFetchAndAdd, a, 8, at(b, 3072))
    };
    a.qp.post_send(&[add]).unwrap();
    assert_eq!(done(a).status, WcStatus::Success);
    assert_eq!(bytes(a, 0, 8), 40u64.to_ne_bytes());
    assert_eq!(bytes(b, 3072, 8), 42u64.to_ne_bytes());
}

#[test]
fn two_contexts_on_one_device_connect_and_do_every_operation() {
    let (a, b) = pair_on(1);
    assert!(
        std::ptr::eq(a.ctx.device(), b.ctx.device()),
        "both contexts run on one device"
    );
    assert_ne!(a.pd.handle(), b.pd.handle(), "PD handles are the device's");
    every_operation(&a, &b);
    every_operation(&b, &a);
}

#[test]
fn closing_one_context_leaves_the_others_working() {
    let (a, b) = pair_on(2);
    let (c, d) = pair_on(2);
    every_operation(&a, &b);
    let packets = a.ctx.device().transport_stats().rx_packets;
    drop((a, b));
    // The device still runs for c and d, and counted on (it did not restart).
    every_operation(&c, &d);
    assert!(c.ctx.device().transport_stats().rx_packets > packets);
    // After the last context, the address can be opened again (a fresh device).
    drop((c, d));
    let (e, f) = pair_on(2);
    every_operation(&e, &f);
}

#[test]
fn an_rkey_of_another_context_gets_a_remote_access_error() {
    // a and b are connected; c is a third context of the same device, whose region a's
    // requests name. c's PD is not b's, so b's responder refuses them.
    let (a, _b) = pair_on(3);
    let c = node(open(3));
    c.mem.write(0, &[0x11; 64]).unwrap();
    a.mem.write(0, &[0x99; 64]).unwrap();
    a.qp.post_send(&[wr(SendOpcode::RdmaWrite, &a, 64, at(&c, 0))])
        .unwrap();
    assert_eq!(done(&a).status, WcStatus::RemAccessErr);
    assert_eq!(bytes(&c, 0, 64), vec![0x11; 64], "c's memory untouched");
}

#[test]
fn asynchronous_events_go_to_their_own_context_only() {
    let (a, b) = pair_on(4);
    let rang = |ctx: &Context| {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        ctx.set_async_notifier(move || {
            m.fetch_add(1, Ordering::SeqCst);
        });
        n
    };
    let (rang_a, rang_b) = (rang(&a.ctx), rang(&b.ctx));
    // An SRQ of b's, armed at 2 with 2 WQEs: the first SEND to it leaves one, below the limit.
    let srq =
        b.pd.create_srq(&SrqAttr {
            max_wr: 8,
            max_sge: 1,
            srq_limit: 0,
        })
        .unwrap();
    let recvs: Vec<RecvWr> = (0..2)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: vec![b.mem.sge(i as usize * 64, 64)],
        })
        .collect();
    srq.post_recv(&recvs).unwrap();
    let limit = SrqAttr {
        srq_limit: 2,
        ..SrqAttr::default()
    };
    srq.modify(&limit, SrqAttrMask::LIMIT).unwrap();
    let init = QpInitAttr {
        srq: Some(&srq),
        ..QpInitAttr::rc(&b.cq, caps())
    };
    let qb = b.pd.create_qp(&init).unwrap();
    let qa = a.pd.create_qp(&QpInitAttr::rc(&a.cq, caps())).unwrap();
    let connect = |qp: &softrnic_uapi::QueuePair, peer: u32| {
        qp.connect(&softrnic_uapi::ConnectAttr {
            dest: addr(4),
            dest_qp_num: peer,
            ..softrnic_uapi::ConnectAttr::default()
        })
        .unwrap()
    };
    connect(&qa, qb.qp_num());
    connect(&qb, qa.qp_num());
    qa.post_send(&[wr(SendOpcode::Send, &a, 8, at(&b, 0))])
        .unwrap();
    assert_eq!(done(&a).status, WcStatus::Success);
    assert_eq!(done(&b).status, WcStatus::Success);
    let deadline = std::time::Instant::now() + WAIT;
    while rang_b.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ev = b.ctx.get_async_event();
    assert_eq!(
        ev,
        Some(AsyncEvent {
            event_type: EventType::SrqLimitReached,
            element: Element::Srq(srq.handle()),
        })
    );
    assert_eq!(a.ctx.get_async_event(), None, "not the other context's");
    assert_eq!(rang_a.load(Ordering::SeqCst), 0, "nor its notifier");
    assert_eq!(rang_b.load(Ordering::SeqCst), 1);
    drop((qa, qb));
}

fn caps() -> softrnic_uapi::QpCaps {
    softrnic_uapi::QpCaps {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

#[test]
fn a_context_reopened_from_another_shares_its_device() {
    // The same on any transport: `reopen` is a second `ibv_open_device`.
    let fabric = softrnic_provider::transport::Fabric::new(Default::default(), 5);
    let at = IpAddr::V4(Ipv4Addr::new(10, 0, 40, 1));
    let opts = OpenOptions::default();
    let first = Context::open_on(Box::new(fabric.attach(at).unwrap()), opts).unwrap();
    let second = first.reopen();
    assert!(std::ptr::eq(first.device(), second.device()));
    let (a, b) = (node(first), node(second));
    common::connect(&a.dev, at, &b.dev, at);
    every_operation(&a, &b);
}

/// `softrnic status` asks each process on its QPN block's lease: the process answers with
/// its pid, program and every QP of the device, of all its contexts, with state and peer.
#[test]
fn the_process_reports_its_qps_to_a_status_question() {
    use softrnic_provider::host::status;
    let host = 9;
    let (a, b) = pair_on(host);
    let blocks = status::devices()
        .unwrap()
        .into_iter()
        .find(|(d, _)| *d == addr(host))
        .map(|(_, blocks)| blocks)
        .expect("the device is listed");
    assert_eq!(blocks.len(), 1, "one process, one block");
    let report = status::ask(addr(host), blocks[0]).unwrap();
    assert_eq!(report.pid, std::process::id());
    assert!(report.runs_agent, "the only process runs the agent");
    let (qa, qb) = (a.dev.qp.qp_num(), b.dev.qp.qp_num());
    type Listed<'a> = (u32, &'a str, &'a str, Option<(IpAddr, u32)>);
    let listed: Vec<Listed> = report
        .qps
        .iter()
        .map(|q| (q.qpn, q.qp_type.name(), q.state.name(), q.peer))
        .collect();
    let mut want = vec![
        (qa, "RC", "RTS", Some((addr(host), qb))),
        (qb, "RC", "RTS", Some((addr(host), qa))),
    ];
    want.sort_unstable();
    assert_eq!(listed, want);
    // A QP gone is gone from the report.
    drop(b);
    let report = status::ask(addr(host), blocks[0]).unwrap();
    assert_eq!(report.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(), [qa]);
}
