//! Shared receive queues (IBTA 10.2.9 "Shared Receive Queue"; `ibv_create_srq(3)`,
//! `ibv_modify_srq(3)`, `ibv_query_srq(3)`, `ibv_post_srq_recv(3)`).
//!
//! An SRQ belongs to a protection domain and holds receive WQEs that any QP created with it
//! consumes, in posting order, for SEND, SEND with immediate and RDMA WRITE with immediate.
//! Its attributes (`struct ibv_srq_attr`) are `max_wr`, `max_sge` and `srq_limit`:
//!
//! * **Limit**: `ibv_modify_srq` with `IBV_SRQ_LIMIT` and a non-zero `srq_limit` arms it; when
//!   a QP takes a WQE and fewer than `srq_limit` remain, one `IBV_EVENT_SRQ_LIMIT_REACHED` is
//!   raised and the limit disarms (`ibv_query_srq` then reports `srq_limit` 0). A limit set
//!   above the current count fires at the next WQE taken. The `srq_limit` of
//!   `ibv_create_srq` is checked (at most `max_wr`) but does not arm, as in verbs.
//! * **Resize**: `IBV_SRQ_MAX_WR` changes `max_wr` (not below the WQEs posted), so the device
//!   sets `IBV_DEVICE_SRQ_RESIZE`.
//! * The SGEs of an SRQ's WQEs are checked against the SRQ's PD, the PD they were posted in.
//!
//! * An XRC SRQ (`IBV_SRQT_XRC`, [`crate::xrc`]) also belongs to an XRC domain and names its
//!   own CQ; its number (`ibv_get_srq_num`) is its handle.
//!
//! The NIC owns SRQs by handle ([`SrqTable`]); a QP's responder is handed the table with each
//! packet, as it is handed the MR table, so the engine stays sans-IO.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use crate::error::{Error, Result};
use crate::mr::PdHandle;
use crate::wr::{RecvWqe, RecvWr};

/// An SRQ handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqId(pub u32);

/// `struct ibv_srq_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    /// WQEs the SRQ holds.
    pub max_wr: u32,
    /// SGEs per WQE.
    pub max_sge: u32,
    /// The limit (0: not armed).
    pub srq_limit: u32,
}

bitflags::bitflags! {
    /// `enum ibv_srq_attr_mask`. A mask from a C caller is taken with
    /// [`from_bits_retain`](Self::from_bits_retain): [`Srq::modify`] refuses an unknown bit
    /// with `EINVAL`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct SrqAttrMask: u32 {
        /// `IBV_SRQ_MAX_WR`: resize.
        const MAX_WR = 1;
        /// `IBV_SRQ_LIMIT`: arm (or disarm with 0) the limit.
        const LIMIT = 2;
    }
}

/// The device limits an SRQ is checked against (`max_srq_wr`, `max_srq_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqLimits {
    /// `max_srq_wr`.
    pub max_wr: u32,
    /// `max_srq_sge`.
    pub max_sge: u32,
}

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    pd: PdHandle,
    max_wr: u32,
    max_sge: u32,
    /// Armed limit, 0 when not armed.
    limit: u32,
    wqes: VecDeque<RecvWqe>,
    /// The limit was reached and the event not yet taken.
    limit_reached: bool,
    /// The XRC domain and CQ of an XRC SRQ.
    xrc: Option<crate::xrc::XrcSrq>,
}

impl Srq {
    /// `ibv_create_srq` in `pd`.
    ///
    /// # Errors
    /// `EINVAL` for `max_wr` of 0 or above `limits.max_wr`, `max_sge` above `limits.max_sge`,
    /// or `srq_limit` above `max_wr`.
    pub fn new(pd: PdHandle, attr: &SrqAttr, limits: &SrqLimits) -> Result<Srq> {
        if attr.max_wr == 0 || attr.max_wr > limits.max_wr {
            return Err(Error::InvalidArgument("SRQ max_wr must be 1..=max_srq_wr"));
        }
        if attr.max_sge > limits.max_sge {
            return Err(Error::InvalidArgument("SRQ max_sge above max_srq_sge"));
        }
        if attr.srq_limit > attr.max_wr {
            return Err(Error::InvalidArgument("srq_limit above max_wr"));
        }
        Ok(Srq {
            pd,
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            limit: 0,
            wqes: VecDeque::new(),
            limit_reached: false,
            xrc: None,
        })
    }

    /// The same SRQ made an XRC SRQ of `xrc`'s domain and CQ.
    pub fn with_xrc(mut self, xrc: crate::xrc::XrcSrq) -> Srq {
        self.xrc = Some(xrc);
        self
    }

    /// The XRC domain and CQ, for an XRC SRQ.
    pub fn xrc(&self) -> Option<crate::xrc::XrcSrq> {
        self.xrc
    }

    /// The protection domain.
    pub fn pd(&self) -> PdHandle {
        self.pd
    }

    /// `ibv_query_srq`.
    pub fn query(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            srq_limit: self.limit,
        }
    }

    /// WQEs posted and not yet taken.
    pub fn len(&self) -> usize {
        self.wqes.len()
    }

    /// Whether no WQE is posted.
    pub fn is_empty(&self) -> bool {
        self.wqes.is_empty()
    }

    /// `ibv_modify_srq`: all attributes in `mask` are checked, then applied.
    ///
    /// # Errors
    /// `EINVAL` for unknown mask bits, a `max_wr` of 0, above `limits.max_wr` or below the
    /// WQEs posted, or a `srq_limit` above `max_wr` (the new one if resized too).
    pub fn modify(&mut self, attr: &SrqAttr, mask: SrqAttrMask, limits: &SrqLimits) -> Result<()> {
        if !SrqAttrMask::all().contains(mask) {
            return Err(Error::InvalidArgument("unknown SRQ attribute mask bits"));
        }
        let mut max_wr = self.max_wr;
        if mask.contains(SrqAttrMask::MAX_WR) {
            if attr.max_wr == 0 || attr.max_wr > limits.max_wr {
                return Err(Error::InvalidArgument("SRQ max_wr must be 1..=max_srq_wr"));
            }
            if (attr.max_wr as usize) < self.wqes.len() {
                return Err(Error::InvalidArgument(
                    "SRQ max_wr below the WQEs already posted",
                ));
            }
            max_wr = attr.max_wr;
        }
        if mask.contains(SrqAttrMask::LIMIT) && attr.srq_limit > max_wr {
            return Err(Error::InvalidArgument("srq_limit above max_wr"));
        }
        self.max_wr = max_wr;
        if mask.contains(SrqAttrMask::LIMIT) {
            self.limit = attr.srq_limit;
        }
        Ok(())
    }

    /// `ibv_post_srq_recv` of one WR.
    ///
    /// # Errors
    /// `ENOMEM` when `max_wr` WQEs are posted; `EINVAL` for more SGEs than `max_sge` or a
    /// buffer over 2^31 bytes.
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<()> {
        if self.wqes.len() >= self.max_wr as usize {
            return Err(Error::NoMemory("shared receive queue full"));
        }
        self.wqes
            .push_back(RecvWqe::new(wr, self.max_sge, self.pd)?);
        Ok(())
    }

    /// Takes the oldest WQE for a QP; fewer than an armed limit left raises the limit event
    /// (once: the limit disarms).
    pub fn take(&mut self) -> Option<RecvWqe> {
        let wqe = self.wqes.pop_front()?;
        if self.limit > 0 && self.wqes.len() < self.limit as usize {
            self.limit = 0;
            self.limit_reached = true;
        }
        Some(wqe)
    }

    /// Puts back at the head a WQE [`Srq::take`] gave out but that was not consumed (the UC
    /// message it was taken for was dropped): the next message takes it first.
    pub fn give_back(&mut self, wqe: RecvWqe) {
        self.wqes.push_front(wqe);
    }

    /// Whether the limit was reached since the last call (the event, taken once).
    pub fn poll_limit_reached(&mut self) -> bool {
        std::mem::take(&mut self.limit_reached)
    }
}

/// The SRQs of a device, by handle.
#[derive(Debug, Default)]
pub struct SrqTable {
    srqs: HashMap<u32, Srq>,
    next: u32,
}

impl SrqTable {
    /// An empty table.
    pub fn new() -> SrqTable {
        SrqTable::default()
    }

    /// Adds an SRQ, up to `max_srq` of them.
    ///
    /// # Errors
    /// `ENOMEM` beyond `max_srq`.
    pub fn insert(&mut self, srq: Srq, max_srq: usize) -> Result<SrqId> {
        if self.srqs.len() >= max_srq {
            return Err(Error::NoMemory("max_srq reached"));
        }
        loop {
            self.next = self.next.wrapping_add(1).max(1);
            if !self.srqs.contains_key(&self.next) {
                break;
            }
        }
        self.srqs.insert(self.next, srq);
        Ok(SrqId(self.next))
    }

    /// Removes an SRQ (the caller checks that no QP uses it).
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ.
    pub fn remove(&mut self, id: SrqId) -> Result<Srq> {
        self.srqs
            .remove(&id.0)
            .ok_or(Error::InvalidArgument("no such SRQ"))
    }

    /// The SRQ `id`.
    pub fn get_mut(&mut self, id: SrqId) -> Option<&mut Srq> {
        self.srqs.get_mut(&id.0)
    }

    /// Whether some SRQ satisfies `f`.
    pub fn any(&self, f: impl FnMut(&Srq) -> bool) -> bool {
        self.srqs.values().any(f)
    }

    /// The SRQ `id`, or `EINVAL`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ.
    pub fn srq(&mut self, id: SrqId) -> Result<&mut Srq> {
        self.get_mut(id)
            .ok_or(Error::InvalidArgument("no such SRQ"))
    }

    /// Whether some SRQ's limit was reached since its event was last taken (a peek).
    pub fn any_limit_reached(&self) -> bool {
        self.srqs.values().any(|s| s.limit_reached)
    }

    /// The SRQs whose limit was reached since the last call.
    pub fn poll_limit_reached(&mut self) -> Vec<SrqId> {
        let mut ids: Vec<SrqId> = self
            .srqs
            .iter_mut()
            .filter_map(|(&id, s)| s.poll_limit_reached().then_some(SrqId(id)))
            .collect();
        ids.sort_by_key(|i| i.0);
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::Sge;

    const LIMITS: SrqLimits = SrqLimits {
        max_wr: 16,
        max_sge: 2,
    };

    fn attr(max_wr: u32, max_sge: u32, srq_limit: u32) -> SrqAttr {
        SrqAttr {
            max_wr,
            max_sge,
            srq_limit,
        }
    }

    fn wr(id: u64, nsge: usize) -> RecvWr {
        RecvWr {
            wr_id: id,
            sg_list: vec![Sge::default(); nsge],
        }
    }

    #[test]
    fn create_checks_the_device_limits() {
        let pd = PdHandle(1);
        assert!(Srq::new(pd, &attr(0, 1, 0), &LIMITS).is_err());
        assert!(Srq::new(pd, &attr(17, 1, 0), &LIMITS).is_err());
        assert!(Srq::new(pd, &attr(4, 3, 0), &LIMITS).is_err());
        assert!(Srq::new(pd, &attr(4, 1, 5), &LIMITS).is_err());
        let s = Srq::new(pd, &attr(4, 2, 3), &LIMITS).unwrap();
        assert_eq!(s.query(), attr(4, 2, 0), "a create-time limit does not arm");
    }

    #[test]
    fn post_beyond_max_wr_is_enomem_and_too_many_sges_einval() {
        let mut s = Srq::new(PdHandle(1), &attr(2, 1, 0), &LIMITS).unwrap();
        assert_eq!(s.post_recv(&wr(1, 2)).unwrap_err().errno(), 22);
        s.post_recv(&wr(1, 1)).unwrap();
        s.post_recv(&wr(2, 0)).unwrap();
        assert_eq!(s.post_recv(&wr(3, 1)).unwrap_err().errno(), 12);
        assert_eq!(s.take().map(|w| w.wr_id), Some(1), "in posting order");
    }

    #[test]
    fn the_limit_fires_once_below_it_then_disarms() {
        let mut s = Srq::new(PdHandle(1), &attr(8, 1, 0), &LIMITS).unwrap();
        for i in 0..4 {
            s.post_recv(&wr(i, 1)).unwrap();
        }
        s.modify(&attr(0, 0, 3), SrqAttrMask::LIMIT, &LIMITS)
            .unwrap();
        assert_eq!(s.query().srq_limit, 3);
        s.take().unwrap(); // 3 left: not below 3
        assert!(!s.poll_limit_reached());
        s.take().unwrap(); // 2 left
        assert!(s.poll_limit_reached());
        assert_eq!(s.query().srq_limit, 0, "disarmed");
        s.take().unwrap();
        assert!(!s.poll_limit_reached(), "once");
    }

    #[test]
    fn resize_keeps_the_posted_wqes() {
        let mut s = Srq::new(PdHandle(1), &attr(4, 1, 0), &LIMITS).unwrap();
        for i in 0..3 {
            s.post_recv(&wr(i, 1)).unwrap();
        }
        let m = SrqAttrMask::MAX_WR;
        assert!(
            s.modify(&attr(2, 0, 0), m, &LIMITS).is_err(),
            "below posted"
        );
        assert!(s.modify(&attr(17, 0, 0), m, &LIMITS).is_err());
        s.modify(&attr(3, 0, 0), m, &LIMITS).unwrap();
        assert_eq!(s.post_recv(&wr(9, 1)).unwrap_err().errno(), 12);
        s.modify(&attr(8, 0, 0), m, &LIMITS).unwrap();
        s.post_recv(&wr(9, 1)).unwrap();
        assert_eq!(s.len(), 4);
        let both = SrqAttrMask::MAX_WR | SrqAttrMask::LIMIT;
        assert!(s.modify(&attr(4, 0, 5), both, &LIMITS).is_err());
        assert_eq!(s.query().max_wr, 8, "nothing applied on error");
        assert!(s
            .modify(&attr(0, 0, 0), SrqAttrMask::from_bits_retain(4), &LIMITS)
            .is_err());
    }
}
