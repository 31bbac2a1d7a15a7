//! MR descriptors (librpma's `rpma_mr_get_descriptor` / `rpma_mr_remote_from_descriptor`):
//! the device on 127.0.104.2 describes a region in 21 bytes and SENDs them; the one on
//! 127.0.104.1 turns them into a `RemoteMr` and RDMA WRITEs and READs through it, never
//! handling a raw address or R_Key itself. What the descriptor does not allow is refused
//! before anything is posted.
//!
//! ```text
//! cargo run -p softrnic-uapi --example mr_descriptor
//! ```

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use softrnic_uapi::{Access, ConnectAttr, Context, Cq, InlineData, MemoryRegion, OpenOptions};
use softrnic_uapi::{QpCaps, QpInitAttr, QueuePair, RecvWr, RemoteMr, SendFlags};
use softrnic_uapi::{SendOpcode, SendWr, Usage, WcStatus, DESCRIPTOR_LEN};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 104, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 104, 2));

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
        max_inline_data: 64,
    };
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, caps))?;
    Ok(Side { cq, qp, mr })
}

/// Posts `wr` (signaled) on `s` and waits for its completion.
fn run(s: &Side, wr: SendWr) -> Result<(), Box<dyn Error>> {
    let wr = SendWr {
        flags: SendFlags::SIGNALED,
        ..wr
    };
    s.qp.post_send(&[wr]).map_err(|(_, e)| e)?;
    wait(s)
}

fn wait(s: &Side) -> Result<(), Box<dyn Error>> {
    let wc = s.cq.wait(1, Duration::from_secs(10))?;
    match wc[0].status {
        WcStatus::Success => Ok(()),
        status => Err(format!("{:?} failed: {status:?}", wc[0].opcode).into()),
    }
}

/// (`pub`: `tests/examples.rs` runs it too.)
pub fn main() -> Result<(), Box<dyn Error>> {
    let a = side(A, Access::LOCAL_WRITE)?;
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let b = side(B, rw)?;
    let to = |dest, peer: &Side| ConnectAttr {
        dest,
        dest_qp_num: peer.qp.qp_num(),
        ..ConnectAttr::default()
    };
    a.qp.connect(&to(B, &b))?;
    b.qp.connect(&to(A, &a))?;

    // B: its region's descriptor, sent as an inline SEND (any channel would do).
    let desc = b.mr.descriptor();
    println!("B's descriptor: {desc:02x?}");
    let sge = a.mr.sge(0, DESCRIPTOR_LEN as u32);
    a.qp.post_recv(&[RecvWr {
        wr_id: 0,
        sg_list: vec![sge],
    }])
    .map_err(|(_, e)| e)?;
    let send = SendWr {
        inline_data: Some(InlineData::from_slice(&desc)),
        ..SendWr::new(1, SendOpcode::Send, Vec::new())
    };
    run(&b, send)?;
    wait(&a)?;

    // A: the 21 bytes are all it knows of B's region.
    let mut got = [0u8; DESCRIPTOR_LEN];
    a.mr.read(0, &mut got)?;
    let remote = RemoteMr::from_descriptor(Some(&got))?;
    println!(
        "A's RemoteMr: {} bytes, R_Key {:#010x}, writable {}, readable {}",
        remote.len,
        remote.rkey,
        remote.usage.contains(Usage::WRITE_DST),
        remote.usage.contains(Usage::READ_SRC)
    );

    let text = b"through a descriptor";
    let len = text.len() as u32;
    a.mr.write(100, text)?;
    let dst = remote.at(1000, len.into(), Usage::WRITE_DST)?;
    let sg_list = vec![a.mr.sge(100, len)];
    run(
        &a,
        SendWr {
            remote: dst,
            ..SendWr::new(2, SendOpcode::RdmaWrite, sg_list)
        },
    )?;
    // And back with a READ, into another part of A's buffer.
    let src = remote.at(1000, len.into(), Usage::READ_SRC)?;
    let sg_list = vec![a.mr.sge(200, len)];
    run(
        &a,
        SendWr {
            remote: src,
            ..SendWr::new(3, SendOpcode::RdmaRead, sg_list)
        },
    )?;
    let (mut at_b, mut back) = (vec![0u8; text.len()], vec![0u8; text.len()]);
    b.mr.read(1000, &mut at_b)?;
    a.mr.read(200, &mut back)?;
    if at_b != text || back != text {
        return Err(format!("B holds {at_b:?}, A read back {back:?}").into());
    }
    println!(
        "WRITE then READ at offset 1000: {:?}",
        String::from_utf8_lossy(&back)
    );

    // Past the region's end: refused by `at`, no packet sent.
    let refused = remote.at(remote.len - 10, 20, Usage::WRITE_DST);
    println!("20 bytes at {}: {refused:?}", remote.len - 10);
    if refused.is_ok() {
        return Err("a range past the region was accepted".into());
    }
    println!("verified: WRITE and READ through B's descriptor");
    Ok(())
}
