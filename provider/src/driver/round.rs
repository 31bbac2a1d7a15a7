//! One round of progress of a running device ([`super::device`]): receive a batch and hand it
//! to the NIC, run due timers, send what the QPs have. Who makes the round decides what it
//! does ([`Round`]); a post makes one for its QP alone ([`transmit_qp`]).
//!
//! A busy poller's empty polls are kept short, as the loop's length is part of every answer's
//! wait: every use of the NIC through [`Device::nic`](super::device::Device::nic) marks the device *dirty*, and a poll
//! round that receives nothing skips the NIC entirely (no lock, no pass over the QPs) unless
//! the device is dirty or a QP's timer is due (which it reads the clock for only every
//! `CLOCK_EVERY`-th time). A round of progress clears the mark before it looks at the QPs, so
//! a change made meanwhile marks the device again and is picked up by the next round.
//!
//! Latency: a poll that receives packets which complete work requests, or SENDs and RDMA
//! WRITEs to a QP whose own requests are outstanding (a conversation, whose application may
//! learn of a WRITE from its memory), returns *before* sending what the packets called for
//! (typically the responder's ACK): the application usually answers with a post, and the ACK
//! then leaves in the same `sendmmsg` as the answer. In a ping-pong
//! of RDMA WRITEs (perftest's `ib_write_lat`) each side's poll for its send completion then
//! receives the peer's WRITE with the ACK it waits for, and nothing is left for the progress
//! thread to do. The deferred transmit waits for a post at most [`DEFER_LIMIT`] (rounds that
//! receive nothing send it after that) and at most the fourth receiving round in a row. The
//! progress thread defers the same way for an application that polled a moment ago
//! ([`ANSWERING`]) and now spins on its memory. A round that defers still runs the timers
//! that are due, which another QP's stream of completions would otherwise put off.
//!
//! A round only looks at the QPs it has reason to: those its packets went to, those a post
//! changed, those owed a transmit by earlier rounds, those whose timers are due (which the
//! NIC keeps in a heap, `nic/deadlines.rs`) and those waiting for room in the send window
//! (`nic/turns.rs`). Every QP is looked at (a full pass: timers, completions, transmit,
//! deadlines) only after a change through the API (the dirty mark), for a multicast packet,
//! before a QP is destroyed, and by the progress thread once every [`SWEEP_EVERY`]. So a
//! round trip costs the same with one QP as with many idle ones (`cargo bench -p
//! softrnic-uapi --bench engine_rtt`), and a round of 1024 busy QPs' ACKs costs what its
//! packets do.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::device::{lock, Inner, BATCH};
use super::emit::Emitter;
use super::ingress::{accept, Rejected};
use softrnic_wire::opcode::Operation;

use crate::nic::mcast::MULTICAST_QPN;
use crate::nic::Nic;
use crate::qp::TxQueue;
use crate::transport::{RecvBatch, Transport};

/// Poll rounds in a row that may return completions before transmitting (see the module
/// comment): enough for a send completion and a receive arriving in two batches.
const MAX_DEFERRED: u8 = 3;

/// How long the transmit a poll round deferred may wait for the application's post: the
/// packets that complete a request often arrive a batch or two after the request (a peer's
/// answer and its ACK leave in one `sendmmsg`, and the receiver may look between the two),
/// and the ACK of a request the application learns of from memory (an RDMA WRITE) goes
/// best with its answer too. An application that does not answer lets it go after this.
/// Long enough for an answer that a preemption delays (an ACK sent ahead of the answer
/// makes the peer stop polling before the answer comes, and then the peer's progress
/// thread must wake for it), short against any ACK timeout (4 us x 2^timeout, 67 ms for
/// perftest's 14).
const DEFER_LIMIT: Duration = Duration::from_micros(50);

/// An application that polled this recently is taken to answer what it receives: the
/// progress thread defers the transmit of a round as a poll round does.
const ANSWERING: Duration = Duration::from_micros(200);

/// How often the progress thread's rounds look at every QP when nothing else asks for it
/// (see the module comment): in between they look, as a poll's round does, at the QPs their
/// packets went to and those with a due timer or a turn. A full pass in every round made
/// the thread of a target of 1024 QPs spend a quarter of its time walking the QPs
/// (`softrnic perf --qps`); once a millisecond it is the same safety net at no cost.
const SWEEP_EVERY: Duration = Duration::from_millis(1);

/// While a timer is armed, a poll round that receives nothing reads the clock (to see whether
/// the timer is due) only every this-many rounds: an empty round is then a receive call and
/// little else. A deadline is so met a few microseconds late at most (8 empty polls), short
/// of the RNR timer's 10 us step and of the ACK timer's 8 us at its shortest (timeout 1).
const CLOCK_EVERY: u8 = 8;

/// The transport and what rounds keep from one to the next, behind the device's transport
/// lock.
pub(super) struct Io {
    pub(super) transport: Box<dyn Transport + Send>,
    pub(super) emitter: Emitter,
    batch: RecvBatch,
    txs: TxQueue,
    /// Consecutive poll rounds that returned completions without transmitting.
    tx_deferred: u8,
    /// Until when the deferred transmit may wait for a post (see [`DEFER_LIMIT`]).
    deferred_until: Option<Instant>,
    /// No later than the QPs' earliest deadline: the NIC's after a full pass or a round of
    /// timers (`nic/deadlines.rs`); a QP's round only brings it forward (a deadline it moves
    /// back makes one early round of timers, which looks at the QPs it names only).
    next_due: Option<Instant>,
    /// Empty poll rounds since one last read the clock (see [`CLOCK_EVERY`]).
    unclocked: u8,
    /// The QPs the last batch received went to.
    touched: QpSet,
    /// The QPs whose transmit the poll rounds deferred (`tx_deferred` rounds in a row).
    owed: QpSet,
    /// When the progress thread's rounds last made a full pass (see [`SWEEP_EVERY`]).
    swept: Option<Instant>,
    /// Posts since the last round that received (see [`after_post`]).
    posts_unreceived: u8,
}

/// A few QPNs (those one batch or a few deferred rounds concern), or all of them: a set with
/// a fixed capacity, which gives up to "all" rather than allocate.
#[derive(Debug)]
struct QpSet {
    qpns: Vec<u32>,
    all: bool,
}

impl QpSet {
    /// Room for the QPs of every packet of `MAX_DEFERRED + 1` batches.
    const CAPACITY: usize = BATCH * (MAX_DEFERRED as usize + 1);

    fn new() -> QpSet {
        QpSet {
            qpns: Vec::with_capacity(QpSet::CAPACITY),
            all: false,
        }
    }

    fn clear(&mut self) {
        self.qpns.clear();
        self.all = false;
    }

    fn is_empty(&self) -> bool {
        !self.all && self.qpns.is_empty()
    }

    /// Adds `qpn`; the multicast QPN (a packet to the QPs of a group) stands for all.
    fn add(&mut self, qpn: u32) {
        if qpn == MULTICAST_QPN || self.qpns.len() == QpSet::CAPACITY {
            self.all = true;
        } else if !self.all && !self.qpns.contains(&qpn) {
            self.qpns.push(qpn);
        }
    }

    fn add_all(&mut self, other: &QpSet) {
        self.all |= other.all;
        for &q in &other.qpns {
            self.add(q);
        }
    }

    fn remove(&mut self, qpn: u32) {
        self.qpns.retain(|&q| q != qpn);
    }
}

impl Io {
    /// Until when a deferred transmit waits for a post (see [`DEFER_LIMIT`]), if one does.
    pub(super) fn deferred_until(&self) -> Option<Instant> {
        self.deferred_until
    }

    /// Nothing is owed any more: the deferral, and its limit, start afresh.
    fn end_deferral(&mut self) {
        self.tx_deferred = 0;
        self.deferred_until = None;
    }

    /// The scratch state of a device sending with `emitter` over `transport`.
    pub(super) fn new(transport: Box<dyn Transport + Send>, emitter: Emitter) -> Io {
        Io {
            transport,
            emitter,
            batch: RecvBatch::new(BATCH, 4096 + 512),
            txs: TxQueue::new(),
            tx_deferred: 0,
            deferred_until: None,
            next_due: None,
            unclocked: 0,
            touched: QpSet::new(),
            owed: QpSet::new(),
            swept: None,
            posts_unreceived: 0,
        }
    }
}

/// What a round of progress did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// Packets received and sent.
    pub packets: usize,
    /// Whether it looked at the NIC (or another thread was making a round): if not, nothing
    /// changed for the CQs either.
    pub looked: bool,
}

impl Default for Moved {
    /// Nothing moved; the CQs may have changed all the same (another thread's round, a
    /// failed device's flush).
    fn default() -> Moved {
        Moved {
            packets: 0,
            looked: true,
        }
    }
}

/// Who makes a round of progress, which decides what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// The progress thread: receive, then transmit.
    Thread,
    /// The application's poll: receive; transmit unless the packets completed work requests
    /// (see the module comment).
    Poll,
    /// A flush before a QP is destroyed: transmit only, every QP, held ACKs included
    /// (receiving is for the thread or the next poll). A post's round is [`transmit_qp`].
    Flush,
}

/// What one received batch brought.
#[derive(Debug, Clone, Copy, Default)]
struct Received {
    packets: usize,
    /// Completions the packets produced.
    completed: usize,
    /// Whether a SEND or an RDMA WRITE came, which the responders answer with plain ACKs (a
    /// READ or atomic request's answer, which its requester waits for, is not one to hold
    /// back).
    acked_requests: bool,
    /// ... and came to a QP whose own requests are outstanding: a conversation (a
    /// ping-pong), whose next post will likely carry the ACK (not a stream to a QP that
    /// sends nothing, whose application never answers).
    conversing: bool,
    /// When they were handled (the clock is only read when packets came).
    at: Option<Instant>,
}

/// Receives one batch into the NIC. `io.touched` says which QPs the packets went to; only
/// their completions are moved to the CQs (a packet changes no other QP).
fn receive(inner: &Inner, io: &mut Io) -> Received {
    io.touched.clear();
    match io.transport.recv_batch(&mut io.batch) {
        Ok(n) if n > 0 => {
            let unwatched = n - io.batch.watched();
            if unwatched > 0 {
                // Only the holder of `io` writes it: no locked read-modify-write.
                let seen = inner.unwatched_rx.load(Ordering::Relaxed);
                inner
                    .unwatched_rx
                    .store(seen.wrapping_add(unwatched as u64), Ordering::Relaxed);
            }
            let now = inner.now();
            let mut nic = lock(&inner.nic);
            let mut acked_requests = false;
            for (index, pkt) in io.batch.iter().enumerate() {
                match accept(&pkt) {
                    Ok((p, verified)) => {
                        let (src, dst) = (pkt.meta.src.ip(), pkt.meta.dst);
                        io.touched.add(p.repr.bth.dest_qp);
                        acked_requests |= p.repr.bth.opcode.info().is_some_and(|i| {
                            matches!(i.operation, Operation::Send | Operation::RdmaWrite)
                        });
                        if let Some(why) = nic.handle_packet_to(now, &p, verified, src, dst) {
                            io.transport.note_dropped(index, why.describe());
                        }
                    }
                    // The transport saw the ICRC fail itself (a capture says so).
                    Err(Rejected::BadIcrc) => nic.rx.icrc_errors += 1,
                    Err(Rejected::Malformed) => {
                        nic.rx.malformed += 1;
                        io.transport.note_dropped(index, Rejected::MALFORMED);
                    }
                }
            }
            // Every packet is placed: the transport may hand their room back to their senders.
            io.transport.release_received();
            let completed = if io.touched.all {
                nic.route_completions()
            } else {
                io.touched
                    .qpns
                    .iter()
                    .map(|&q| nic.route_qp_completions(q))
                    .sum()
            };
            let conversing = acked_requests
                && !io.touched.all
                && io
                    .touched
                    .qpns
                    .iter()
                    .any(|&q| nic.qp(q).is_ok_and(|qp| qp.send_queue_len() > 0));
            Received {
                packets: n,
                completed,
                acked_requests,
                conversing,
                at: Some(now),
            }
        }
        _ => Received::default(),
    }
}

/// Posts in a row with no round between, after which a post makes a round itself.
pub(super) const POSTS_PER_ROUND: u8 = 4;

/// After a post's send: a round, as a poll makes, once [`POSTS_PER_ROUND`] posts came with
/// no round between. An application answering a poll's completions with a burst of posts
/// (with 1024 QPs about 30 WRITEs of 64 KiB, 100 µs of copying) otherwise looked at nothing
/// meanwhile: the peer's ACKs waited unread, and the device's window went out and came back
/// in convoys, each round taking some 30 ACKs at once. One that polls between its posts (one
/// QP's `ib_write_bw`) makes its rounds itself and pays nothing here.
pub(super) fn after_post(inner: &Inner, io: &mut Io) {
    io.posts_unreceived = io.posts_unreceived.saturating_add(1);
    if io.posts_unreceived >= POSTS_PER_ROUND {
        progress(inner, io, Round::Poll);
    }
}

/// One round: receive a batch (not after a post), run timers, send everything the QPs have.
pub(super) fn progress(inner: &Inner, io: &mut Io, round: Round) -> Moved {
    if inner.inject_panic.swap(false, Ordering::AcqRel) {
        panic!("a round of progress panicked (Device::inject_panic)");
    }
    let mut moved = Moved {
        packets: 0,
        looked: true,
    };
    let mut clock = None;
    if round != Round::Flush {
        // What the watchdog looks at: a round that receives (a flush does not). Only
        // the holder of `io` writes it, so a plain store does (no locked read-modify-write).
        let rounds = inner.rounds.load(Ordering::Relaxed);
        inner
            .rounds
            .store(rounds.wrapping_add(1), Ordering::Relaxed);
        let got = receive(inner, io);
        io.posts_unreceived = 0;
        moved.packets += got.packets;
        clock = got.at;
        // Whether the application will likely answer what came: it polls (and the QP is in a
        // conversation), or the thread makes the round for an application that polled a
        // moment ago and now spins on memory for an RDMA WRITE; its own WRITE is then
        // acknowledged already, so its recent polling stands for the conversation (see the
        // module comment).
        let may_defer = match round {
            Round::Poll => got.completed > 0 || got.conversing,
            Round::Thread => {
                (got.completed > 0 || got.acked_requests)
                    && inner.polled_within(ANSWERING, *clock.get_or_insert_with(|| inner.now()))
            }
            Round::Flush => false,
        };
        if may_defer && io.tx_deferred < MAX_DEFERRED {
            // The transmit of the QPs the packets went to is owed: a later round makes it,
            // unless posts' rounds send all of it first. Due timers run now: a busy QP's
            // completions in every round, each answered by a post that paid what was owed,
            // kept another QP's retransmit timer from running for as long as they came (one
            // of two QPs completed a fiftieth of what the other did).
            if let Some(now) = got.at.filter(|&now| timer_due(io.next_due, Some(now))) {
                // (What the fired timers give to send goes with the owed transmit.)
                let mut nic = lock(&inner.nic);
                nic.handle_timeout(now);
                io.next_due = nic.poll_timeout();
            }
            let Io { owed, touched, .. } = io;
            owed.add_all(touched);
            io.tx_deferred += 1;
            if let Some(at) = got.at {
                io.deferred_until.get_or_insert(at + DEFER_LIMIT);
            }
            if inner.dirty.load(Ordering::Acquire) {
                // A change through the API may have given any QP completions or packets: the
                // completions move now (or every poll_cq would move them all again), the
                // packets go with the owed pass, made over all QPs.
                inner.dirty.store(false, Ordering::Release);
                lock(&inner.nic).route_completions();
                io.owed.all = true;
            }
            return moved;
        }
        if got.packets == 0 && io.tx_deferred > 0 && !inner.dirty.load(Ordering::Acquire) {
            // The owed transmit waits for the application's post, a while.
            let now = *clock.get_or_insert_with(|| inner.now());
            if io.deferred_until.is_some_and(|t| now < t) {
                moved.looked = false;
                return moved;
            }
        }
        if round == Round::Poll
            && got.packets == 0
            && io.tx_deferred == 0
            && !inner.dirty.load(Ordering::Acquire)
        {
            // Nothing came and nothing changed: only a due timer needs the NIC.
            let due = io.next_due.is_some_and(|t| {
                io.unclocked += 1;
                io.unclocked >= CLOCK_EVERY && {
                    io.unclocked = 0;
                    let now = inner.now();
                    clock = Some(now);
                    t <= now
                }
            });
            if !due {
                moved.looked = false;
                return moved;
            }
        }
    }
    let now = clock.unwrap_or_else(|| inner.now());
    let targeted = match round {
        Round::Poll => true,
        Round::Thread => io
            .swept
            .is_some_and(|t| now.saturating_duration_since(t) < SWEEP_EVERY),
        Round::Flush => false,
    };
    if targeted && !inner.dirty.load(Ordering::Acquire) {
        // Nothing changed but the QPs packets went to and those whose timers are due: they
        // alone may have something to send (an ACK, a READ response, a retransmission), and
        // their deadlines join the device's.
        let Io { owed, touched, .. } = io;
        owed.add_all(touched);
        if !owed.all {
            if timer_due(io.next_due, Some(now)) {
                moved.packets += run_timers(inner, io, now);
            }
            let qpns = std::mem::take(&mut io.owed.qpns);
            for &q in &qpns {
                moved.packets += transmit_qp(inner, io, q, now);
            }
            io.owed.qpns = qpns;
            io.owed.clear();
            io.end_deferral();
            return moved;
        }
    }
    // Cleared before the pass looks at the QPs (see the module comment).
    inner.dirty.store(false, Ordering::Release);
    io.end_deferral();
    io.owed.clear();
    io.swept = Some(now);
    if round == Round::Flush {
        // Before a QP is destroyed: the ACKs it holds leave now (else the peer retries
        // against a QP that is gone).
        lock(&inner.nic).release_acks();
    }
    moved.packets += passes(inner, io, |nic, txs, max, next_due| {
        nic.handle_timeout(now);
        nic.route_completions();
        nic.poll_transmit(now, txs, max);
        *next_due = nic.poll_timeout();
    });
    moved
}

/// Whether the device's deadline `next_due` has come at `now` (a round that did not read
/// the clock knows of none).
fn timer_due(next_due: Option<Instant>, now: Option<Instant>) -> bool {
    next_due.is_some_and(|t| now.is_some_and(|now| t <= now))
}

/// Runs the due timers, which the NIC finds without looking at the other QPs, and sends
/// what the QPs whose timers fired have (and the QPs waiting for room in the send window,
/// which a retransmit timeout may have made); the device's deadline is then exact again.
/// Returns the packets sent.
fn run_timers(inner: &Inner, io: &mut Io, now: Instant) -> usize {
    passes(inner, io, |nic, txs, max, next_due| {
        nic.handle_timeout(now);
        nic.poll_transmit_scheduled(now, txs, max);
        *next_due = nic.poll_timeout();
    })
}

/// A round for QP `qpn` alone (a post's, see [`Device::post_send`], or for the QPs a batch
/// went to): sends what it has and moves its completions to their CQs; its deadline joins
/// the device's. Returns the packets sent.
pub(super) fn transmit_qp(inner: &Inner, io: &mut Io, qpn: u32, now: Instant) -> usize {
    // What poll rounds deferred for this QP (typically its ACK, behind the answer posted
    // now) goes out with its packets.
    if io.tx_deferred > 0 {
        io.owed.remove(qpn);
        if io.owed.is_empty() {
            io.end_deferral();
        }
    }
    passes(inner, io, |nic, txs, max, next_due| {
        let due = nic.poll_transmit_qp(qpn, now, txs, max);
        nic.route_qp_completions(qpn);
        *next_due = match (*next_due, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    })
}

/// The most packets a round sends before it receives again (2 MiB at a 4096-byte path MTU).
/// Without a bound, one READ of gigabytes (or a peer's burst of them) was sent whole before
/// the round looked at what had come meanwhile: every other QP's requests waited in the
/// socket for as long, seconds.
pub(super) const ROUND_BUDGET: usize = 512;

/// Transmit passes: `fill` puts up to `max` packets into the queue (and updates the device's
/// deadline) with the NIC locked, then they are sent, until a pass leaves room in the queue:
/// every QP it looked at had nothing more, and sending changes no QP, so another pass would
/// find nothing. After [`ROUND_BUDGET`] packets with more to send, the passes stop and mark
/// the device dirty: the next round receives first, then makes a full pass, in which every
/// QP with something to send takes its turn. Returns the packets sent.
fn passes(
    inner: &Inner,
    io: &mut Io,
    mut fill: impl FnMut(&mut Nic, &mut TxQueue, usize, &mut Option<Instant>),
) -> usize {
    let mut sent = 0;
    loop {
        io.txs.clear();
        let max = io.emitter.batch();
        fill(&mut lock(&inner.nic), &mut io.txs, max, &mut io.next_due);
        if io.txs.is_empty() {
            return sent;
        }
        let drained = io.txs.len() < max;
        sent += send_queued(inner, io);
        if drained {
            return sent;
        }
        if sent >= ROUND_BUDGET {
            inner.dirty.store(true, Ordering::Release);
            return sent;
        }
    }
}

/// Sends `io.txs`; returns how many packets are done with.
fn send_queued(inner: &Inner, io: &mut Io) -> usize {
    let Io {
        transport,
        emitter,
        txs,
        ..
    } = io;
    let mut done = 0;
    let mut stalls = 0;
    let mut failed = 0;
    while done < txs.len() {
        match emitter.send(&txs.as_slice()[done..], &inner.mrs, transport.as_mut()) {
            Ok(0) => {
                // The socket is full: wait for room a little, then give the rest up to
                // retransmission rather than stall the device.
                stalls += 1;
                if stalls > 50 {
                    break;
                }
                let _ = transport.poll(Some(Duration::from_micros(200)));
            }
            Ok(n) => done += n,
            Err(_) => {
                // A per-packet failure: dropped, RC recovers.
                done += 1;
                failed += 1;
            }
        }
    }
    inner
        .packets_sent
        .fetch_add((done - failed) as u64, Ordering::Relaxed);
    let given_up = txs.len() - done;
    if failed + given_up > 0 {
        inner
            .send_errors
            .fetch_add((failed + given_up) as u64, Ordering::Relaxed);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qp_set_holds_each_qpn_once_and_gives_up_to_all_rather_than_grow() {
        let mut s = QpSet::new();
        assert!(s.is_empty());
        for q in [17, 18, 17, 19, 18] {
            s.add(q);
        }
        assert_eq!((s.qpns.as_slice(), s.all), (&[17, 18, 19][..], false));
        s.remove(18);
        assert_eq!(s.qpns, [17, 19]);
        // One more distinct QPN than it has room for: "all", and no allocation.
        let room = s.qpns.capacity();
        for q in 0..=QpSet::CAPACITY as u32 {
            s.add(1000 + q);
        }
        assert!(s.all && !s.is_empty());
        assert_eq!(s.qpns.capacity(), room);
        s.clear();
        assert!(s.is_empty());
        // A packet to a multicast group concerns every QP attached to it.
        s.add(MULTICAST_QPN);
        assert!(s.all);
        let mut t = QpSet::new();
        t.add(5);
        t.add_all(&s);
        assert!(t.all);
    }
}
