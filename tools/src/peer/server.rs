//! The peer process of the two-process scenarios (`softrnic scenario-peer`, hidden): it opens
//! a [`Node`] on its address, listens on TCP (a free port, printed as `listening on
//! ADDR:PORT`), takes one controlling connection, and answers each command line of
//! [`super::protocol`] with one reply line until `quit` or the connection closes.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::Duration;

use super::node::{MrInfo, Node, NodeResult};
use super::protocol::{to_hex, Command};

/// The longest command line accepted.
const MAX_LINE: u64 = 1 << 20;

/// The longest a `poll` may wait.
const MAX_POLL_MS: u64 = 60_000;

fn mr_reply(m: MrInfo) -> String {
    format!("{} {:#x} {:#x} {:#x}", m.id, m.addr, m.lkey, m.rkey)
}

/// Executes one command; `Ok(None)` for `quit`.
fn execute(node: &mut Node, cmd: Command) -> NodeResult<Option<String>> {
    let reply = match cmd {
        Command::Quit => return Ok(None),
        Command::Qpn => node.qpn().to_string(),
        Command::State => node.state().name().to_string(),
        Command::Mr { len, access, pd } => mr_reply(node.reg_mr(len, access, pd)?),
        Command::SubMr {
            parent,
            offset,
            len,
            access,
            pd,
        } => mr_reply(node.reg_sub_mr(parent, offset, len, access, pd)?),
        Command::Dereg { id } => node.dereg(id).map(|_| String::new())?,
        Command::Fill { id, offset, data } => {
            node.fill(id, offset, &data).map(|_| String::new())?
        }
        Command::Read { id, offset, len } => to_hex(&node.read(id, offset, len)?),
        Command::Connect(attr) => node.connect(&attr).map(|_| String::new())?,
        Command::Modify { state, access } => node.modify(state, access).map(|_| String::new())?,
        Command::Recv { wr_id, sges } => {
            let sg_list = sges
                .iter()
                .map(|&(id, off, len)| node.sge(id, off, len))
                .collect::<NodeResult<Vec<_>>>()?;
            node.post_recv(wr_id, sg_list).map(|_| String::new())?
        }
        Command::Poll { n, ms } => {
            let wcs = node.poll(n, Duration::from_millis(ms.min(MAX_POLL_MS)));
            wcs.iter()
                .map(|w| {
                    format!(
                        "{}:{}:{}:{}:{}",
                        w.wr_id,
                        w.status as u32,
                        w.opcode as u32,
                        w.byte_len,
                        w.imm_data_or_inv_rkey
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
        Command::Fault(rule) => node.faults().add(rule).map(|_| String::new())?,
        Command::ClearFaults => {
            node.faults().clear_rules();
            node.faults().clear_counters();
            String::new()
        }
        Command::Count { dir, opcode } => node.faults().seen(dir, opcode).to_string(),
    };
    Ok(Some(reply))
}

/// Runs the peer on `bind` until told to quit; `out` gets the listening line.
///
/// # Errors
/// The device cannot be opened; the TCP listener or connection fails.
pub fn serve(bind: IpAddr, out: &mut dyn Write) -> io::Result<()> {
    let mut node = Node::open(bind, 0x9ee7)?;
    let listener = TcpListener::bind(SocketAddr::new(bind, 0))?;
    writeln!(out, "listening on {}", listener.local_addr()?)?;
    out.flush()?;
    let (stream, _) = listener.accept()?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if (&mut reader).take(MAX_LINE).read_line(&mut line)? == 0 {
            return Ok(());
        }
        let reply = match line.parse::<Command>() {
            Err(e) => format!("err {e}"),
            Ok(cmd) => match execute(&mut node, cmd) {
                Ok(None) => {
                    writeln!(writer, "ok")?;
                    return Ok(());
                }
                Ok(Some(r)) if r.is_empty() => "ok".to_string(),
                Ok(Some(r)) => format!("ok {r}"),
                Err(e) => format!("err {}", e.replace('\n', " ")),
            },
        };
        writeln!(writer, "{reply}")?;
    }
}
