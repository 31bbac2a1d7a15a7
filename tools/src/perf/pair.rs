//! One process of a WRITE pair for `softrnic perf --host` (the hidden `softrnic perf-pair`
//! command): a device, a registered buffer and an RC QP, connected to the other process of
//! its pair through the parent, which carries their connection lines (`pingpong::exchange`'s
//! format) over the two processes' standard input and output.
//!
//! Each process prints its line, reads its peer's, connects and prints `ready`. The writer
//! then waits for `go`, streams RDMA WRITEs of 64 KiB for the given time and prints
//! `<bytes> <nanoseconds>`; the target waits for the end of its input. The parent sends `go`
//! to every writer at once, so that their windows overlap.

use std::io::{self, BufRead, Write};
use std::net::IpAddr;
use std::time::Duration;

use softrnic_uapi::{ConnectAttr, Progress, RemoteAddr};

use crate::pingpong::exchange::Dest;
use crate::rig::{err, side};

/// The two processes of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Streams the WRITEs (its thread drives its device, polling).
    Writer,
    /// Is written to (a progress thread answers).
    Target,
}

/// The buffer each side registers.
const MEM: usize = 2 << 20;

/// Runs `role` on the device of `bind`, talking to the parent on `input` and `out`.
///
/// # Errors
/// The device, the connection, a failed WRITE, or a malformed line from the parent.
pub fn run(
    role: Role,
    bind: IpAddr,
    secs: Duration,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<()> {
    let progress = match role {
        Role::Writer => Progress::Polling,
        Role::Target => Progress::Thread,
    };
    let me = side(bind, MEM, progress, u64::from(std::process::id()))?;
    let psn = std::process::id() & 0x00ff_ffff;
    let mine = Dest {
        lid: 0,
        qpn: me.qp.qp_num(),
        psn,
        gid: bind.into(),
        rkey: me.mr.rkey(),
        addr: me.mr.addr(),
    };
    writeln!(out, "{mine}")?;
    out.flush()?;
    let mut line = String::new();
    input.read_line(&mut line)?;
    let peer: Dest = line
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}")))?;
    let mtu = me.ctx.query_port().active_mtu;
    me.qp
        .connect(&ConnectAttr {
            dest: peer.gid.to_ip(),
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            sq_psn: psn,
            path_mtu: mtu,
            ..ConnectAttr::default()
        })
        .map_err(err)?;
    writeln!(out, "ready")?;
    out.flush()?;
    line.clear();
    input.read_line(&mut line)?;
    if role == Role::Writer {
        if line.trim() != "go" {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("expected go, got {line:?}"),
            ));
        }
        let remote = RemoteAddr {
            addr: peer.addr,
            rkey: peer.rkey,
        };
        let (bytes, took) = crate::demo::write_stream(&me, remote, crate::demo::WRITE_MSG, secs)?;
        writeln!(out, "{bytes} {}", took.as_nanos())?;
        out.flush()?;
    }
    Ok(())
}
