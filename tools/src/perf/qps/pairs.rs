//! The QP pairs a `--qps` measurement streams WRITEs over: a writer device at one address
//! and a target at the other, N RC QPs connected pairwise, and the loop that keeps the first
//! `k` of them writing for a while.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use softrnic_uapi::{
    Access, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, Progress, QpCaps, QpInitAttr,
    QueuePair, RemoteAddr, SendOpcode, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

use super::{Recovery, MAX_QPS, MSG};
use crate::rig::{err, wr};

/// The writer device's address.
pub const WRITER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

/// The target device's address.
pub const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// `n` RC QP pairs from a writer device to a target device, connected.
///
/// The writer's thread polls its device (`Progress::Polling`) and posts; the target's device
/// has its own progress thread (`Progress::Thread`) and its application never polls.
pub struct Pairs {
    writer: Context,
    target: Context,
    writer_qps: Vec<QueuePair>,
    // Held for their lifetime: the target's QPs, its CQ and the memory both sides use.
    _target_qps: Vec<QueuePair>,
    _target_cq: Cq,
    _src: MemoryRegion,
    _dst: MemoryRegion,
    cq: Cq,
    /// One WRITE per QP, built once, its wr_id the QP's index; each QP reads its own 64 KiB
    /// of the source (16 of them) and every QP writes the same 64 KiB of the target, as
    /// perftest's do.
    wrs: Vec<SendWr>,
}

impl Pairs {
    /// Opens the two devices ([`WRITER`] writes to [`TARGET`]) and connects `n` QP pairs,
    /// each able to keep `depth` WRITEs outstanding.
    ///
    /// # Errors
    /// `n` is 0 or above [`MAX_QPS`]; opening a device, a QP, or connecting it.
    pub fn open(n: usize, depth: usize) -> io::Result<Pairs> {
        let (a, b) = (WRITER, TARGET);
        if n == 0 || n > MAX_QPS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--qps counts are 1 to {MAX_QPS}, not {n}"),
            ));
        }
        let (ca, cb) = (
            open(a, 11, Progress::Polling)?,
            open(b, 12, Progress::Thread)?,
        );
        let (pa, pb) = (ca.alloc_pd(), cb.alloc_pd());
        let src = pa.reg_mr(1 << 20, Access::LOCAL_WRITE).map_err(err)?;
        let dst = pb
            .reg_mr(MSG, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .map_err(err)?;
        let cq_a = ca.create_cq((2 * n * depth).max(256)).map_err(err)?;
        let cq_b = cb.create_cq(256).map_err(err)?;
        let cap = QpCaps {
            max_send_wr: depth as u32,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let (mut qas, mut qbs) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            qas.push(pa.create_qp(&QpInitAttr::rc(&cq_a, cap)).map_err(err)?);
            qbs.push(pb.create_qp(&QpInitAttr::rc(&cq_b, cap)).map_err(err)?);
        }
        let mtu = ca.query_port().active_mtu.min(cb.query_port().active_mtu);
        for (qa, qb) in qas.iter().zip(&qbs) {
            let attr = ConnectAttr {
                path_mtu: mtu,
                ..ConnectAttr::default()
            };
            qa.connect(&ConnectAttr {
                dest: b,
                dest_qp_num: qb.qp_num(),
                sq_psn: 0x1234,
                rq_psn: 0x5678,
                ..attr
            })
            .map_err(err)?;
            qb.connect(&ConnectAttr {
                dest: a,
                dest_qp_num: qa.qp_num(),
                sq_psn: 0x5678,
                rq_psn: 0x1234,
                ..attr
            })
            .map_err(err)?;
        }
        let remote = RemoteAddr {
            addr: dst.addr(),
            rkey: dst.rkey(),
        };
        let wrs = (0..n)
            .map(|i| {
                let sge = src.sge((i % 16) * MSG, MSG as u32);
                wr(i as u64, SendOpcode::RdmaWrite, vec![sge], remote)
            })
            .collect();
        Ok(Pairs {
            writer: ca,
            target: cb,
            writer_qps: qas,
            _target_qps: qbs,
            _target_cq: cq_b,
            _src: src,
            _dst: dst,
            cq: cq_a,
            wrs,
        })
    }

    /// What the two devices have counted since they were opened.
    pub fn recovery(&self) -> Recovery {
        Recovery::of(&self.writer, &self.target)
    }

    /// Keeps the first `k` QPs writing, `depth` WRITEs outstanding each (at most the depth
    /// they were opened with), posting the next as soon as one completes, for `dur`; then
    /// lets what is outstanding complete. Returns the WRITEs each of the `k` completed and
    /// the time from the first post to the last completion.
    ///
    /// # Errors
    /// A post that fails, a WRITE that ends in error, or no completion for 10 s.
    pub fn stream(&mut self, k: usize, depth: usize, dur: Duration) -> io::Result<Streamed> {
        let mut done = vec![0u64; k];
        let mut outstanding = 0usize;
        let start = Instant::now();
        for i in 0..k {
            for _ in 0..depth {
                self.post(i)?;
                outstanding += 1;
            }
        }
        let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::RdmaWrite, 0); 64];
        let mut last_progress = Instant::now();
        while outstanding > 0 {
            let got = self.cq.poll(&mut wcs).map_err(err)?;
            if got > 0 {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > Duration::from_secs(10) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{k} QPs: no completion in 10 s"),
                ));
            }
            let sending = start.elapsed() < dur;
            for wc in &wcs[..got] {
                if wc.status != WcStatus::Success {
                    return Err(io::Error::other(format!(
                        "{k} QPs: a WRITE ended in {:?} (writer: {}; target: {})",
                        wc.status,
                        nonzero_counters(&self.writer),
                        nonzero_counters(&self.target),
                    )));
                }
                // Each QP's WRITE carries the QP's index as its wr_id (as perftest's do),
                // which its completion gives back.
                let i = wc.wr_id as usize;
                if i >= k || self.writer_qps[i].qp_num() != wc.qp_num {
                    return Err(io::Error::other(format!(
                        "a completion of QP {:#x} (wr_id {}), not one of the {k} writing",
                        wc.qp_num, wc.wr_id
                    )));
                }
                done[i] += 1;
                outstanding -= 1;
                if sending {
                    self.post(i)?;
                    outstanding += 1;
                }
            }
        }
        Ok(Streamed {
            done,
            took: start.elapsed(),
        })
    }

    fn post(&mut self, i: usize) -> io::Result<()> {
        self.writer_qps[i]
            .post_send(std::slice::from_ref(&self.wrs[i]))
            .map_err(|(_, e)| err(e))
    }
}

/// What [`Pairs::stream`] did.
pub struct Streamed {
    /// WRITEs each QP completed.
    pub done: Vec<u64>,
    /// From the first post to the last completion.
    pub took: Duration,
}

impl Streamed {
    /// WRITEs completed, all QPs together.
    pub fn messages(&self) -> u64 {
        self.done.iter().sum()
    }

    /// Payload written, 10^9 bits per second.
    pub fn gbit_per_s(&self) -> f64 {
        self.messages() as f64 * MSG as f64 * 8.0 / self.took.as_secs_f64() / 1e9
    }
}

fn open(addr: IpAddr, seed: u64, progress: Progress) -> io::Result<Context> {
    Context::open(
        addr,
        OpenOptions {
            progress,
            key_seed: seed,
        },
    )
}

/// A device's counters that are not zero, as `name=value` (what a failure report shows).
fn nonzero_counters(ctx: &Context) -> String {
    let (c, _) = ctx.device().observe();
    let named: Vec<String> = c
        .values()
        .filter(|&(_, v)| v != 0)
        .map(|(name, v)| format!("{name}={v}"))
        .collect();
    named.join(" ")
}
