//! `softrnic status` from another process: a `softrnic pingpong` server waiting for its
//! client on 127.0.44.1 holds a device with one RC QP in INIT (once it has opened it);
//! `status` must list its process and QP, as text and as JSON, and nothing once it is gone.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_softrnic");
const ADDR: &str = "127.0.44.1";

/// Kills the server however the test ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("status")
        .args(args)
        .output()
        .expect("status runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("text")
}

#[test]
fn status_lists_another_process_and_its_qp() {
    let mut server = Command::new(BIN)
        .args(["pingpong", "--bind", ADDR, "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server runs");
    let mut first = String::new();
    BufReader::new(server.stdout.as_mut().expect("stdout"))
        .read_line(&mut first)
        .expect("the server's first line");
    assert!(first.starts_with("listening on"), "{first}");
    let server = Guard(server);
    let pid = server.0.id();

    // The server prints its port before it opens the device: wait for its QP, created in
    // RESET and then moved to INIT, where it waits for the client.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let json: serde_json::Value = loop {
        let json: serde_json::Value =
            serde_json::from_str(&status(&["--json", "--addr", ADDR])).expect("JSON");
        let waiting = json[0]["processes"][0]["qps"][0]["state"] == "INIT";
        if waiting || std::time::Instant::now() > deadline {
            break json;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let devices = json.as_array().expect("an array of devices");
    assert_eq!(devices.len(), 1, "{json}");
    assert_eq!(devices[0]["address"], ADDR);
    let processes = devices[0]["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 1, "{json}");
    let p = &processes[0];
    assert_eq!(p["pid"], pid);
    assert_eq!(p["program"], "softrnic");
    assert_eq!(p["interface"], "lo");
    let qps = p["qps"].as_array().expect("qps");
    assert_eq!(qps.len(), 1, "{json}");
    assert_eq!(
        (&qps[0]["type"], &qps[0]["state"]),
        (&"RC".into(), &"INIT".into())
    );
    assert!(
        qps[0]["peer_address"].is_null(),
        "not connected yet: {json}"
    );
    let qpn = qps[0]["qpn"].as_u64().expect("a QPN");
    let (first, last) = (p["qpn_first"].as_u64(), p["qpn_last"].as_u64());
    assert!(first <= Some(qpn) && Some(qpn) <= last, "{json}");

    let text = status(&["--addr", ADDR]);
    assert!(
        text.starts_with(&format!("{ADDR} (lo): 1 process\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("  pid {pid} softrnic  QPNs ")),
        "{text}"
    );
    assert!(
        text.contains(&format!("    QPN {qpn:#08x}  RC  INIT\n")),
        "{text}"
    );

    drop(server);
    assert_eq!(status(&["--json", "--addr", ADDR]).trim(), "[]");
    assert_eq!(
        status(&["--addr", ADDR]),
        "no process uses a softrnic device\n"
    );
}
