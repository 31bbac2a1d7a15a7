//! A fault-injecting wrapper around any [`Transport`], for tests over real networks: it drops
//! or duplicates chosen packets — "the `nth` packet with this BTH opcode sent (or received)",
//! or every such packet — and counts every packet it passes by opcode, so that a test can say
//! what reached the wire. Rules and counters sit behind a [`FaultControl`] handle the test
//! keeps (or a peer process drives from its command line), while the device owns the
//! wrapper. The in-memory [`Fabric`](super::Fabric) draws random faults; this one makes
//! exactly the faults asked for.
//!
//! Duplicates are made on send only (the packet goes to the wire twice); a received packet can
//! only be dropped. Without rules the wrapper passes whole batches through.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use softrnic_wire::Opcode;

use super::{Bytes, OutPacket, Ready, RecvBatch, Transport, TransportStats};

/// Which way a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the network.
    Rx,
    /// Sent to the network.
    Tx,
}

/// What a rule does to the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The packet is lost.
    Drop,
    /// The packet is sent twice (send direction only).
    Duplicate,
}

/// One fault: `action` on the packets going `dir` with BTH opcode `opcode` (`None`: any),
/// either the `nth` of them (0-based, counted from when the counters were last cleared) or,
/// with `nth` `None`, all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Which way.
    pub dir: Direction,
    /// Which opcode; `None` matches every packet.
    pub opcode: Option<Opcode>,
    /// Which one of them; `None` matches all.
    pub nth: Option<u64>,
    /// What to do.
    pub action: Action,
}

#[derive(Debug)]
struct State {
    rules: Vec<Rule>,
    /// Packets seen per direction (0: rx, 1: tx) and opcode byte, dropped ones included.
    seen: [[u64; 256]; 2],
    /// Packets seen per direction, any opcode.
    total: [u64; 2],
    dropped: u64,
    duplicated: u64,
}

fn dir_index(dir: Direction) -> usize {
    match dir {
        Direction::Rx => 0,
        Direction::Tx => 1,
    }
}

impl State {
    /// The action for the next packet going `dir` with opcode byte `op`, without counting it.
    fn action(&self, dir: Direction, op: u8) -> Option<Action> {
        let d = dir_index(dir);
        self.rules.iter().find_map(|r| {
            let (matches, count) = match r.opcode {
                Some(o) => (o.0 == op, self.seen[d][usize::from(op)]),
                None => (true, self.total[d]),
            };
            (r.dir == dir && matches && r.nth.is_none_or(|n| n == count)).then_some(r.action)
        })
    }

    fn count(&mut self, dir: Direction, op: u8, action: Option<Action>) {
        let d = dir_index(dir);
        self.seen[d][usize::from(op)] += 1;
        self.total[d] += 1;
        match action {
            Some(Action::Drop) => self.dropped += 1,
            Some(Action::Duplicate) => self.duplicated += 1,
            None => {}
        }
    }
}

/// The handle on a [`FaultInjector`]'s rules and counters. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FaultControl(Arc<Mutex<State>>);

impl Default for FaultControl {
    fn default() -> FaultControl {
        FaultControl(Arc::new(Mutex::new(State {
            rules: Vec::new(),
            seen: [[0; 256]; 2],
            total: [0; 2],
            dropped: 0,
            duplicated: 0,
        })))
    }
}

impl FaultControl {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a rule (the first matching rule wins).
    ///
    /// # Errors
    /// A duplicate on receive, which this wrapper cannot make.
    pub fn add(&self, rule: Rule) -> Result<(), &'static str> {
        if rule.dir == Direction::Rx && rule.action == Action::Duplicate {
            return Err("duplicates are made on send only");
        }
        self.lock().rules.push(rule);
        Ok(())
    }

    /// Removes every rule.
    pub fn clear_rules(&self) {
        self.lock().rules.clear();
    }

    /// Zeroes the counters (rules count their `nth` from here on).
    pub fn clear_counters(&self) {
        let mut s = self.lock();
        s.seen = [[0; 256]; 2];
        s.total = [0; 2];
        s.dropped = 0;
        s.duplicated = 0;
    }

    /// Packets with `opcode` seen going `dir`, dropped ones included, each duplicate once.
    pub fn seen(&self, dir: Direction, opcode: Opcode) -> u64 {
        self.lock().seen[dir_index(dir)][usize::from(opcode.0)]
    }

    /// Packets dropped so far.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Packets sent twice so far.
    pub fn duplicated(&self) -> u64 {
        self.lock().duplicated
    }
}

/// A [`Transport`] that applies a [`FaultControl`]'s rules to `T`'s packets.
#[derive(Debug)]
pub struct FaultInjector<T> {
    inner: T,
    control: FaultControl,
    keep: Vec<bool>,
}

impl<T: Transport> FaultInjector<T> {
    /// Wraps `inner`; returns the wrapper and the handle on its rules.
    pub fn new(inner: T) -> (FaultInjector<T>, FaultControl) {
        let control = FaultControl::default();
        let t = FaultInjector {
            inner,
            control: control.clone(),
            keep: Vec::new(),
        };
        (t, control)
    }
}

/// The BTH opcode byte of a UDP payload given in pieces (0 for an empty one).
fn first_byte(pieces: &[Bytes<'_>]) -> u8 {
    pieces.iter().find_map(Bytes::first).unwrap_or(0)
}

impl<T: Transport> Transport for FaultInjector<T> {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        if self.control.lock().rules.is_empty() {
            let n = self.inner.send_batch(pkts)?;
            let mut s = self.control.lock();
            for p in &pkts[..n] {
                s.count(Direction::Tx, first_byte(p.pieces), None);
            }
            return Ok(n);
        }
        // One packet at a time, so that a packet is counted once, when it is done with.
        for (i, p) in pkts.iter().enumerate() {
            let op = first_byte(p.pieces);
            let action = self.control.lock().action(Direction::Tx, op);
            if action != Some(Action::Drop) {
                match self.inner.send_batch(std::slice::from_ref(p)) {
                    Ok(0) => return Ok(i),
                    Ok(_) => {}
                    Err(e) if i == 0 => return Err(e),
                    Err(_) => return Ok(i),
                }
                if action == Some(Action::Duplicate) {
                    // The second copy is best effort, as a duplicating network's would be.
                    let _ = self.inner.send_batch(std::slice::from_ref(p));
                }
            }
            self.control.lock().count(Direction::Tx, op, action);
        }
        Ok(pkts.len())
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        let n = self.inner.recv_batch(batch)?;
        self.keep.clear();
        {
            let mut s = self.control.lock();
            for p in batch.iter() {
                let op = p.payload.first().copied().unwrap_or(0);
                let action = s.action(Direction::Rx, op);
                s.count(Direction::Rx, op, action);
                self.keep.push(action != Some(Action::Drop));
            }
        }
        if self.keep.iter().all(|k| *k) {
            return Ok(n);
        }
        for (r, _) in self.keep.iter().enumerate().filter(|(_, k)| !**k) {
            self.inner
                .note_dropped(r, "dropped: lost by the fault injector");
        }
        // Move the kept packets down over the dropped ones.
        let mut slots: Vec<(&mut [u8], &mut crate::transport::RecvMeta)> =
            batch.slots_mut().take(n).collect();
        let mut w = 0;
        for r in 0..n {
            if !self.keep[r] {
                continue;
            }
            if w != r {
                let (lo, hi) = slots.split_at_mut(r);
                let (dst, dst_meta) = &mut lo[w];
                let (src, src_meta) = &hi[0];
                let len = src_meta.len.min(src.len());
                dst[..len].copy_from_slice(&src[..len]);
                **dst_meta = **src_meta;
            }
            w += 1;
        }
        batch.set_len(w);
        Ok(w)
    }

    fn note_dropped(&mut self, index: usize, why: &'static str) {
        // `index` counts the packets kept; the inner transport's batch held them all.
        let mut kept = self.keep.iter().enumerate().filter(|(_, k)| **k);
        if let Some((r, _)) = kept.nth(index) {
            self.inner.note_dropped(r, why);
        }
    }

    fn release_received(&mut self) {
        self.inner.release_received();
    }

    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready> {
        self.inner.poll(timeout)
    }

    fn wants_icrc(&mut self, dst: SocketAddr, dest_qp: u32, len: usize) -> bool {
        self.inner.wants_icrc(dst, dest_qp, len)
    }

    fn source_port(&mut self, src_port: u16, dst: SocketAddr) -> u16 {
        self.inner.source_port(src_port, dst)
    }

    fn local_addr(&self) -> IpAddr {
        self.inner.local_addr()
    }

    fn join_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        self.inner.join_multicast(group)
    }

    fn leave_multicast(&mut self, group: IpAddr) -> io::Result<()> {
        self.inner.leave_multicast(group)
    }

    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.wait_fd()
    }

    fn adopt_receive_socket(&mut self, rx: std::net::UdpSocket) -> io::Result<()> {
        self.inner.adopt_receive_socket(rx)
    }
}

#[cfg(test)]
#[path = "faults_tests.rs"]
mod tests;
