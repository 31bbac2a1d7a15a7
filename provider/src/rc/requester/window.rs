//! The send window: how many PSNs a requester may have outstanding (sent and not
//! acknowledged), alone and together with the other QPs of its device.
//!
//! IBTA 9.7.7 lets a requester keep as many packets in flight as it likes; what limits it in
//! practice is the receiver. softrnic's receiver is a socket buffer (or a packet ring) that
//! holds what its senders have in flight until it reads it, and drops whole runs when they
//! have more: each lost packet then costs a go-back-N retransmission. One QP's window
//! ([`WINDOW_PSNS`]) fits; four QPs' windows to one peer did not, and four QPs moved less than
//! one. So a device's QPs share one window too:
//!
//! * each QP that is sending gets an equal part of [`DEVICE_WINDOW_PSNS`], at most
//!   [`WINDOW_PSNS`], at least [`MIN_SHARE_PSNS`] (the device sets it, `nic/turns.rs`);
//! * and no QP sends a new packet while the device's QPs have [`DEVICE_WINDOW_PSNS`]
//!   outstanding together, however many QPs there are: with more than 32 QPs sending, only
//!   some have packets out at a time, and the others wait for their ACKs. 256 QPs with a
//!   share of two PSNs each sent runs of two packets (a system call each) and an ACK for
//!   each, and moved a quarter of what one QP did; a share is at least one whole run.
//! * While QPs with nothing out wait for room, the others start no new message: they finish
//!   the one they are sending and let the window drain to the waiting ones. Without that, the
//!   QPs that got in first refilled their shares as each ACK came and the others starved (16
//!   to 6666 WRITEs per QP in one run of `softrnic perf --qps 16`).
//! * A waiting QP takes room to start a message only when the device *offers* it some
//!   ([`Seat::offer`]), which it does in the order the QPs began to wait (`nic/turns.rs`). A
//!   waiting QP that took room whenever it was looked at (a post to it, its ACK) went ahead
//!   of those waiting longer: with 1024 QPs, some completed thousands of WRITEs and some two.
//!   One that waits to resume a message it began (after going back to resend) needs no
//!   offer, and the device puts it first ([`Seat::resumes`]): its peer is waiting for those
//!   packets, and behind a thousand others its retransmit timer would run out.
//!
//! A QP counts the PSNs from its oldest unacknowledged one to the furthest it has sent. An
//! early resend (`rto.rs`, before the local ACK timeout) goes back to the oldest and resends
//! it alone as a probe, while what followed may still wait unread at the peer: those PSNs
//! stay counted until the peer makes progress. (Counting only up to the next PSN to send
//! freed them at once; with 1024 QPs timing out together on a target whose thread had not
//! run, the others refilled the window behind them and overran the target's lanes by
//! thousands of packets a run.) After a counted timeout (a whole local ACK timeout without
//! progress) it counts none until it has resent them, so a QP whose peer died holds up the
//! others for one timeout at most. A QP in
//! any state but RTS and SQD counts none. The count lives in one atomic the device's
//! requesters share ([`DeviceWindow`]); each holds its part in a [`Seat`] and gives it back
//! when it is dropped.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The most PSNs one requester has outstanding: a window that a receiver's socket buffer
/// holds.
pub const WINDOW_PSNS: u32 = 512;

/// The most PSNs the QPs of one device have outstanding together: one QP's window, so that
/// several QPs together burst no more than one did.
pub const DEVICE_WINDOW_PSNS: u32 = WINDOW_PSNS;

/// The smallest share: a 64 KiB message at the largest path MTU, which the transport sends
/// as one segmentation run.
pub const MIN_SHARE_PSNS: u32 = 16;

#[derive(Debug)]
struct Shared {
    /// Each sending QP's window.
    share: AtomicU32,
    /// PSNs outstanding, all the device's QPs together.
    in_flight: AtomicU32,
    /// QPs with nothing out waiting for room.
    waiting: AtomicU32,
}

/// A device's send window, shared by its QPs' requesters.
#[derive(Debug, Clone)]
pub struct DeviceWindow(Arc<Shared>);

impl DeviceWindow {
    /// A window with nothing outstanding, each QP's share a whole [`WINDOW_PSNS`].
    pub fn new() -> DeviceWindow {
        DeviceWindow(Arc::new(Shared {
            share: AtomicU32::new(WINDOW_PSNS),
            in_flight: AtomicU32::new(0),
            waiting: AtomicU32::new(0),
        }))
    }

    /// Shares the window between `sending` QPs.
    pub fn share_between(&self, sending: usize) {
        let n = u32::try_from(sending.max(1)).unwrap_or(u32::MAX);
        let share = (DEVICE_WINDOW_PSNS / n).clamp(MIN_SHARE_PSNS, WINDOW_PSNS);
        self.0.share.store(share, Ordering::Relaxed);
    }

    /// Each sending QP's window.
    pub fn share(&self) -> u32 {
        self.0.share.load(Ordering::Relaxed)
    }

    /// PSNs outstanding, all QPs together.
    pub fn in_flight(&self) -> u32 {
        self.0.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the QPs have the whole [`DEVICE_WINDOW_PSNS`] outstanding: none may send a
    /// new packet.
    pub fn is_full(&self) -> bool {
        self.in_flight() >= DEVICE_WINDOW_PSNS
    }

    /// Whether a QP with nothing out waits for room (the device should give it a turn).
    pub fn has_waiting(&self) -> bool {
        self.0.waiting.load(Ordering::Relaxed) > 0
    }
}

impl Default for DeviceWindow {
    fn default() -> Self {
        DeviceWindow::new()
    }
}

/// One requester's place in its device's window: the PSNs it has counted there, and whether
/// it waits for room.
#[derive(Debug, Default)]
pub struct Seat {
    device: DeviceWindow,
    mine: u32,
    state: Turn,
    /// The device offered this waiting requester room.
    offered: bool,
    /// The waiting requester's next packet continues a message.
    resumes: bool,
}

/// Where a requester stands in the device's window.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Neither sending nor waiting.
    #[default]
    Idle,
    /// Nothing out, waiting for room.
    Waiting,
    /// Admitted: it may send up to its share.
    Sending,
}

impl Seat {
    /// A place in `device`'s window, with nothing counted.
    pub fn new(device: DeviceWindow) -> Seat {
        Seat {
            device,
            mine: 0,
            state: Turn::Idle,
            offered: false,
            resumes: false,
        }
    }

    /// This requester's window (its share).
    pub fn window(&self) -> u32 {
        self.device.share()
    }

    /// Whether a requester with `outstanding` PSNs may send its next packet, which
    /// `starts` a message or not (see the module comment). One with nothing out that may
    /// not waits for room from now on.
    pub fn may_send(&mut self, outstanding: u32, starts: bool) -> bool {
        if outstanding >= self.window() {
            return false;
        }
        let full = self.device.is_full();
        let others_wait = self.state != Turn::Waiting && self.device.has_waiting();
        let may = !full
            && match self.state {
                // A message begun is finished; a new one waits while others do.
                Turn::Sending => !starts || !others_wait,
                Turn::Idle => !others_wait,
                Turn::Waiting => self.offered || !starts,
            };
        self.resumes = !starts;
        let next = match (may, outstanding) {
            (true, _) => Turn::Sending,
            (false, 0) => Turn::Waiting,
            (false, _) if starts && others_wait => Turn::Idle,
            (false, _) => self.state,
        };
        self.set(next);
        may
    }

    /// Whether the packet that leaves the requester `outstanding` PSNs out (the `last` of its
    /// message or not) is the last one it may send before an ACK makes room: it fills the
    /// requester's share or the device's window, or it ends a message while other QPs wait
    /// for room (`may_send` starts no new one then). Such a packet asks for its ACK: only an
    /// ACK moves the requester on, and the responder sends only the ACKs it is asked for.
    pub fn stops_after(&self, outstanding: u32, last: bool) -> bool {
        let device = self.device.in_flight().saturating_sub(self.mine) + outstanding;
        outstanding >= self.window()
            || device >= DEVICE_WINDOW_PSNS
            || (last && self.state != Turn::Waiting && self.device.has_waiting())
    }

    /// Whether the requester has nothing out and waits for room (its last
    /// [`Seat::may_send`] said no).
    pub fn waits(&self) -> bool {
        self.state == Turn::Waiting
    }

    /// Whether the requester waits for room to resume a message it began (to resend it).
    pub fn resumes(&self) -> bool {
        self.state == Turn::Waiting && self.resumes
    }

    /// The device offers this requester, if it waits, room: it may send as soon as the
    /// device's window is not full, until it stops waiting.
    pub fn offer(&mut self) {
        self.offered = self.state == Turn::Waiting;
    }

    /// Stops waiting for room (the QP left RTS, or has nothing more to send).
    pub fn leave(&mut self) {
        self.set(Turn::Idle);
    }

    fn set(&mut self, next: Turn) {
        if self.state != next {
            let w = &self.device.0.waiting;
            if next == Turn::Waiting {
                w.fetch_add(1, Ordering::Relaxed);
            } else if self.state == Turn::Waiting {
                w.fetch_sub(1, Ordering::Relaxed);
                self.offered = false;
            }
            self.state = next;
        }
    }

    /// The requester now has `outstanding` PSNs out: the device's count follows.
    pub fn count(&mut self, outstanding: u32) {
        if outstanding != self.mine {
            let total = &self.device.0.in_flight;
            if outstanding > self.mine {
                total.fetch_add(outstanding - self.mine, Ordering::Relaxed);
            } else {
                total.fetch_sub(self.mine - outstanding, Ordering::Relaxed);
            }
            self.mine = outstanding;
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.count(0);
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_equal_parts_between_one_run_and_a_whole_window() {
        let d = DeviceWindow::new();
        let share = |n| {
            d.share_between(n);
            d.share()
        };
        assert_eq!(share(0), WINDOW_PSNS);
        assert_eq!(share(1), WINDOW_PSNS);
        assert_eq!(share(4), DEVICE_WINDOW_PSNS / 4);
        assert_eq!(share(5000), MIN_SHARE_PSNS);
    }

    #[test]
    fn the_packet_after_which_the_window_lets_none_leave_is_the_one_that_asks() {
        let d = DeviceWindow::new();
        d.share_between(4);
        let share = DEVICE_WINDOW_PSNS / 4;
        let (a, mut b, mut c) = (
            Seat::new(d.clone()),
            Seat::new(d.clone()),
            Seat::new(d.clone()),
        );
        assert!(!a.stops_after(share - 1, false));
        assert!(a.stops_after(share, false), "its share is full");
        b.count(DEVICE_WINDOW_PSNS - 10);
        assert!(a.stops_after(10, false), "the device's window is full");
        assert!(!a.stops_after(9, true));
        // C has nothing out and waits for room: A starts no new message after this one.
        b.count(DEVICE_WINDOW_PSNS);
        assert!(!c.may_send(0, true) && c.waits());
        b.count(0);
        assert!(
            a.stops_after(5, true),
            "the end of a message while another QP waits"
        );
        assert!(!a.stops_after(5, false));
        assert!(!c.stops_after(5, true), "the waiting QP itself goes on");
    }

    #[test]
    fn the_device_counts_every_seat_and_stops_new_packets_when_full() {
        let d = DeviceWindow::new();
        d.share_between(1);
        let (mut a, mut b) = (Seat::new(d.clone()), Seat::new(d.clone()));
        a.count(300);
        b.count(200);
        assert_eq!(d.in_flight(), 500);
        assert!(a.may_send(300, true) && b.may_send(200, true));
        b.count(DEVICE_WINDOW_PSNS - 300);
        assert!(!a.may_send(300, false), "the device's window is full");
        assert!(!d.has_waiting(), "a QP with packets out does not wait");
        a.count(0); // acknowledged, or gone back to resend
        assert!(b.may_send(DEVICE_WINDOW_PSNS - 300, true));
        drop(b);
        assert_eq!(d.in_flight(), 0, "a dropped seat gives its part back");
    }

    #[test]
    fn qps_sending_finish_their_message_and_let_the_window_drain_to_the_waiting() {
        let d = DeviceWindow::new();
        d.share_between(2);
        let (mut a, mut b) = (Seat::new(d.clone()), Seat::new(d.clone()));
        assert!(a.may_send(0, true));
        a.count(DEVICE_WINDOW_PSNS / 2);
        let mut c = Seat::new(d.clone());
        c.count(DEVICE_WINDOW_PSNS / 2);
        assert!(!b.may_send(0, true), "full");
        assert!(d.has_waiting() && b.waits() && !a.waits());
        c.count(0); // c's ACKs came
        assert!(a.may_send(1, false), "a finishes its message");
        assert!(!a.may_send(1, true), "but starts no new one while b waits");
        assert!(
            !b.may_send(0, true),
            "b waits for the device to offer it room"
        );
        b.offer();
        assert!(b.may_send(0, true), "b's turn");
        assert!(!d.has_waiting() && !b.waits());
        assert!(b.may_send(1, true), "b goes on: no one waits");
        b.offer();
        assert!(!b.offered, "an offer is for a waiting requester only");
        drop(c);
        a.count(DEVICE_WINDOW_PSNS);
        let mut e = Seat::new(d.clone());
        assert!(!e.may_send(0, true));
        e.offer();
        assert!(
            !e.may_send(0, true),
            "an offer makes no room in a full window"
        );
        assert!(d.has_waiting() && e.waits());
        drop(e);
        assert!(!d.has_waiting(), "a dropped seat waits no more");
    }

    #[test]
    fn a_qp_resuming_its_message_needs_no_offer() {
        let d = DeviceWindow::new();
        d.share_between(2);
        let (mut a, mut b) = (Seat::new(d.clone()), Seat::new(d.clone()));
        a.count(DEVICE_WINDOW_PSNS);
        // b went back to resend a message it began, and finds the window full.
        assert!(!b.may_send(0, false));
        assert!(b.waits() && b.resumes());
        a.count(0);
        assert!(b.may_send(0, false), "room: it resends, unoffered");
        assert!(!b.resumes());
        // One that waits to start a new message is not resuming one.
        a.count(DEVICE_WINDOW_PSNS);
        assert!(!b.may_send(0, true));
        assert!(b.waits() && !b.resumes());
    }

    #[test]
    fn a_qp_keeps_to_its_share() {
        let d = DeviceWindow::new();
        d.share_between(4);
        let mut s = Seat::new(d.clone());
        assert!(s.may_send(DEVICE_WINDOW_PSNS / 4 - 1, true));
        assert!(!s.may_send(DEVICE_WINDOW_PSNS / 4, false));
    }
}
