//! Shared setup of the uapi tests: a device with a PD, a CQ and a QP ([`Setup`]), and two
//! such on the in-memory fabric with QPs connected to each other ([`pair`], [`pair_on`]), progress by a
//! thread per device; a hostile peer of plain UDP sockets ([`hostile`]).

#![allow(dead_code)]

pub mod hostile;

use std::net::IpAddr;
use std::time::Duration;

use softrnic_provider::transport::{Fabric, FabricConfig, Transport};
use softrnic_uapi::{
    Access, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, Pd, Progress, QpCaps, QpInitAttr,
    QpType, QueuePair, SendFlags, SendOpcode, SendWr, Sge, WorkCompletion,
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

/// What a test device is opened with besides its transport; [`Setup::on`] and
/// [`Setup::with`] make the [`Side`]. The default: a progress thread, an RC QP of 8 send and
/// 8 receive WRs (one SGE each way, no inline data), a CQ of 16.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub progress: Progress,
    pub seed: u64,
    pub qp_type: QpType,
    pub cqe: usize,
    pub send_wr: u32,
    pub recv_wr: u32,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup::DEFAULT
    }
}

impl Setup {
    /// The default, for a `const` setup (`..Setup::DEFAULT`).
    pub const DEFAULT: Setup = Setup {
        progress: Progress::Thread,
        seed: 1,
        qp_type: QpType::Rc,
        cqe: 16,
        send_wr: 8,
        recv_wr: 8,
    };

    /// A device on `fabric` at `addr`.
    pub fn on(&self, fabric: &Fabric, addr: IpAddr) -> Side {
        self.on_transport(Box::new(fabric.attach(addr).unwrap()))
    }

    /// A device on `transport`.
    pub fn on_transport(&self, transport: Box<dyn Transport + Send>) -> Side {
        let opts = OpenOptions {
            progress: self.progress,
            key_seed: self.seed,
        };
        self.with(Context::open_on(transport, opts).unwrap())
    }

    /// The PD, CQ and QP on the device `ctx` (opened by the caller, whose options win).
    pub fn with(&self, ctx: Context) -> Side {
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(self.cqe).unwrap();
        let cap = QpCaps {
            max_send_wr: self.send_wr,
            max_recv_wr: self.recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let init = QpInitAttr {
            qp_type: self.qp_type,
            ..QpInitAttr::rc(&cq, cap)
        };
        let qp = pd.create_qp(&init).unwrap();
        Side { ctx, pd, cq, qp }
    }
}

/// A device over kernel UDP on `addr` with its progress thread, or `None` (the test `test`
/// saying it skips) if it cannot be opened.
pub fn udp_context(test: &str, addr: IpAddr, seed: u64) -> Option<Context> {
    let opts = OpenOptions {
        progress: Progress::Thread,
        key_seed: seed,
    };
    match Context::open(addr, opts) {
        Ok(c) => Some(c),
        Err(e) => {
            softrnic_testkit::skip(test, &format!("cannot open a UDP device on {addr}: {e}"));
            None
        }
    }
}

/// One side on `transport`, making progress as `progress` says.
pub fn side_on(transport: Box<dyn Transport + Send>, progress: Progress, seed: u64) -> Side {
    Setup {
        progress,
        seed,
        ..Setup::default()
    }
    .on_transport(transport)
}

/// A [`Side`] and a region of its PD, what a test moves its data through (it derefs to the
/// side).
pub struct Node {
    pub dev: Side,
    pub mem: MemoryRegion,
}

impl Node {
    /// `dev` with a new region of `len` bytes and `access`.
    pub fn new(dev: Side, len: usize, access: Access) -> Node {
        let mem = dev.pd.reg_mr(len, access).unwrap();
        Node { dev, mem }
    }
}

impl std::ops::Deref for Node {
    type Target = Side;
    fn deref(&self) -> &Side {
        &self.dev
    }
}

/// Two sides on addresses `a` and `b` of a fresh fabric (seeded with `seed`), their QPs
/// connected with the default attributes (every remote right).
pub fn pair(a: IpAddr, b: IpAddr, seed: u64) -> (Side, Side) {
    let fabric = Fabric::new(FabricConfig::default(), seed);
    let setup = |seed| Setup {
        seed,
        ..Setup::default()
    };
    pair_on(&fabric, (a, &setup(seed)), (b, &setup(seed + 1)))
}

/// The two-node setup the tests share: a side made by `sa` at `a` and one made by `sb` at `b`,
/// both on `fabric`, their QPs connected to each other with the default attributes. A test
/// that moves data through regions makes its [`Node`]s of the two sides.
pub fn pair_on(
    fabric: &Fabric,
    (a, sa): (IpAddr, &Setup),
    (b, sb): (IpAddr, &Setup),
) -> (Side, Side) {
    let (x, y) = (sa.on(fabric, a), sb.on(fabric, b));
    connect(&x, a, &y, b);
    (x, y)
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
