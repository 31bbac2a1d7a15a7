//! The link between the agent and each process's connection manager: Unix datagrams on
//! abstract names, one per side. Over it a process registers the Service IDs it listens on
//! (the agent answers with an errno: `EADDRINUSE` if another process has one), and the agent
//! hands it the MADs that `mad_route.rs` says are its own, with the address they came from.
//!
//! Datagrams, not the stream each process keeps to the agent: a MAD is a message, and the
//! agent must never block on a process that does not read; if a process's queue is full the
//! MAD is dropped, as the network may drop it, and its sender retries.
//!
//! A record is [`RECORD_LEN`] bytes:
//!
//! ```text
//!  byte 0      kind: b'L' listen, b'U' unlisten, b'A' answer, b'M' MAD
//!  byte 1      address family of bytes 16-31 (4 or 6; MAD only)
//!  byte 2-3    QPN block of the process (listen, unlisten), little-endian
//!  byte 4-7    errno (answer), little-endian
//!  byte 8-15   Service ID (listen, unlisten), little-endian
//!  byte 16-31  the MAD's source address (IPv4 in bytes 16-19)
//!  byte 32-287 the MAD
//! ```

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use softrnic_wire::mad::MAD_LEN;

use super::block::QpnBlock;

/// Bytes of a record.
pub const RECORD_LEN: usize = 32 + MAD_LEN;

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
    /// A process listens on a Service ID.
    Listen {
        /// Its block.
        block: QpnBlock,
        /// The Service ID.
        service: u64,
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
        /// 0 or the errno.
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
            Record::Listen { block, service } | Record::Unlisten { block, service } => {
                b[0] = if matches!(self, Record::Listen { .. }) {
                    b'L'
                } else {
                    b'U'
                };
                b[2..4].copy_from_slice(&block.0.to_le_bytes());
                b[8..16].copy_from_slice(&service.to_le_bytes());
            }
            Record::Answer { errno } => {
                b[0] = b'A';
                b[4..8].copy_from_slice(&errno.to_le_bytes());
            }
            Record::Mad { from, mad } => {
                b[0] = b'M';
                match from {
                    IpAddr::V4(a) => {
                        b[1] = 4;
                        b[16..20].copy_from_slice(&a.octets());
                    }
                    IpAddr::V6(a) => {
                        b[1] = 6;
                        b[16..32].copy_from_slice(&a.octets());
                    }
                }
                b[32..].copy_from_slice(&mad);
            }
        }
        b
    }

    /// The record in `b`, if it is one.
    pub fn decode(b: &[u8]) -> Option<Record> {
        let b: &[u8; RECORD_LEN] = b.try_into().ok()?;
        let block = QpnBlock(u16::from_le_bytes([b[2], b[3]]));
        let service = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        Some(match b[0] {
            b'L' => Record::Listen { block, service },
            b'U' => Record::Unlisten { block, service },
            b'A' => Record::Answer {
                errno: i32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            },
            b'M' => Record::Mad {
                from: match b[1] {
                    4 => IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19])),
                    6 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&b[16..32]).ok()?)),
                    _ => return None,
                },
                mad: b[32..].try_into().expect("a MAD"),
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
}

/// How long a process waits for the agent's answer to a request.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

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
        requests.set_read_timeout(Some(ANSWER_WAIT))?;
        Ok(MemberLink {
            addr,
            block,
            mads,
            requests: Mutex::new(requests),
        })
    }

    /// Registers `service` with the agent: REQs and SIDR_REQs for it come here from now on.
    ///
    /// # Errors
    /// `EADDRINUSE` if another process listens on it; `TimedOut` if the agent did not answer.
    pub fn listen(&self, service: u64) -> io::Result<()> {
        let block = self.block;
        let errno = self.request(&Record::Listen { block, service })?;
        match errno {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
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

    /// The next MAD the agent handed over, and where it came from, if there is one.
    pub fn recv(&self) -> Option<(IpAddr, [u8; MAD_LEN])> {
        let mut buf = [0u8; RECORD_LEN];
        loop {
            let n = self.mads.recv(&mut buf).ok()?;
            if let Some(Record::Mad { from, mad }) = Record::decode(&buf[..n]) {
                return Some((from, mad));
            }
        }
    }

    /// The descriptor to poll for MADs.
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.mads)
    }

    /// Sends `r` to the agent and waits for its answer.
    fn request(&self, r: &Record) -> io::Result<i32> {
        let s = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        s.send_to_addr(&r.encode(), &agent_name(self.addr)?)?;
        let mut buf = [0u8; RECORD_LEN];
        loop {
            let n = s.recv(&mut buf).map_err(|e| match e.kind() {
                io::ErrorKind::WouldBlock => io::ErrorKind::TimedOut.into(),
                _ => e,
            })?;
            if let Some(Record::Answer { errno }) = Record::decode(&buf[..n]) {
                return Ok(errno);
            }
        }
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
            },
            Record::Unlisten {
                block: QpnBlock(1023),
                service: u64::MAX,
            },
            Record::Answer {
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
}
