//! A QP's share of its device's send window: what the device's turns (`nic/turns.rs`) ask of
//! a QP, and how many PSNs its requester has outstanding in the window. The window is
//! softrnic's own limit (IBTA 9.7.7 leaves the number of packets in flight to the requester),
//! so that a device's QPs together do not overrun their receivers (`rc/requester/window.rs`
//! says why); only reliable transports, whose PSNs wait for acknowledgement, count in it.

use super::Qp;
use crate::qp_state::QpState;

impl Qp {
    /// Whether the requester has work requests to send or to see acknowledged: a QP that
    /// takes a share of the device's send window (`nic/turns.rs`).
    pub fn is_sending(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd) && !self.req.sq.is_empty()
    }

    /// Whether the requester has nothing out and waits for room in its device's send window
    /// (`rc/requester/window.rs`): the device offers it a turn when there is some.
    pub fn waits_for_room(&self) -> bool {
        self.req.seat.waits()
    }

    /// Whether the requester waits for room to resume a message it began (to resend it):
    /// the device offers it room before the QPs waiting to start one.
    pub fn resumes(&self) -> bool {
        self.req.seat.resumes()
    }

    /// The device offers the requester, if it waits for room, room in the send window.
    pub fn offer_room(&mut self) {
        self.req.seat.offer();
    }

    /// Takes its place in its device's send window (`rc/requester/window.rs`).
    pub fn share_window(&mut self, device: crate::rc::DeviceWindow) {
        self.req.seat = crate::rc::requester::Seat::new(device);
        self.count_window();
    }

    /// Counts the requester's outstanding PSNs in the device's window: from the oldest
    /// unacknowledged one to the furthest sent, also after an early resend went back (those
    /// packets may still wait at the peer); none outside RTS and SQD, nor for a transport
    /// without ACKs.
    pub(super) fn count_window(&mut self) {
        let n = if matches!(self.state, QpState::Rts | QpState::Sqd) && self.ctx.is_reliable() {
            self.req.sent_through().distance_from(self.req.una)
        } else {
            0
        };
        self.req.seat.count(n);
        if self.state != QpState::Rts || self.req.cur >= self.req.sq.len() {
            // Nothing more to send: it waits for no room.
            self.req.seat.leave();
        }
    }
}
