//! The link between the agent and each process's connection manager: Unix datagrams on
//! abstract names, one per side. Over it a process registers the Service IDs it listens on
//! (the agent answers with an errno: `EADDRINUSE` if another process has one), and the agent
//! hands it the MADs that `mad_route.rs` says are its own, with the address they came from.
//!
//! Datagrams, not the stream each process keeps to the agent: a MAD is a message, and the
//! agent must never block on a process that does not read; if a process's queue is full the
//! MAD is dropped, as the network may drop it, and its sender retries. A process's queue
//! holds few datagrams (`net.unix.max_dgram_qlen`, 10 by default), while a burst of REQs (a
//! server accepting many connections at once) is many MADs: so the agent hands over every
//! MAD it has for a process in one datagram, of up to [`MADS_PER_DATAGRAM`] records.
//!
//! A process addresses the agent by its name on every request, never by a connection: when
//! the agent changes hands, the next request reaches the new agent, on the same name. The new
//! agent knows no listeners, so each process registers its Service IDs again once it has
//! joined the new group (`driver::cm`, on [`super::Member::on_rejoin`]). Until then the
//! agent's name may be unbound (`ECONNREFUSED`), the agent may be building its group and not
//! reading yet (no answer), or may not know the process's block yet (`ENOTCONN`): a listen
//! waits for each of these, sleeping between tries, up to [`AGENT_WAIT`].
//!
//! Every request carries a transaction number that its answer repeats (as a MAD's
//! TransactionID does): an answer that comes after its request was given up on is told from
//! the answer to the next one, and dropped.
//!
//! A record is [`RECORD_LEN`] bytes:
//!
//! ```text
//!  byte 0      kind: b'L' listen, b'U' unlisten, b'A' answer, b'M' MAD
//!  byte 1      address family of bytes 16-31 (4 or 6; MAD only)
//!  byte 2-3    QPN block of the process (listen, unlisten), little-endian
//!  byte 4-7    errno (answer), little-endian
//!  byte 8-15   Service ID (listen, unlisten), little-endian
//!  byte 16-19  transaction number (listen, and its answer), little-endian
//!  byte 16-31  the MAD's source address (MAD only; IPv4 in bytes 16-19)
//!  byte 32-287 the MAD
//! ```

use std::io;
use std::net::IpAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use softrnic_wire::mad::MAD_LEN;

use super::agent::AGENT_WAIT;
use super::block::QpnBlock;

/// Bytes of a record.
pub const RECORD_LEN: usize = 32 + MAD_LEN;

/// The most MAD records one datagram of the link carries, back to back (18 KiB).
pub const MADS_PER_DATAGRAM: usize = 64;

/// The agent's name for `addr`'s link.
pub fn agent_name(addr: IpAddr) -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(format!("softrnic/{addr}/cm"))
}

/// The name of the link of the process holding `block` of `addr`.
pub fn member_name(addr: IpAddr, block: QpnBlock) -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(format!("softrnic/{addr}/cm/{}", block.0))
}

/// One message on the link. (Records are encoded as soon as they are made, never stored:
/// the size of the `Mad` variant costs nothing.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// A process listens on a Service ID (again: no change).
    Listen {
        /// Its block.
        block: QpnBlock,
        /// The Service ID.
        service: u64,
        /// The process's number for this request, repeated by the answer.
        transaction: u32,
    },
    /// A process stops listening on a Service ID.
    Unlisten {
        /// Its block.
        block: QpnBlock,
        /// The Service ID.
        service: u64,
    },
    /// The agent's answer to `Listen`: 0 or an errno.
    Answer {
        /// The transaction number of the `Listen` it answers.
        transaction: u32,
        /// 0, or `EADDRINUSE` (another block listens on the Service ID), or `ENOTCONN` (the
        /// block is not in the agent's group, or not yet).
        errno: i32,
    },
    /// A MAD for the process.
    Mad {
        /// Where it came from.
        from: IpAddr,
        /// The MAD.
        mad: [u8; MAD_LEN],
    },
}

impl Record {
    /// The record's bytes.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        match *self {
            Record::Listen {
                block,
                service,
                transaction,
            } => {
                b[0] = b'L';
                b[2..4].copy_from_slice(&block.0.to_le_bytes());
                b[8..16].copy_from_slice(&service.to_le_bytes());
                b[16..20].copy_from_slice(&transaction.to_le_bytes());
            }
            Record::Unlisten { block, service } => {
                b[0] = b'U';
                b[2..4].copy_from_slice(&block.0.to_le_bytes());
                b[8..16].copy_from_slice(&service.to_le_bytes());
            }
            Record::Answer { transaction, errno } => {
                b[0] = b'A';
                b[4..8].copy_from_slice(&errno.to_le_bytes());
                b[16..20].copy_from_slice(&transaction.to_le_bytes());
            }
            Record::Mad { from, mad } => {
                b[0] = b'M';
                let (family, bytes) = super::addr::encode(from);
                b[1] = family;
                b[16..32].copy_from_slice(&bytes);
                b[32..].copy_from_slice(&mad);
            }
        }
        b
    }

    /// The record in `b`, if it is one.
    pub fn decode(b: &[u8]) -> Option<Record> {
        let b: &[u8; RECORD_LEN] = b.try_into().ok()?;
        let block = QpnBlock(u16::from_le_bytes([b[2], b[3]]));
        let service = u64::from_le_bytes(b[8..16].try_into().ok()?);
        let transaction = u32::from_le_bytes(b[16..20].try_into().ok()?);
        Some(match b[0] {
            b'L' => Record::Listen {
                block,
                service,
                transaction,
            },
            b'U' => Record::Unlisten { block, service },
            b'A' => Record::Answer {
                transaction,
                errno: i32::from_le_bytes(b[4..8].try_into().ok()?),
            },
            b'M' => Record::Mad {
                from: super::addr::decode(b[1], b[16..32].try_into().ok()?)?,
                mad: b[32..].try_into().ok()?,
            },
            _ => return None,
        })
    }
}

/// A process's end of the link, for its block of one address: a socket for the MADs the
/// agent hands it, and one for its requests and the agent's answers.
#[derive(Debug)]
pub struct MemberLink {
    addr: IpAddr,
    block: QpnBlock,
    mads: UnixDatagram,
    requests: Mutex<UnixDatagram>,
    /// The transaction number of the next request.
    next_transaction: AtomicU32,
}

/// How long a process waits for the agent's answer to a request.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// How long a process sleeps before asking again an agent that is not ready for it.
const RETRY_SLEEP: Duration = Duration::from_millis(20);

impl MemberLink {
    /// Binds this process's names for `block` of `addr` (the block's lease makes them free).
    ///
    /// # Errors
    /// Binding them.
    pub fn open(addr: IpAddr, block: QpnBlock) -> io::Result<MemberLink> {
        let mads = UnixDatagram::bind_addr(&member_name(addr, block)?)?;
        mads.set_nonblocking(true)?;
        let name = format!("softrnic/{addr}/cm/{}/requests", block.0);
        let requests = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name)?)?;
        // The agent reads its link whenever it wakes: a full queue empties soon.
        requests.set_write_timeout(Some(ANSWER_WAIT))?;
        Ok(MemberLink {
            addr,
            block,
            mads,
            requests: Mutex::new(requests),
            next_transaction: AtomicU32::new(0),
        })
    }

    /// Registers `service` with the agent: REQs and SIDR_REQs for it come here from now on.
    /// Registering it again is no change (so it is how a process tells a new agent). While
    /// the agent is changing hands (module doc), waits for the new one, up to [`AGENT_WAIT`].
    ///
    /// # Errors
    /// `EADDRINUSE` if another process listens on it; `ENOTCONN` if the agent does not know
    /// this process's block; `ECONNREFUSED` or `TimedOut` if no agent answered.
    pub fn listen(&self, service: u64) -> io::Result<()> {
        let deadline = Instant::now() + AGENT_WAIT;
        loop {
            let answer = self.request_listen(service);
            let not_ready = match &answer {
                Ok(errno) => *errno == libc::ENOTCONN,
                Err(e) => matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused | io::ErrorKind::TimedOut
                ),
            };
            if !not_ready || Instant::now() + RETRY_SLEEP > deadline {
                return match answer? {
                    0 => Ok(()),
                    errno => Err(io::Error::from_raw_os_error(errno)),
                };
            }
            std::thread::sleep(RETRY_SLEEP);
        }
    }

    /// Stops listening on `service`.
    pub fn unlisten(&self, service: u64) {
        let r = Record::Unlisten {
            block: self.block,
            service,
        };
        let s = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = agent_name(self.addr).and_then(|to| send(&s, &r, &to));
    }

    /// Calls `f` with every MAD the agent handed over since the last call, and where it
    /// came from. Any other record is dropped.
    pub fn recv_each(&self, mut f: impl FnMut(IpAddr, &[u8; MAD_LEN])) {
        let mut buf = [0u8; RECORD_LEN * MADS_PER_DATAGRAM];
        while let Ok(n) = self.mads.recv(&mut buf) {
            for record in buf[..n].chunks_exact(RECORD_LEN) {
                if let Some(Record::Mad { from, mad }) = Record::decode(record) {
                    f(from, &mad);
                }
            }
        }
    }

    /// What [`MemberLink::recv_each`] gives, collected.
    #[cfg(test)]
    pub(crate) fn received(&self) -> Vec<(IpAddr, [u8; MAD_LEN])> {
        let mut v = Vec::new();
        self.recv_each(|from, mad| v.push((from, *mad)));
        v
    }

    /// The descriptor to poll for MADs.
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.mads)
    }

    /// Asks the agent once to route `service` here, and waits up to [`ANSWER_WAIT`] for its
    /// answer: the errno the agent gave. Answers to earlier requests, given up on, are
    /// dropped.
    fn request_listen(&self, service: u64) -> io::Result<i32> {
        let transaction = self.next_transaction.fetch_add(1, Ordering::Relaxed);
        let r = Record::Listen {
            block: self.block,
            service,
            transaction,
        };
        let s = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        send(&s, &r, &agent_name(self.addr)?)?;
        let deadline = Instant::now() + ANSWER_WAIT;
        let mut buf = [0u8; RECORD_LEN];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            s.set_read_timeout(Some(left))?;
            let n = match s.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::ErrorKind::TimedOut.into())
                }
                Err(e) => return Err(e),
            };
            match Record::decode(&buf[..n]) {
                Some(Record::Answer {
                    transaction: t,
                    errno,
                }) if t == transaction => return Ok(errno),
                _ => {} // a late answer to a request given up on, or junk
            }
        }
    }
}

/// MAD records for the processes, gathered while the agent reads a burst from the network and
/// then sent with one datagram per process (module doc). A process whose queue is full gets
/// its MADs at a later flush, in order; at most [`MadOutbox::CAPACITY`] wait (beyond, a MAD
/// is dropped as the network drops it). Its buffers are kept from one burst to the next.
#[derive(Debug, Default)]
pub struct MadOutbox {
    /// (the process's block, its record), in arrival order.
    records: Vec<(QpnBlock, [u8; RECORD_LEN])>,
    /// Those a flush could not deliver yet.
    kept: Vec<(QpnBlock, [u8; RECORD_LEN])>,
    /// One datagram being assembled.
    datagram: Vec<u8>,
}

impl MadOutbox {
    /// The most MADs that wait (1.2 MB): a burst of connection requests as large as a
    /// listener's largest backlog.
    pub const CAPACITY: usize = 4096;

    /// Adds the MAD `mad` from `from` for the process holding `block`; `false` if the
    /// outbox is full and the MAD dropped.
    pub fn push(&mut self, block: QpnBlock, from: IpAddr, mad: &[u8; MAD_LEN]) -> bool {
        if self.records.len() >= Self::CAPACITY {
            return false;
        }
        let r = Record::Mad { from, mad: *mad };
        self.records.push((block, r.encode()));
        true
    }

    /// How many MADs wait.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no MAD waits.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Sends the waiting MADs on `sock` (the agent's, which never blocks) to their processes,
    /// as few datagrams as [`MADS_PER_DATAGRAM`] allows, each process's in arrival order. A
    /// process whose queue is full keeps the rest of its MADs waiting; returns how many MADs
    /// were dropped for processes that are gone.
    pub fn flush(&mut self, sock: &UnixDatagram, addr: IpAddr) -> u64 {
        // A stable sort: a process's MADs keep their order.
        self.records.sort_by_key(|(block, _)| block.0);
        let mut dropped = 0;
        for run in self.records.chunk_by(|a, b| a.0 == b.0) {
            let block = run[0].0;
            for (i, part) in run.chunks(MADS_PER_DATAGRAM).enumerate() {
                self.datagram.clear();
                for (_, r) in part {
                    self.datagram.extend_from_slice(r);
                }
                let sent =
                    member_name(addr, block).and_then(|to| sock.send_to_addr(&self.datagram, &to));
                match sent {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.kept.extend_from_slice(&run[i * MADS_PER_DATAGRAM..]);
                        break;
                    }
                    Err(_) => dropped += part.len() as u64,
                }
            }
        }
        self.records.clear();
        std::mem::swap(&mut self.records, &mut self.kept);
        dropped
    }
}

/// Sends `r` on `sock` to `to`. On the agent's socket, which never blocks, a full queue
/// drops it (the MAD's sender retries, as after a loss on the network).
///
/// # Errors
/// The socket's.
pub fn send(sock: &UnixDatagram, r: &Record, to: &SocketAddr) -> io::Result<()> {
    sock.send_to_addr(&r.encode(), to).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_roundtrip_and_junk_is_refused() {
        let mad: [u8; MAD_LEN] = core::array::from_fn(|i| i as u8);
        for r in [
            Record::Listen {
                block: QpnBlock(7),
                service: 0x0106_4e20,
                transaction: 0xfeed_f00d,
            },
            Record::Unlisten {
                block: QpnBlock(1023),
                service: u64::MAX,
            },
            Record::Answer {
                transaction: 3,
                errno: libc::EADDRINUSE,
            },
            Record::Mad {
                from: "10.0.0.9".parse().unwrap(),
                mad,
            },
            Record::Mad {
                from: "fe80::1".parse().unwrap(),
                mad,
            },
        ] {
            assert_eq!(Record::decode(&r.encode()), Some(r));
        }
        assert_eq!(Record::decode(&[b'L'; RECORD_LEN - 1]), None);
        assert_eq!(Record::decode(&[b'X'; RECORD_LEN]), None);
        let mut bad_family = Record::Mad {
            from: "10.0.0.9".parse().unwrap(),
            mad,
        }
        .encode();
        bad_family[1] = 5;
        assert_eq!(Record::decode(&bad_family), None);
    }

    /// An agent that is starting (it does not know the process's block yet) is asked again
    /// until it answers for good; an answer to a request given up on is not taken for the
    /// answer to the next one; a stray record among the MADs is dropped.
    #[test]
    fn a_listen_waits_for_a_new_agent_and_takes_only_its_own_answer() {
        let addr: IpAddr = "127.0.50.9".parse().unwrap();
        let agent = UnixDatagram::bind_addr(&agent_name(addr).unwrap()).unwrap();
        let link = MemberLink::open(addr, QpnBlock(5)).unwrap();
        let fake_agent = std::thread::spawn(move || {
            let mut buf = [0u8; RECORD_LEN];
            let mut listen = || {
                let (n, asker) = agent.recv_from(&mut buf).unwrap();
                let Some(Record::Listen { transaction, .. }) = Record::decode(&buf[..n]) else {
                    panic!("not a listen")
                };
                (transaction, asker)
            };
            let answer = |transaction, errno, to: &SocketAddr| {
                send(&agent, &Record::Answer { transaction, errno }, to).unwrap();
            };
            let (first, asker) = listen();
            answer(first, libc::ENOTCONN, &asker);
            let (second, asker) = listen();
            assert_ne!(second, first, "each request has its own number");
            answer(first, libc::EADDRINUSE, &asker); // late, to the first request
            answer(second, 0, &asker);
            let mut mad = [0u8; MAD_LEN];
            mad[0] = 1;
            let to = member_name(addr, QpnBlock(5)).unwrap();
            answer(second, 0, &to); // stray, among the MADs
            let from = "127.0.50.10".parse().unwrap();
            send(&agent, &Record::Mad { from, mad }, &to).unwrap();
            (from, mad)
        });
        link.listen(0x0106_0009).unwrap();
        let handed = fake_agent.join().unwrap();
        assert_eq!(link.received(), [handed]);
        assert_eq!(link.received(), []);
    }

    /// A burst of REQs far beyond what a process's queue of datagrams holds
    /// (`net.unix.max_dgram_qlen`, 10 by default) reaches the process whole and in order,
    /// and the MADs of two processes each reach their own.
    #[test]
    fn a_burst_of_mads_reaches_its_process_whole() {
        let addr: IpAddr = "127.0.50.11".parse().unwrap();
        let agent = UnixDatagram::bind_addr(&agent_name(addr).unwrap()).unwrap();
        agent.set_nonblocking(true).unwrap();
        let (a, b) = (QpnBlock(3), QpnBlock(4));
        let (link_a, link_b) = (
            MemberLink::open(addr, a).unwrap(),
            MemberLink::open(addr, b).unwrap(),
        );
        let from: IpAddr = "127.0.50.12".parse().unwrap();
        let mad = |i: usize| -> [u8; MAD_LEN] { core::array::from_fn(|k| (i + k) as u8) };
        let mut outbox = MadOutbox::default();
        let burst = 3 * MADS_PER_DATAGRAM + 5;
        for i in 0..burst {
            if outbox.len() == MadOutbox::CAPACITY {
                assert_eq!(outbox.flush(&agent, addr), 0);
            }
            assert!(outbox.push(if i % 7 == 0 { b } else { a }, from, &mad(i)));
        }
        assert_eq!(outbox.flush(&agent, addr), 0);
        assert!(outbox.is_empty());
        let to = |blk: QpnBlock| -> Vec<(IpAddr, [u8; MAD_LEN])> {
            (0..burst)
                .filter(|i| (i % 7 == 0) == (blk == b))
                .map(|i| (from, mad(i)))
                .collect()
        };
        assert_eq!(link_a.received(), to(a));
        assert_eq!(link_b.received(), to(b));
        // A process gone: its MADs are counted as dropped.
        outbox.push(QpnBlock(9), from, &mad(0));
        assert_eq!(outbox.flush(&agent, addr), 1);
    }

    /// A process that does not read while MADs keep coming one at a time (the agent wakes
    /// for each) fills its queue; the MADs beyond wait in the outbox and reach it, in order,
    /// once it reads again. A full outbox drops.
    #[test]
    fn a_process_that_reads_late_gets_every_mad_in_order() {
        let addr: IpAddr = "127.0.50.13".parse().unwrap();
        let agent = UnixDatagram::bind_addr(&agent_name(addr).unwrap()).unwrap();
        agent.set_nonblocking(true).unwrap();
        let link = MemberLink::open(addr, QpnBlock(6)).unwrap();
        let from: IpAddr = "127.0.50.14".parse().unwrap();
        let mad = |i: usize| -> [u8; MAD_LEN] { core::array::from_fn(|k| (i * 3 + k) as u8) };
        let mut outbox = MadOutbox::default();
        for i in 0..40 {
            assert!(outbox.push(QpnBlock(6), from, &mad(i)));
            assert_eq!(outbox.flush(&agent, addr), 0);
        }
        assert!(!outbox.is_empty(), "the queue held fewer than 40 datagrams");
        let mut got = link.received();
        while !outbox.is_empty() {
            assert_eq!(outbox.flush(&agent, addr), 0);
            got.extend(link.received());
        }
        assert_eq!(got, (0..40).map(|i| (from, mad(i))).collect::<Vec<_>>());
        for i in 0..MadOutbox::CAPACITY {
            assert!(outbox.push(QpnBlock(6), from, &mad(i)));
        }
        assert!(!outbox.push(QpnBlock(6), from, &mad(0)));
    }
}
