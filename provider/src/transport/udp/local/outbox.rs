//! The sending side of the host-local path (see `local/mod.rs`): which destinations have an
//! inbox on this host, the lane each one gave, the datagrams written into it, and the
//! doorbell rung for those left unread (`local/unread.rs`).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use softrnic_wire::{bth, ROCE_V2_UDP_PORT};

use super::inbox::{closed, lane_message, BELL_MESSAGE};
use super::unread::{Look, Unread};
use super::{inbox_name, ring, Region, SlotHeader, LANES, SLOTS, SLOT_PAYLOAD};
use crate::host::block::QpnBlock;
use crate::host::fdpass;
use crate::transport::OutPacket;

/// How long a destination without an inbox goes over UDP before the next look for one.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// How often a sender waiting for its lane looks whether it came.
const LANE_LOOK: Duration = Duration::from_micros(100);

/// How often a sender with a lane checks that the receiver is still there.
const ALIVE_LOOK: Duration = Duration::from_millis(10);

/// The most slots of a run written before they are published ([`Outbox::push`]): a long
/// run's first datagrams are not held back for the whole copy (64 KiB here, a few
/// microseconds).
const PUBLISH_EVERY: u64 = 16;

/// The inboxes this device sends to, by destination address and QPN block.
#[derive(Debug)]
pub(crate) struct Outbox {
    local: IpAddr,
    peers: FxHashMap<(IpAddr, u16), Peer>,
    /// Datagrams written into lanes, and their bytes.
    pub sent: u64,
    pub bytes: u64,
    /// Datagrams dropped for a full lane.
    pub dropped: u64,
    /// Doorbells rung for datagrams a receiver left unread.
    pub rung: u64,
    /// Lanes with datagrams written and not known to be read (at least).
    unread_lanes: usize,
}

#[derive(Debug)]
enum Peer {
    /// No inbox (another host, the host's agent, a device without one): UDP until `look`.
    Remote { look: Instant },
    /// Connected to the inbox, waiting for the lane (UDP meanwhile).
    Waiting {
        stream: UnixStream,
        lane: Option<(usize, Region)>,
        look: Instant,
    },
    /// Writing into the lane.
    Local(Box<Lane>),
}

#[derive(Debug)]
struct Lane {
    region: Region,
    lane: usize,
    /// Slots written (all published once [`Outbox::push`] returns).
    tail: u64,
    /// Slots the receiver had consumed when last read.
    head: u64,
    stream: UnixStream,
    bell: OwnedFd,
    look: Instant,
    /// The watch over datagrams written and not known to be read.
    unread: Option<Unread>,
}

impl Lane {
    /// Publishes the slots written from `from` on, in order.
    ///
    /// # Safety
    /// The caller is the lane's producer and wrote those slots.
    unsafe fn publish(&self, from: u64) {
        let mut seq = from;
        while seq != self.tail {
            // SAFETY: as the caller promises.
            unsafe { self.region.publish(self.lane, seq) };
            seq = seq.wrapping_add(1);
        }
    }
}

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Over UDP.
    Udp,
    /// Into the lane of the inbox of this key.
    Local((IpAddr, u16)),
}

impl Outbox {
    pub fn new(local: IpAddr) -> Outbox {
        Outbox {
            local,
            peers: FxHashMap::default(),
            sent: 0,
            bytes: 0,
            dropped: 0,
            rung: 0,
            unread_lanes: 0,
        }
    }

    /// Where `p` goes at `now`: into a lane if its destination has an inbox on this host that
    /// gave this device one, and it fits a slot; else over UDP. Looks for the inbox the first
    /// time a destination is seen (and again after [`LOOK_AGAIN`]).
    pub fn route(&mut self, p: &OutPacket<'_>, now: Instant) -> Route {
        match dest_qp(p) {
            Some(qpn) => self.route_to(p.dst, qpn, p.len(), now),
            None => Route::Udp,
        }
    }

    /// [`Outbox::route`] for a datagram of `len` bytes to `dst` whose BTH names `qpn`.
    pub fn route_to(&mut self, dst: SocketAddr, qpn: u32, len: usize, now: Instant) -> Route {
        let ip = dst.ip();
        if dst.port() != ROCE_V2_UDP_PORT
            || ip.is_multicast()
            || ip.is_ipv4() != self.local.is_ipv4()
            || len > SLOT_PAYLOAD
        {
            return Route::Udp;
        }
        let key = (ip, QpnBlock::of(qpn).0);
        let peer = self
            .peers
            .entry(key)
            .or_insert_with(|| Peer::Remote { look: now });
        peer.advance(key, now);
        match peer {
            Peer::Local(_) => Route::Local(key),
            _ => Route::Udp,
        }
    }

    /// Writes the run `pkts` (consecutive packets of a batch, all routed to `key`) into its
    /// lane, as many as it has room for; the rest are dropped (counted), as a full socket
    /// buffer drops them. Returns how many were written.
    ///
    /// The run is published whole (up to [`PUBLISH_EVERY`] slots at a time): its slots are
    /// written first, their sequence words stored after. Published one by one, a receiver
    /// polling the lane took the first datagrams of a run without the rest: an ACK without
    /// the RDMA WRITE that left with it (`driver/round.rs`), after which the application,
    /// its send complete, stopped polling to spin on its memory, and the WRITE waited for
    /// the doorbell ([`super::unread::STALE`]).
    pub fn push(&mut self, key: (IpAddr, u16), pkts: &[OutPacket<'_>]) -> usize {
        let Some(Peer::Local(lane)) = self.peers.get_mut(&key) else {
            return 0;
        };
        let n = pkts.len() as u64;
        if lane.tail.wrapping_sub(lane.head) + n > SLOTS {
            lane.head = lane.region.head(lane.lane).load(Ordering::Acquire);
        }
        let room = SLOTS - lane.tail.wrapping_sub(lane.head).min(SLOTS);
        let (pkts, over) = pkts.split_at(room.min(n) as usize);
        self.dropped += over.len() as u64;
        if pkts.is_empty() {
            return 0;
        }
        let mut unpublished = lane.tail;
        for p in pkts {
            let h = SlotHeader {
                len: p.len(),
                src_port: p.src_port,
                ident: p.ident,
                src: self.local,
            };
            // SAFETY: this outbox is the lane's producer, and the slot is free (checked above).
            unsafe {
                lane.region.write_slot(lane.lane, lane.tail, &h, |mut at| {
                    for piece in p.pieces {
                        // SAFETY: the slot has room for `h.len` bytes, the pieces' sum; a
                        // piece is readable for its length (`Bytes`), and the slot is not
                        // memory a piece can lie in.
                        std::ptr::copy_nonoverlapping(piece.as_ptr(), at, piece.len());
                        at = at.add(piece.len());
                    }
                });
            }
            lane.tail = lane.tail.wrapping_add(1);
            self.sent += 1;
            self.bytes += h.len as u64;
            if lane.tail.wrapping_sub(unpublished) == PUBLISH_EVERY {
                // SAFETY: this outbox is the lane's producer, and wrote these slots.
                unsafe { lane.publish(unpublished) };
                unpublished = lane.tail;
            }
        }
        // SAFETY: as above.
        unsafe { lane.publish(unpublished) };
        lane.region
            .tail(lane.lane)
            .store(lane.tail, Ordering::Release);
        // Publishing before reading `sleeping`, as the sleeping thread sets it before it
        // looks at the slots (see `local/mod.rs`).
        fence(Ordering::SeqCst);
        if lane.region.sleeping().load(Ordering::SeqCst) != 0 {
            ring(&lane.bell);
        }
        if lane.unread.is_none() {
            lane.unread = Some(Unread::new(lane.head));
            self.unread_lanes += 1;
        }
        pkts.len()
    }

    /// Looks at the lanes with datagrams not known to be read, and rings the receivers that
    /// stopped reading theirs (`local/unread.rs`). Reads nothing shared when every lane
    /// was read at the last look.
    pub fn watch(&mut self) {
        if self.unread_lanes == 0 {
            return;
        }
        let mut now = None;
        let mut clock = || *now.get_or_insert_with(Instant::now);
        let mut left = 0;
        for peer in self.peers.values_mut() {
            let Peer::Local(lane) = peer else {
                continue;
            };
            let Some(u) = &mut lane.unread else {
                continue;
            };
            lane.head = lane.region.head(lane.lane).load(Ordering::Acquire);
            match u.look(lane.head, lane.tail, &mut clock) {
                Look::Read => lane.unread = None,
                Look::Waiting => left += 1,
                Look::Ring => {
                    ring(&lane.bell);
                    self.rung += 1;
                    left += 1;
                }
            }
        }
        self.unread_lanes = left;
    }

    /// Destinations with a lane now.
    pub fn lanes(&self) -> usize {
        self.peers
            .values()
            .filter(|p| matches!(p, Peer::Local(_)))
            .count()
    }
}

impl Peer {
    /// Moves on at `now` where it is time: looks for the inbox, for the lane, or whether the
    /// receiver is still there.
    fn advance(&mut self, key: (IpAddr, u16), now: Instant) {
        let due = match self {
            Peer::Remote { look } | Peer::Waiting { look, .. } => now >= *look,
            Peer::Local(lane) => now >= lane.look,
        };
        if !due {
            return;
        }
        let gone = Peer::Remote {
            look: now + LOOK_AGAIN,
        };
        *self = match std::mem::replace(self, Peer::Remote { look: now }) {
            Peer::Remote { .. } => match connect(key) {
                Some(stream) => Peer::Waiting {
                    stream,
                    lane: None,
                    look: now,
                },
                None => gone,
            },
            Peer::Waiting {
                stream, mut lane, ..
            } => match receive_lane(&stream, &mut lane) {
                Ok(Some(bell)) => {
                    let (n, region) = lane.expect("the lane comes before the doorbell");
                    region.populate_lane(n);
                    let tail = region.tail(n).load(Ordering::Acquire);
                    let head = region.head(n).load(Ordering::Acquire);
                    Peer::Local(Box::new(Lane {
                        region,
                        lane: n,
                        tail,
                        head,
                        stream,
                        bell,
                        look: now + ALIVE_LOOK,
                        unread: None,
                    }))
                }
                Ok(None) => Peer::Waiting {
                    stream,
                    lane,
                    look: now + LANE_LOOK,
                },
                Err(_) => gone,
            },
            // The receiver is gone: a device started again on its address has a new inbox,
            // found at the next look.
            Peer::Local(lane) if closed(&lane.stream) => Peer::Remote {
                look: now + LANE_LOOK,
            },
            Peer::Local(mut lane) => {
                lane.look = now + ALIVE_LOOK;
                Peer::Local(lane)
            }
        };
    }
}

/// The QP a packet is for (the BTH's DestQP), if its first piece holds the BTH.
fn dest_qp(p: &OutPacket<'_>) -> Option<u32> {
    let mut b = [0u8; bth::HEADER_LEN];
    p.pieces.first()?.split_at(b.len())?.0.copy_to(&mut b);
    Some(bth::Packet::new_unchecked(&b[..]).dest_qp())
}

/// Connects to the inbox for `key`: the one of its QPN block's process, else the one of a
/// device owning the address.
fn connect((addr, block): (IpAddr, u16)) -> Option<UnixStream> {
    [Some(QpnBlock(block)), None].into_iter().find_map(|b| {
        let name = UnixAddr::from_abstract_name(inbox_name(addr, b)).ok()?;
        let s = UnixStream::connect_addr(&name).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    })
}

/// Reads what the inbox sent so far: the lane and the region (kept in `lane`), then the
/// doorbell, returned. `Ok(None)`: not all of it yet.
///
/// # Errors
/// The inbox turned this sender away (closed the connection), or sent something else.
fn receive_lane(s: &UnixStream, lane: &mut Option<(usize, Region)>) -> io::Result<Option<OwnedFd>> {
    let invalid = || io::Error::from(io::ErrorKind::InvalidData);
    let mut buf = [0u8; 8];
    if lane.is_none() {
        let Some(fd) = read_message(s, &mut buf)? else {
            return Ok(None);
        };
        let n = u32::from_le_bytes(buf[4..].try_into().expect("4 bytes")) as usize;
        if n >= LANES || buf != lane_message(n) {
            return Err(invalid());
        }
        *lane = Some((n, Region::open(fd)?));
    }
    match read_message(s, &mut buf)? {
        Some(bell) if &buf == BELL_MESSAGE => Ok(Some(bell)),
        Some(_) => Err(invalid()),
        None => Ok(None),
    }
}

/// One message of the inbox with its descriptor; `Ok(None)` if none is there yet.
fn read_message(s: &UnixStream, buf: &mut [u8; 8]) -> io::Result<Option<OwnedFd>> {
    match fdpass::recv(s, buf) {
        Ok(Some(Some(fd))) => Ok(Some(fd)),
        Ok(Some(None)) => Err(io::ErrorKind::InvalidData.into()),
        Ok(None) => Err(io::ErrorKind::ConnectionAborted.into()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}
