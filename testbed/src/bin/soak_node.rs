//! One end of the soak through a lossy link (`testbed/src/soak/`, run by
//! `testbed/tests/soak.rs` in the namespaces of `testbed/relay_link.sh`).
//!
//! usage: soak-node server ADDR
//!        soak-node client ADDR SERVER_ADDR SECONDS
//!
//! `SOFTRNIC_LOG` (a `tracing` filter) prints the engine's events to stderr.

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Instant;

use softrnic_testbed::soak::{client, server};

fn main() -> ExitCode {
    // `SOFTRNIC_LOG=softrnic::rc=debug` shows every timeout, NAK and resend of a failed run.
    softrnic_uapi::log::init_from_env();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ip = |i: usize| args.get(i).and_then(|a| a.parse::<IpAddr>().ok());
    let t0 = Instant::now();
    let outcome = match (args.first().map(String::as_str), ip(1), ip(2)) {
        (Some("server"), Some(addr), _) => server::serve(addr).map(|r| {
            format!(
                "received {} messages, {} bytes, all as sent",
                r.messages, r.bytes
            )
        }),
        (Some("client"), Some(addr), Some(server)) => {
            let secs = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(60);
            client::drive(addr, server, secs).map(|d| {
                format!(
                    "{} steps, {} work requests (SEND {}, SEND_WITH_IMM {}, WRITE {}, \
                     WRITE_WITH_IMM {}, READ {}, CMP_SWAP {}, FETCH_ADD {}), {} bytes, \
                     every one completed once and checked",
                    d.steps,
                    d.wrs,
                    d.by_opcode[2],
                    d.by_opcode[3],
                    d.by_opcode[0],
                    d.by_opcode[1],
                    d.by_opcode[4],
                    d.by_opcode[5],
                    d.by_opcode[6],
                    d.bytes
                )
            })
        }
        _ => Err("usage: soak-node server ADDR | soak-node client ADDR SERVER_ADDR SECONDS".into()),
    };
    let side = args.first().map_or("?", String::as_str);
    match outcome {
        Ok(report) => {
            eprintln!("soak-node {side}: {report} in {:.1?}", t0.elapsed());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("soak-node {side}: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
