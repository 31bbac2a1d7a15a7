//! The progress thread of a device ([`run`]). It sleeps until a packet comes or a deadline
//! is due, then makes a round of progress; but while the application busy-polls the device
//! (its `poll_cq` calls make the rounds: receive, timers, transmit), the thread keeps out of
//! the way: it does not wake for packets and looks only now and then whether the
//! application still polls (`watch.rs`). A wake per packet would put a context switch on a
//! busy core (on two cores, a spinning application and its peer leave no core free), and a
//! round the thread made would take the packets from under the application's polls (which
//! then find nothing until the thread has run) and send the ACKs the application's next
//! post would carry.
//!
//! Once the application stops polling (to spin on memory for an RDMA WRITE, to block on
//! something else), packets wake the thread again. While it stays away the thread waits on
//! the host-local path's doorbell, which a sender rings only for packets left unread
//! (`udp/local/unread.rs`): it makes a round for them, and stays away again if the
//! application still polls. The device rings it too when the application arms a CQ
//! ([`Device::arm_cq`](super::device::Device::arm_cq)): that application waits for an
//! event now, and the thread takes over at once rather than at its next look.
//!
//! For an application that makes no verbs calls at all (a passive side), the thread spins
//! for a moment after packets rather than sleep (`spin.rs`): the next request is likely
//! near, and waking a sleeping thread cost more than answering it.

use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::device::{guarded, lock, try_lock, Inner};
use super::round::{progress, Round};
use super::spin::{Spin, PASSIVE};
use super::watch::{busy_polling, Watch, POLLING};
use crate::transport::{wait_readable, SleepGate};

/// The longest the progress thread sleeps without a packet.
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// The progress thread: waits on `wait_fd` (the transport's socket, if it has one) and
/// `gate` (the host-local path's doorbell and inbox, if there is one).
pub(super) fn run(inner: &Inner, (wait_fd, gate): (Option<RawFd>, Option<Arc<SleepGate>>)) {
    let mut t = Thread::new(inner, wait_fd, gate);
    while !inner.stop.load(Ordering::Acquire) {
        let look = t.look();
        if look.busy {
            t.stay_away(look.now);
            continue;
        }
        // An application that holds the transport makes a round itself: the thread would
        // only queue behind it, and the application's unlock would have to wake it (under
        // `ib_write_bw -q 16` the writer's thread was woken 10 000 to 18 000 times a second,
        // mostly so, and made rounds beside the application's). It stays away instead,
        // unless a ring or an armed CQ says the application is about to stop polling.
        let io = if look.rung || look.armed {
            lock(&inner.io)
        } else if let Some(io) = try_lock(&inner.io) {
            io
        } else {
            t.stay_away(look.now);
            continue;
        };
        inner.thread_rounds.fetch_add(1, Ordering::Relaxed);
        let (moved, unwatched, deferred) = {
            let mut io = io;
            let before = inner.unwatched_rx.load(Ordering::Relaxed);
            let moved = guarded(inner, || progress(inner, &mut io, Round::Thread)).packets;
            let after = inner.unwatched_rx.load(Ordering::Relaxed);
            (moved, after.wrapping_sub(before), io.deferred_until())
        };
        t.watch.round(unwatched as usize, look.now, look.rung);
        if inner.failed.load(Ordering::Acquire) {
            return; // nothing more to make progress on
        }
        if look.rung && !look.armed {
            // Rung while away: the next look asks whether the application still polls.
            t.was_away = true;
            continue;
        }
        // The spin's time is the real one, not a test's clock: it is about the CPU.
        if moved > 0 {
            t.spin.moved(Instant::now());
        }
        // A deferred transmit waits for the application's post (see `round.rs`).
        if deferred.is_none() && (moved > 0 || lock(&inner.nic).wants_transmit()) {
            continue;
        }
        let now = inner.now();
        let real = Instant::now();
        if t.spin.spins(real, inner.polled_within(PASSIVE, now)) {
            std::thread::yield_now();
            t.spin.yielded(real.elapsed());
            continue;
        }
        let due = lock(&inner.nic).poll_timeout();
        let sleep = [due, deferred]
            .into_iter()
            .flatten()
            .min()
            .map_or(MAX_SLEEP, |d| {
                d.saturating_duration_since(now).min(MAX_SLEEP)
            });
        if !sleep.is_zero() {
            t.sleep(sleep);
        }
    }
}

/// What a look found.
#[derive(Debug, Clone, Copy)]
struct Look {
    now: Instant,
    /// The application busy-polls: the thread stays away.
    busy: bool,
    /// A ring ended the thread's staying away.
    rung: bool,
    /// The application armed a CQ since the last look.
    armed: bool,
}

/// The thread's state between looks.
struct Thread<'a> {
    inner: &'a Inner,
    wait_fd: Option<RawFd>,
    gate: Option<Arc<SleepGate>>,
    watch: Watch,
    /// The application's polls, and when, at the last look.
    seen: u64,
    looked: Instant,
    /// Unwatched packets received, at the last stay away.
    unwatched_seen: u64,
    /// CQs armed, at the last look.
    arms_seen: u64,
    /// A sender (or the device) rang while the thread stayed away: packets wait that the
    /// polls leave unread (`udp/local/unread.rs`), a round takes them, and the thread stays
    /// away again if the application still polls.
    rung: bool,
    /// The thread stayed away (or made a round for a ring) since its last look.
    was_away: bool,
    /// A packet over UDP woke the thread while it stayed away (see [`Thread::stay_away`]).
    socket_woke: bool,
    /// Whether it spins rather than sleeps (`spin.rs`).
    spin: Spin,
}

impl<'a> Thread<'a> {
    fn new(inner: &'a Inner, wait_fd: Option<RawFd>, gate: Option<Arc<SleepGate>>) -> Self {
        Thread {
            inner,
            wait_fd,
            gate,
            watch: Watch::new(),
            seen: inner.polls.load(Ordering::Relaxed),
            looked: inner.now(),
            unwatched_seen: inner.unwatched_rx.load(Ordering::Relaxed),
            arms_seen: inner.arms.load(Ordering::SeqCst),
            rung: false,
            was_away: false,
            socket_woke: false,
            spin: Spin::default(),
        }
    }

    /// Looks whether the application busy-polls.
    ///
    /// After the thread stayed away (for a busy poller), or made a round for a ring
    /// meanwhile, the application is taken to poll on for as long as it polls or posts at
    /// all. Counting its polls again at each such look took a busy poller in a burst of
    /// posts (64 KiB each: a few microseconds of copying) for one that had stopped, and the
    /// thread then made rounds beside it, a third of a core under `ib_write_bw -q 16`,
    /// contending for the transport. An application that armed a CQ since the last look
    /// waits for its event: it is no busy poller now, however it polled until then.
    fn look(&mut self) -> Look {
        let inner = self.inner;
        let polls = inner.polls.load(Ordering::Relaxed);
        let now = inner.now();
        let rung = std::mem::take(&mut self.rung);
        let after_away = std::mem::take(&mut self.was_away);
        let arms = inner.arms.load(Ordering::SeqCst);
        let armed = std::mem::replace(&mut self.arms_seen, arms) != arms;
        let busy = if rung || armed {
            false
        } else if after_away {
            inner.polled_within(POLLING, now)
        } else {
            busy_polling(
                polls.wrapping_sub(self.seen),
                now.saturating_duration_since(self.looked),
            ) && inner.polled_within(POLLING, now)
        };
        (self.seen, self.looked) = (polls, now);
        Look {
            now,
            busy,
            rung,
            armed,
        }
    }

    /// Stays away from the busy-polling application until the next look (`watch.rs`), a
    /// ring, a packet over UDP, or the application arming a CQ.
    fn stay_away(&mut self, now: Instant) {
        let inner = self.inner;
        let unwatched = inner.unwatched_rx.load(Ordering::Relaxed);
        let watched = unwatched == self.unwatched_seen && !std::mem::take(&mut self.socket_woke);
        let fixed = inner.watched_for.load(Ordering::Relaxed);
        self.watch.watched_for = (fixed != 0).then(|| Duration::from_nanos(fixed));
        let mut away = self.watch.stay_away(now, watched);
        self.unwatched_seen = unwatched;
        // A transmit the polls deferred (an ACK for the application's next post to carry,
        // `round.rs`) is the polls' to send; but if the application stops polling, the
        // thread sends it soon after its deadline, not a long look later. (Not waiting for
        // the lock: the polls hold it often.)
        let owed = inner.io.try_lock().ok().and_then(|io| io.deferred_until());
        if let Some(t) = owed {
            away = away.min(t.saturating_duration_since(now) + POLLING);
        }
        // Against `Device::arm_cq`: either it sees the thread away and rings, or the thread
        // sees the count move and looks again at once.
        inner.away.store(true, Ordering::SeqCst);
        if inner.arms.load(Ordering::SeqCst) == self.arms_seen {
            match &self.gate {
                Some(g) => {
                    // While the packets come watched the looks are far apart: one over UDP
                    // (the socket readable) ends the wait as a ring does. It stays readable
                    // until a poll takes it, so the next wait leaves the socket out, and its
                    // looks are the short ones.
                    let socket = self.wait_fd.filter(|_| watched).unwrap_or(-1);
                    (self.rung, self.socket_woke) = g.wait_rung(away, socket);
                }
                None => std::thread::park_timeout(away),
            }
        }
        inner.away.store(false, Ordering::Relaxed);
        self.was_away = !self.rung;
    }

    /// Sleeps up to `sleep`, until a packet comes: on the socket, or into the inbox (the
    /// doorbell); or a sender connects to the inbox.
    fn sleep(&self, sleep: Duration) {
        let Some(fd) = self.wait_fd else {
            std::thread::sleep(sleep.min(Duration::from_micros(50)));
            return;
        };
        // The host-local path's doorbell and inbox beside the socket (`udp/local/`); -1 is
        // ignored.
        let [bell, inbox] = self.gate.as_ref().map_or([-1, -1], |g| g.fds());
        if self.gate.as_ref().is_some_and(|g| !g.sleep()) {
            return; // a datagram came to the inbox meanwhile
        }
        // The transport is dropped after the thread is joined, the gate's descriptors are
        // its own: all stay open while the thread waits.
        let [_, rung, connecting] = wait_readable([fd, bell, inbox], sleep);
        if let Some(g) = &self.gate {
            g.woke(rung, connecting);
        }
    }
}
