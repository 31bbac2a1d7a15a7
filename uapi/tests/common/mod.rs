//! Shared setup of the uapi tests: two devices on the in-memory fabric, each with a PD, a CQ
//! and an RC QP, connected to each other, progress by a thread per device.

#![allow(dead_code)]

use std::net::IpAddr;
use std::time::Duration;

use softrnic_provider::transport::{Fabric, FabricConfig, Transport};
use softrnic_uapi::{
    ConnectAttr, Context, Cq, OpenOptions, Pd, Progress, QpCaps, QpInitAttr, QueuePair, SendFlags,
    SendOpcode, SendWr, Sge, WorkCompletion,
};

/// One device with a PD, a CQ and an RC QP.
pub struct Side {
    pub ctx: Context,
    pub pd: Pd,
    pub cq: Cq,
    pub qp: QueuePair,
}

impl Side {
    /// The next completion (a 10 s guard against a hang, never a timing assertion).
    pub fn one(&self) -> WorkCompletion {
        self.cq.wait(1, Duration::from_secs(10)).unwrap()[0]
    }
}

fn side(fabric: &Fabric, addr: IpAddr, seed: u64) -> Side {
    side_on(
        Box::new(fabric.attach(addr).unwrap()),
        Progress::Thread,
        seed,
    )
}

/// One side on `transport`, making progress as `progress` says.
pub fn side_on(transport: Box<dyn Transport + Send>, progress: Progress, seed: u64) -> Side {
    let opts = OpenOptions {
        progress,
        key_seed: seed,
    };
    let ctx = Context::open_on(transport, opts).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let cap = QpCaps {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, cap)).unwrap();
    Side { ctx, pd, cq, qp }
}

/// Two sides on addresses `a` and `b` of a fresh fabric (seeded with `seed`), their QPs
/// connected with the default attributes (every remote right).
pub fn pair(a: IpAddr, b: IpAddr, seed: u64) -> (Side, Side) {
    let fabric = Fabric::new(FabricConfig::default(), seed);
    let (sa, sb) = (side(&fabric, a, seed), side(&fabric, b, seed + 1));
    connect(&sa, a, &sb, b);
    (sa, sb)
}

/// Connects the QPs of `sa` (on address `a`) and `sb` (on `b`) to each other, with the
/// default attributes.
pub fn connect(sa: &Side, a: IpAddr, sb: &Side, b: IpAddr) {
    for (s, dest, peer) in [(sa, b, sb), (sb, a, sa)] {
        s.qp.connect(&ConnectAttr {
            dest,
            dest_qp_num: peer.qp.qp_num(),
            ..ConnectAttr::default()
        })
        .unwrap();
    }
}

/// A signaled SEND of `sge`.
pub fn signaled_send(wr_id: u64, sge: Sge) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        ..SendWr::new(wr_id, SendOpcode::Send, vec![sge])
    }
}
