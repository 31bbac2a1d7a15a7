//! A process that exits with a connection up ends it, as Linux does when a process's rdma_cm
//! file closes (each of its ids destroyed: a DREQ for a connection). Programs rely on it:
//! perftest's `-R` never destroys the id of its first connection. The peer process is this
//! test binary run again ([`child_connects_and_exits`], ignored in a normal run), which
//! connects and exits with nothing destroyed; the server, here, must hear DISCONNECTED.
//! Over real kernel UDP on loopback (127.0.56.x).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use softrnic_uapi::cm::{CmEvent, CmId, ConnParam, EventChannel, EventType, PortSpace};
use softrnic_uapi::{Cq, Pd, QpCaps, QpInitAttr, QueuePair};

/// Set in the child's environment: the address it connects to.
const CHILD_ENV: &str = "SOFTRNIC_CM_EXIT_TEST_SERVER";

const WAIT: Duration = Duration::from_secs(2);

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 56, last)), port)
}

/// The next event of `ch` within `secs` seconds, or `None`.
fn next_within(ch: &EventChannel, secs: i32) -> Option<CmEvent> {
    let mut p = libc::pollfd {
        fd: ch.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, secs * 1000) };
    (n == 1).then(|| ch.get_event().unwrap())
}

fn next(ch: &EventChannel) -> CmEvent {
    next_within(ch, 20).expect("an event within 20 s")
}

/// A PD, a CQ and an RC QP of `id`'s device for `id`.
fn rc_qp(id: &CmId) -> (Pd, Cq, QueuePair) {
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let caps = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = id.create_qp(&pd, &QpInitAttr::rc(&cq, caps)).unwrap();
    (pd, cq, qp)
}

/// The child: connects to the server its environment names and exits once established,
/// destroying nothing (outside the parent's run it does nothing).
#[test]
#[ignore = "the peer process of a_connection_ends_when_its_process_exits"]
fn child_connects_and_exits() {
    let Some(server) = std::env::var(CHILD_ENV).ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let ch = EventChannel::new().unwrap();
    let id = CmId::new(Some(&ch), PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(addr(2, 0)), server, WAIT).unwrap();
    assert_eq!(next(&ch).event, EventType::AddrResolved);
    id.resolve_route(WAIT).unwrap();
    assert_eq!(next(&ch).event, EventType::RouteResolved);
    let _qp = rc_qp(&id);
    id.connect(&ConnParam::none()).unwrap();
    assert_eq!(next(&ch).event, EventType::Established);
    std::process::exit(0);
}

#[test]
fn a_connection_ends_when_its_process_exits() {
    let server = addr(1, 7561);
    let ch = EventChannel::new().unwrap();
    let listener = CmId::new(Some(&ch), PortSpace::Tcp).unwrap();
    listener.bind_addr(server).unwrap();
    listener.listen(1).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_connects_and_exits",
            "--ignored",
            "--quiet",
        ])
        .env(CHILD_ENV, server.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

    let req = next(&ch);
    assert_eq!(req.event, EventType::ConnectRequest);
    let conn = req.id.clone();
    drop(req);
    let _qp = rc_qp(&conn);
    conn.accept(None).unwrap();
    assert_eq!(next(&ch).event, EventType::Established);
    assert!(child.wait().unwrap().success(), "the child failed");

    let e = next_within(&ch, 10).expect("DISCONNECTED once the peer process exited");
    assert_eq!((e.event, e.status), (EventType::Disconnected, 0));
    drop(e);
    conn.destroy();
    listener.destroy();
}
