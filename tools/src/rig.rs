//! Two softrnic devices in one process, an RC QP on each, connected: what `softrnic demo` and
//! `softrnic perf` run on. Everything goes through the verbs API of `softrnic-uapi`.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use softrnic_provider::transport::{Capture, CaptureConfig, Fabric, Transport};
use softrnic_uapi::{
    Access, ConnectAttr, Context, Cq, MemoryRegion, Mtu, OpenOptions, Progress, QpCaps, QpInitAttr,
    QueuePair, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge, WcStatus, WorkCompletion,
};

/// One side: device, CQ, QP and a registered buffer.
pub struct Side {
    /// The device.
    pub ctx: Context,
    /// Send and receive completions.
    pub cq: Cq,
    /// The QP.
    pub qp: QueuePair,
    /// The buffer, registered with every right.
    pub mr: MemoryRegion,
    /// The other device, when this process must drive its progress too (polling mode: one
    /// thread runs both devices).
    pub peer: Option<Context>,
    /// The in-memory fabric both devices are on, when they are ([`Rig::on_fabric`]): its
    /// virtual time moves by [`FABRIC_STEP`] at every empty poll of a wait.
    pub fabric: Option<Fabric>,
}

/// How far a wait moves the fabric's virtual time each time it polls both devices and finds
/// nothing: a retransmission timeout of about a millisecond (`timeout` 8) is a thousand
/// empty polls away.
pub const FABRIC_STEP: Duration = Duration::from_micros(1);

/// Two connected sides.
pub struct Rig {
    /// The requester side (127.0.0.1 by default).
    pub a: Side,
    /// The responder side (127.0.0.2 by default).
    pub b: Side,
}

/// A verbs error as an `io::Error`.
pub(crate) fn err(e: softrnic_uapi::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// A side on the device of `addr`: a `mem`-byte buffer registered with every right, a CQ
/// and an RC QP in RESET.
pub fn side(addr: IpAddr, mem: usize, progress: Progress, seed: u64) -> io::Result<Side> {
    let ctx = Context::open(
        addr,
        OpenOptions {
            progress,
            key_seed: seed,
        },
    )?;
    side_of(ctx, mem, Access::empty())
}

/// A side on the open device `ctx`, as [`side`] makes it, its buffer registered with `more`
/// rights too.
fn side_of(ctx: Context, mem: usize, more: Access) -> io::Result<Side> {
    let pd = ctx.alloc_pd();
    let all = Access::LOCAL_WRITE
        | Access::REMOTE_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_ATOMIC
        | more;
    let mr = pd.reg_mr(mem, all).map_err(err)?;
    let cq = ctx.create_cq(4096).map_err(err)?;
    let cap = QpCaps {
        max_send_wr: 1024,
        max_recv_wr: 1024,
        max_send_sge: 4,
        max_recv_sge: 4,
        max_inline_data: 64,
    };
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, cap)).map_err(err)?;
    Ok(Side {
        ctx,
        cq,
        qp,
        mr,
        peer: None,
        fabric: None,
    })
}

impl Rig {
    /// Opens both devices and connects their QPs at the port's active MTU.
    pub fn new(a: IpAddr, b: IpAddr, mem: usize, progress: Progress) -> io::Result<Rig> {
        let mut sa = side(a, mem, progress, 1)?;
        let mut sb = side(b, mem, progress, 2)?;
        if progress == Progress::Polling {
            sa.peer = Some(sb.ctx.clone());
            sb.peer = Some(sa.ctx.clone());
        }
        Rig::connect(sa, sb, ConnectAttr::default(), None)
    }

    /// Two devices on the in-memory `fabric`, at `a` and `b`, on its virtual clock and driven
    /// by the one thread that polls them (so the run is the same every time for the fabric's
    /// seed), their QPs connected with a retransmission timeout of about a millisecond
    /// (`timeout` 8) at MTU 1024 (more packets, more to recover). `capture` wraps A's transport: it sees every packet A sends (lost ones
    /// too) and receives.
    ///
    /// # Errors
    /// An address already on the fabric, or a verbs call failing.
    pub fn on_fabric(
        fabric: &Fabric,
        a: IpAddr,
        b: IpAddr,
        mem: usize,
        capture: Option<CaptureConfig>,
    ) -> io::Result<Rig> {
        let open = |addr: IpAddr, seed: u64, capture: Option<CaptureConfig>| {
            let ep = fabric.attach(addr)?;
            let transport: Box<dyn Transport + Send> = match capture {
                Some(c) => Box::new(Capture::new(ep, c).map_err(|(_, e)| e)?),
                None => Box::new(ep),
            };
            let opts = OpenOptions {
                progress: Progress::Polling,
                key_seed: seed,
            };
            let ctx = Context::open_on_clocked(transport, opts, Some(fabric.clock()))?;
            // Zero-based: the addresses on the wire are offsets, the same in every run
            // (a buffer's address is not).
            let mut s = side_of(ctx, mem, Access::ZERO_BASED)?;
            s.fabric = Some(fabric.clone());
            Ok::<_, io::Error>(s)
        };
        let mut sa = open(a, 1, capture)?;
        let mut sb = open(b, 2, None)?;
        sa.peer = Some(sb.ctx.clone());
        sb.peer = Some(sa.ctx.clone());
        let attr = ConnectAttr {
            timeout: 8,
            ..ConnectAttr::default()
        };
        Rig::connect(sa, sb, attr, Some(Mtu::Mtu1024))
    }

    /// Connects `sa`'s QP to `sb`'s at the port's active MTU (or `mtu`, if smaller), with
    /// `attr`'s other choices.
    fn connect(sa: Side, sb: Side, attr: ConnectAttr, mtu: Option<Mtu>) -> io::Result<Rig> {
        let (a, b) = (sa.ctx.local_addr(), sb.ctx.local_addr());
        let mtu = sa
            .ctx
            .query_port()
            .active_mtu
            .min(sb.ctx.query_port().active_mtu)
            .min(mtu.unwrap_or(Mtu::Mtu4096));
        let attr = ConnectAttr {
            path_mtu: mtu,
            ..attr
        };
        sa.qp
            .connect(&ConnectAttr {
                dest: b,
                dest_qp_num: sb.qp.qp_num(),
                sq_psn: 0x1234,
                rq_psn: 0x5678,
                ..attr
            })
            .map_err(err)?;
        sb.qp
            .connect(&ConnectAttr {
                dest: a,
                dest_qp_num: sa.qp.qp_num(),
                sq_psn: 0x5678,
                rq_psn: 0x1234,
                ..attr
            })
            .map_err(err)?;
        Ok(Rig { a: sa, b: sb })
    }
}

impl Side {
    /// Posts one send WR.
    pub fn post(&self, wr: SendWr) -> io::Result<()> {
        self.qp.post_send(&[wr]).map_err(|(_, e)| err(e))
    }

    /// Posts a receive of `len` bytes at `offset`.
    pub fn post_recv(&self, wr_id: u64, offset: usize, len: u32) -> io::Result<()> {
        self.qp
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: vec![self.mr.sge(offset, len)],
            }])
            .map_err(|(_, e)| err(e))
    }

    /// Waits for `n` completions, all successful.
    pub fn wait(&self, n: usize) -> io::Result<Vec<WorkCompletion>> {
        let wcs = self
            .cq
            .wait_with(n, Duration::from_secs(10), || {
                if let Some(p) = &self.peer {
                    p.progress();
                }
                if let Some(f) = &self.fabric {
                    f.advance_to(f.now() + FABRIC_STEP.as_nanos() as u64);
                }
            })
            .map_err(|e| match e {
                softrnic_uapi::Error::Io(softrnic_uapi::ETIMEDOUT) => {
                    io::Error::new(io::ErrorKind::TimedOut, "no completion in 10 s")
                }
                e => err(e),
            })?;
        all_succeeded(&wcs)?;
        Ok(wcs)
    }
}

/// Fails with the first completion in `wcs` that is not successful.
pub(crate) fn all_succeeded(wcs: &[WorkCompletion]) -> io::Result<()> {
    match wcs.iter().find(|w| w.status != WcStatus::Success) {
        Some(bad) => Err(io::Error::other(format!(
            "work request {} failed: {:?}",
            bad.wr_id, bad.status
        ))),
        None => Ok(()),
    }
}

/// A signaled send WR of `op` from `sges` to `remote`.
pub fn wr(wr_id: u64, op: SendOpcode, sg_list: Vec<Sge>, remote: RemoteAddr) -> SendWr {
    SendWr {
        wr_id,
        opcode: op,
        flags: SendFlags::SIGNALED,
        sg_list,
        imm_data_or_inv_rkey: 0,
        remote,
        compare_add: 0,
        swap: 0,
        bind_mw: None,
        ud: None,
        xrc_srqn: 0,
        inline_data: None,
    }
}
