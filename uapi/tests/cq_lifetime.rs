//! CQ lifetime through the safe API: a CQ outlives the QPs that use it (`ibv_destroy_cq` is
//! `EBUSY` while a QP uses it), and none stays behind in the NIC once its handle and its QPs
//! are gone.

use std::net::{IpAddr, Ipv4Addr};

use softrnic_provider::nic::CqId;
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Context, Cq, OpenOptions, Progress, QpCaps, QpInitAttr, QpType, QueuePair, WcOpcode, WcStatus,
    WorkCompletion,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1));

fn open(fabric: &Fabric) -> Context {
    let opts = OpenOptions {
        progress: Progress::Polling,
        key_seed: 9,
    };
    Context::open_on(Box::new(fabric.attach(A).unwrap()), opts).unwrap()
}

fn qp(ctx: &Context, send_cq: &Cq, recv_cq: &Cq) -> QueuePair {
    let cap = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let init = QpInitAttr {
        send_cq,
        recv_cq,
        cap,
        qp_type: QpType::Rc,
        sq_sig_all: false,
        srq: None,
    };
    ctx.alloc_pd().create_qp(&init).unwrap()
}

/// Whether the device still has the CQ `handle`.
fn exists(ctx: &Context, handle: u32) -> bool {
    let mut wc = [WorkCompletion::error(
        0,
        WcStatus::Success,
        WcOpcode::Send,
        0,
    )];
    ctx.device().nic().poll_cq(CqId(handle), &mut wc).is_ok()
}

#[test]
fn destroy_is_ebusy_while_a_qp_uses_the_cq_and_gives_it_back() {
    let fabric = Fabric::new(FabricConfig::default(), 1);
    let ctx = open(&fabric);
    let (s, r) = (ctx.create_cq(8).unwrap(), ctx.create_cq(8).unwrap());
    let q = qp(&ctx, &s, &r);
    let (s, e) = s.destroy().unwrap_err();
    assert_eq!(e.errno(), 16, "EBUSY");
    let (r, e) = r.destroy().unwrap_err();
    assert_eq!(e.errno(), 16, "EBUSY");
    let mut wc = [WorkCompletion::error(
        0,
        WcStatus::Success,
        WcOpcode::Send,
        0,
    )];
    assert_eq!(s.poll(&mut wc).unwrap(), 0, "given back intact");
    let (hs, hr) = (s.handle(), r.handle());
    drop(q);
    s.destroy().map_err(|(_, e)| e).unwrap();
    r.destroy().map_err(|(_, e)| e).unwrap();
    assert!(
        !exists(&ctx, hs) && !exists(&ctx, hr),
        "gone from the device"
    );
}

#[test]
fn a_cq_dropped_before_its_qp_lives_until_the_qp_goes() {
    let fabric = Fabric::new(FabricConfig::default(), 2);
    let ctx = open(&fabric);
    let cq = ctx.create_cq(8).unwrap();
    let h = cq.handle();
    let q1 = qp(&ctx, &cq, &cq);
    let q2 = qp(&ctx, &cq, &cq);
    drop(cq);
    assert!(exists(&ctx, h), "the QPs still use it");
    drop(q1);
    assert!(exists(&ctx, h), "q2 still uses it");
    drop(q2);
    assert!(!exists(&ctx, h), "destroyed with its last QP: no leak");
}

#[test]
fn an_unused_cq_is_destroyed_by_destroy_and_by_drop() {
    let fabric = Fabric::new(FabricConfig::default(), 3);
    let ctx = open(&fabric);
    let (a, b) = (ctx.create_cq(8).unwrap(), ctx.create_cq(8).unwrap());
    let (ha, hb) = (a.handle(), b.handle());
    a.destroy().map_err(|(_, e)| e).unwrap();
    drop(b);
    assert!(!exists(&ctx, ha) && !exists(&ctx, hb));
}
