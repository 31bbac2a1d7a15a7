//! The interop matrix: every case (an rdma-core or perftest program pair, or rping over
//! rdma_cm) run between softrnic and kernel rxe, with either side as the client, over IPv4
//! and IPv6, at path MTU 1024 and 4096.
//!
//! A cell passes when both programs exit with status 0 and the capture of the link shows the
//! case's operation crossing both ways' worth of packets, every ICRC right (IBTA annex A17.3.3),
//! every packet in the cell's IP family, and, where messages span packets, first and middle
//! packets of exactly the path MTU (IBTA 9.7.2.1).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::capture::{Capture, Wire};
use super::cases::{Case, Listen};
use super::console::Console;
use super::net::{self, Family};
use super::vm;

/// Which side connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// softrnic runs the client, kernel rxe the server.
    Softrnic,
    /// kernel rxe runs the client, softrnic the server.
    Rxe,
}

/// Where a cell stands in the matrix.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// The program pair.
    pub case: &'static Case,
    /// Who connects.
    pub client: Client,
    /// IPv4 or IPv6.
    pub family: Family,
    /// The path MTU: 1024 or 4096.
    pub mtu: u32,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = match self.client {
            Client::Softrnic => "softrnic -> rxe",
            Client::Rxe => "rxe -> softrnic",
        };
        let family = match self.family {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        };
        write!(f, "{:<16} {dir} {family} MTU {}", self.case.name, self.mtu)
    }
}

/// The link MTU that gives rxe (and softrnic: `active_mtu_for_netdev_mtu`) path MTU `mtu`.
pub fn link_mtu(mtu: u32) -> u32 {
    if mtu >= 4096 {
        9000
    } else {
        1500
    }
}

/// What the host side needs: the drop-in libraries' folder, the programs built for the
/// matrix ([`super::guest::build_programs`]), and a folder for pcaps and logs.
pub struct Host {
    /// `LD_LIBRARY_PATH` for programs on softrnic.
    pub lib_dir: PathBuf,
    /// The folder of `verbs_op`, ahead of the system's on softrnic's side's `PATH`.
    pub programs: PathBuf,
    /// Where each cell's pcap and logs go.
    pub out_dir: PathBuf,
}

/// A cell's outcome.
#[derive(Debug)]
pub struct Outcome {
    /// Empty if it passed; else why not.
    pub failures: Vec<String>,
    /// The capture's summary.
    pub wire: Wire,
    /// The pcap.
    pub pcap: PathBuf,
    /// How long it took.
    pub took: Duration,
}

/// Replaces the template's placeholders.
fn fill(
    template: &str,
    cell: &Cell,
    gid: u32,
    port: u16,
    server_is_host: bool,
    me: &str,
) -> String {
    let (server, server4) = if server_is_host {
        (cell.family.host(), net::HOST_V4)
    } else {
        (cell.family.guest(), net::GUEST_V4)
    };
    template
        .replace("{gid}", &gid.to_string())
        .replace("{mtu}", &cell.mtu.to_string())
        .replace("{port}", &port.to_string())
        .replace("{me}", me)
        .replace("{server4}", &server4.to_string())
        .replace("{server}", &server.to_string())
}

/// A program on softrnic, inside the namespace, bound to the cell's family's host address.
fn softrnic_program(host: &Host, cell: &Cell, command: &str, log: &Path) -> io::Result<Child> {
    let log = std::fs::File::create(log)?;
    Command::new("ip")
        .args(["netns", "exec", net::netns(), "env"])
        .arg(format!("LD_LIBRARY_PATH={}", host.lib_dir.display()))
        .arg(format!("SOFTRNIC_ADDR={}", cell.family.host()))
        .arg(format!(
            "PATH={}:{}",
            host.programs.display(),
            std::env::var("PATH").unwrap_or_default()
        ))
        .args(["timeout", "120"])
        .args(command.split_whitespace())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
}

/// Waits up to `timeout` for `child`; kills it after that.
fn wait(child: &mut Child, timeout: Duration) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the process `pid` (in the namespace) listens on TCP `port`, IPv4 or IPv6.
fn listens(pid: u32, port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["tcp", "tcp6"].iter().any(|t| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).is_ok_and(|table| {
            // Column 2 is local address:port, column 4 the state; 0A is LISTEN.
            table.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&hex) && cols[3] == "0A"
            })
        })
    })
}

/// The programs a cell may leave behind in the guest, as a `pkill` pattern (process names are
/// cut at 15 characters: `ibv_srq_pingpon`).
const GUEST_PROGRAMS: &str = "^(ibv_.._pingpo|ibv_srq_pingpo|ib_.*_bw|rping|udaddy|verbs_op)";

/// Runs one cell. `guest_gid` is the guest's GID index of the cell's family (softrnic's is
/// always 1, its address).
///
/// # Errors
/// When the harness itself fails (the console, a capture, a process that cannot start); a
/// failing cell is an `Outcome` with failures.
pub fn run(
    cell: &Cell,
    console: &mut Console,
    host: &Host,
    guest_gid: u32,
    port: u16,
    tag: &str,
) -> io::Result<Outcome> {
    let start = Instant::now();
    let pcap = host.out_dir.join(format!("{tag}.pcap"));
    let host_log = host.out_dir.join(format!("{tag}.softrnic.log"));
    let mut failures = Vec::new();
    console.run(
        &format!("pkill -9 '{GUEST_PROGRAMS}'; true"),
        Duration::from_secs(20),
    )?;
    let capture = Capture::start(&pcap)?;
    let host_me = cell.family.host().to_string();
    let guest_me = cell.family.guest().to_string();
    match cell.client {
        Client::Softrnic => {
            let server = fill(cell.case.server, cell, guest_gid, port, false, &guest_me);
            let client = fill(cell.case.client, cell, 1, port, false, &host_me);
            console.run(
                &format!("(timeout 120 {server} > /tmp/server.log 2>&1; echo \"server rc=$?\" >> /tmp/server.log) &"),
                Duration::from_secs(20),
            )?;
            let ready = match cell.case.listen {
                Listen::Tcp => format!("ss -ltn | grep -q ':{port} '"),
                Listen::Cm(p) => format!(
                    "rdma resource show cm_id | grep -q -E 'state LISTEN .*src-addr [^ ]*:{} '",
                    fill(p, cell, guest_gid, port, false, &guest_me)
                ),
            };
            let waited = console.run(
                &format!("for i in $(seq 300); do {ready} && break; sleep 0.1; done; {ready}"),
                Duration::from_secs(60),
            )?;
            if waited.status != 0 {
                failures.push("rxe's server did not listen within 30 s".into());
            }
            let mut program = softrnic_program(host, cell, &client, &host_log)?;
            match wait(&mut program, Duration::from_secs(150))? {
                Some(s) if s.success() => {}
                Some(s) => failures.push(format!("softrnic's client ended with {s}")),
                None => failures.push("softrnic's client did not end".into()),
            }
            let mut server_log = String::new();
            for _ in 0..60 {
                server_log = console
                    .run("cat /tmp/server.log", Duration::from_secs(20))?
                    .text;
                if server_log.contains("server rc=") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            if !server_log.contains("server rc=0") {
                failures.push(format!(
                    "rxe's server did not end well: {}",
                    last_lines(&server_log)
                ));
            }
            std::fs::write(host.out_dir.join(format!("{tag}.rxe.log")), &server_log)?;
        }
        Client::Rxe => {
            let server = fill(cell.case.server, cell, 1, port, true, &host_me);
            let client = fill(cell.case.client, cell, guest_gid, port, true, &guest_me);
            let mut program = softrnic_program(host, cell, &server, &host_log)?;
            if let Listen::Tcp = cell.case.listen {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !listens(program.id(), port) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
            } else {
                std::thread::sleep(Duration::from_secs(2));
            }
            let mut attempts = 0;
            let out = loop {
                attempts += 1;
                let out = console.run(
                    &format!("timeout 120 {client} 2>&1"),
                    Duration::from_secs(150),
                )?;
                let unheard = out.text.contains("REJECTED") && out.text.contains("error 8");
                if out.status == 0 || !unheard || attempts == 3 {
                    break out;
                }
                std::thread::sleep(Duration::from_secs(2));
            };
            if out.status != 0 {
                failures.push(format!(
                    "rxe's client ended with status {}: {}",
                    out.status,
                    last_lines(&out.text)
                ));
            }
            std::fs::write(host.out_dir.join(format!("{tag}.rxe.log")), &out.text)?;
            match wait(&mut program, Duration::from_secs(30))? {
                Some(s) if s.success() => {}
                Some(s) => failures.push(format!("softrnic's server ended with {s}")),
                None => failures.push("softrnic's server did not end".into()),
            }
        }
    }
    if !failures.is_empty() {
        let log = std::fs::read_to_string(&host_log).unwrap_or_default();
        failures.push(format!("softrnic's side printed: {}", last_lines(&log)));
    }
    let wire = capture.finish()?;
    check_wire(cell, &wire, &mut failures);
    Ok(Outcome {
        failures,
        wire,
        pcap,
        took: start.elapsed(),
    })
}

/// The capture's verdict on `cell`, added to `failures`.
fn check_wire(cell: &Cell, wire: &Wire, failures: &mut Vec<String>) {
    if wire.bad_icrc > 0 {
        failures.push(format!(
            "{} of {} packets had a bad ICRC",
            wire.bad_icrc, wire.packets
        ));
    }
    if wire.unparsed > 0 {
        failures.push(format!(
            "{} frames to port 4791 did not parse: {}",
            wire.unparsed,
            wire.unparsed_why.as_deref().unwrap_or("")
        ));
    }
    for side in [cell.family.host(), cell.family.guest()] {
        if wire.by_source.get(&side).copied().unwrap_or(0) == 0 {
            failures.push(format!("no RoCE packet from {side}"));
        }
    }
    let expect_v6 = if cell.family == Family::V6 {
        wire.packets
    } else {
        0
    };
    if wire.ipv6 != expect_v6 {
        failures.push(format!(
            "{} of {} packets were IPv6 in an {:?} cell",
            wire.ipv6, wire.packets, cell.family
        ));
    }
    for &(transport, operation) in cell.case.expect {
        if wire.count(transport, operation) == 0 {
            failures.push(format!("no {transport:?} {operation:?} packet crossed"));
        }
    }
    if cell.case.full_mtu && wire.max_payload != cell.mtu as usize {
        failures.push(format!(
            "the largest payload was {} bytes, not the path MTU {}",
            wire.max_payload, cell.mtu
        ));
    }
    if !cell.case.full_mtu && wire.max_payload > cell.mtu as usize {
        failures.push(format!(
            "a payload of {} bytes exceeds the path MTU",
            wire.max_payload
        ));
    }
}

/// The last lines of a program's output, on one line.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join(" | ")
}

/// Sets the link and the guest's `eth0` to the MTU that gives path MTU `mtu`, and waits for
/// rxe to report it as its active MTU.
///
/// # Errors
/// When the link cannot be changed or rxe does not follow within 30 s.
pub fn set_path_mtu(console: &mut Console, mtu: u32) -> io::Result<()> {
    let link = link_mtu(mtu);
    net::set_mtu(link)?;
    let out = console.run(
        &format!(
            "ip link set eth0 mtu {link}; for i in $(seq 300); do ibv_devinfo -d rxe0 | grep -q 'active_mtu:.*{mtu} ' && break; sleep 0.1; done; ibv_devinfo -d rxe0 | grep active_mtu"
        ),
        Duration::from_secs(60),
    )?;
    if out.text.contains(&format!("{mtu} (")) {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "rxe's active MTU did not become {mtu}: {}",
            out.text
        )))
    }
}

/// The guest's GID indices for IPv4 and IPv6.
///
/// # Errors
/// As [`vm::gid_index`].
pub fn guest_gids(console: &mut Console) -> io::Result<(u32, u32)> {
    Ok((
        vm::gid_index(console, Family::V4)?,
        vm::gid_index(console, Family::V6)?,
    ))
}
