//! Relaxed memory registration (Solaris OFED's `ibv_reg_mr_relaxed`): registering and
//! deregistering a buffer per message becomes cheap, because deregistration returns at once
//! and the keys die together at the next `flush_relaxed_mr`. The device on 127.0.103.2
//! registers a fresh relaxed region for each of a few messages, the one on 127.0.103.1 RDMA
//! WRITEs each message into it; then the flush, after which the old keys are refused.
//!
//! ```text
//! cargo run -p softrnic-uapi --example relaxed_mr
//! ```
//!
//! The price (the window of vulnerability): between `dereg_relaxed` and the flush, a peer
//! holding the R_Key can still write the region's memory. Flush before that memory is reused.

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use softrnic_uapi::{Access, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, Pd, QpCaps};
use softrnic_uapi::{QpInitAttr, QueuePair, RemoteAddr, SendFlags, SendOpcode, SendWr, WcStatus};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 103, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 103, 2));
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

struct Side {
    pd: Pd,
    cq: Cq,
    qp: QueuePair,
    mr: MemoryRegion,
}

fn side(addr: IpAddr) -> Result<Side, Box<dyn Error>> {
    let ctx = Context::open(addr, OpenOptions::default())?;
    let pd = ctx.alloc_pd();
    let mr = pd.reg_mr(4096, Access::LOCAL_WRITE)?;
    let cq = ctx.create_cq(16)?;
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, caps))?;
    Ok(Side { pd, cq, qp, mr })
}

/// A WRITEs `text` to `addr` through `rkey` and returns the completion's status.
fn write(a: &Side, text: &str, addr: u64, rkey: u32) -> Result<WcStatus, Box<dyn Error>> {
    a.mr.write(0, text.as_bytes())?;
    let wr = SendWr {
        flags: SendFlags::SIGNALED,
        remote: RemoteAddr { addr, rkey },
        ..SendWr::new(
            1,
            SendOpcode::RdmaWrite,
            vec![a.mr.sge(0, text.len() as u32)],
        )
    };
    a.qp.post_send(&[wr]).map_err(|(_, e)| e)?;
    Ok(a.cq.wait(1, Duration::from_secs(10))?[0].status)
}

/// (`pub`: `tests/examples.rs` runs it too.)
pub fn main() -> Result<(), Box<dyn Error>> {
    let (a, b) = (side(A)?, side(B)?);
    let to = |dest, peer: &Side| ConnectAttr {
        dest,
        dest_qp_num: peer.qp.qp_num(),
        ..ConnectAttr::default()
    };
    a.qp.connect(&to(B, &b))?;
    b.qp.connect(&to(A, &a))?;

    let mut last = (0, 0);
    for i in 0..4 {
        // B: a new region for this message (its keys come from the PD's relaxed pool).
        let region = b.pd.reg_mr_relaxed(4096, RW)?;
        let text = format!("message {i}");
        let status = write(&a, &text, region.addr(), region.rkey())?;
        let mut got = vec![0u8; text.len()];
        region.read(0, &mut got)?;
        if status != WcStatus::Success || got != text.as_bytes() {
            return Err(format!("round {i}: {status:?}, {got:?}").into());
        }
        println!("round {i}: R_Key {:#010x} got {text:?}", region.rkey());
        last = (region.addr(), region.rkey());
        // Returns at once: no waiting for the key to be invalidated.
        region.dereg_relaxed().map_err(|(_, e)| e)?;
    }

    // The window: deregistered, not flushed, the last key still writes.
    let status = write(&a, "late", last.0, last.1)?;
    println!("after dereg_relaxed, before the flush: a WRITE is {status:?}");
    let flushed = b.pd.flush_relaxed_mr();
    println!("flush_relaxed_mr invalidated {flushed} regions");
    // Now the key is dead: the WRITE is refused (and A's QP goes to the error state).
    let status = write(&a, "too late", last.0, last.1)?;
    println!("after the flush: a WRITE is {status:?}");
    if status != WcStatus::RemAccessErr || flushed != 4 {
        return Err("the flush did not invalidate the keys".into());
    }
    println!("verified: 4 relaxed regions written, their keys dead after one flush");
    Ok(())
}
