//! `softrnic run --pcap`: an unmodified `ibv_rc_pingpong` pair, each side capturing its
//! device's traffic (`SOFTRNIC_PCAP`, `provider/src/transport/capture.rs`). Every frame of
//! both captures is one RoCE packet whose ICRC verifies over the headers as written, both
//! captures hold the same packets (what one side sent, the other received), the SENDs are
//! exactly the ones the pingpong makes, and tshark, where installed, dissects every frame as
//! RoCE. Skips (`softrnic_testkit::skip`) without ibverbs-utils or the built library.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use softrnic_wire::frame::Frame;
use softrnic_wire::opcode::Operation;
use softrnic_wire::pcap;

const TEST: &str = "a_pingpong_pair_captures_every_packet_both_ways";

/// (source, destination, opcode, PSN) of every frame of `path`; panics on a frame that is
/// not one RoCE packet with a good ICRC.
fn packets(path: &Path) -> Vec<(String, String, u8, u32)> {
    pcap::read_file(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let f = Frame::parse(&r.data)
                .unwrap_or_else(|e| panic!("{} frame {}: {e}", path.display(), i + 1));
            let d = f.datagram;
            assert!(d.icrc_ok, "{} frame {}: bad ICRC", path.display(), i + 1);
            assert_eq!(r.comment, None, "no packet of a clean run is dropped");
            (
                d.repr.ip.src_addr().to_string(),
                d.repr.ip.dst_addr().to_string(),
                d.repr.roce.bth.opcode.0,
                d.repr.roce.bth.psn.value(),
            )
        })
        .collect()
}

#[test]
fn a_pingpong_pair_captures_every_packet_both_ways() {
    if !Path::new("/usr/bin/ibv_rc_pingpong").exists() {
        softrnic_testkit::skip(
            TEST,
            "/usr/bin/ibv_rc_pingpong missing (apt-get install ibverbs-utils)",
        );
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run_pcap");
    std::fs::create_dir_all(&dir).unwrap();
    let (srv_pcap, cli_pcap) = (dir.join("server.pcapng"), dir.join("client.pcapng"));
    let port = "21781";
    let pingpong = |addr: &str, pcap: &Path, peer: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_softrnic"));
        // The library `cargo test` just built is the one in deps/ (the copy beside the
        // executable is refreshed only by `cargo build`).
        let deps = Path::new(env!("CARGO_BIN_EXE_softrnic")).with_file_name("deps");
        c.args(["run", "--addr", addr, "--lib"]).arg(deps);
        c.arg("--pcap").arg(pcap).args([
            "--",
            "ibv_rc_pingpong",
            "-g",
            "1",
            "-n",
            "20",
            "-s",
            "8192",
            "-p",
            port,
        ]);
        c.args(peer);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    };
    let server = pingpong("127.0.23.1", &srv_pcap, None).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = pingpong("127.0.23.2", &cli_pcap, Some("127.0.23.1"))
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    if text(&client).contains("libsoftrnic_ibverbs.so is not in") {
        softrnic_testkit::skip(TEST, "the drop-in library is not built");
        return;
    }
    assert!(client.status.success(), "client: {}", text(&client));
    assert!(server.status.success(), "server: {}", text(&server));

    let (mut on_server, mut on_client) = (packets(&srv_pcap), packets(&cli_pcap));
    on_server.sort();
    on_client.sort();
    assert_eq!(on_server, on_client, "each side saw what the other sent");
    // 20 SENDs of 8192 bytes each way, at path MTU 1024: 8 packets each.
    let sends = on_client
        .iter()
        .filter(|p| {
            softrnic_wire::Opcode(p.2)
                .info()
                .is_some_and(|i| i.operation == Operation::Send)
        })
        .count();
    assert_eq!(sends, 2 * 20 * 8, "SEND packets");
    for side in ["127.0.23.1", "127.0.23.2"] {
        assert!(on_client.iter().any(|p| p.0 == side), "packets from {side}");
    }

    if Path::new("/usr/bin/tshark").exists() {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&cli_pcap)
            .args(["-Y", "!infiniband"])
            .output()
            .unwrap();
        assert!(out.status.success(), "tshark: {}", text(&out));
        assert!(
            out.stdout.is_empty(),
            "frames tshark did not dissect as RoCE: {}",
            text(&out)
        );
        let all = Command::new("tshark")
            .arg("-r")
            .arg(&cli_pcap)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&all.stdout).lines().count(),
            on_client.len(),
            "tshark reads every frame"
        );
    }
}
