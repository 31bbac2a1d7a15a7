//! The host-local path between two processes (`provider/src/transport/udp/local/`): this
//! test's binary, run again as a child ([`ROLE`]), opens a device on 127.0.61.2 and the test
//! one on 127.0.61.1; they trade QP numbers over the child's standard input and output and
//! connect, and the parent sends [`SENDS`] SENDs of 4 KiB, each to a receive the child posted.
//! Every byte arrives, and both devices count that the datagrams went through shared memory
//! (`local_sent`, `local_rcvd`): all but the first few, sent over UDP while the child's inbox
//! hands the parent its lane.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{signaled_send, udp_context, Setup, Side};
use softrnic_uapi::{Access, ConnectAttr, RecvWr, WcOpcode, WcStatus};

const TEST: &str = "two_processes_send_through_shared_memory";

/// Set in the child: it is the receiving side.
const ROLE: &str = "SOFTRNIC_LOCAL_PATH_CHILD";

/// The child's line once its receives are posted.
const READY: u64 = 0;

const SENDS: usize = 100;
const LEN: usize = 4096;

fn parent_addr() -> IpAddr {
    "127.0.61.1".parse().unwrap()
}

fn child_addr() -> IpAddr {
    "127.0.61.2".parse().unwrap()
}

/// The byte `i` of SEND `n`.
fn byte(n: usize, i: usize) -> u8 {
    (n * 31 + i * 7) as u8
}

fn connect(side: &Side, dest: IpAddr, dest_qp_num: u32) {
    side.qp
        .connect(&ConnectAttr {
            dest,
            dest_qp_num,
            ..ConnectAttr::default()
        })
        .unwrap();
}

/// The child: receives every SEND, checks its bytes, reports its counters, and stays until
/// the parent says it is done (its last ACKs must leave).
fn child() {
    let ctx = udp_context(TEST, child_addr(), 2).expect("the child's device");
    let side = Setup::default().with(ctx);
    let mr = side.pd.reg_mr(8 * LEN, Access::LOCAL_WRITE).unwrap();
    let post = |slot: usize| {
        side.qp
            .post_recv(&[RecvWr {
                wr_id: slot as u64,
                sg_list: vec![mr.sge(slot * LEN, LEN as u32)],
            }])
            .unwrap();
    };
    println!("{}", side.qp.qp_num());
    let mut lines = BufReader::new(std::io::stdin()).lines();
    let peer: u32 = lines.next().unwrap().unwrap().parse().unwrap();
    connect(&side, parent_addr(), peer);
    (0..8).for_each(post);
    println!("{READY}");
    for n in 0..SENDS {
        let wc = side.one();
        assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Recv));
        let slot = wc.wr_id as usize;
        let mut got = vec![0u8; LEN];
        mr.read(slot * LEN, &mut got).unwrap();
        assert!(
            got.iter().enumerate().all(|(i, &b)| b == byte(n, i)),
            "SEND {n}'s bytes"
        );
        post(slot);
    }
    // Counted once the parent has every completion: the ACK of the last SEND may leave
    // after the last receive completed here.
    let _done = lines.next();
    let (c, _) = side.ctx.device().observe();
    println!("{} {}", c.local_rcvd, c.local_sent);
}

#[test]
fn two_processes_send_through_shared_memory() {
    if std::env::var_os(ROLE).is_some() {
        child();
        return;
    }
    if std::env::var_os("SOFTRNIC_LOCAL").is_some_and(|v| v == "0") {
        softrnic_testkit::skip(TEST, "SOFTRNIC_LOCAL=0 turns the host-local path off");
        return;
    }
    let Some(ctx) = udp_context(TEST, parent_addr(), 1) else {
        return;
    };
    let side = Setup::default().with(ctx);
    let mr = side.pd.reg_mr(LEN, Access::LOCAL_WRITE).unwrap();
    let mut kid = Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--quiet"])
        .env(ROLE, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_kid = kid.stdin.take().unwrap();
    let mut from_kid = BufReader::new(kid.stdout.take().unwrap()).lines();
    // The child's lines among the test harness's own: the first that parses.
    let mut next_numbers = || -> Vec<u64> {
        loop {
            let line = from_kid.next().expect("the child ended early").unwrap();
            let n: Result<Vec<u64>, _> = line.split(' ').map(str::parse).collect();
            if let Ok(n) = n {
                return n;
            }
        }
    };
    let peer = next_numbers()[0] as u32;
    connect(&side, child_addr(), peer);
    writeln!(to_kid, "{}", side.qp.qp_num()).unwrap();
    assert_eq!(next_numbers(), [READY], "the child's receives are posted");
    for n in 0..SENDS {
        let bytes: Vec<u8> = (0..LEN).map(|i| byte(n, i)).collect();
        mr.write(0, &bytes).unwrap();
        side.qp
            .post_send(&[signaled_send(n as u64, mr.sge(0, LEN as u32))])
            .unwrap();
        let wc = side.cq.wait(1, Duration::from_secs(10)).unwrap()[0];
        assert_eq!((wc.wr_id, wc.status), (n as u64, WcStatus::Success));
    }
    writeln!(to_kid, "done").unwrap();
    let kid_counts = next_numbers();
    let (mine, _) = side.ctx.device().observe();
    assert!(kid.wait().unwrap().success(), "the child failed");
    let (kid_rcvd, kid_sent) = (kid_counts[0], kid_counts[1]);
    // The lane comes within a few SENDs (the child admits senders every millisecond).
    assert!(
        mine.local_sent >= SENDS as u64 / 2,
        "the parent sent {} of {} datagrams through shared memory",
        mine.local_sent,
        mine.sent_pkts
    );
    assert_eq!(kid_rcvd, mine.local_sent, "what one wrote, the other read");
    assert!(
        kid_sent > 0 && mine.local_rcvd == kid_sent,
        "the ACKs too: the child sent {kid_sent} through shared memory, the parent read {}",
        mine.local_rcvd
    );
}
