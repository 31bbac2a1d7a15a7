//! One RDMA WRITE between two softrnic devices in one process: the device on 127.0.101.1
//! writes a message straight into a registered buffer of the device on 127.0.101.2, over
//! RoCEv2 on kernel UDP (loopback), and the bytes are checked on the other side.
//!
//! ```text
//! cargo run -p softrnic-uapi --example rdma_write
//! ```
//!
//! The steps are those of any verbs program (`ibv_rc_pingpong`'s): open a device, allocate a
//! PD, register memory, create a CQ and an RC QP, connect the QP to the peer's (its address
//! and QP number, which two processes would exchange over TCP or the connection manager),
//! post a work request, wait for its completion.

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use softrnic_uapi::{Access, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, QpCaps};
use softrnic_uapi::{QpInitAttr, QueuePair, RemoteAddr, SendFlags, SendOpcode, SendWr, WcStatus};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 101, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 101, 2));

/// A device's QP, its CQ and a 4 KiB buffer registered with `access`.
struct Side {
    cq: Cq,
    qp: QueuePair,
    mr: MemoryRegion,
}

fn side(addr: IpAddr, access: Access) -> Result<Side, Box<dyn Error>> {
    let ctx = Context::open(addr, OpenOptions::default())?;
    let pd = ctx.alloc_pd();
    let mr = pd.reg_mr(4096, access)?;
    let cq = ctx.create_cq(16)?;
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, caps))?;
    Ok(Side { cq, qp, mr })
}

/// (`pub`: `tests/examples.rs` runs it too.)
pub fn main() -> Result<(), Box<dyn Error>> {
    let a = side(A, Access::LOCAL_WRITE)?;
    // B lets peers write into its buffer.
    let b = side(B, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    a.qp.connect(&ConnectAttr {
        dest: B,
        dest_qp_num: b.qp.qp_num(),
        ..ConnectAttr::default()
    })?;
    b.qp.connect(&ConnectAttr {
        dest: A,
        dest_qp_num: a.qp.qp_num(),
        ..ConnectAttr::default()
    })?;

    let msg = b"written by 127.0.101.1 with one RDMA WRITE";
    a.mr.write(0, msg)?;
    // Where it goes: B's buffer, 100 bytes in, through B's R_Key.
    let wr = SendWr {
        flags: SendFlags::SIGNALED,
        remote: RemoteAddr {
            addr: b.mr.addr() + 100,
            rkey: b.mr.rkey(),
        },
        ..SendWr::new(
            1,
            SendOpcode::RdmaWrite,
            vec![a.mr.sge(0, msg.len() as u32)],
        )
    };
    a.qp.post_send(&[wr]).map_err(|(_, e)| e)?;
    let wc = a.cq.wait(1, Duration::from_secs(10))?;
    println!(
        "completion: wr_id {} {:?} {:?}, {} bytes",
        wc[0].wr_id,
        wc[0].opcode,
        wc[0].status,
        msg.len()
    );
    if wc[0].status != WcStatus::Success {
        return Err("the WRITE failed".into());
    }

    // B's CPU took no part: the bytes are simply there (the completion comes after B's ACK).
    let mut got = vec![0u8; msg.len()];
    b.mr.read(100, &mut got)?;
    if got != msg {
        return Err(format!("B holds {:?}", String::from_utf8_lossy(&got)).into());
    }
    println!(
        "verified: B's buffer holds {:?}",
        String::from_utf8_lossy(&got)
    );
    Ok(())
}
