//! `softrnic status`: each shared device of this host, the processes using it, and their
//! QPs (number, type, state, peer), as `rdma resource show qp` shows a kernel device's.
//! Every process answers for itself (`softrnic_provider::host::status`); one that does not
//! answer (stopped, stuck, exiting) is listed with the reason.

use std::io;
use std::net::IpAddr;

use serde_json::{json, Value};
use softrnic_provider::host::block::QpnBlock;
use softrnic_provider::host::status::{self, ProcessReport};

/// One device: its address, and each process leasing a block of it with its report.
pub struct Device {
    /// The device's address.
    pub addr: IpAddr,
    /// Per leased block: the process's report, or why there is none.
    pub processes: Vec<(QpnBlock, io::Result<ProcessReport>)>,
}

/// The devices in use now, all of them or the one of `only`.
///
/// # Errors
/// Reading `/proc/net/unix`.
pub fn collect(only: Option<IpAddr>) -> io::Result<Vec<Device>> {
    Ok(status::devices()?
        .into_iter()
        .filter(|(addr, _)| only.is_none_or(|o| o == *addr))
        .map(|(addr, blocks)| Device {
            addr,
            processes: blocks
                .into_iter()
                .map(|b| (b, status::ask(addr, b)))
                .collect(),
        })
        .collect())
}

/// The devices as text: a line per device, per process, and per QP.
pub fn text(devices: &[Device]) -> String {
    if devices.is_empty() {
        return "no process uses a softrnic device\n".into();
    }
    let mut out = String::new();
    for d in devices {
        let n = d.processes.len();
        let interface = d
            .processes
            .iter()
            .find_map(|(_, r)| r.as_ref().ok().map(|r| r.interface.clone()))
            .unwrap_or_else(|| "?".into());
        out += &format!(
            "{} ({interface}): {n} process{}\n",
            d.addr,
            if n == 1 { "" } else { "es" }
        );
        for (block, report) in &d.processes {
            let (first, last) = qpns(*block);
            match report {
                Ok(r) => {
                    out += &format!(
                        "  pid {} {}  QPNs {first:#08x}-{last:#08x}{}\n",
                        r.pid,
                        r.program,
                        if r.runs_agent {
                            "  (runs the agent)"
                        } else {
                            ""
                        }
                    );
                    for q in &r.qps {
                        let peer = q
                            .peer
                            .map_or(String::new(), |(a, n)| format!("  peer {a} QPN {n:#08x}"));
                        out += &format!(
                            "    QPN {:#08x}  {}  {}{peer}\n",
                            q.qpn,
                            q.qp_type.name(),
                            q.state.name()
                        );
                    }
                }
                Err(e) => {
                    out += &format!("  QPNs {first:#08x}-{last:#08x}: no answer ({e})\n");
                }
            }
        }
    }
    out
}

/// The devices as one JSON value: an array of devices.
pub fn json(devices: &[Device]) -> Value {
    Value::Array(
        devices
            .iter()
            .map(|d| {
                let processes: Vec<Value> = d
                    .processes
                    .iter()
                    .map(|(block, report)| {
                        let (first, last) = qpns(*block);
                        match report {
                            Ok(r) => json!({
                                "pid": r.pid,
                                "program": r.program,
                                "interface": r.interface,
                                "qpn_first": first,
                                "qpn_last": last,
                                "runs_agent": r.runs_agent,
                                "qps": r.qps.iter().map(|q| json!({
                                    "qpn": q.qpn,
                                    "type": q.qp_type.name(),
                                    "state": q.state.name(),
                                    "peer_address": q.peer.map(|(a, _)| a.to_string()),
                                    "peer_qpn": q.peer.map(|(_, n)| n),
                                })).collect::<Vec<_>>(),
                            }),
                            Err(e) => json!({
                                "qpn_first": first,
                                "qpn_last": last,
                                "error": e.to_string(),
                            }),
                        }
                    })
                    .collect();
                json!({ "address": d.addr.to_string(), "processes": processes })
            })
            .collect(),
    )
}

/// The QPNs of `block`.
fn qpns(block: QpnBlock) -> (u32, u32) {
    (block.first(), block.last())
}
