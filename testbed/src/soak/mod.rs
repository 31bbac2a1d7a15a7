//! A soak through a lossy link: two devices in two network namespaces joined by the
//! impairing `packet-relay` (`testbed/relay_link.sh`), [`QPS`] RC QPs between them, every RC
//! operation of the verbs API, and every byte checked (`testbed/tests/soak.rs` runs it).
//!
//! The *client* (`client.rs`) drives: on each QP it works through that QP's [`Plan`], a
//! seeded stream of [`Step`]s, keeping [`WINDOW`] steps in flight. The *server*
//! (`server.rs`) only answers: its memory is the target of the WRITEs, READs and atomics,
//! and its receive queues take the SENDs and WRITE_WITH_IMMs, which it checks against the
//! same plan, replayed. The two agree on the plan and on nothing else: every payload is
//! [`fill`]ed from the QP's index and the step's number, so the receiver knows what the
//! sender sent without being told.
//!
//! What is checked: each SEND's and SEND_WITH_IMM's payload, length and immediate data by
//! the receiver; each WRITE by a READ of the same bytes right behind it on the same QP (a
//! responder executes requests in order, IBTA 9.5: so the READ sees the WRITE); each atomic's
//! original value against a model of the remote word, and the word itself at the end; each
//! work request's one successful completion, and nothing outstanding at the end.
//!
//! Out of band (QP numbers, the server's region, the end) goes over a TCP connection
//! across the same link ([`Control`]).

pub mod client;
pub mod server;

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;

use softrnic_provider::transport::SplitMix64;
use softrnic_uapi::{Cq, Pd, QpCaps, QpInitAttr, QueuePair};

/// RC QPs between the two devices.
pub const QPS: usize = 16;

/// Steps in flight per QP at the client.
pub const WINDOW: usize = 8;

/// The largest message: 64 KiB.
pub const MAX_LEN: usize = 64 << 10;

/// Receive WQEs the server keeps posted per QP: twice what the client can have in flight,
/// so that a receive is nearly always there (an RNR NAK is rare, and retried forever with
/// `rnr_retry` 7).
pub const RECV_DEPTH: usize = 2 * WINDOW;

/// The TCP port of the control connection, on the server's address.
pub const CONTROL_PORT: u16 = 7575;

/// The seed of every plan and payload.
pub const SEED: u64 = 0x5eed_0075;

/// The server's region: a [`MAX_LEN`] area per QP and slot for the WRITEs and READs, then an
/// 8-byte word per QP for the atomics.
pub const SERVER_LEN: usize = QPS * WINDOW * MAX_LEN + QPS * 8;

/// Where the area of QP `qp`'s slot `slot` starts in the server's region.
pub fn area(qp: usize, slot: usize) -> usize {
    (qp * WINDOW + slot) * MAX_LEN
}

/// Where QP `qp`'s atomic word is in the server's region.
pub fn word(qp: usize) -> usize {
    QPS * WINDOW * MAX_LEN + qp * 8
}

/// One step of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A SEND of `len` bytes.
    Send { len: usize },
    /// A SEND_WITH_IMM of `len` bytes; the immediate data is the step's number.
    SendImm { len: usize },
    /// An RDMA WRITE_WITH_IMM of `len` bytes; the immediate data is the step's number.
    WriteImm { len: usize },
    /// An RDMA WRITE of `len` bytes and a READ of them back.
    WriteRead { len: usize },
    /// A CMP_SWAP whose compare value is the word's (`hit`) or not, and its swap value.
    CmpSwap { hit: bool, swap: u64 },
    /// A FETCH_ADD of `add`.
    FetchAdd { add: u64 },
}

impl Step {
    /// Whether the step consumes a receive WQE at the server.
    pub fn receives(self) -> bool {
        matches!(
            self,
            Step::Send { .. } | Step::SendImm { .. } | Step::WriteImm { .. }
        )
    }
}

/// One QP's steps, numbered from 0: the same stream at both ends.
pub struct Plan {
    rng: SplitMix64,
    next: u64,
}

impl Plan {
    /// QP `qp`'s plan.
    pub fn new(qp: usize) -> Plan {
        Plan {
            rng: SplitMix64(SEED ^ (qp as u64) << 48),
            next: 0,
        }
    }

    /// The next step and its number.
    pub fn step(&mut self) -> (u64, Step) {
        let rng = &mut self.rng;
        // Lengths spread over the powers of two from 1 byte to 64 KiB.
        let bits = rng.below(17);
        let len = (1 + rng.below(1 << bits) as usize).min(MAX_LEN);
        let step = match rng.below(7) {
            0 => Step::Send { len },
            1 => Step::SendImm { len },
            2 => Step::WriteImm { len },
            3 | 4 => Step::WriteRead { len },
            5 => Step::CmpSwap {
                hit: rng.chance(0.5),
                swap: rng.next_u64(),
            },
            _ => Step::FetchAdd {
                add: rng.next_u64(),
            },
        };
        let n = self.next;
        self.next += 1;
        (n, step)
    }
}

/// Fills `buf` with the payload of QP `qp`'s step `n`.
pub fn fill(buf: &mut [u8], qp: usize, n: u64) {
    let mut rng = SplitMix64(SEED ^ (qp as u64) << 48 ^ n.wrapping_mul(0x9e37_79b9));
    for chunk in buf.chunks_mut(8) {
        let w = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The immediate data of step `n`.
pub fn imm(n: u64) -> u32 {
    n as u32
}

/// [`QPS`] RC QPs of `pd` on `cq`, with room for `send` and `recv` work requests of one
/// SGE each.
pub fn create_qps(pd: &Pd, cq: &Cq, send: usize, recv: usize) -> Result<Vec<QueuePair>, String> {
    let caps = QpCaps {
        max_send_wr: send as u32,
        max_recv_wr: recv as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    (0..QPS)
        .map(|_| pd.create_qp(&QpInitAttr::rc(cq, caps)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("create_qp: {e:?}"))
}

/// The control connection: lines of space-separated numbers, or a line that says why a
/// side failed.
pub struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Control {
    /// The control connection over `stream`.
    pub fn new(stream: TcpStream) -> io::Result<Control> {
        Ok(Control {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) -> io::Result<()> {
        writeln!(self.writer, "{line}")
    }

    /// Receives one line (without its newline).
    pub fn recv(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(line.trim_end().to_string())
    }

    /// Receives a line of numbers.
    pub fn numbers(&mut self) -> io::Result<Vec<u64>> {
        self.recv()?
            .split_whitespace()
            .map(|w| {
                w.parse()
                    .map_err(|_| io::Error::other(format!("not a number: {w}")))
            })
            .collect()
    }

    /// The stream, to set its timeouts and blocking.
    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }
}
