//! Who carries the ACKs of a request-response exchange (`driver/round.rs`, `driver/device.rs`):
//! a round of progress that receives an RDMA WRITE in a conversation (the QP's own requests
//! outstanding) owes its ACK to the application's next post (the two leave together), or
//! sends it alone once the application has not answered for a while; the ACK of a stream
//! leaves at once; and while the application busy-polls, the progress thread leaves the
//! packets to its polls instead of waking for each one.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::{connect, signaled_send, Setup, Side};
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, Context, MemoryRegion, OpenOptions, Progress, RecvWr, RemoteAddr, SendFlags,
    SendOpcode, SendWr, Sge, WcStatus,
};

const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 34, 1));
const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 34, 2));

/// Two connected sides on a fresh fabric, each with a region every remote may write.
fn pair(progress: Progress) -> (Side, MemoryRegion, Side, MemoryRegion) {
    let fabric = Fabric::new(FabricConfig::default(), 34);
    let setup = |seed| Setup {
        progress,
        seed,
        ..Setup::default()
    };
    let (a, b) = common::pair_on(&fabric, (A, &setup(1)), (B, &setup(2)));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let (ma, mb) = (
        a.pd.reg_mr(4096, rw).unwrap(),
        b.pd.reg_mr(4096, rw).unwrap(),
    );
    (a, ma, b, mb)
}

/// A signaled RDMA WRITE of 8 bytes from `from` to `to`.
fn write(s: &Side, id: u64, from: &MemoryRegion, to: &MemoryRegion) {
    write_sge(s, id, from.sge(0, 8), to);
}

/// A signaled RDMA WRITE of `sge` to the start of `to`.
fn write_sge(s: &Side, id: u64, sge: Sge, to: &MemoryRegion) {
    let wr = SendWr {
        flags: SendFlags::SIGNALED,
        remote: RemoteAddr {
            addr: to.addr(),
            rkey: to.rkey(),
        },
        ..SendWr::new(id, SendOpcode::RdmaWrite, vec![sge])
    };
    s.qp.post_send(&[wr]).unwrap();
}

/// Packets `s`'s device has handed its transport.
fn sent(s: &Side) -> u64 {
    s.ctx.device().emit_stats().sent
}

/// Polls `s`'s device (its application's `poll_cq` finding nothing) until a round receives.
fn poll_until_received(s: &Side) {
    let guard = Instant::now() + Duration::from_secs(10);
    while s.ctx.device().progress().packets == 0 {
        assert!(Instant::now() < guard, "nothing came in 10 s");
    }
}

#[test]
fn the_ack_of_a_write_in_a_conversation_leaves_with_the_answer_or_alone_once_none_comes() {
    let (a, ma, b, mb) = pair(Progress::Polling);
    // A stream: B's QP sends nothing, so B's application will not answer: the ACK of A's
    // WRITE leaves from the round that took it in.
    write(&a, 1, &ma, &mb);
    let before = sent(&b);
    poll_until_received(&b);
    assert_eq!(sent(&b) - before, 1, "the ACK at once");
    assert_eq!(a.one().wr_id, 1);

    // A conversation: B's own WRITE is outstanding (A has not polled, so has not ACKed it),
    // and the ACK of A's next WRITE waits for B's answer, which carries it.
    write(&b, 2, &mb, &ma);
    write(&a, 3, &ma, &mb);
    let before = sent(&b);
    poll_until_received(&b);
    assert_eq!(sent(&b), before, "the ACK waits for B's answer");
    write(&b, 4, &mb, &ma);
    assert_eq!(sent(&b) - before, 2, "B's WRITE and the ACK of A's");
    let wc = a.one();
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::Success));

    // No answer comes: once B's application has not answered for a while, the ACK leaves
    // alone (on a later poll, or the idle watchdog's round), and A's WRITE completes.
    write(&a, 5, &ma, &mb);
    let before = sent(&b);
    poll_until_received(&b);
    let guard = Instant::now() + Duration::from_secs(10);
    while sent(&b) == before {
        assert!(Instant::now() < guard, "the ACK never left");
        b.ctx.device().progress();
    }
    assert_eq!(sent(&b) - before, 1, "the ACK alone");
    let wc = a.one();
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::Success));
}

#[test]
fn the_progress_thread_leaves_the_packets_to_a_busy_poller() {
    const MESSAGES: u64 = 200;
    // Real UDP sockets: the thread sleeps on B's socket and would wake for each packet.
    let opts = OpenOptions {
        progress: Progress::Thread,
        key_seed: 3,
    };
    let (ua, ub) = (
        IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 62, 1)),
        IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 62, 2)),
    );
    let a = Setup::default().with(Context::open(ua, opts).unwrap());
    let b = Setup::default().with(Context::open(ub, opts).unwrap());
    connect(&a, ua, &b, ub);
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let (ma, mb) = (
        a.pd.reg_mr(4096, rw).unwrap(),
        b.pd.reg_mr(4096, rw).unwrap(),
    );
    // A thread that woke for every packet makes a round (or more) per message. This one
    // leaves them to B's polls, but for the first ones (before it sees B polling) and for
    // those that come while B's thread is preempted for long. On a UDP socket the thread
    // makes rounds only when woken (a packet, a deadline), not every few microseconds as on
    // the in-memory fabric, which has no file descriptor to sleep on. A machine loaded far
    // beyond its cores preempts B's polling often enough that the thread rightly takes
    // over, so the exchange is tried up to three times: a thread that wakes for every
    // packet (the rule removed: 420-450 rounds) fails all three.
    let mut tries = Vec::new();
    for _ in 0..3 {
        let rounds_before = b.ctx.device().thread_rounds();
        std::thread::scope(|s| {
            // B's application: busy-polls its CQ for each SEND, and posts the next receive.
            s.spawn(|| {
                for i in 0..MESSAGES {
                    b.qp.post_recv(&[RecvWr {
                        wr_id: i,
                        sg_list: vec![mb.sge(0, 64)],
                    }])
                    .unwrap();
                    let wc = b.one();
                    assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
                }
            });
            // A: one SEND at a time, each once B has had time to post its receive.
            for i in 0..MESSAGES {
                std::thread::sleep(Duration::from_micros(200));
                a.qp.post_send(&[signaled_send(i, ma.sge(0, 64))]).unwrap();
                assert_eq!(a.one().status, WcStatus::Success);
            }
        });
        let rounds = b.ctx.device().thread_rounds() - rounds_before;
        if rounds < MESSAGES {
            return;
        }
        tries.push(rounds);
    }
    panic!("B's progress thread made {tries:?} rounds for {MESSAGES} messages B polled for");
}

/// The value in the first 8 bytes of `mr`.
fn first_word(mr: &MemoryRegion) -> u64 {
    let mut b = [0u8; 8];
    mr.read(0, &mut b).unwrap();
    u64::from_le_bytes(b)
}

/// Writes `v` into bytes 8..16 of `from` and RDMA WRITEs them into the first 8 of `to`.
fn write_word(s: &Side, v: u64, from: &MemoryRegion, to: &MemoryRegion) {
    from.write(8, &v.to_le_bytes()).unwrap();
    write_sge(s, v, from.sge(8, 8), to);
}

#[test]
fn arming_a_cq_wakes_the_thread_for_the_ack_the_polls_left_to_the_next_post() {
    const TEST: &str = "arming_a_cq_wakes_the_thread_for_the_ack_the_polls_left_to_the_next_post";
    const ROUNDS: u64 = 100;
    // Two devices of this process on loopback: their packets go through shared memory,
    // watched by their senders, and B's thread, once away from B's busy polls, is here made
    // to stay away an hour each time: nothing wakes it but a sender's ring, the owed
    // deadline it saw at its last look, or B arming its CQ.
    let (ua, ub) = (
        IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 63, 1)),
        IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 63, 2)),
    );
    let (Some(ca), Some(cb)) = (
        common::udp_context(TEST, ua, 5),
        common::udp_context(TEST, ub, 6),
    ) else {
        return;
    };
    let (a, b) = (Setup::default().with(ca), Setup::default().with(cb));
    connect(&a, ua, &b, ub);
    b.ctx.device().stay_away_for(Duration::from_secs(3600));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let (ma, mb) = (
        a.pd.reg_mr(4096, rw).unwrap(),
        b.pd.reg_mr(4096, rw).unwrap(),
    );
    // A ping-pong of RDMA WRITEs as `ib_write_lat` makes it: each side writes the round's
    // number into the other's memory, polls for its send completion, and spins on its own
    // memory for the other's. B's poll for its completion takes in A's next WRITE with the
    // ACK it waits for, and leaves the ACK of that WRITE to B's next post (`round.rs`). In
    // the last round B makes no post: it arms its CQ, as an application does before it
    // waits for an event, and stops polling. The deferred ACK must leave then, from B's
    // thread, before A's retransmission timer (1 ms at the least, `rc/requester/rto.rs`)
    // resends the WRITE: the resend would sit in B's lane until A's ring woke B's thread,
    // which would ACK it. A thread not woken by the arm makes A resend every time; a
    // machine loaded far beyond its cores may delay a woken one as long, so up to three
    // tries.
    let mut resends = Vec::new();
    for t in 0..3u64 {
        let base = t * ROUNDS;
        let mut before = 0;
        std::thread::scope(|s| {
            s.spawn(|| {
                // Empty polls for a while first: B's thread sees a busy poller and goes
                // away (a slow build's B may otherwise poll too little to count as one).
                let until = Instant::now() + Duration::from_millis(30);
                while Instant::now() < until {
                    b.cq.poll(&mut []).unwrap();
                }
                for i in base + 1..=base + ROUNDS {
                    while first_word(&mb) != i {}
                    if i == base + ROUNDS {
                        b.cq.req_notify();
                        return;
                    }
                    write_word(&b, i, &mb, &ma);
                    assert_eq!(b.one().status, WcStatus::Success);
                }
            });
            for i in base + 1..=base + ROUNDS {
                if i == base + ROUNDS {
                    // Resends of the rounds before (a side preempted for long) are not
                    // what this test is about.
                    before = a.ctx.device().observe().0.timeout_resends;
                }
                write_word(&a, i, &ma, &mb);
                let wc = a.one();
                assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
                if i < base + ROUNDS {
                    while first_word(&ma) != i {}
                }
            }
        });
        let (c, _) = a.ctx.device().observe();
        if c.local_sent == 0 {
            softrnic_testkit::skip(TEST, "the devices did not take the host-local path");
            return;
        }
        if c.timeout_resends == before {
            return;
        }
        resends.push(c.timeout_resends - before);
    }
    panic!("A resent its last WRITE in every try ({resends:?}): B's ACK waited for the resend");
}
