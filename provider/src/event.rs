//! Asynchronous events (IBTA 11.6.3 "Asynchronous Events"; `ibv_get_async_event(3)`): the
//! affiliated and unaffiliated events a device reports outside the completion queues, with
//! libibverbs' `enum ibv_event_type` values, and the queue the NIC keeps them in.
//!
//! softrnic raises:
//!
//! * `IBV_EVENT_SRQ_LIMIT_REACHED` when an armed SRQ falls below its limit (IBTA 10.2.9);
//! * `IBV_EVENT_SQ_DRAINED` when a QP in SQD that asked for it (`en_sqd_async_notify`) has
//!   every outstanding request acknowledged (IBTA 10.3.1, "Send Queue Drain");
//! * `IBV_EVENT_QP_LAST_WQE_REACHED` when a QP with an SRQ enters ERR: it will take no more
//!   WQEs from the SRQ (IBTA 10.2.9; kernel rxe does the same).
//!
//! The other types are listed for their values. `IBV_EVENT_QP_FATAL` is not raised: every
//! error the engine detects has a work completion that carries it.

use std::collections::VecDeque;

/// `enum ibv_event_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventType {
    /// `IBV_EVENT_CQ_ERR`.
    CqErr = 0,
    /// `IBV_EVENT_QP_FATAL`.
    QpFatal = 1,
    /// `IBV_EVENT_QP_REQ_ERR`.
    QpReqErr = 2,
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    QpAccessErr = 3,
    /// `IBV_EVENT_COMM_EST`.
    CommEst = 4,
    /// `IBV_EVENT_SQ_DRAINED`.
    SqDrained = 5,
    /// `IBV_EVENT_PATH_MIG`.
    PathMig = 6,
    /// `IBV_EVENT_PATH_MIG_ERR`.
    PathMigErr = 7,
    /// `IBV_EVENT_DEVICE_FATAL`.
    DeviceFatal = 8,
    /// `IBV_EVENT_PORT_ACTIVE`.
    PortActive = 9,
    /// `IBV_EVENT_PORT_ERR`.
    PortErr = 10,
    /// `IBV_EVENT_LID_CHANGE`.
    LidChange = 11,
    /// `IBV_EVENT_PKEY_CHANGE`.
    PkeyChange = 12,
    /// `IBV_EVENT_SM_CHANGE`.
    SmChange = 13,
    /// `IBV_EVENT_SRQ_ERR`.
    SrqErr = 14,
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    SrqLimitReached = 15,
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    QpLastWqeReached = 16,
    /// `IBV_EVENT_CLIENT_REREGISTER`.
    ClientReregister = 17,
    /// `IBV_EVENT_GID_CHANGE`.
    GidChange = 18,
    /// `IBV_EVENT_WQ_FATAL`.
    WqFatal = 19,
}

impl EventType {
    /// The libibverbs value.
    pub fn ibv(self) -> u32 {
        self as u32
    }
}

/// What an event is about (`ibv_async_event.element`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Element {
    /// A QP, by number.
    Qp(u32),
    /// An SRQ, by handle.
    Srq(u32),
    /// A CQ, by handle.
    Cq(u32),
    /// A port, by number.
    Port(u8),
}

/// One asynchronous event (`struct ibv_async_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsyncEvent {
    /// What happened.
    pub event_type: EventType,
    /// To what.
    pub element: Element,
}

/// The device's event queue. It is bounded: beyond `capacity` the oldest events are dropped
/// and counted, so that a consumer that never reads events costs nothing but the count.
#[derive(Debug)]
pub struct EventQueue {
    events: VecDeque<AsyncEvent>,
    capacity: usize,
    /// Events dropped because the queue was full.
    pub lost: u64,
}

impl EventQueue {
    /// An empty queue holding up to `capacity` events.
    pub fn new(capacity: usize) -> EventQueue {
        EventQueue {
            events: VecDeque::new(),
            capacity: capacity.max(1),
            lost: 0,
        }
    }

    /// Queues an event.
    pub fn push(&mut self, ev: AsyncEvent) {
        if self.events.len() >= self.capacity {
            self.events.pop_front();
            self.lost += 1;
        }
        self.events.push_back(ev);
    }

    /// The oldest event.
    pub fn pop(&mut self) -> Option<AsyncEvent> {
        self.events.pop_front()
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_libibverbs() {
        assert_eq!(EventType::QpFatal.ibv(), 1);
        assert_eq!(EventType::SqDrained.ibv(), 5);
        assert_eq!(EventType::SrqLimitReached.ibv(), 15);
        assert_eq!(EventType::QpLastWqeReached.ibv(), 16);
        assert_eq!(EventType::WqFatal.ibv(), 19);
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts() {
        let mut q = EventQueue::new(2);
        for n in 0..3 {
            q.push(AsyncEvent {
                event_type: EventType::SqDrained,
                element: Element::Qp(n),
            });
        }
        assert_eq!(q.lost, 1);
        assert_eq!(q.pop().map(|e| e.element), Some(Element::Qp(1)));
        assert_eq!(q.pop().map(|e| e.element), Some(Element::Qp(2)));
        assert!(q.pop().is_none());
    }
}
