//! The SRQ verbs, the SQD state and `Context::get_async_event` through the safe API: two
//! devices on the in-memory fabric (no delay, no loss), in polling mode, driven from this
//! thread.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::signaled_send;
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, AsyncEvent, AttrMask, Context, Element, EventType, Mtu, OpenOptions, Progress, QpAttr,
    QpCaps, QpInitAttr, QpState, QpType, QueuePair, RecvWr, SrqAttr, SrqAttrMask, WcStatus,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const WAIT: Duration = Duration::from_secs(5);

fn open(fabric: &Fabric, addr: IpAddr, seed: u64) -> Context {
    let opts = OpenOptions {
        progress: Progress::Polling,
        key_seed: seed,
    };
    Context::open_on(Box::new(fabric.attach(addr).unwrap()), opts).unwrap()
}

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 64,
        max_recv_wr: 64,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 0,
    }
}

fn connect(qp: &QueuePair, peer: IpAddr, peer_qpn: u32) {
    let all =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let init = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: all,
        ..QpAttr::default()
    };
    let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
    qp.modify(&init, m).unwrap();
    let rtr = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: peer_qpn,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
        dest: peer,
        ..QpAttr::default()
    };
    let m = AttrMask::STATE
        | AttrMask::AV
        | AttrMask::PATH_MTU
        | AttrMask::DEST_QPN
        | AttrMask::RQ_PSN
        | AttrMask::MAX_DEST_RD_ATOMIC
        | AttrMask::MIN_RNR_TIMER;
    qp.modify(&rtr, m).unwrap();
    let rts = QpAttr {
        qp_state: QpState::Rts,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..QpAttr::default()
    };
    let m = AttrMask::STATE
        | AttrMask::TIMEOUT
        | AttrMask::RETRY_CNT
        | AttrMask::RNR_RETRY
        | AttrMask::SQ_PSN
        | AttrMask::MAX_QP_RD_ATOMIC;
    qp.modify(&rts, m).unwrap();
}

#[test]
fn srq_verbs_and_the_limit_event_through_the_safe_api() {
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let (a, b) = (open(&fabric, A, 1), open(&fabric, B, 2));
    // The notifier an event fd's thread would sleep on: counted here.
    let signals = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = signals.clone();
    b.set_async_notifier(move || {
        s.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let signalled = || signals.load(std::sync::atomic::Ordering::SeqCst);
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let srq = pb
        .create_srq(&SrqAttr {
            max_wr: 8,
            max_sge: 1,
            srq_limit: 0,
        })
        .unwrap();
    let init = |cq, srq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        cap: caps(),
        qp_type: QpType::Rc,
        sq_sig_all: false,
        srq,
    };
    let qa = pa.create_qp(&init(&cqa, None)).unwrap();
    let qb = pb.create_qp(&init(&cqb, Some(&srq))).unwrap();
    connect(&qa, B, qb.qp_num());
    connect(&qb, A, qa.qp_num());

    let ma = pa.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let mb = pb.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let recvs: Vec<RecvWr> = (0..4)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: vec![mb.sge(i as usize * 64, 64)],
        })
        .collect();
    let e = qb.post_recv(&recvs[..1]).unwrap_err();
    assert_eq!((e.0, e.1.errno()), (0, 22), "post_recv on an SRQ QP");
    srq.post_recv(&recvs).unwrap();
    srq.modify(
        &SrqAttr {
            srq_limit: 3,
            ..SrqAttr::default()
        },
        SrqAttrMask::LIMIT,
    )
    .unwrap();
    assert_eq!(srq.query().unwrap().srq_limit, 3);
    assert_eq!(b.get_async_event(), None);

    ma.write(0, b"hello, srq").unwrap();
    qa.post_send(&[signaled_send(7, ma.sge(0, 10))]).unwrap();
    let wcs = cqb
        .wait_with(1, WAIT, || {
            a.progress();
        })
        .unwrap();
    assert_eq!((wcs[0].wr_id, wcs[0].status), (0, WcStatus::Success));
    let mut got = [0u8; 10];
    mb.read(0, &mut got).unwrap();
    assert_eq!(&got, b"hello, srq");
    cqa.wait_with(1, WAIT, || {
        b.progress();
    })
    .unwrap();

    // Three left: not below 3. A second message leaves two: the event, once.
    assert_eq!(b.get_async_event(), None);
    assert_eq!(signalled(), 0, "nothing pending, nothing signalled");
    qa.post_send(&[signaled_send(8, ma.sge(0, 10))]).unwrap();
    cqb.wait_with(1, WAIT, || {
        a.progress();
    })
    .unwrap();
    assert_eq!(
        signalled(),
        1,
        "signalled in the round that reached the limit"
    );
    b.progress();
    assert_eq!(signalled(), 1, "once until drained");
    let ev = b.get_async_event();
    assert_eq!(
        ev,
        Some(AsyncEvent {
            event_type: EventType::SrqLimitReached,
            element: Element::Srq(srq.handle()),
        })
    );
    assert_eq!(b.get_async_event(), None);
    assert_eq!(srq.query().unwrap().srq_limit, 0, "disarmed");

    // In use: EBUSY, and the SRQ comes back intact.
    let (srq, e) = srq.destroy().unwrap_err();
    assert_eq!(e.errno(), 16);
    assert_eq!(srq.query().unwrap().max_wr, 8);
    drop(qb);
    srq.destroy().map_err(|(_, e)| e).unwrap();
}

#[test]
fn sqd_and_the_drained_event_through_the_safe_api() {
    let fabric = Fabric::new(FabricConfig::default(), 2);
    let (a, b) = (open(&fabric, A, 3), open(&fabric, B, 4));
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let init = |cq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        cap: caps(),
        qp_type: QpType::Rc,
        sq_sig_all: false,
        srq: None,
    };
    let qa = pa.create_qp(&init(&cqa)).unwrap();
    let qb = pb.create_qp(&init(&cqb)).unwrap();
    connect(&qa, B, qb.qp_num());
    connect(&qb, A, qa.qp_num());
    let ma = pa.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let mb = pb.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let recv = RecvWr {
        wr_id: 1,
        sg_list: vec![mb.sge(0, 64)],
    };
    qb.post_recv(&[recv]).unwrap();

    let sqd = QpAttr {
        qp_state: QpState::Sqd,
        en_sqd_async_notify: 1,
        ..QpAttr::default()
    };
    qa.modify(&sqd, AttrMask::STATE | AttrMask::EN_SQD_ASYNC_NOTIFY)
        .unwrap();
    assert_eq!(qa.state(), QpState::Sqd);
    let drained = AsyncEvent {
        event_type: EventType::SqDrained,
        element: Element::Qp(qa.qp_num()),
    };
    assert_eq!(a.get_async_event(), Some(drained), "idle: drained at once");
    assert!(!qa.sq_draining());

    qa.post_send(&[signaled_send(5, ma.sge(0, 8))]).unwrap();
    for _ in 0..100 {
        a.progress();
        b.progress();
    }
    let mut out = [softrnic_uapi::WorkCompletion::error(
        0,
        WcStatus::Success,
        softrnic_uapi::WcOpcode::Send,
        0,
    ); 4];
    assert_eq!(cqb.poll(&mut out).unwrap(), 0, "nothing sent in SQD");

    let rts = QpAttr {
        qp_state: QpState::Rts,
        ..QpAttr::default()
    };
    qa.modify(&rts, AttrMask::STATE).unwrap();
    qa.post_send(&[]).unwrap(); // a post makes progress: the waiting WR goes
    let wcs = cqa
        .wait_with(1, WAIT, || {
            b.progress();
        })
        .unwrap();
    assert_eq!((wcs[0].wr_id, wcs[0].status), (5, WcStatus::Success));
    assert_eq!(a.get_async_event(), None);
}
