//! `softrnic pingpong`: the RC SEND ping-pong of rdma-core's `ibv_rc_pingpong`, as two
//! processes. The server listens on TCP; the client connects; each opens a softrnic device on
//! its own address, creates PD, MR, CQ and an RC QP, posts `rx_depth` receives, swaps its
//! address line with the other ([`exchange`]), and connects its QP (RESET→INIT→RTR→RTS).
//! Then `iters` times the client SENDs `size` bytes and the server SENDs them back; every
//! message carries a pattern of its iteration, checked byte for byte on arrival. Last, the
//! client RDMA WRITEs `size` bytes into the server's buffer (R_Key and address from the
//! exchange) and SENDs once more; the server, which sees the SEND after the WRITE has landed
//! (RC executes in order), checks the written bytes. Both print what `ibv_rc_pingpong` prints.

pub mod exchange;

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use softrnic_uapi::{
    Access, ConnectAttr, Context, Cq, MemoryRegion, Mtu, OpenOptions, Progress, QpCaps, QpInitAttr,
    QueuePair, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, WcOpcode, WcStatus,
    WorkCompletion,
};

use exchange::Dest;

/// The options, named after `ibv_rc_pingpong`'s.
#[derive(Debug, Clone)]
pub struct Options {
    /// The local address: the device's, and the server's TCP listening address.
    pub bind: IpAddr,
    /// The server to connect to; `None`: be the server.
    pub server: Option<IpAddr>,
    /// TCP port (server: 0 picks a free one, printed on the first line).
    pub port: u16,
    /// Bytes per message.
    pub size: u32,
    /// Round trips.
    pub iters: u32,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// The GID index whose address the peer sends to (1: the device's own).
    pub gid_idx: u32,
    /// Receives kept posted.
    pub rx_depth: u32,
    /// A progress thread per device instead of progress from the polling loop.
    pub progress_thread: bool,
}

/// What a run measured.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    /// Payload bytes moved both ways.
    pub bytes: u64,
    /// Round trips.
    pub iters: u32,
    /// Time of the ping-pong.
    pub elapsed: Duration,
}

/// How long any single completion may take before the run fails.
const WAIT: Duration = Duration::from_secs(10);

fn verbs(what: &str) -> impl FnOnce(softrnic_uapi::Error) -> io::Error + '_ {
    move |e| io::Error::other(format!("{what}: {e}"))
}

/// The bytes of message `iter` from `side` (b'c' client, b's' server, b'w' the WRITE).
pub fn pattern(iter: u32, side: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7) ^ (iter as u8).wrapping_add(side) ^ (iter >> 8) as u8)
        .collect()
}

/// A 24-bit PSN nobody can predict, as `ibv_rc_pingpong` draws with `lrand48`.
fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32 & 0xff_ffff
}

/// The verbs objects of one side. Field order is drop order: QP before CQ.
struct Side {
    qp: QueuePair,
    cq: Cq,
    mr: MemoryRegion,
    ctx: Context,
    size: usize,
    /// Receives that completed before they were waited for (see [`Side::exchange_one`]).
    early: std::cell::Cell<u32>,
}

/// Offsets in the buffer: what is sent, where receives land, what the peer writes.
const SEND: usize = 0;

impl Side {
    fn recv_at(&self) -> usize {
        self.size.max(1)
    }

    fn write_at(&self) -> usize {
        2 * self.size.max(1)
    }

    fn open(o: &Options) -> io::Result<Side> {
        let progress = if o.progress_thread {
            Progress::Thread
        } else {
            Progress::Polling
        };
        let ctx = Context::open(
            o.bind,
            OpenOptions {
                progress,
                key_seed: u64::from(random_psn()),
            },
        )
        .map_err(|e| io::Error::new(e.kind(), format!("opening the device on {}: {e}", o.bind)))?;
        let size = o.size as usize;
        let pd = ctx.alloc_pd();
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let mr = pd
            .reg_mr(3 * size.max(1), access)
            .map_err(verbs("ibv_reg_mr"))?;
        let cq = ctx
            .create_cq(o.rx_depth as usize + 1)
            .map_err(verbs("ibv_create_cq"))?;
        let cap = QpCaps {
            max_send_wr: 1,
            max_recv_wr: o.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qp = pd
            .create_qp(&QpInitAttr::rc(&cq, cap))
            .map_err(verbs("ibv_create_qp"))?;
        Ok(Side {
            qp,
            cq,
            mr,
            ctx,
            size,
            early: std::cell::Cell::new(0),
        })
    }

    fn post_recv(&self) -> io::Result<()> {
        let wr = RecvWr {
            wr_id: 1,
            sg_list: vec![self.mr.sge(self.recv_at(), self.size as u32)],
        };
        self.qp
            .post_recv(&[wr])
            .map_err(|(_, e)| verbs("ibv_post_recv")(e))
    }

    fn post_send(&self, opcode: SendOpcode, offset: usize, remote: RemoteAddr) -> io::Result<()> {
        let wr = SendWr {
            wr_id: 2,
            opcode,
            flags: SendFlags::SIGNALED,
            sg_list: vec![self.mr.sge(offset, self.size as u32)],
            imm_data_or_inv_rkey: 0,
            remote,
            compare_add: 0,
            swap: 0,
            bind_mw: None,
            ud: None,
            xrc_srqn: 0,
            inline_data: None,
        };
        self.qp
            .post_send(&[wr])
            .map_err(|(_, e)| verbs("ibv_post_send")(e))
    }

    /// Waits for one completion, which must be successful.
    fn next_wc(&self) -> io::Result<WorkCompletion> {
        let wc = self.cq.wait(1, WAIT).map_err(|e| match e {
            softrnic_uapi::Error::Io(softrnic_uapi::ETIMEDOUT) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no completion in {WAIT:?}"),
            ),
            e => verbs("ibv_poll_cq")(e),
        })?[0];
        if wc.status != WcStatus::Success {
            return Err(io::Error::other(format!(
                "completion with status {:?} for wr_id {} ({:?})",
                wc.status, wc.wr_id, wc.opcode
            )));
        }
        Ok(wc)
    }

    /// Sends what is at `offset` and waits for its completion and for a message in (`recv`);
    /// or only for one of them. Re-posts the receive it used.
    ///
    /// The peer's next message may complete before this side's SEND does: the peer may send
    /// it as soon as this SEND arrived, ahead of the ACK that completes the SEND here, and
    /// completions of the send and receive queues are not ordered against each other. Such a
    /// receive is counted and taken by the next call that waits for one, as `ibv_rc_pingpong`
    /// does with its `pending` flags.
    fn exchange_one(&self, send: Option<(SendOpcode, RemoteAddr)>, recv: bool) -> io::Result<()> {
        let mut want_send = send.is_some();
        let mut want_recv = recv;
        if want_recv && self.early.get() > 0 {
            self.early.set(self.early.get() - 1);
            want_recv = false;
        }
        if let Some((op, remote)) = send {
            let offset = if op == SendOpcode::RdmaWrite {
                self.write_at()
            } else {
                SEND
            };
            self.post_send(op, offset, remote)?;
        }
        while want_send || want_recv {
            let wc = self.next_wc()?;
            match wc.opcode {
                WcOpcode::Recv => {
                    if wc.byte_len != self.size as u32 {
                        return Err(io::Error::other(format!(
                            "received {} bytes, expected {}",
                            wc.byte_len, self.size
                        )));
                    }
                    if want_recv {
                        want_recv = false;
                    } else {
                        self.early.set(self.early.get() + 1);
                    }
                    self.post_recv()?;
                }
                WcOpcode::Send | WcOpcode::RdmaWrite if want_send => want_send = false,
                other => return Err(io::Error::other(format!("unexpected completion {other:?}"))),
            }
        }
        Ok(())
    }

    fn read(&self, offset: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0; self.size];
        self.mr
            .read(offset, &mut v)
            .map_err(verbs("reading the MR"))?;
        Ok(v)
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.mr.write(offset, data).map_err(verbs("writing the MR"))
    }

    /// Checks that the message just received is `pattern(iter, side)`.
    fn check_received(&self, iter: u32, side: u8) -> io::Result<()> {
        if self.read(self.recv_at())? != pattern(iter, side, self.size) {
            return Err(io::Error::other(format!(
                "message {iter} arrived with wrong bytes"
            )));
        }
        Ok(())
    }
}

/// Runs one side; `out` gets the lines `ibv_rc_pingpong` prints (and, first, the server's
/// listening address).
///
/// # Errors
/// Any failure of the device, the exchange, a completion, or a byte check.
pub fn run(o: &Options, out: &mut dyn Write) -> io::Result<Report> {
    let mtu = Mtu::from_bytes(o.mtu).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "--mtu must be 256..4096, a power of two",
        )
    })?;
    if o.rx_depth == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--rx-depth must be at least 1",
        ));
    }
    // The server listens before opening the device, so its port is known at once.
    let listener = match o.server {
        None => {
            let listener = TcpListener::bind(SocketAddr::new(o.bind, o.port))?;
            writeln!(out, "listening on {}", listener.local_addr()?)?;
            out.flush()?;
            Some(listener)
        }
        Some(_) => None,
    };
    let side = Side::open(o)?;
    let gid = side.ctx.query_gid(o.gid_idx).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no GID at index {}", o.gid_idx),
        )
    })?;
    if gid.to_ip() != side.ctx.local_addr() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "GID index {} is {gid}, not this device's address {}",
                o.gid_idx,
                side.ctx.local_addr()
            ),
        ));
    }
    // INIT first, so that the receives can be posted before the peer is known.
    let attr = ConnectAttr {
        path_mtu: mtu,
        ..ConnectAttr::default()
    };
    let [(init, init_mask), ..] = attr.steps();
    side.qp
        .modify(&init, init_mask)
        .map_err(verbs("ibv_modify_qp to INIT"))?;
    for _ in 0..o.rx_depth {
        side.post_recv()?;
    }
    let mine = Dest {
        lid: 0,
        qpn: side.qp.qp_num(),
        psn: random_psn(),
        gid,
        rkey: side.mr.rkey(),
        addr: side.mr.addr() + side.write_at() as u64,
    };
    // The client speaks first; the server connects its QP before it answers, so it is ready
    // for the client's first SEND.
    let connect = |peer: &Dest| {
        side.qp
            .connect(&ConnectAttr {
                dest: peer.gid.to_ip(),
                dest_qp_num: peer.qpn,
                rq_psn: peer.psn,
                sq_psn: mine.psn,
                ..attr
            })
            .map_err(verbs("ibv_modify_qp"))
    };
    let (mut stream, peer) = match (o.server, listener) {
        (Some(server), _) => {
            let mut s = TcpStream::connect(SocketAddr::new(server, o.port)).map_err(|e| {
                io::Error::new(e.kind(), format!("connecting to {server}:{}: {e}", o.port))
            })?;
            exchange::send(&mut s, &mine)?;
            let peer = exchange::receive(&mut s)?;
            connect(&peer)?;
            (s, peer)
        }
        (None, Some(listener)) => {
            let (mut s, _) = listener.accept()?;
            let peer = exchange::receive(&mut s)?;
            connect(&peer)?;
            exchange::send(&mut s, &mine)?;
            (s, peer)
        }
        (None, None) => return Err(io::Error::other("the server has no listener")),
    };
    writeln!(
        out,
        "  local address:  LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}",
        mine.lid, mine.qpn, mine.psn, mine.gid
    )?;
    writeln!(
        out,
        "  remote address: LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}",
        peer.lid, peer.qpn, peer.psn, peer.gid
    )?;

    let client = o.server.is_some();
    let none = RemoteAddr { addr: 0, rkey: 0 };
    let start = Instant::now();
    for i in 0..o.iters {
        if client {
            side.write(SEND, &pattern(i, b'c', side.size))?;
            side.exchange_one(Some((SendOpcode::Send, none)), true)?;
            side.check_received(i, b's')?;
        } else {
            side.exchange_one(None, true)?;
            side.check_received(i, b'c')?;
            side.write(SEND, &pattern(i, b's', side.size))?;
            side.exchange_one(Some((SendOpcode::Send, none)), false)?;
        }
    }
    let elapsed = start.elapsed();

    // The RDMA WRITE, then a SEND that tells the server it has landed.
    let written = pattern(o.iters, b'w', side.size);
    if client {
        side.write(side.write_at(), &written)?;
        let remote = RemoteAddr {
            addr: peer.addr,
            rkey: peer.rkey,
        };
        side.exchange_one(Some((SendOpcode::RdmaWrite, remote)), false)?;
        side.write(SEND, &pattern(o.iters, b'c', side.size))?;
        side.exchange_one(Some((SendOpcode::Send, none)), false)?;
    } else {
        side.exchange_one(None, true)?;
        side.check_received(o.iters, b'c')?;
        if side.read(side.write_at())? != written {
            return Err(io::Error::other("the RDMA WRITE left wrong bytes"));
        }
    }
    // ibv_rc_pingpong's closing handshake: neither side tears down while the other works.
    stream.write_all(b"done\n")?;
    let mut done = [0u8; 5];
    stream.read_exact(&mut done)?;
    if &done != b"done\n" {
        return Err(io::Error::other("the peer did not finish cleanly"));
    }

    let bytes = 2 * u64::from(o.size) * u64::from(o.iters);
    let usec = elapsed.as_secs_f64() * 1e6;
    writeln!(
        out,
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        elapsed.as_secs_f64(),
        bytes as f64 * 8.0 / usec.max(1e-9)
    )?;
    writeln!(
        out,
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        o.iters,
        elapsed.as_secs_f64(),
        usec / f64::from(o.iters.max(1))
    )?;
    writeln!(
        out,
        "RDMA WRITE of {} bytes: {}",
        o.size,
        if client { "done" } else { "verified" }
    )?;
    Ok(Report {
        bytes,
        iters: o.iters,
        elapsed,
    })
}
