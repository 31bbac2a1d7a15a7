//! The connection manager's listeners outlive the agent's process (`host::agent`,
//! `driver::cm`). A child process (this test binary, run again) becomes the agent of an
//! address; this process listens on a Service ID there; the child is killed, this process
//! takes the agent's role, and its CM registers the Service ID again: a peer's REQ for it
//! reaches the listener rather than the REJ for nobody (reason 8, Invalid Service ID), and
//! another process's block still may not listen on it.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use softrnic_provider::cm::{Config, Event};
use softrnic_provider::driver::cm::CmDriver;
use softrnic_provider::host::Member;
use softrnic_wire::cm::{self as wcm, ReqRepr};

/// The environment variable that makes this test binary the agent's process: the address.
const RUN_THE_AGENT_OF: &str = "SOFTRNIC_TEST_RUN_THE_AGENT_OF";

/// What the agent's process prints once it runs the agent.
const READY: &str = "softrnic test: the agent runs";

/// Only keeps a broken build from hanging the test.
const BOUND: Duration = Duration::from_secs(30);

fn addr(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 50, host))
}

/// In the child: runs the agent of `addr`, says so, and waits to be killed (or for the
/// parent's end of stdin to close, if the parent is gone first).
fn run_the_agent(addr: &str) {
    let addr: IpAddr = addr.parse().expect("an address");
    let (member, _group_socket) = Member::join(addr).expect("joined");
    assert!(
        member.runs_agent(),
        "the first process of the address runs its agent"
    );
    println!("{READY}");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Starts this test again in a child process that runs the agent of `addr`, and waits until
/// it does.
fn spawn_agent(test: &str, addr: IpAddr) -> Child {
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(RUN_THE_AGENT_OF, addr.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the agent's process");
    let out = child.stdout.take().expect("its stdout");
    let (tx, ready) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(READY) {
                let _ = tx.send(());
            }
        }
    });
    ready.recv_timeout(BOUND).expect("the child runs the agent");
    child
}

/// A CM of `member`'s block on `addr`, whose events go to `events` with its CA GUID.
fn cm_of(member: &Member, addr: IpAddr, guid: u64, events: &Events) -> CmDriver {
    let events = events.clone();
    let cfg = Config::new(guid, member.block(), 1);
    let on_event = Box::new(move |e| {
        let _ = events.send((guid, e));
    });
    CmDriver::start(addr, cfg, on_event).expect("a CM")
}

/// Where CMs' events go, each with the CA GUID of its CM.
type Events = mpsc::Sender<(u64, Event)>;

/// A REQ for `service`, as the active side's rdma_cm would send it.
fn req_for(service: u64) -> ReqRepr {
    let mut req = ReqRepr::parse(&wcm::req::Packet::new_unchecked(&[0u8; 232][..])).unwrap();
    req.service_id = service;
    req.local_qpn = 0x1234;
    req.max_cm_retries = 15;
    req.remote_cm_response_timeout = 16;
    req.primary_path.local_ack_timeout = 10;
    req
}

/// When the listener's CM registers its Service ID with the new agent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Relisten {
    /// From the member's thread, once it has joined the new agent.
    OnRejoin,
    /// At once, from the test's thread, as the agent's process ends: before a new agent
    /// runs, most likely, so the registration waits for one.
    AtOnce,
}

#[test]
fn a_listener_gets_its_reqs_after_the_agent_changes_hands() {
    let test = "a_listener_gets_its_reqs_after_the_agent_changes_hands";
    listener_across_a_handover(test, (addr(1), addr(2)), Relisten::OnRejoin);
}

#[test]
fn a_listener_registering_before_the_new_agent_runs_waits_for_it() {
    let test = "a_listener_registering_before_the_new_agent_runs_waits_for_it";
    listener_across_a_handover(test, (addr(3), addr(4)), Relisten::AtOnce);
}

/// The agent of `here` changes hands while this process listens there; then a REQ from
/// `peer` reaches the listener, and no other block may listen on its Service ID. In the
/// child process that `test` (this test's name) starts, runs the first agent instead.
fn listener_across_a_handover(test: &str, (here, peer): (IpAddr, IpAddr), relisten: Relisten) {
    if let Ok(a) = std::env::var(RUN_THE_AGENT_OF) {
        return run_the_agent(&a);
    }
    let mut agent = spawn_agent(test, here);

    // This process's block on `here`, watched as a device watches it; the group's sockets
    // are not needed (QP1's MADs come over the CM's link), so they are given back at once.
    let (member, group_socket) = Member::join(here).unwrap();
    drop(group_socket);
    assert!(!member.runs_agent(), "the child runs the agent");
    let adopt = Box::new(|group_socket| {
        drop(group_socket);
        Ok(())
    });
    member
        .watch("lo", adopt, Box::new(Default::default))
        .unwrap();
    let (events, heard) = mpsc::channel();
    let (listening, connecting, rivalling) = (1, 2, 3);
    let listener = cm_of(&member, here, listening, &events);
    let service = wcm::PortSpace::Tcp.service_id(5050);
    listener.listen(service, 1).unwrap();
    if relisten == Relisten::OnRejoin {
        listener.relisten_on_rejoin(&member);
    }
    // Runs after the hook above: the Service ID is registered again by then.
    let (tx, rejoined) = mpsc::channel();
    member.on_rejoin(Box::new(move || tx.send(()).is_ok()));

    agent.kill().expect("SIGKILL");
    agent.wait().expect("the agent's process ended");
    if relisten == Relisten::AtOnce {
        listener.relisten().unwrap();
    }
    rejoined.recv_timeout(BOUND).expect("joined the new agent");
    assert!(
        member.runs_agent(),
        "the one process left took the agent's role"
    );

    let (peer_member, group_socket) = Member::join(peer).unwrap();
    drop(group_socket);
    let connector = cm_of(&peer_member, peer, connecting, &events);
    connector
        .with(|cm, now| cm.connect(now, here, req_for(service)))
        .unwrap();
    // The first event of either side: the listener's REQ, not the connector's REJ.
    match heard.recv_timeout(BOUND).expect("an event") {
        (cm, Event::Request { from, req, .. }) if cm == listening => {
            assert_eq!((from, req.service_id), (peer, service));
        }
        other => panic!("not the listener's REQ: {other:?}"),
    }

    // The new agent keeps the Service ID this block's: registering again is no change, and
    // another process's block may not have it.
    listener.relisten().unwrap();
    let (other, group_socket) = Member::join(here).unwrap();
    drop(group_socket);
    assert_ne!(other.block(), member.block());
    let rival = cm_of(&other, here, rivalling, &events);
    let in_use = rival.listen(service, 1).unwrap_err();
    assert_eq!(in_use.raw_os_error(), Some(libc::EADDRINUSE));
}
