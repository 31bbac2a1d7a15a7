//! What each process does with a shared device, as `softrnic status` and `softrnic stat`
//! show it (like `rdma resource show qp` and rxe's `hw_counters` for a kernel device): the
//! processes using each address, their QPs with type, state and peer, and the device's and
//! each QP's counters ([`crate::counters`]).
//!
//! Every process using a shared device holds a QPN block's lease ([`super::block`]), a
//! listening Unix socket under a name the kernel lists in `/proc/net/unix`. So the devices
//! and their processes are found there, with no registry to keep; and a question is a
//! connection to the lease's socket, which the process's member thread
//! ([`super::member`]) answers with a report and closes. A report is text, one record per
//! line, fields separated by spaces:
//!
//! ```text
//! process <pid> <block> <runs the agent: 0|1> <interface> <program name>
//! qp <QPN> <type: ibv value> <state: ibv value> <peer address|-> <peer QPN|->
//! counters <name>=<value> ...
//! qp_counters <QPN> <name>=<value> ...
//! ```
//!
//! `counters` is the device's (in this process), `qp_counters` a QP's; a counter whose name
//! the reader does not know (a newer process's) is skipped, one it misses reads 0.

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::time::Duration;

use super::block::{lease_name, QpnBlock};
use crate::counters::{DeviceCounters, QpCounters};
use crate::qp_state::{QpState, QpType};

/// How long a question waits for an answer (a stopped or stuck process gives none).
const ANSWER_WAIT: Duration = Duration::from_secs(1);

/// The longest report read (some 40 bytes per QP, for a device's most QPs).
const REPORT_MAX: u64 = 1 << 20;

/// One QP of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpReport {
    /// Its number.
    pub qpn: u32,
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Its state.
    pub state: QpState,
    /// The connected QP's address and number (RC and UC, from RTR on).
    pub peer: Option<(IpAddr, u32)>,
    /// What it counted.
    pub counters: QpCounters,
}

/// One process using a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessReport {
    /// Its process ID.
    pub pid: u32,
    /// Its QPN block.
    pub block: QpnBlock,
    /// Whether the device's agent runs in it.
    pub runs_agent: bool,
    /// The network interface that has the device's address (`lo`, `eth0`).
    pub interface: String,
    /// The program's name (`/proc/<pid>/comm`).
    pub program: String,
    /// Its QPs, by number.
    pub qps: Vec<QpReport>,
    /// The device's counters in this process.
    pub counters: DeviceCounters,
}

impl ProcessReport {
    /// This process's report.
    pub fn of_this_process(
        block: QpnBlock,
        runs_agent: bool,
        interface: &str,
        counters: DeviceCounters,
        mut qps: Vec<QpReport>,
    ) -> ProcessReport {
        let program = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        qps.sort_by_key(|q| q.qpn);
        ProcessReport {
            pid: std::process::id(),
            block,
            runs_agent,
            interface: interface.to_string(),
            program: program.trim().to_string(),
            qps,
            counters,
        }
    }

    /// The report as sent (see the module comment). Names may not contain white space:
    /// each of their white-space characters becomes `_`.
    pub fn encode(&self) -> String {
        let word = |s: &str| -> String {
            let w: String = s
                .chars()
                .map(|c| if c.is_whitespace() { '_' } else { c })
                .collect();
            if w.is_empty() {
                "-".into()
            } else {
                w
            }
        };
        let mut out = format!(
            "process {} {} {} {} {}\n",
            self.pid,
            self.block.0,
            u8::from(self.runs_agent),
            word(&self.interface),
            word(&self.program)
        );
        for q in &self.qps {
            let (addr, qpn) = match q.peer {
                Some((a, n)) => (a.to_string(), n.to_string()),
                None => ("-".into(), "-".into()),
            };
            out += &format!(
                "qp {} {} {} {addr} {qpn}\n",
                q.qpn,
                q.qp_type.ibv(),
                q.state.ibv()
            );
        }
        out += "counters";
        for (name, value) in self.counters.values() {
            out += &format!(" {name}={value}");
        }
        out += "\n";
        for q in &self.qps {
            out += &format!("qp_counters {}", q.qpn);
            for (name, value) in q.counters.values() {
                out += &format!(" {name}={value}");
            }
            out += "\n";
        }
        out
    }

    /// Reads a report.
    ///
    /// # Errors
    /// `InvalidData`, saying which line is wrong.
    pub fn decode(text: &str) -> io::Result<ProcessReport> {
        let bad = |line: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a malformed status line: {line:?}"),
            )
        };
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("");
        let f: Vec<&str> = first.split(' ').collect();
        let mut report = match f[..] {
            ["process", pid, block, agent, interface, program] => ProcessReport {
                pid: pid.parse().map_err(|_| bad(first))?,
                block: QpnBlock(block.parse().map_err(|_| bad(first))?),
                runs_agent: agent == "1",
                interface: interface.to_string(),
                program: program.to_string(),
                qps: Vec::new(),
                counters: DeviceCounters::default(),
            },
            _ => return Err(bad(first)),
        };
        // Each `name=value` of `fields`, given to `set`.
        let counted = |line: &str, fields: &[&str], set: &mut dyn FnMut(&str, u64) -> bool| {
            for field in fields {
                let (name, value) = field.split_once('=').ok_or_else(|| bad(line))?;
                let _known = set(name, value.parse().map_err(|_| bad(line))?);
            }
            Ok::<(), io::Error>(())
        };
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            if let ["counters", fields @ ..] = &f[..] {
                let c = &mut report.counters;
                counted(line, fields, &mut |n, v| c.set(n, v))?;
                continue;
            }
            if let ["qp_counters", qpn, fields @ ..] = &f[..] {
                let qpn: u32 = qpn.parse().map_err(|_| bad(line))?;
                let q = report
                    .qps
                    .iter_mut()
                    .find(|q| q.qpn == qpn)
                    .ok_or_else(|| bad(line))?;
                counted(line, fields, &mut |n, v| q.counters.set(n, v))?;
                continue;
            }
            let ["qp", qpn, qp_type, state, addr, peer_qpn] = f[..] else {
                return Err(bad(line));
            };
            let number = |s: &str| s.parse::<u32>().map_err(|_| bad(line));
            let peer = match (addr, peer_qpn) {
                ("-", "-") => None,
                (a, n) => Some((a.parse().map_err(|_| bad(line))?, number(n)?)),
            };
            report.qps.push(QpReport {
                qpn: number(qpn)?,
                qp_type: QpType::from_ibv(number(qp_type)?).map_err(|_| bad(line))?,
                state: QpState::from_ibv(number(state)?).map_err(|_| bad(line))?,
                peer,
                counters: QpCounters::default(),
            });
        }
        Ok(report)
    }
}

/// Answers one question on `conn` with `report`.
///
/// # Errors
/// Writing to `conn` (the asker went away).
pub fn answer(mut conn: UnixStream, report: &ProcessReport) -> io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_write_timeout(Some(ANSWER_WAIT))?;
    conn.write_all(report.encode().as_bytes())
}

/// Asks the process leasing `block` of `addr` for its report.
///
/// # Errors
/// The process is gone (`ConnectionRefused`, `NotFound`), does not answer within a second
/// (`WouldBlock`/`TimedOut`), or answered something unreadable (`InvalidData`).
pub fn ask(addr: IpAddr, block: QpnBlock) -> io::Result<ProcessReport> {
    let name = SocketAddr::from_abstract_name(lease_name(addr, block))?;
    let conn = UnixStream::connect_addr(&name)?;
    conn.set_read_timeout(Some(ANSWER_WAIT))?;
    let mut text = String::new();
    conn.take(REPORT_MAX).read_to_string(&mut text)?;
    ProcessReport::decode(&text)
}

/// The addresses with a shared device in use now, and the blocks leased on each, in order;
/// from `/proc/net/unix`.
///
/// # Errors
/// Reading `/proc/net/unix`.
pub fn devices() -> io::Result<Vec<(IpAddr, Vec<QpnBlock>)>> {
    let table = std::fs::read_to_string("/proc/net/unix")?;
    Ok(devices_in(&table))
}

/// [`devices`] of a `/proc/net/unix` table.
fn devices_in(table: &str) -> Vec<(IpAddr, Vec<QpnBlock>)> {
    let mut found: Vec<(IpAddr, QpnBlock)> = table
        .lines()
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter_map(|name| {
            let rest = name.strip_prefix("@softrnic/")?;
            let (addr, block) = rest.split_once("/block/")?;
            Some((addr.parse().ok()?, QpnBlock(block.parse().ok()?)))
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    let mut devices: Vec<(IpAddr, Vec<QpnBlock>)> = Vec::new();
    for (addr, block) in found {
        match devices.last_mut() {
            Some((a, blocks)) if *a == addr => blocks.push(block),
            _ => devices.push((addr, vec![block])),
        }
    }
    devices
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn report() -> ProcessReport {
        ProcessReport {
            pid: 4242,
            block: QpnBlock(3),
            runs_agent: true,
            interface: "lo".into(),
            program: "ib write bw".into(),
            qps: vec![
                QpReport {
                    qpn: 0xc011,
                    qp_type: QpType::Rc,
                    state: QpState::Rts,
                    peer: Some(("::ffff:127.0.0.2".parse().unwrap(), 0x4005)),
                    counters: QpCounters {
                        sent_pkts: 12,
                        rcvd_seq_err: 1,
                        ..QpCounters::default()
                    },
                },
                QpReport {
                    qpn: 0xc012,
                    qp_type: QpType::Ud,
                    state: QpState::Init,
                    peer: None,
                    counters: QpCounters::default(),
                },
            ],
            counters: DeviceCounters {
                sent_pkts: 12,
                icrc_errors: 3,
                ..DeviceCounters::default()
            },
        }
    }

    #[test]
    fn a_report_reads_back_as_sent() {
        let r = report();
        let text = r.encode();
        assert!(text.starts_with("process 4242 3 1 lo ib_write_bw\nqp 49169 2 3 "));
        let back = ProcessReport::decode(&text).unwrap();
        assert_eq!(back.program, "ib_write_bw");
        assert_eq!(back.qps, r.qps);
        assert_eq!(back.counters, r.counters);
        assert!(
            text.contains("\ncounters sent_pkts=12 rcvd_pkts=0 "),
            "{text}"
        );
        assert!(text.contains("\nqp_counters 49169 sent_pkts=12 "), "{text}");
        assert_eq!(
            (back.pid, back.block, back.runs_agent),
            (4242, QpnBlock(3), true)
        );
    }

    #[test]
    fn counters_of_unknown_names_are_skipped_and_missing_ones_read_0() {
        let text = "process 1 3 1 lo p\nqp 17 2 3 - -\ncounters sent_pkts=4 future=9\n\
            qp_counters 17 rcvd_pkts=2 future=1\n";
        let r = ProcessReport::decode(text).unwrap();
        assert_eq!((r.counters.sent_pkts, r.counters.rcvd_pkts), (4, 0));
        assert_eq!(r.qps[0].counters.rcvd_pkts, 2);
    }

    #[test]
    fn a_malformed_report_is_an_error_naming_the_line() {
        for text in [
            "",
            "process x 3 1 d p",
            "process 1 3 1 d p\nqp 1 2 3 -",
            "process 1 3 1 d p\nqp 1 7 3 - -",
            "process 1 3 1 d p\nqp 1 2 9 - -",
            "process 1 3 1 d p\nqp 1 2 3 nowhere 5",
            "process 1 3 1 d p\ncounters sent_pkts",
            "process 1 3 1 d p\ncounters sent_pkts=x",
            "process 1 3 1 d p\nqp_counters 5 sent_pkts=1",
        ] {
            let e = ProcessReport::decode(text).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{text:?}");
            assert!(e.to_string().contains("malformed status line"), "{e}");
        }
    }

    #[test]
    fn a_process_that_does_not_answer_is_an_error_not_a_hang() {
        use super::super::block::Lease;
        let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 3));
        let lease = Lease::take(addr).unwrap(); // listening, never accepting
        let e = ask(addr, lease.block()).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{e}"
        );
        drop(lease);
        let e = ask(addr, QpnBlock(5)).unwrap_err();
        assert_eq!(
            e.kind(),
            io::ErrorKind::ConnectionRefused,
            "nobody leases it: {e}"
        );
    }

    #[test]
    fn devices_are_found_by_their_leases() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000: 00000002 00000000 00010000 0001 01 1 @softrnic/127.0.0.2/block/2\n\
            0000: 00000002 00000000 00010000 0001 01 2 @softrnic/127.0.0.1/block/7\n\
            0000: 00000002 00000000 00010000 0001 01 3 @softrnic/127.0.0.1/agent\n\
            0000: 00000002 00000000 00010000 0001 01 4 @softrnic/127.0.0.1/block/1\n\
            0000: 00000002 00000000 00010000 0001 01 5 /run/other.sock\n\
            0000: 00000002 00000000 00010000 0001 01 6 @softrnic/::1/block/1\n";
        let v4 = |d| IpAddr::V4(Ipv4Addr::new(127, 0, 0, d));
        assert_eq!(
            devices_in(table),
            [
                (v4(1), vec![QpnBlock(1), QpnBlock(7)]),
                (v4(2), vec![QpnBlock(2)]),
                ("::1".parse().unwrap(), vec![QpnBlock(1)]),
            ]
        );
    }
}
