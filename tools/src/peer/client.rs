//! The test's side of the peer process: spawns `softrnic scenario-peer`, connects to its
//! command port, and offers the [`Node`](super::node::Node) verbs as calls that travel as
//! [`Command`] lines. The process is killed when the handle drops.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use softrnic_provider::transport::faults::{Direction, Rule};
use softrnic_uapi::{Access, ConnectAttr, QpState, WcOpcode, WcStatus};
use softrnic_wire::Opcode;

use super::node::MrInfo;
use super::protocol::{from_hex, Command};

/// A completion as the peer reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status`.
    pub status: WcStatus,
    /// `opcode`.
    pub opcode: WcOpcode,
    /// `byte_len`.
    pub byte_len: u32,
    /// `imm_data` (or the invalidated R_Key).
    pub imm: u32,
}

const STATUSES: [WcStatus; 15] = [
    WcStatus::Success,
    WcStatus::LocLenErr,
    WcStatus::LocQpOpErr,
    WcStatus::LocProtErr,
    WcStatus::WrFlushErr,
    WcStatus::MwBindErr,
    WcStatus::BadRespErr,
    WcStatus::LocAccessErr,
    WcStatus::RemInvReqErr,
    WcStatus::RemAccessErr,
    WcStatus::RemOpErr,
    WcStatus::RetryExcErr,
    WcStatus::RnrRetryExcErr,
    WcStatus::FatalErr,
    WcStatus::GeneralErr,
];

const OPCODES: [WcOpcode; 11] = [
    WcOpcode::Send,
    WcOpcode::RdmaWrite,
    WcOpcode::RdmaRead,
    WcOpcode::CompSwap,
    WcOpcode::FetchAdd,
    WcOpcode::BindMw,
    WcOpcode::LocalInv,
    WcOpcode::Flush,
    WcOpcode::AtomicWrite,
    WcOpcode::Recv,
    WcOpcode::RecvRdmaWithImm,
];

fn bad(why: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

fn parse_wc(s: &str) -> io::Result<Wc> {
    let f: Vec<&str> = s.split(':').collect();
    let [id, st, op, len, imm] = f[..] else {
        return Err(bad(format!("bad completion {s:?}")));
    };
    let n = |x: &str| {
        x.parse::<u64>()
            .map_err(|_| bad(format!("bad completion {s:?}")))
    };
    let st = n(st)? as u32;
    let op = n(op)? as u32;
    Ok(Wc {
        wr_id: n(id)?,
        status: STATUSES
            .into_iter()
            .find(|v| *v as u32 == st)
            .ok_or_else(|| bad(format!("unknown status {st}")))?,
        opcode: OPCODES
            .into_iter()
            .find(|v| *v as u32 == op)
            .ok_or_else(|| bad(format!("unknown opcode {op}")))?,
        byte_len: n(len)? as u32,
        imm: n(imm)? as u32,
    })
}

fn parse_num(s: &str) -> io::Result<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| bad(format!("not a number: {s:?}")))
}

/// A running peer process.
pub struct Peer {
    child: Child,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    addr: IpAddr,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.writer, "{}", Command::Quit);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    /// Starts `bin scenario-peer --bind addr` and connects to it.
    ///
    /// # Errors
    /// The process cannot start, or fails before it listens (its stderr is in the error).
    pub fn spawn(bin: &Path, addr: IpAddr) -> io::Result<Peer> {
        let mut child = Process::new(bin)
            .args(["scenario-peer", "--bind", &addr.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut first = String::new();
        if let Some(out) = child.stdout.as_mut() {
            BufReader::new(out).read_line(&mut first)?;
        }
        let port = first
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse::<SocketAddr>().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(bad(format!("the peer did not start: {first:?}")));
        };
        let stream = TcpStream::connect(port)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Peer {
            child,
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            addr,
        })
    }

    /// The peer device's address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// Sends `cmd`; returns the words after `ok`.
    ///
    /// # Errors
    /// The peer's `err` (as `Other`), or the connection's.
    pub fn call(&mut self, cmd: &Command) -> io::Result<String> {
        writeln!(self.writer, "{cmd}")?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer is gone",
            ));
        }
        let line = line.trim_end();
        match line.split_once(' ').unwrap_or((line, "")) {
            ("ok", rest) => Ok(rest.to_string()),
            ("err", why) => Err(io::Error::other(format!("peer: {cmd}: {why}"))),
            _ => Err(bad(format!("bad reply {line:?}"))),
        }
    }

    fn mr_info(&mut self, cmd: &Command, len: usize) -> io::Result<MrInfo> {
        let r = self.call(cmd)?;
        let v = r
            .split(' ')
            .map(parse_num)
            .collect::<io::Result<Vec<_>>>()?;
        let [id, addr, lkey, rkey] = v[..] else {
            return Err(bad(format!("bad mr reply {r:?}")));
        };
        Ok(MrInfo {
            id: id as usize,
            addr,
            lkey: lkey as u32,
            rkey: rkey as u32,
            len,
        })
    }

    /// The peer's QPN.
    pub fn qpn(&mut self) -> io::Result<u32> {
        Ok(parse_num(&self.call(&Command::Qpn)?)? as u32)
    }

    /// See [`Node::reg_mr`](super::node::Node::reg_mr).
    pub fn reg_mr(&mut self, len: usize, access: Access, pd: u32) -> io::Result<MrInfo> {
        self.mr_info(&Command::Mr { len, access, pd }, len)
    }

    /// See [`Node::reg_sub_mr`](super::node::Node::reg_sub_mr).
    pub fn reg_sub_mr(
        &mut self,
        parent: usize,
        offset: usize,
        len: usize,
        access: Access,
        pd: u32,
    ) -> io::Result<MrInfo> {
        let cmd = Command::SubMr {
            parent,
            offset,
            len,
            access,
            pd,
        };
        self.mr_info(&cmd, len)
    }

    /// Deregisters region `id`.
    pub fn dereg(&mut self, id: usize) -> io::Result<()> {
        self.call(&Command::Dereg { id }).map(|_| ())
    }

    /// Writes `data` into region `id` at `offset`.
    pub fn fill(&mut self, id: usize, offset: usize, data: &[u8]) -> io::Result<()> {
        let data = data.to_vec();
        self.call(&Command::Fill { id, offset, data }).map(|_| ())
    }

    /// Reads `len` bytes of region `id` at `offset`.
    pub fn read(&mut self, id: usize, offset: usize, len: usize) -> io::Result<Vec<u8>> {
        from_hex(&self.call(&Command::Read { id, offset, len })?).map_err(bad)
    }

    /// Connects the peer's QP.
    pub fn connect(&mut self, attr: &ConnectAttr) -> io::Result<()> {
        self.call(&Command::Connect(*attr)).map(|_| ())
    }

    /// Moves the peer's QP to `state` (and sets its access flags).
    pub fn modify(&mut self, state: QpState, access: Option<Access>) -> io::Result<()> {
        self.call(&Command::Modify { state, access }).map(|_| ())
    }

    /// The peer QP's state.
    pub fn state(&mut self) -> io::Result<QpState> {
        let s = self.call(&Command::State)?;
        QpState::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| bad(format!("unknown state {s:?}")))
    }

    /// Posts a receive of SGEs (region, offset, length).
    pub fn post_recv(&mut self, wr_id: u64, sges: &[(usize, usize, u32)]) -> io::Result<()> {
        let sges = sges.to_vec();
        self.call(&Command::Recv { wr_id, sges }).map(|_| ())
    }

    /// Waits for `n` completions at most `timeout`; returns those that came.
    pub fn poll(&mut self, n: usize, timeout: Duration) -> io::Result<Vec<Wc>> {
        let ms = timeout.as_millis() as u64;
        let r = self.call(&Command::Poll { n, ms })?;
        r.split_whitespace().map(parse_wc).collect()
    }

    /// Adds a fault rule at the peer.
    pub fn fault(&mut self, rule: Rule) -> io::Result<()> {
        self.call(&Command::Fault(rule)).map(|_| ())
    }

    /// Packets with `opcode` the peer's transport saw going `dir`.
    pub fn count(&mut self, dir: Direction, opcode: Opcode) -> io::Result<u64> {
        parse_num(&self.call(&Command::Count { dir, opcode })?)
    }
}
