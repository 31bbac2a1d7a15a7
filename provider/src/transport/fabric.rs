//! An in-memory network for deterministic tests, with seeded fault injection.
//!
//! Endpoints, each with an IP address, attach to one [`Fabric`]. Sending builds the whole IP
//! datagram — the IPv4 or IPv6 header a UDP socket with `IP_PMTUDISC_DO` would send (DF, IP ID
//! 0, TTL 64), a UDP header to port 4791 with checksum 0 as RoCEv2 senders send it (A17.2.2)
//! and the payload — so receivers get the real IP header and can verify the ICRC (A17.4.2) of
//! every packet.
//!
//! Faults, in the manner of smoltcp's `phy::FaultInjector` and s2n-quic's network model, each
//! drawn per packet from a seeded SplitMix64 generator (no clocks, no OS randomness): loss,
//! corruption (one random bit of the UDP payload flipped), duplication, reordering (the packet
//! is held back until `reorder_by` later packets to the same endpoint have arrived, or
//! `reorder_hold_ns` passed), and a one-way delay, fixed or with jitter (a further uniform draw
//! per packet, so that a packet drawing less overtakes the ones sent before it, as on a path
//! whose queues vary).
//!
//! Multicast (IBTA 10.5 over RoCE v2's IP multicast, annex A17): an endpoint joins a group
//! address with [`Transport::join_multicast`], and a datagram sent to a multicast address
//! reaches every endpoint that joined it — the sender too, as with `IP_MULTICAST_LOOP` —
//! each its own copy with its own fault draws, and [`super::RecvMeta::dst`] the group.
//!
//! Time is virtual: nanoseconds that the test harness passes to [`Fabric::advance_to`]; sends
//! are stamped with the fabric's current time. With zero delay a packet is in the destination's
//! inbox when `send_batch` returns. Endpoints are [`Transport`]s, so driver code runs over the
//! fabric unchanged; their [`Transport::poll`] never sleeps (only the harness moves time).
//! Everything lives behind one mutex, so one thread stepping the fabric is deterministic.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use softrnic_wire::frame::{emit_outer, IpHeader, UdpHeader, IPV6_HEADER_LEN, UDP_HEADER_LEN};
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::{OutPacket, Ready, RecvBatch, SegmentLimits, Transport, TransportStats, HOP_LIMIT};

/// The faults of a fabric. Rates are probabilities per packet, in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FabricConfig {
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that a packet (each copy, if duplicated) is held back.
    pub reorder: f64,
    /// A held-back packet arrives after this many later packets to the same endpoint...
    pub reorder_by: usize,
    /// ... or this long after it was due, whichever comes first.
    pub reorder_hold_ns: u64,
    /// Probability that one random bit of the UDP payload is flipped.
    pub corrupt: f64,
    /// One-way delay, in virtual nanoseconds...
    pub delay_ns: u64,
    /// ... and a further uniform `0..=jitter_ns` drawn per packet (each copy, if duplicated).
    pub jitter_ns: u64,
}

impl Default for FabricConfig {
    /// A perfect network: no faults, no delay (reordering, once enabled, by 3 packets or 100 µs).
    fn default() -> FabricConfig {
        FabricConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_by: 3,
            reorder_hold_ns: 100_000,
            corrupt: 0.0,
            delay_ns: 0,
            jitter_ns: 0,
        }
    }
}

/// Counters of a fabric (each duplicate counts as one more `delivered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FabricStats {
    /// Packets given to `send_batch`.
    pub sent: u64,
    /// Packets put into an inbox.
    pub delivered: u64,
    /// Packets lost.
    pub lost: u64,
    /// Packets duplicated.
    pub duplicated: u64,
    /// Packets held back for reordering.
    pub reordered: u64,
    /// Packets with a bit flipped.
    pub corrupted: u64,
    /// Packets to an address no endpoint has (a multicast group no endpoint joined), or to a
    /// port other than 4791.
    pub unroutable: u64,
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough for fault draws (the
/// fabric's, the userspace link's in `testbed`, and the seeded tests' workloads and mutations).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is negligible for packet sizes).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A datagram in the fabric: IP header, UDP header, UDP payload.
#[derive(Debug)]
struct Datagram {
    bytes: Vec<u8>,
    ip_len: usize,
    src: SocketAddr,
    /// The destination IP address: the endpoint's, or a multicast group's.
    dst: IpAddr,
}

#[derive(Debug)]
struct InFlight {
    dst: usize,
    held: bool,
    datagram: Datagram,
}

#[derive(Debug)]
struct Held {
    /// Later packets still to arrive before this one.
    after: usize,
    /// Virtual time by which it arrives anyway.
    deadline: u64,
    datagram: Datagram,
}

#[derive(Debug)]
struct Endpoint {
    addr: IpAddr,
    /// The multicast groups joined.
    groups: Vec<IpAddr>,
    inbox: VecDeque<Datagram>,
    held: Vec<Held>,
    stats: TransportStats,
}

#[derive(Debug)]
struct Inner {
    config: FabricConfig,
    rng: SplitMix64,
    now: u64,
    seq: u64,
    /// Keyed by (due time, sequence number): arrival order is deterministic.
    in_flight: BinaryHeap<Reverse<(u64, u64, usize)>>,
    /// The in-flight datagrams, by slot; `free_slots` lists the empty ones.
    slots: Vec<Option<InFlight>>,
    free_slots: Vec<usize>,
    /// Spare buffers, reused.
    pool: Vec<Vec<u8>>,
    endpoints: Vec<Endpoint>,
    stats: FabricStats,
}

/// An in-memory network. Clones share it.
#[derive(Debug, Clone)]
pub struct Fabric {
    inner: Arc<Mutex<Inner>>,
}

/// An endpoint of a [`Fabric`]: a [`Transport`] with an IP address.
#[derive(Debug, Clone)]
pub struct FabricEndpoint {
    inner: Arc<Mutex<Inner>>,
    index: usize,
    addr: IpAddr,
}

impl Fabric {
    /// A fabric with `config`'s faults, drawn from `seed`, at virtual time 0.
    pub fn new(config: FabricConfig, seed: u64) -> Fabric {
        Fabric {
            inner: Arc::new(Mutex::new(Inner {
                config,
                rng: SplitMix64(seed),
                now: 0,
                seq: 0,
                in_flight: BinaryHeap::new(),
                slots: Vec::new(),
                free_slots: Vec::new(),
                pool: Vec::new(),
                endpoints: Vec::new(),
                stats: FabricStats::default(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Attaches an endpoint with address `addr`; endpoints are numbered from 0 in order.
    ///
    /// # Errors
    ///
    /// `AddrInUse` if an endpoint already has `addr`.
    pub fn attach(&self, addr: IpAddr) -> io::Result<FabricEndpoint> {
        let mut f = self.lock();
        if f.endpoints.iter().any(|e| e.addr == addr) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{addr} is already attached to the fabric"),
            ));
        }
        f.endpoints.push(Endpoint {
            addr,
            groups: Vec::new(),
            inbox: VecDeque::new(),
            held: Vec::new(),
            stats: TransportStats::default(),
        });
        Ok(FabricEndpoint {
            inner: self.inner.clone(),
            index: f.endpoints.len() - 1,
            addr,
        })
    }

    /// Replaces the faults (from the next packet sent on).
    pub fn set_config(&self, config: FabricConfig) {
        self.lock().config = config;
    }

    /// The current virtual time.
    pub fn now(&self) -> u64 {
        self.lock().now
    }

    /// The virtual time as a [`Clock`](super::Clock): for a device or a capture on this
    /// fabric to read instead of the wall clock.
    pub fn clock(&self) -> super::Clock {
        let f = self.clone();
        super::Clock::new(move || Duration::from_nanos(f.now()))
    }

    /// Moves virtual time to `now` (never backwards) and delivers what is due by then.
    pub fn advance_to(&self, now: u64) {
        let mut f = self.lock();
        f.now = f.now.max(now);
        f.deliver_due();
    }

    /// When the next packet arrives (or a held one is released), if any is on its way: the
    /// harness's next wakeup.
    pub fn next_arrival(&self) -> Option<u64> {
        let f = self.lock();
        let flight = f.in_flight.peek().map(|Reverse((due, _, _))| *due);
        let held = f
            .endpoints
            .iter()
            .flat_map(|e| e.held.iter().map(|h| h.deadline))
            .min();
        flight.into_iter().chain(held).min()
    }

    /// Packets on their way (in flight or held back).
    pub fn in_flight(&self) -> usize {
        let f = self.lock();
        f.in_flight.len() + f.endpoints.iter().map(|e| e.held.len()).sum::<usize>()
    }

    /// The counters so far.
    pub fn stats(&self) -> FabricStats {
        self.lock().stats
    }
}

impl FabricEndpoint {
    /// The endpoint's number on its fabric.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// Writes the whole datagram of `p` — IP header `ip`, UDP header, payload — into `bytes`;
/// returns the IP header's length.
fn emit_datagram(ip: &IpHeader, p: &OutPacket<'_>, bytes: &mut Vec<u8>) -> io::Result<usize> {
    let udp = UdpHeader {
        src_port: p.src_port,
        dst_port: ROCE_V2_UDP_PORT,
        checksum: 0, // none, as RoCEv2 senders send it
    };
    let mut outer = [0u8; IPV6_HEADER_LEN + UDP_HEADER_LEN];
    let outer_len = emit_outer(ip, &udp, UDP_HEADER_LEN + p.len(), &mut outer)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    bytes.extend_from_slice(&outer[..outer_len]);
    for piece in p.pieces {
        piece.append_to(bytes);
    }
    Ok(ip.header_len())
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic elsewhere (a failed test assertion) must not hide behind a poisoned lock.
    inner.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b
    }

    /// Sends one packet from endpoint `from` through the faults.
    fn send(&mut self, from: usize, p: &OutPacket<'_>) -> io::Result<()> {
        let src_ip = self.endpoints[from].addr;
        let ip =
            IpHeader::udp_socket(src_ip, p.dst.ip(), HOP_LIMIT).map(|h| h.with_ident(p.segment));
        let Some(ip) = ip else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "destination address family differs from the local address's",
            ));
        };
        let payload_len = p.len();
        let udp_len = UDP_HEADER_LEN + payload_len;
        if udp_len > usize::from(u16::MAX) - IPV6_HEADER_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "datagram too long",
            ));
        }
        self.stats.sent += 1;
        {
            let st = &mut self.endpoints[from].stats;
            st.tx_packets += 1;
            st.tx_bytes += payload_len as u64;
        }
        if p.dst.port() != ROCE_V2_UDP_PORT {
            self.stats.unroutable += 1;
            return Ok(());
        }
        let src = SocketAddr::new(src_ip, p.src_port);
        if p.dst.ip().is_multicast() {
            return self.send_multicast(&ip, src, p);
        }
        let Some(dst) = self.endpoints.iter().position(|e| e.addr == p.dst.ip()) else {
            self.stats.unroutable += 1;
            return Ok(());
        };
        if self.rng.chance(self.config.loss) {
            self.stats.lost += 1;
            return Ok(());
        }
        let mut bytes = self.buffer();
        let ip_len = emit_datagram(&ip, p, &mut bytes)?;
        let datagram = Datagram {
            bytes,
            ip_len,
            src,
            dst: p.dst.ip(),
        };
        self.fault_and_launch(dst, datagram);
        Ok(())
    }

    /// Sends a copy of a packet to a multicast group to every endpoint that joined it, each
    /// through its own faults.
    fn send_multicast(
        &mut self,
        ip: &IpHeader,
        src: SocketAddr,
        p: &OutPacket<'_>,
    ) -> io::Result<()> {
        let group = p.dst.ip();
        let mut template = self.buffer();
        let ip_len = emit_datagram(ip, p, &mut template)?;
        let mut reached = false;
        for dst in 0..self.endpoints.len() {
            if !self.endpoints[dst].groups.contains(&group) {
                continue;
            }
            reached = true;
            if self.rng.chance(self.config.loss) {
                self.stats.lost += 1;
                continue;
            }
            let mut bytes = self.buffer();
            bytes.extend_from_slice(&template);
            let datagram = Datagram {
                bytes,
                ip_len,
                src,
                dst: group,
            };
            self.fault_and_launch(dst, datagram);
        }
        self.stats.unroutable += u64::from(!reached);
        self.pool.push(template);
        Ok(())
    }

    /// Corrupts and duplicates a datagram by the faults' draws and puts it (and its copy) on
    /// its way to endpoint `dst`.
    fn fault_and_launch(&mut self, dst: usize, mut datagram: Datagram) {
        let at = datagram.ip_len + UDP_HEADER_LEN;
        let payload_len = datagram.bytes.len() - at;
        if payload_len > 0 && self.rng.chance(self.config.corrupt) {
            let bit = self.rng.below(payload_len as u64 * 8) as usize;
            datagram.bytes[at + bit / 8] ^= 1 << (bit % 8);
            self.stats.corrupted += 1;
        }
        if self.rng.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            let mut copy = self.buffer();
            copy.extend_from_slice(&datagram.bytes);
            let dup = Datagram {
                bytes: copy,
                ..datagram
            };
            self.launch(dst, dup);
        }
        self.launch(dst, datagram);
    }

    /// Puts a datagram on its way to endpoint `dst`.
    fn launch(&mut self, dst: usize, datagram: Datagram) {
        let held = self.rng.chance(self.config.reorder);
        let mut due = self.now.saturating_add(self.config.delay_ns);
        if self.config.jitter_ns > 0 {
            // Drawn only with jitter: the draws of a fabric without it stay as they were.
            due = due.saturating_add(self.rng.below(self.config.jitter_ns + 1));
        }
        let flight = Some(InFlight {
            dst,
            held,
            datagram,
        });
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i] = flight;
                i
            }
            None => {
                self.slots.push(flight);
                self.slots.len() - 1
            }
        };
        self.seq += 1;
        self.in_flight.push(Reverse((due, self.seq, slot)));
    }

    /// Delivers what is due by `now`, and releases held packets whose time has come.
    fn deliver_due(&mut self) {
        while let Some(&Reverse((due, _, slot))) = self.in_flight.peek() {
            if due > self.now {
                break;
            }
            self.in_flight.pop();
            let Some(f) = self.slots[slot].take() else {
                continue;
            };
            self.free_slots.push(slot);
            if f.held {
                self.stats.reordered += 1;
                self.endpoints[f.dst].held.push(Held {
                    after: self.config.reorder_by,
                    deadline: due.saturating_add(self.config.reorder_hold_ns),
                    datagram: f.datagram,
                });
                continue;
            }
            let ep = &mut self.endpoints[f.dst];
            ep.inbox.push_back(f.datagram);
            self.stats.delivered += 1;
            for h in &mut ep.held {
                h.after = h.after.saturating_sub(1);
            }
            self.release_held(f.dst);
        }
        for i in 0..self.endpoints.len() {
            self.release_held(i);
        }
    }

    /// Moves endpoint `i`'s held packets whose count or deadline ran out into its inbox.
    fn release_held(&mut self, i: usize) {
        let now = self.now;
        let ep = &mut self.endpoints[i];
        let mut k = 0;
        while k < ep.held.len() {
            if ep.held[k].after == 0 || ep.held[k].deadline <= now {
                let h = ep.held.remove(k);
                ep.inbox.push_back(h.datagram);
                self.stats.delivered += 1;
            } else {
                k += 1;
            }
        }
    }
}

impl Transport for FabricEndpoint {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        let mut f = lock(&self.inner);
        for (i, p) in pkts.iter().enumerate() {
            if let Err(e) = f.send(self.index, p) {
                f.deliver_due();
                return if i == 0 { Err(e) } else { Ok(i) };
            }
        }
        f.deliver_due();
        Ok(pkts.len())
    }

    /// Runs go out as the kernel cuts them: each packet on its own, segment `k` with IPv4
    /// Identification `k` (so the receiver's ICRC check covers the emitter's numbering).
    fn segment_limits(&self) -> SegmentLimits {
        SegmentLimits {
            max_segments: 64,
            max_bytes: usize::from(u16::MAX) - IPV6_HEADER_LEN - UDP_HEADER_LEN,
            max_pieces: usize::MAX,
        }
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        let mut f = lock(&self.inner);
        let f = &mut *f;
        let ep = &mut f.endpoints[self.index];
        let mut n = 0;
        for (buf, meta) in batch.slots_mut() {
            let Some(d) = ep.inbox.pop_front() else {
                break;
            };
            let payload = &d.bytes[d.ip_len + UDP_HEADER_LEN..];
            let len = payload.len().min(buf.len());
            buf[..len].copy_from_slice(&payload[..len]);
            meta.src = d.src;
            meta.dst = d.dst;
            meta.len = len;
            meta.truncated = len < payload.len();
            meta.set_ip_header(&d.bytes[..d.ip_len]);
            ep.stats.rx_packets += 1;
            ep.stats.rx_bytes += len as u64;
            ep.stats.rx_truncated += u64::from(meta.truncated);
            f.pool.push(d.bytes);
            n += 1;
        }
        batch.set_len(n);
        Ok(n)
    }

    /// Never sleeps: virtual time moves only by [`Fabric::advance_to`].
    fn poll(&mut self, _timeout: Option<Duration>) -> io::Result<Ready> {
        let f = lock(&self.inner);
        Ok(Ready {
            recv: !f.endpoints[self.index].inbox.is_empty(),
            send: true,
        })
    }

    fn local_addr(&self) -> IpAddr {
        self.addr
    }

    /// Joins `group` (a multicast address; `InvalidInput` otherwise, `AddrInUse` if joined).
    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        if !group.is_multicast() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a multicast address",
            ));
        }
        let mut f = lock(&self.inner);
        let groups = &mut f.endpoints[self.index].groups;
        if groups.contains(&group) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "group already joined",
            ));
        }
        groups.push(group);
        Ok(())
    }

    /// Leaves `group` (`InvalidInput` if not joined).
    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        let mut f = lock(&self.inner);
        let groups = &mut f.endpoints[self.index].groups;
        let i = groups
            .iter()
            .position(|&g| g == group)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "group not joined"))?;
        groups.swap_remove(i);
        Ok(())
    }

    fn stats(&self) -> TransportStats {
        lock(&self.inner).endpoints[self.index].stats
    }
}

#[cfg(test)]
#[path = "fabric_tests.rs"]
mod tests;
