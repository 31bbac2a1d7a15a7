//! `softrnic stat` and the capture of the same run agree: this test's process captures its
//! device's traffic (`SOFTRNIC_PCAP`), runs SENDs to a second device, and the packets sent and
//! received that `softrnic stat --json` reads from it are the frames from and to its address
//! in the capture.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use softrnic_tools::rig::{wr, Rig};
use softrnic_uapi::{Progress, RemoteAddr, SendOpcode};
use softrnic_wire::frame::Frame;
use softrnic_wire::pcap;

const A: &str = "127.0.68.1";
const B: &str = "127.0.68.2";

#[test]
fn stat_counts_the_packets_the_capture_holds() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stat_capture");
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("a.pcapng");
    // The only test of this executable: nothing else reads the environment meanwhile.
    std::env::set_var("SOFTRNIC_PCAP", &cap);
    let (a, b): (IpAddr, IpAddr) = (A.parse().unwrap(), B.parse().unwrap());
    let rig = Rig::new(a, b, 1 << 16, Progress::Thread).expect("the rig");
    for i in 0..30u64 {
        rig.b.post_recv(i, 0, 3000).expect("post_recv");
    }
    for i in 0..30u64 {
        let w = wr(
            i,
            SendOpcode::Send,
            vec![rig.a.mr.sge(0, 3000)],
            RemoteAddr::default(),
        );
        rig.a.post(w).expect("post_send");
    }
    rig.a.wait(30).expect("the SENDs complete");
    rig.b.wait(30).expect("the receives complete");

    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["stat", "--json", "--addr", A])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let me = json[0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == std::process::id())
        .cloned()
        .unwrap_or_else(|| panic!("this process is not listed: {json}"));
    let counter = |name: &str| me["counters"][name].as_u64().unwrap();
    let (sent, received) = (counter("sent_pkts"), counter("rcvd_pkts"));
    drop(rig); // the capture is complete once its device closes

    let (mut from_a, mut to_a) = (0u64, 0u64);
    for r in pcap::read_file(&cap).unwrap() {
        let ip = Frame::parse(&r.data).unwrap().datagram.repr.ip;
        from_a += u64::from(ip.src_addr() == a);
        to_a += u64::from(ip.dst_addr() == a);
    }
    assert!(
        sent >= 30,
        "30 SENDs, one packet each at lo's path MTU: {me}"
    );
    assert_eq!(
        (sent, received),
        (from_a, to_a),
        "stat's counters against the capture: {me}"
    );
}
