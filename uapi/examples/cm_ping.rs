//! rping's idea in Rust: a client connects to a server with the connection manager, sends
//! `count` messages, each echoed back in capitals (so the client sees that the answer is
//! the server's), and disconnects.
//!
//! ```text
//! cargo run -p softrnic-uapi --example cm_ping -- server 127.0.0.1:7471
//! cargo run -p softrnic-uapi --example cm_ping -- client 127.0.0.2 127.0.0.1:7471 10
//! ```
//!
//! (The client's first argument is its own address: two loopback addresses are two hosts.)

use std::error::Error;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use softrnic_uapi::cm::{CmId, ConnParam, EventChannel, EventType, PortSpace};
use softrnic_uapi::{Access, Cq, QpCaps, QpInitAttr, QueuePair, RecvWr, SendFlags, SendOpcode};
use softrnic_uapi::{MemoryRegion, SendWr, Sge, WcStatus};

const LEN: u32 = 64;
const WAIT: Duration = Duration::from_secs(10);

fn main() -> Result<(), Box<dyn Error>> {
    run(std::env::args().skip(1).collect())
}

/// The program with its arguments (`tests/cm_example.rs` runs it so too).
pub fn run(args: Vec<String>) -> Result<(), Box<dyn Error>> {
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["server", listen] => server(listen.parse()?),
        ["client", src, dst, count] => client(src.parse()?, dst.parse()?, count.parse()?),
        _ => Err("usage: cm_ping server ADDR:PORT | client SRC_IP DST:PORT COUNT".into()),
    }
}

/// Waits for the next event of `ch` and checks that it is `want`.
fn expect(
    ch: &EventChannel,
    want: EventType,
) -> Result<softrnic_uapi::cm::CmEvent, Box<dyn Error>> {
    let e = ch.get_event()?;
    if e.event != want {
        return Err(format!("expected {want:?}, got {:?} (status {})", e.event, e.status).into());
    }
    Ok(e)
}

/// What each side has: its QP, its buffer, and the CQs of its sends and of its receives (two,
/// so that a send's completion and the next message's cannot be taken for one another: the
/// peer's next message may arrive before the ACK of the send).
struct Side {
    qp: QueuePair,
    mr: MemoryRegion,
    send_cq: Cq,
    recv_cq: Cq,
}

/// A QP for `id` with a buffer, a receive posted.
fn setup(id: &CmId) -> Result<Side, Box<dyn Error>> {
    let ctx = id.context().ok_or("no device")?;
    let pd = ctx.alloc_pd();
    let send_cq = ctx.create_cq(8)?;
    let recv_cq = ctx.create_cq(8)?;
    let caps = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let attr = QpInitAttr {
        recv_cq: &recv_cq,
        ..QpInitAttr::rc(&send_cq, caps)
    };
    let qp = id.create_qp(&pd, &attr)?;
    let mr = pd.reg_mr(LEN as usize, Access::LOCAL_WRITE)?;
    post_recv(&qp, &mr)?;
    Ok(Side {
        qp,
        mr,
        send_cq,
        recv_cq,
    })
}

fn sge(mr: &MemoryRegion) -> Vec<Sge> {
    vec![Sge {
        addr: mr.addr(),
        length: LEN,
        lkey: mr.lkey(),
    }]
}

fn post_recv(qp: &QueuePair, mr: &MemoryRegion) -> Result<(), Box<dyn Error>> {
    qp.post_recv(&[RecvWr {
        wr_id: 0,
        sg_list: sge(mr),
    }])
    .map_err(|(_, e)| e)?;
    Ok(())
}

/// Sends the buffer and waits for the send's completion.
fn send(s: &Side) -> Result<(), Box<dyn Error>> {
    let mut wr = SendWr::new(1, SendOpcode::Send, sge(&s.mr));
    wr.flags = SendFlags::SIGNALED;
    s.qp.post_send(&[wr]).map_err(|(_, e)| e)?;
    let done = s.send_cq.wait(1, WAIT)?;
    if done.iter().any(|c| c.status != WcStatus::Success) {
        return Err(format!("send failed: {done:?}").into());
    }
    Ok(())
}

/// Waits for the client's next message: `true` when it has come, `false` once the client has
/// disconnected. Its DREQ leaves this side's QP as it is (as Linux's rdma_cm does: the QP goes
/// to ERROR at this side's own `rdma_disconnect`), so the end shows as the `DISCONNECTED`
/// event, or as a flushed receive: both are watched.
fn next_message(cq: &Cq, ch: &EventChannel) -> Result<bool, Box<dyn Error>> {
    let deadline = Instant::now() + WAIT;
    loop {
        match cq.wait(1, Duration::from_millis(1)) {
            Ok(got) => return Ok(got[0].status == WcStatus::Success),
            Err(e) if e.errno() == libc::ETIMEDOUT => {}
            Err(e) => return Err(e.into()),
        }
        if let Some(e) = ch.try_get_event() {
            if e.event == EventType::Disconnected {
                return Ok(false);
            }
        }
        if Instant::now() > deadline {
            return Err("no message and no disconnect".into());
        }
    }
}

fn server(listen: SocketAddr) -> Result<(), Box<dyn Error>> {
    let ch = EventChannel::new()?;
    let listener = CmId::new(Some(&ch), PortSpace::Tcp)?;
    listener.bind_addr(listen)?;
    listener.listen(1)?;
    println!("listening on {listen}");
    let req = expect(&ch, EventType::ConnectRequest)?;
    let id = req.id.clone();
    drop(req);
    let s = setup(&id)?;
    id.accept(None)?;
    drop(expect(&ch, EventType::Established)?);
    let mut echoed = 0;
    while next_message(&s.recv_cq, &ch)? {
        let mut text = [0u8; LEN as usize];
        s.mr.read(0, &mut text)?;
        text.make_ascii_uppercase();
        s.mr.write(0, &text)?;
        post_recv(&s.qp, &s.mr)?;
        send(&s)?;
        echoed += 1;
    }
    println!("echoed {echoed} messages");
    let _ = id.disconnect();
    id.destroy();
    listener.destroy();
    Ok(())
}

fn client(src: std::net::IpAddr, dst: SocketAddr, count: u32) -> Result<(), Box<dyn Error>> {
    let ch = EventChannel::new()?;
    let id = CmId::new(Some(&ch), PortSpace::Tcp)?;
    id.resolve_addr(Some(SocketAddr::new(src, 0)), dst, WAIT)?;
    drop(expect(&ch, EventType::AddrResolved)?);
    id.resolve_route(WAIT)?;
    drop(expect(&ch, EventType::RouteResolved)?);
    let s = setup(&id)?;
    id.connect(&ConnParam::none())?;
    drop(expect(&ch, EventType::Established)?);
    for i in 0..count {
        let text = format!("ping {i}");
        s.mr.write(0, text.as_bytes())?;
        send(&s)?;
        // The echo lands in the same buffer: the receive posted before.
        let got = s.recv_cq.wait(1, WAIT)?;
        if got[0].status != WcStatus::Success {
            return Err(format!("receive failed: {got:?}").into());
        }
        let mut back = vec![0u8; text.len()];
        s.mr.read(0, &mut back)?;
        if back != text.to_uppercase().as_bytes() {
            return Err(format!("echo of {text:?}: {:?}", String::from_utf8_lossy(&back)).into());
        }
        println!("{}", String::from_utf8_lossy(&back));
        post_recv(&s.qp, &s.mr)?;
    }
    id.disconnect()?;
    drop(expect(&ch, EventType::Disconnected)?);
    id.destroy();
    Ok(())
}
