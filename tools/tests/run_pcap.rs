//! `softrnic run --pcap`: an unmodified `ibv_rc_pingpong` pair, each side capturing its
//! device's traffic (`SOFTRNIC_PCAP`, `provider/src/transport/capture.rs`). Every frame of
//! both captures is one RoCE packet whose ICRC verifies over the headers as written, both
//! captures hold the same packets (what one side sent, the other received), the SENDs are
//! exactly the ones the pingpong makes, an ICRC check independent of softrnic's
//! (`tests/scripts/icrc_check.py`) passes on every packet, and tshark, where installed,
//! dissects every frame as RoCE. Skips (`softrnic_testkit::skip`) without ibverbs-utils or the built library.
//!
//! Then the same run seen two ways: `tcpdump -i lo` beside a capture from the provider, the
//! loopback's GSO super-packets split by `softrnic decode`; both must hold the same packets,
//! each with the same ICRC, which verifies (skips without tcpdump).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use softrnic_wire::frame::Frame;
use softrnic_wire::opcode::Operation;
use softrnic_wire::pcap;

const TEST: &str = "a_pingpong_pair_captures_every_packet_both_ways";

/// Checks every ICRC of the capture `path` with `tests/scripts/icrc_check.py`, an
/// implementation independent of softrnic's (Python's zlib over the masked fields), and that
/// it found `packets` RoCE packets; skips the check without python3.
fn independent_icrc_check(path: &Path, packets: usize) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts/icrc_check.py");
    let out = match Command::new("python3").arg(&script).arg(path).output() {
        Ok(out) => out,
        Err(e) => {
            softrnic_testkit::skip("independent_icrc_check", &format!("no python3: {e}"));
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the independent ICRC check failed: {text}"
    );
    assert!(
        text.contains(&format!("roce_ok={packets} roce_bad=0")),
        "the independent check saw other packets: {text}"
    );
}

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

/// Only the server captures: the client, capturing nothing, leaves the ICRC of what it
/// writes into the server's lane zero (the host-local path checks none), and the server's
/// capture still shows each packet with the ICRC it has on a link.
#[test]
fn a_capture_on_the_receiving_side_alone_shows_every_icrc() {
    let test = "a_capture_on_the_receiving_side_alone_shows_every_icrc";
    if !Path::new("/usr/bin/ibv_rc_pingpong").exists() {
        softrnic_testkit::skip(
            test,
            "/usr/bin/ibv_rc_pingpong missing (apt-get install ibverbs-utils)",
        );
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run_pcap_receiver");
    std::fs::create_dir_all(&dir).unwrap();
    let srv_pcap = dir.join("server.pcapng");
    let pingpong = ["ibv_rc_pingpong", "-g", "1", "-n", "50", "-p", "21787"];
    let (server, client) = pair(
        &pingpong,
        ("127.0.23.5", Some(&srv_pcap)),
        ("127.0.23.6", None),
        &[],
    );
    let client_text = String::from_utf8_lossy(&client.stderr);
    if client_text.contains("libsoftrnic_ibverbs.so is not in") {
        softrnic_testkit::skip(test, "the drop-in library is not built");
        return;
    }
    assert!(client.status.success(), "client: {client_text}");
    assert!(server.status.success(), "server: {server:?}");
    let on_server = packets(&srv_pcap);
    let from_client = on_server.iter().filter(|p| p.0 == "127.0.23.6").count();
    assert!(
        from_client >= 50,
        "the client's 50 SENDs and more: {on_server:?}"
    );
    independent_icrc_check(&srv_pcap, on_server.len());
}

/// `softrnic run --addr addr [--pcap pcap] -- program args [peer]`, on the library `cargo
/// test` just built (in deps/: the copy beside the executable is refreshed only by `cargo
/// build`), its output piped.
fn softrnic_run(addr: &str, pcap: Option<&Path>, program: &[&str], peer: Option<&str>) -> Command {
    let deps = Path::new(env!("CARGO_BIN_EXE_softrnic")).with_file_name("deps");
    let mut c = Command::new(env!("CARGO_BIN_EXE_softrnic"));
    c.args(["run", "--addr", addr, "--lib"]).arg(deps);
    if let Some(p) = pcap {
        c.arg("--pcap").arg(p);
    }
    c.arg("--").args(program).args(peer);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Runs `program` as a server on `server` and then as its client on `client`, each under
/// [`softrnic_run`] with the capture given; returns (server's output, client's output).
fn pair(
    program: &[&str],
    server: (&str, Option<&Path>),
    client: (&str, Option<&Path>),
    env: &[(&str, &str)],
) -> (std::process::Output, std::process::Output) {
    let srv = softrnic_run(server.0, server.1, program, None)
        .envs(env.iter().copied())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let cli = softrnic_run(client.0, client.1, program, Some(server.0))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (srv.wait_with_output().unwrap(), cli)
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
    let pingpong = [
        "ibv_rc_pingpong",
        "-g",
        "1",
        "-n",
        "20",
        "-s",
        "8192",
        "-p",
        "21781",
    ];
    let (server, client) = pair(
        &pingpong,
        ("127.0.23.1", Some(&srv_pcap)),
        ("127.0.23.2", Some(&cli_pcap)),
        &[],
    );
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
    independent_icrc_check(&srv_pcap, on_server.len());
    independent_icrc_check(&cli_pcap, on_client.len());
    on_server.sort();
    on_client.sort();
    assert_eq!(on_server, on_client, "each side saw what the other sent");
    // 20 SENDs of 8192 bytes each way, at path MTU 1024: 8 packets each (a packet resent
    // under load appears twice, with its PSN).
    let mut sends: Vec<_> = on_client
        .iter()
        .filter(|p| {
            softrnic_wire::Opcode(p.2)
                .info()
                .is_some_and(|i| i.operation == Operation::Send)
        })
        .map(|p| (p.0.clone(), p.3))
        .collect();
    sends.dedup();
    assert_eq!(sends.len(), 2 * 20 * 8, "SEND packets, each PSN once");
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

/// (source, destination, UDP source port, opcode, PSN, ICRC) of every RoCE packet between
/// `a` and `b` that `softrnic decode --json` finds in the `tcpdump -i lo` capture `path`
/// (super-packets split into their segments); panics on a packet whose ICRC does not verify.
fn loopback_packets(path: &Path, a: &str, b: &str) -> Vec<(String, String, u16, u8, u32, u32)> {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .args(["decode", "--json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "softrnic decode: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut packets = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v["roce"], true,
            "a frame decode did not take for RoCE: {line}"
        );
        let (src, dst) = (v["src"].as_str().unwrap(), v["dst"].as_str().unwrap());
        if !((src == a && dst == b) || (src == b && dst == a)) {
            continue;
        }
        assert_eq!(v["icrc_ok"], true, "a packet on lo with a bad ICRC: {line}");
        // The ICRC's four bytes as on the wire, in hex: least significant first.
        let icrc = u32::from_str_radix(v["icrc"].as_str().unwrap(), 16)
            .unwrap()
            .swap_bytes();
        let n = |k: &str| v[k].as_u64().unwrap();
        packets.push((
            src.to_string(),
            dst.to_string(),
            n("src_port") as u16,
            n("opcode") as u8,
            n("psn") as u32,
            icrc,
        ));
    }
    packets
}

#[test]
fn a_loopback_tcpdump_shows_the_packets_the_provider_captured() {
    let test = "a_loopback_tcpdump_shows_the_packets_the_provider_captured";
    let tcpdump = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(tcpdump) = tcpdump else {
        softrnic_testkit::skip(test, "tcpdump missing (apt-get install tcpdump)");
        return;
    };
    if !Path::new("/usr/bin/ibv_rc_pingpong").exists() {
        softrnic_testkit::skip(
            test,
            "/usr/bin/ibv_rc_pingpong missing (apt-get install ibverbs-utils)",
        );
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        softrnic_testkit::skip(test, "capturing on lo needs root");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run_pcap_lo");
    std::fs::create_dir_all(&dir).unwrap();
    let (lo_pcap, provider_pcap) = (dir.join("lo.pcap"), dir.join("client.pcapng"));
    let _ = std::fs::remove_file(&lo_pcap);
    let (a, b) = ("127.0.23.3", "127.0.23.4");
    let mut dump = Command::new(tcpdump)
        .args([
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-B",
            "16384",
            "-s",
            "0",
            "-w",
        ])
        .arg(&lo_pcap)
        .arg(format!("udp port 4791 and host {a} and host {b}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::fs::metadata(&lo_pcap).map_or(0, |m| m.len()) < 24 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tcpdump did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pingpong = [
        "ibv_rc_pingpong",
        "-g",
        "1",
        "-n",
        "20",
        "-s",
        "16384",
        "-p",
        "21783",
    ];
    // Over UDP, so that the packets pass the loopback: between two devices of one host they
    // would otherwise go through shared memory, which no tcpdump sees.
    let udp = [("SOFTRNIC_LOCAL", "0")];
    let (server, client) = pair(&pingpong, (a, None), (b, Some(&provider_pcap)), &udp);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child: SIGINT makes tcpdump flush and close its file.
    unsafe { libc::kill(dump.id() as i32, libc::SIGINT) };
    let _ = dump.wait();
    assert!(
        client.status.success(),
        "client: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(
        server.status.success(),
        "server: {}",
        String::from_utf8_lossy(&server.stderr)
    );

    let mut on_lo = loopback_packets(&lo_pcap, a, b);
    let mut captured: Vec<_> = pcap::read_file(&provider_pcap)
        .unwrap()
        .iter()
        .map(|r| {
            let d = Frame::parse(&r.data).unwrap().datagram;
            (
                d.repr.ip.src_addr().to_string(),
                d.repr.ip.dst_addr().to_string(),
                d.repr.udp.src_port,
                d.repr.roce.bth.opcode.0,
                d.repr.roce.bth.psn.value(),
                d.icrc,
            )
        })
        .collect();
    on_lo.sort();
    captured.sort();
    assert!(on_lo.len() >= 2 * 20 * 16, "{} packets on lo", on_lo.len());
    let only_lo: Vec<_> = on_lo
        .iter()
        .filter(|p| !captured.contains(p))
        .take(5)
        .collect();
    let only_captured: Vec<_> = captured
        .iter()
        .filter(|p| !on_lo.contains(p))
        .take(5)
        .collect();
    assert!(
        on_lo == captured,
        "the provider's capture is not what crossed lo: {} packets on lo, {} captured; \
         on lo only: {only_lo:?}; captured only: {only_captured:?}",
        on_lo.len(),
        captured.len()
    );
}

/// perftest's `ib_write_bw` under `--pcap` on its client: 64 KiB WRITEs sent as segmentation
/// runs, each packet a frame of its own, every ICRC right, and tshark dissects them all.
#[test]
fn an_ib_write_bw_client_captures_each_packet_of_its_runs() {
    let test = "an_ib_write_bw_client_captures_each_packet_of_its_runs";
    if !Path::new("/usr/bin/ib_write_bw").exists() {
        softrnic_testkit::skip(
            test,
            "/usr/bin/ib_write_bw missing (apt-get install perftest)",
        );
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run_pcap_bw");
    std::fs::create_dir_all(&dir).unwrap();
    let cap = dir.join("client.pcapng");
    let bw = [
        "ib_write_bw",
        "-x",
        "1",
        "-F",
        "-s",
        "65536",
        "-n",
        "50",
        "-p",
        "21785",
    ];
    let (server, client) = pair(&bw, ("127.0.23.5", None), ("127.0.23.6", Some(&cap)), &[]);
    assert!(
        client.status.success(),
        "client: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(
        server.status.success(),
        "server: {}",
        String::from_utf8_lossy(&server.stderr)
    );
    let all = packets(&cap);
    independent_icrc_check(&cap, all.len());
    let writes: std::collections::BTreeSet<u32> = all
        .iter()
        .filter(|p| p.0 == "127.0.23.6")
        .filter(|p| {
            softrnic_wire::Opcode(p.2)
                .info()
                .is_some_and(|i| i.operation == Operation::RdmaWrite)
        })
        .map(|p| p.3)
        .collect();
    // 50 messages of 16 packets at lo's path MTU, 4096 (perftest may add WRITEs of its own).
    assert!(writes.len() >= 50 * 16, "{} WRITE packets", writes.len());
    assert!(
        all.iter().any(|p| p.0 == "127.0.23.5"),
        "the ACKs received are captured too"
    );
    if Path::new("/usr/bin/tshark").exists() {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&cap)
            .args(["-Y", "!infiniband"])
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "frames tshark did not dissect as RoCE"
        );
    }
}
