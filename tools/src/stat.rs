//! `softrnic stat`: the counters of each shared device of this host, per process using it and
//! per QP, as rxe's `hw_counters` show a kernel device's (the counters and their rxe names:
//! `softrnic_provider::counters`). Every process answers for itself, as for
//! `softrnic status` ([`crate::status`]); a device's counters are those of one process, so
//! each process is shown on its own. As text, JSON, or the Prometheus text exposition format
//! (for a node exporter's text-file collector or a scrape through a small wrapper).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use serde_json::{json, Map, Value};
use softrnic_provider::counters::{DeviceCounters, QpCounters};

use crate::status::Device;

/// The counters of one process on one device, keyed for comparison with an earlier reading.
pub type Readings = HashMap<(IpAddr, u32), DeviceCounters>;

/// The counters of `devices`, by device and process ID (for the rates of `--watch`).
pub fn readings(devices: &[Device]) -> Readings {
    devices
        .iter()
        .flat_map(|d| {
            d.processes
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .map(|r| ((d.addr, r.pid), r.counters))
        })
        .collect()
}

/// The devices' counters as text: a block per device and process with every device counter,
/// then a line per QP with the counters that are not 0. With `before` (an earlier reading
/// `secs` seconds ago), each device counter that changed shows its rate per second.
pub fn text(devices: &[Device], before: Option<(&Readings, f64)>) -> String {
    if devices.is_empty() {
        return "no process uses a softrnic device\n".into();
    }
    let mut out = String::new();
    for d in devices {
        for (block, report) in &d.processes {
            let r = match report {
                Ok(r) => r,
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "{} QPNs {:#08x}-{:#08x}: no answer ({e})",
                        d.addr,
                        block.first(),
                        block.last()
                    );
                    continue;
                }
            };
            let _ = writeln!(
                out,
                "{} ({}) pid {} {}",
                d.addr, r.interface, r.pid, r.program
            );
            let earlier = before.and_then(|(b, secs)| Some((b.get(&(d.addr, r.pid))?, secs)));
            for (name, value) in r.counters.values() {
                let _ = write!(out, "  {name:<24}{value:>14}");
                if let Some((earlier, secs)) = earlier {
                    let was = earlier.values().find(|(n, _)| *n == name).map(|(_, v)| v);
                    let delta = value.wrapping_sub(was.unwrap_or(0));
                    if delta != 0 {
                        let _ = write!(out, "  {:>12.1}/s", delta as f64 / secs);
                    }
                }
                out.push('\n');
            }
            for q in &r.qps {
                let _ = write!(out, "  QPN {:#08x}", q.qpn);
                for (name, value) in q.counters.values().filter(|(_, v)| *v != 0) {
                    let _ = write!(out, " {name}={value}");
                }
                out.push('\n');
            }
        }
    }
    out
}

/// `c`'s counters as a JSON object, name to value.
fn object(values: impl Iterator<Item = (&'static str, u64)>) -> Value {
    Value::Object(
        values
            .map(|(n, v)| (n.to_string(), json!(v)))
            .collect::<Map<_, _>>(),
    )
}

/// The devices' counters as one JSON value: an array of devices, each with its processes,
/// each with its device counters and its QPs' counters.
pub fn json(devices: &[Device]) -> Value {
    Value::Array(
        devices
            .iter()
            .map(|d| {
                let processes: Vec<Value> = d
                    .processes
                    .iter()
                    .map(|(block, report)| match report {
                        Ok(r) => json!({
                            "pid": r.pid,
                            "program": r.program,
                            "interface": r.interface,
                            "counters": object(r.counters.values()),
                            "qps": r.qps.iter().map(|q| json!({
                                "qpn": q.qpn,
                                "type": q.qp_type.name(),
                                "state": q.state.name(),
                                "counters": object(q.counters.values()),
                            })).collect::<Vec<_>>(),
                        }),
                        Err(e) => json!({
                            "qpn_first": block.first(),
                            "qpn_last": block.last(),
                            "error": e.to_string(),
                        }),
                    })
                    .collect();
                json!({ "address": d.addr.to_string(), "processes": processes })
            })
            .collect(),
    )
}

/// The devices' counters in the Prometheus text exposition format: per device counter
/// `softrnic_<name>{device="<address>",pid="<pid>"}`, per QP counter
/// `softrnic_qp_<name>{device=..,pid=..,qpn="<QPN>"}`, each metric's samples together under
/// its `# TYPE` line. A process that did not answer is a comment.
pub fn prometheus(devices: &[Device]) -> String {
    let mut out = String::new();
    let answered: Vec<(IpAddr, &softrnic_provider::host::status::ProcessReport)> = devices
        .iter()
        .flat_map(|d| {
            d.processes
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .map(|r| (d.addr, r))
        })
        .collect();
    for d in devices {
        for (block, report) in &d.processes {
            if let Err(e) = report {
                let _ = writeln!(
                    out,
                    "# softrnic: device {} QPNs {:#08x}-{:#08x}: no answer ({e})",
                    d.addr,
                    block.first(),
                    block.last()
                );
            }
        }
    }
    for (i, name) in DeviceCounters::NAMES.iter().enumerate() {
        let _ = writeln!(out, "# TYPE softrnic_{name} counter");
        for (addr, r) in &answered {
            let value = r.counters.values().nth(i).map_or(0, |(_, v)| v);
            let _ = writeln!(
                out,
                "softrnic_{name}{{device=\"{addr}\",pid=\"{}\"}} {value}",
                r.pid
            );
        }
    }
    for (i, name) in QpCounters::NAMES.iter().enumerate() {
        let _ = writeln!(out, "# TYPE softrnic_qp_{name} counter");
        for (addr, r) in &answered {
            for q in &r.qps {
                let value = q.counters.values().nth(i).map_or(0, |(_, v)| v);
                let _ = writeln!(
                    out,
                    "softrnic_qp_{name}{{device=\"{addr}\",pid=\"{}\",qpn=\"{}\"}} {value}",
                    r.pid, q.qpn
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use softrnic_provider::host::block::QpnBlock;
    use softrnic_provider::host::status::{ProcessReport, QpReport};
    use softrnic_provider::qp_state::{QpState, QpType};

    fn devices() -> Vec<Device> {
        let report = ProcessReport {
            pid: 77,
            block: QpnBlock(1),
            runs_agent: true,
            interface: "lo".into(),
            program: "app".into(),
            qps: vec![QpReport {
                qpn: 0x11,
                qp_type: QpType::Rc,
                state: QpState::Rts,
                peer: None,
                counters: QpCounters {
                    sent_pkts: 5,
                    rcvd_rnr_err: 1,
                    ..QpCounters::default()
                },
            }],
            counters: DeviceCounters {
                sent_pkts: 5,
                rcvd_pkts: 4,
                ..DeviceCounters::default()
            },
        };
        vec![Device {
            addr: "127.0.0.1".parse().unwrap(),
            processes: vec![
                (QpnBlock(1), Ok(report)),
                (
                    QpnBlock(2),
                    Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
                ),
            ],
        }]
    }

    #[test]
    fn prometheus_has_a_sample_per_process_and_qp_under_each_type_line() {
        let p = prometheus(&devices());
        assert!(p.contains(
            "# TYPE softrnic_sent_pkts counter\nsoftrnic_sent_pkts{device=\"127.0.0.1\",pid=\"77\"} 5\n"
        ), "{p}");
        assert!(p.contains("softrnic_rcvd_pkts{device=\"127.0.0.1\",pid=\"77\"} 4\n"));
        assert!(
            p.contains("softrnic_qp_rcvd_rnr_err{device=\"127.0.0.1\",pid=\"77\",qpn=\"17\"} 1\n")
        );
        assert!(p.starts_with("# softrnic: device 127.0.0.1 QPNs "), "{p}");
        let samples = p.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(
            samples,
            DeviceCounters::NAMES.len() + QpCounters::NAMES.len()
        );
    }

    #[test]
    fn text_shows_every_device_counter_the_qps_nonzero_ones_and_rates() {
        let d = devices();
        let mut before = readings(&d);
        before
            .get_mut(&("127.0.0.1".parse().unwrap(), 77))
            .unwrap()
            .sent_pkts = 1;
        let t = text(&d, Some((&before, 2.0)));
        assert!(t.starts_with("127.0.0.1 (lo) pid 77 app\n"), "{t}");
        let line = |name: &str| -> Vec<String> {
            let l = t
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name));
            l.unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        assert_eq!(line("sent_pkts"), ["sent_pkts", "5", "2.0/s"], "{t}");
        assert_eq!(line("rcvd_pkts"), ["rcvd_pkts", "4"], "unchanged: {t}");
        assert_eq!(
            line("retry_exceeded_err"),
            ["retry_exceeded_err", "0"],
            "{t}"
        );
        assert!(
            t.contains("  QPN 0x000011 sent_pkts=5 rcvd_rnr_err=1\n"),
            "{t}"
        );
        assert!(t.contains("no answer"), "{t}");
    }

    #[test]
    fn json_has_the_counters_by_name() {
        let j = json(&devices());
        let p = &j[0]["processes"][0];
        assert_eq!(p["counters"]["sent_pkts"], 5);
        assert_eq!(p["qps"][0]["counters"]["rcvd_rnr_err"], 1);
        assert!(j[0]["processes"][1]["error"].is_string());
    }
}
