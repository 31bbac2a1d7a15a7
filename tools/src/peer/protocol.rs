//! The command protocol between a scenario test and its peer process: one command per text
//! line over TCP, one reply line each — `ok` and the results, or `err` and why. Numbers are
//! decimal or `0x` hex; bytes are hex strings; access flags are `ibv_access_flags` values.
//!
//! ```text
//! qpn                                  ok 17
//! mr LEN ACCESS PD                     ok ID ADDR LKEY RKEY
//! submr PARENT OFFSET LEN ACCESS PD    ok ID ADDR LKEY RKEY
//! dereg ID | fill ID OFFSET HEX        ok
//! read ID OFFSET LEN                   ok HEX
//! connect dest=IP qpn=N rq_psn=N sq_psn=N mtu=BYTES timeout=N retry_cnt=N rnr_retry=N
//!         min_rnr_timer=N max_rd_atomic=N max_dest_rd_atomic=N access=N
//! modify STATE [ACCESS] | state        ok | ok RTS
//! recv WR_ID [ID:OFFSET:LEN ...]       ok
//! poll N MILLISECONDS                  ok WR_ID:STATUS:OPCODE:BYTE_LEN:IMM ...
//! fault rx|tx OPCODE|any NTH|all drop|dup | fault clear | count rx|tx OPCODE | quit
//! ```

use std::fmt;
use std::net::IpAddr;

use softrnic_provider::transport::faults::{Action, Direction, Rule};
use softrnic_uapi::{Access, ConnectAttr, Mtu, QpState};
use softrnic_wire::opcode::TABLE;
use softrnic_wire::Opcode;

/// A command to the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// The QP number.
    Qpn,
    /// Register a new buffer.
    Mr {
        /// The buffer's length in bytes.
        len: usize,
        /// The region's rights.
        access: Access,
        /// The PD's number on the peer (0 is the QP's; up to 16).
        pd: u32,
    },
    /// Register part of a region's memory again.
    SubMr {
        /// The ID of the region whose memory is registered again.
        parent: usize,
        /// Where the new region starts in the parent, in bytes.
        offset: usize,
        /// The new region's length in bytes.
        len: usize,
        /// The new region's rights.
        access: Access,
        /// The PD's number on the peer (0 is the QP's; up to 16).
        pd: u32,
    },
    /// Deregister.
    Dereg {
        /// The region's ID.
        id: usize,
    },
    /// Write bytes into a region.
    Fill {
        /// The region's ID.
        id: usize,
        /// Where the bytes go in the region.
        offset: usize,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Read bytes of a region.
    Read {
        /// The region's ID.
        id: usize,
        /// Where the bytes start in the region.
        offset: usize,
        /// How many bytes.
        len: usize,
    },
    /// Connect the QP.
    Connect(ConnectAttr),
    /// Move the QP to a state (and change its access flags).
    Modify {
        /// The state to move to.
        state: QpState,
        /// The QP's new access flags, if they change.
        access: Option<Access>,
    },
    /// The QP's state.
    State,
    /// Post a receive.
    Recv {
        /// The work request's ID, returned in its completion.
        wr_id: u64,
        /// The scatter list: (region ID, offset in it, length) each.
        sges: Vec<(usize, usize, u32)>,
    },
    /// Wait for completions.
    Poll {
        /// How many completions to wait for.
        n: usize,
        /// How long to wait at most, in milliseconds.
        ms: u64,
    },
    /// Add a fault rule.
    Fault(Rule),
    /// Remove the fault rules and zero the counters.
    ClearFaults,
    /// Packets seen with an opcode.
    Count {
        /// Received or sent packets.
        dir: Direction,
        /// The opcode counted.
        opcode: Opcode,
    },
    /// End the peer.
    Quit,
}

fn num<T: TryFrom<u64>>(what: &str, s: &str) -> Result<T, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.ok()
        .and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| format!("{what}: not a number in range: {s:?}"))
}

/// Hex text of bytes.
pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of hex text.
///
/// # Errors
/// Odd length or a non-hex digit.
pub fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "not hex bytes: {:?}",
            s.chars().take(40).collect::<String>()
        ));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

fn opcode(s: &str) -> Result<Option<Opcode>, String> {
    if s == "any" {
        return Ok(None);
    }
    TABLE
        .iter()
        .find(|i| i.name == s)
        .map(|i| Some(Opcode(i.code)))
        .ok_or_else(|| format!("unknown opcode {s:?}"))
}

fn dir(s: &str) -> Result<Direction, String> {
    match s {
        "rx" => Ok(Direction::Rx),
        "tx" => Ok(Direction::Tx),
        _ => Err(format!("direction must be rx or tx, not {s:?}")),
    }
}

fn state(s: &str) -> Result<QpState, String> {
    QpState::ALL
        .into_iter()
        .find(|q| q.name() == s)
        .ok_or_else(|| format!("unknown QP state {s:?}"))
}

fn connect(args: &[&str]) -> Result<ConnectAttr, String> {
    let mut c = ConnectAttr::default();
    for kv in args {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, not {kv:?}"))?;
        match k {
            "dest" => c.dest = v.parse::<IpAddr>().map_err(|e| format!("dest: {e}"))?,
            "qpn" => c.dest_qp_num = num(k, v)?,
            "rq_psn" => c.rq_psn = num(k, v)?,
            "sq_psn" => c.sq_psn = num(k, v)?,
            "mtu" => c.path_mtu = Mtu::from_bytes(num(k, v)?).map_err(|e| e.to_string())?,
            "timeout" => c.timeout = num(k, v)?,
            "retry_cnt" => c.retry_cnt = num(k, v)?,
            "rnr_retry" => c.rnr_retry = num(k, v)?,
            "min_rnr_timer" => c.min_rnr_timer = num(k, v)?,
            "max_rd_atomic" => c.max_rd_atomic = num(k, v)?,
            "max_dest_rd_atomic" => c.max_dest_rd_atomic = num(k, v)?,
            "access" => c.qp_access_flags = Access::from_bits_retain(num(k, v)?),
            _ => return Err(format!("unknown connect attribute {k:?}")),
        }
    }
    Ok(c)
}

impl std::str::FromStr for Command {
    type Err = String;

    fn from_str(line: &str) -> Result<Command, String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let Some((&verb, args)) = w.split_first() else {
            return Err("empty command".into());
        };
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!("{verb} takes {n} arguments, not {}", args.len()))
            }
        };
        Ok(match verb {
            "qpn" => arity(0).map(|_| Command::Qpn)?,
            "state" => arity(0).map(|_| Command::State)?,
            "quit" => arity(0).map(|_| Command::Quit)?,
            "mr" => {
                arity(3)?;
                Command::Mr {
                    len: num("len", args[0])?,
                    access: Access::from_bits_retain(num("access", args[1])?),
                    pd: num("pd", args[2])?,
                }
            }
            "submr" => {
                arity(5)?;
                Command::SubMr {
                    parent: num("parent", args[0])?,
                    offset: num("offset", args[1])?,
                    len: num("len", args[2])?,
                    access: Access::from_bits_retain(num("access", args[3])?),
                    pd: num("pd", args[4])?,
                }
            }
            "dereg" => arity(1).and_then(|_| {
                Ok(Command::Dereg {
                    id: num("id", args[0])?,
                })
            })?,
            "fill" => {
                arity(3)?;
                Command::Fill {
                    id: num("id", args[0])?,
                    offset: num("offset", args[1])?,
                    data: from_hex(args[2])?,
                }
            }
            "read" => {
                arity(3)?;
                Command::Read {
                    id: num("id", args[0])?,
                    offset: num("offset", args[1])?,
                    len: num("len", args[2])?,
                }
            }
            "connect" => Command::Connect(connect(args)?),
            "modify" => match args {
                [s] => Command::Modify {
                    state: state(s)?,
                    access: None,
                },
                [s, a] => Command::Modify {
                    state: state(s)?,
                    access: Some(Access::from_bits_retain(num("access", a)?)),
                },
                _ => return Err("modify takes STATE [ACCESS]".into()),
            },
            "recv" => {
                let (id, sges) = args
                    .split_first()
                    .ok_or("recv takes WR_ID [ID:OFFSET:LEN ...]")?;
                let sges = sges
                    .iter()
                    .map(|s| match s.split(':').collect::<Vec<_>>()[..] {
                        [m, o, l] => Ok((num("id", m)?, num("offset", o)?, num("len", l)?)),
                        _ => Err(format!("an SGE is ID:OFFSET:LEN, not {s:?}")),
                    })
                    .collect::<Result<_, String>>()?;
                Command::Recv {
                    wr_id: num("wr_id", id)?,
                    sges,
                }
            }
            "poll" => {
                arity(2)?;
                Command::Poll {
                    n: num("n", args[0])?,
                    ms: num("ms", args[1])?,
                }
            }
            "fault" => match args {
                ["clear"] => Command::ClearFaults,
                [d, op, nth, action] => Command::Fault(Rule {
                    dir: dir(d)?,
                    opcode: opcode(op)?,
                    nth: if *nth == "all" {
                        None
                    } else {
                        Some(num("nth", nth)?)
                    },
                    action: match *action {
                        "drop" => Action::Drop,
                        "dup" => Action::Duplicate,
                        _ => return Err(format!("action must be drop or dup, not {action:?}")),
                    },
                }),
                _ => return Err("fault takes rx|tx OPCODE|any NTH|all drop|dup, or clear".into()),
            },
            "count" => {
                arity(2)?;
                Command::Count {
                    dir: dir(args[0])?,
                    opcode: opcode(args[1])?.ok_or("count needs an opcode")?,
                }
            }
            _ => return Err(format!("unknown command {verb:?}")),
        })
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Direction| if *d == Direction::Rx { "rx" } else { "tx" };
        match self {
            Command::Qpn => write!(f, "qpn"),
            Command::State => write!(f, "state"),
            Command::Quit => write!(f, "quit"),
            Command::Mr { len, access, pd } => write!(f, "mr {len} {} {pd}", access.bits()),
            Command::SubMr {
                parent,
                offset,
                len,
                access,
                pd,
            } => write!(f, "submr {parent} {offset} {len} {} {pd}", access.bits()),
            Command::Dereg { id } => write!(f, "dereg {id}"),
            Command::Fill { id, offset, data } => write!(f, "fill {id} {offset} {}", to_hex(data)),
            Command::Read { id, offset, len } => write!(f, "read {id} {offset} {len}"),
            Command::Connect(c) => write!(
                f,
                "connect dest={} qpn={} rq_psn={} sq_psn={} mtu={} timeout={} retry_cnt={} \
                 rnr_retry={} min_rnr_timer={} max_rd_atomic={} max_dest_rd_atomic={} access={}",
                c.dest,
                c.dest_qp_num,
                c.rq_psn,
                c.sq_psn,
                c.path_mtu.bytes(),
                c.timeout,
                c.retry_cnt,
                c.rnr_retry,
                c.min_rnr_timer,
                c.max_rd_atomic,
                c.max_dest_rd_atomic,
                c.qp_access_flags.bits()
            ),
            Command::Modify { state, access } => match access {
                Some(a) => write!(f, "modify {} {}", state.name(), a.bits()),
                None => write!(f, "modify {}", state.name()),
            },
            Command::Recv { wr_id, sges } => {
                write!(f, "recv {wr_id}")?;
                sges.iter()
                    .try_for_each(|(m, o, l)| write!(f, " {m}:{o}:{l}"))
            }
            Command::Poll { n, ms } => write!(f, "poll {n} {ms}"),
            Command::Fault(r) => write!(
                f,
                "fault {} {} {} {}",
                d(&r.dir),
                r.opcode.map_or("any", |o| o.name()),
                r.nth.map_or("all".to_string(), |n| n.to_string()),
                if r.action == Action::Drop {
                    "drop"
                } else {
                    "dup"
                }
            ),
            Command::ClearFaults => write!(f, "fault clear"),
            Command::Count { dir, opcode } => write!(f, "count {} {}", d(dir), opcode.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_reads_back_what_it_writes() {
        let cmds = [
            Command::Qpn,
            Command::State,
            Command::Quit,
            Command::Mr {
                len: 4096,
                access: Access::from_bits_retain(15),
                pd: 2,
            },
            Command::SubMr {
                parent: 1,
                offset: 4096,
                len: 4096,
                access: Access::from_bits_retain(7),
                pd: 0,
            },
            Command::Dereg { id: 3 },
            Command::Fill {
                id: 0,
                offset: 8,
                data: vec![0, 1, 0xab, 0xff],
            },
            Command::Read {
                id: 0,
                offset: 8,
                len: 100,
            },
            Command::Connect(ConnectAttr {
                dest: "127.0.10.1".parse().unwrap(),
                dest_qp_num: 0x11,
                rq_psn: 0xff_fff0,
                sq_psn: 5,
                path_mtu: Mtu::Mtu256,
                timeout: 10,
                retry_cnt: 2,
                rnr_retry: 0,
                min_rnr_timer: 5,
                max_rd_atomic: 4,
                max_dest_rd_atomic: 8,
                qp_access_flags: Access::from_bits_retain(3),
                // Not on the wire (the peers' QPs are RC): the default comes back.
                qkey: ConnectAttr::default().qkey,
            }),
            Command::Modify {
                state: QpState::Err,
                access: None,
            },
            Command::Modify {
                state: QpState::Rts,
                access: Some(Access::from_bits_retain(1)),
            },
            Command::Recv {
                wr_id: 900,
                sges: vec![(0, 0, 1000), (1, 2000, 8000)],
            },
            Command::Recv {
                wr_id: 901,
                sges: vec![],
            },
            Command::Poll { n: 2, ms: 5000 },
            Command::Fault(Rule {
                dir: Direction::Tx,
                opcode: Some(Opcode::RC_RDMA_READ_RESPONSE_ONLY),
                nth: Some(0),
                action: Action::Drop,
            }),
            Command::Fault(Rule {
                dir: Direction::Rx,
                opcode: None,
                nth: None,
                action: Action::Drop,
            }),
            Command::ClearFaults,
            Command::Count {
                dir: Direction::Rx,
                opcode: Opcode::RC_FETCH_ADD,
            },
        ];
        for c in cmds {
            let line = c.to_string();
            assert_eq!(line.parse::<Command>().as_ref(), Ok(&c), "{line}");
        }
    }

    #[test]
    fn bad_commands_say_what_is_wrong() {
        let cases = [
            ("", "empty"),
            ("frobnicate", "unknown command"),
            ("mr 10 0", "takes 3 arguments"),
            ("mr ten 0 0", "len: not a number"),
            ("mr 10 0x 0", "access: not a number"),
            ("fill 0 0 abc", "not hex"),
            ("fill 0 0 zz", "not hex"),
            ("connect dest=nowhere", "dest:"),
            ("connect mtu=1000", "MTU"),
            ("connect colour=blue", "unknown connect attribute"),
            ("connect timeout=300", "timeout: not a number in range"),
            ("modify SLEEPY", "unknown QP state"),
            ("recv", "recv takes"),
            ("recv 1 0:0", "ID:OFFSET:LEN"),
            ("fault up RC_SEND_ONLY 0 drop", "direction"),
            ("fault tx RC_NOPE 0 drop", "unknown opcode"),
            ("fault tx any 0 explode", "drop or dup"),
            ("count rx any", "needs an opcode"),
        ];
        for (line, why) in cases {
            let e = line.parse::<Command>().unwrap_err();
            assert!(e.contains(why), "{line:?}: {e}");
        }
    }

    #[test]
    fn hex_round_trips() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&b)), Ok(b));
        assert_eq!(from_hex(""), Ok(vec![]));
    }
}
