//! A SEND/RECV ping-pong over RC, `ibv_rc_pingpong`'s idea: the device on 127.0.102.1 sends
//! "ping N" to the one on 127.0.102.2, which answers "pong N"; each message lands in a receive
//! posted beforehand. The mean round trip is printed.
//!
//! ```text
//! cargo run -p softrnic-uapi --example rc_pingpong
//! cargo run --release -p softrnic-uapi --example rc_pingpong   # for a meaningful time
//! ```
//!
//! Each side has two CQs, one for its sends and one for its receives, so that the completion
//! of a send and the arrival of the next message cannot be taken for one another.

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use softrnic_uapi::{Access, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, QpCaps};
use softrnic_uapi::{QpInitAttr, QueuePair, RecvWr, SendFlags, SendOpcode, SendWr, WcStatus};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 102, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 102, 2));
const ROUNDS: u32 = 1000;
/// Bytes of a message; a side receives at offset 0 of its buffer and sends from offset `MSG`.
const MSG: u32 = 64;
const WAIT: Duration = Duration::from_secs(10);

struct Side {
    qp: QueuePair,
    mr: MemoryRegion,
    send_cq: Cq,
    recv_cq: Cq,
}

impl Side {
    fn open(addr: IpAddr) -> Result<Side, Box<dyn Error>> {
        let ctx = Context::open(addr, OpenOptions::default())?;
        let pd = ctx.alloc_pd();
        let mr = pd.reg_mr(2 * MSG as usize, Access::LOCAL_WRITE)?;
        let (send_cq, recv_cq) = (ctx.create_cq(16)?, ctx.create_cq(16)?);
        let caps = QpCaps {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let attr = QpInitAttr {
            recv_cq: &recv_cq,
            ..QpInitAttr::rc(&send_cq, caps)
        };
        let qp = pd.create_qp(&attr)?;
        Ok(Side {
            qp,
            mr,
            send_cq,
            recv_cq,
        })
    }

    fn post_recv(&self) -> Result<(), Box<dyn Error>> {
        let wr = RecvWr {
            wr_id: 0,
            sg_list: vec![self.mr.sge(0, MSG)],
        };
        self.qp.post_recv(&[wr]).map_err(|(_, e)| e)?;
        Ok(())
    }

    /// Posts a SEND of `text` (its completion comes once the peer has ACKed it).
    fn send(&self, text: &str) -> Result<(), Box<dyn Error>> {
        self.mr.write(MSG as usize, text.as_bytes())?;
        let sge = self.mr.sge(MSG as usize, text.len() as u32);
        let wr = SendWr {
            flags: SendFlags::SIGNALED,
            ..SendWr::new(1, SendOpcode::Send, vec![sge])
        };
        self.qp.post_send(&[wr]).map_err(|(_, e)| e)?;
        Ok(())
    }

    /// Waits for the next message and returns it, with a receive posted again for the next.
    fn recv(&self) -> Result<String, Box<dyn Error>> {
        let len = check(&self.recv_cq)?;
        let mut text = vec![0u8; len as usize];
        self.mr.read(0, &mut text)?;
        self.post_recv()?;
        Ok(String::from_utf8(text)?)
    }
}

/// Waits for one completion on `cq`, which must be a success; returns its byte count.
fn check(cq: &Cq) -> Result<u32, Box<dyn Error>> {
    let wc = cq.wait(1, WAIT)?;
    if wc[0].status != WcStatus::Success {
        return Err(format!("{:?} failed: {:?}", wc[0].opcode, wc[0].status).into());
    }
    Ok(wc[0].byte_len)
}

/// (`pub`: `tests/examples.rs` runs it too.)
pub fn main() -> Result<(), Box<dyn Error>> {
    let (a, b) = (Side::open(A)?, Side::open(B)?);
    let to = |dest, peer: &Side| ConnectAttr {
        dest,
        dest_qp_num: peer.qp.qp_num(),
        ..ConnectAttr::default()
    };
    a.qp.connect(&to(B, &b))?;
    b.qp.connect(&to(A, &a))?;
    // A receive waits on each side before anything is sent.
    a.post_recv()?;
    b.post_recv()?;

    let start = Instant::now();
    for i in 0..ROUNDS {
        a.send(&format!("ping {i}"))?;
        let ping = b.recv()?;
        b.send(&ping.replace("ping", "pong"))?;
        let pong = a.recv()?;
        if pong != format!("pong {i}") {
            return Err(format!("round {i}: A got {pong:?}").into());
        }
        // Each SEND completes once the peer has ACKed it; taken before its buffer is reused.
        check(&a.send_cq)?;
        check(&b.send_cq)?;
    }
    let rtt = start.elapsed() / ROUNDS;
    println!(
        "verified: {ROUNDS} pings answered in order, the last \"pong {}\"",
        ROUNDS - 1
    );
    println!("mean round trip: {:.1} µs", rtt.as_secs_f64() * 1e6);
    Ok(())
}
