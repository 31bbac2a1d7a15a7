//! The contexts sharing one device, and where each one's asynchronous events go.
//!
//! A device is shared by every context opened on it (`ibv_open_device` any number of times):
//! one NIC, one key table, one transport. Each context owns its PDs, and through them its
//! MRs, QPs and SRQs (a QP or SRQ belongs to the context of its PD, as in the kernel's
//! uverbs, where every object hangs off one `ib_ucontext`). What the NIC must keep apart is
//! the asynchronous events (IBTA 11.6.3): an affiliated event goes to the context that owns
//! its QP or SRQ, on that context's `async_fd` and nowhere else.
//!
//! So the NIC keeps, per owner, an event queue and a notifier, and hands out PD handles that
//! are unique across the device (the key table checks an access's PD against the region's,
//! so two contexts must never get the same handle: one context's rkey would then open the
//! other's memory). PDs the NIC did not hand out — tests make up handles — and their
//! objects belong to [`DEFAULT_OWNER`], which always exists.

use rustc_hash::FxHashMap as HashMap;

use crate::cq::Notifier;
use crate::event::{AsyncEvent, EventQueue};
use crate::mr::PdHandle;

/// Asynchronous events the NIC keeps per owner for a consumer that does not read them.
pub const EVENT_QUEUE_LEN: usize = 1024;

/// A context of the device, as the NIC knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerId(pub u32);

/// The owner of PDs the NIC did not hand out (and of their QPs and SRQs).
pub const DEFAULT_OWNER: OwnerId = OwnerId(0);

/// One owner's events.
struct Owner {
    events: EventQueue,
    /// Called when events become pending and none was signalled since the owner last
    /// drained them.
    notifier: Option<Notifier>,
    signalled: bool,
}

impl Owner {
    fn new() -> Owner {
        Owner {
            events: EventQueue::new(EVENT_QUEUE_LEN),
            notifier: None,
            signalled: false,
        }
    }
}

/// The owners of a device, their PDs and their event queues.
pub struct Owners {
    owners: HashMap<u32, Owner>,
    pds: HashMap<u32, OwnerId>,
    next_owner: u32,
    next_pd: u32,
    /// Events queued, all owners together (a round of progress looks at this alone).
    queued: usize,
}

impl Default for Owners {
    fn default() -> Owners {
        let mut owners = HashMap::default();
        owners.insert(DEFAULT_OWNER.0, Owner::new());
        Owners {
            owners,
            pds: HashMap::default(),
            next_owner: 1,
            next_pd: 1,
            queued: 0,
        }
    }
}

impl Owners {
    /// A new owner (a context opened on the device).
    pub fn add(&mut self) -> OwnerId {
        let id = self.next_owner;
        self.next_owner = self.next_owner.wrapping_add(1).max(1);
        self.owners.insert(id, Owner::new());
        OwnerId(id)
    }

    /// Forgets `owner` (its context is closed), its PDs and its undelivered events.
    pub fn remove(&mut self, owner: OwnerId) {
        if owner == DEFAULT_OWNER {
            return;
        }
        if let Some(o) = self.owners.remove(&owner.0) {
            self.queued -= o.events.len();
        }
        self.pds.retain(|_, o| *o != owner);
    }

    /// `ibv_alloc_pd` for `owner`: a handle no other PD of the device has.
    pub fn alloc_pd(&mut self, owner: OwnerId) -> PdHandle {
        loop {
            let pd = self.next_pd;
            self.next_pd = self.next_pd.wrapping_add(1).max(1);
            if let std::collections::hash_map::Entry::Vacant(e) = self.pds.entry(pd) {
                e.insert(owner);
                return PdHandle(pd);
            }
        }
    }

    /// `ibv_dealloc_pd`.
    pub fn dealloc_pd(&mut self, pd: PdHandle) {
        self.pds.remove(&pd.0);
    }

    /// Who owns `pd` ([`DEFAULT_OWNER`] for a handle the NIC did not hand out).
    pub fn owner_of(&self, pd: PdHandle) -> OwnerId {
        self.pds.get(&pd.0).copied().unwrap_or(DEFAULT_OWNER)
    }

    /// Queues `ev` for the owner of `pd` (dropped if that owner is gone).
    pub fn push(&mut self, pd: PdHandle, ev: AsyncEvent) {
        let owner = self.owner_of(pd);
        if let Some(o) = self.owners.get_mut(&owner.0) {
            let before = o.events.len();
            o.events.push(ev);
            self.queued += o.events.len() - before;
        }
    }

    /// Queues `ev` for every owner (an event of the whole device).
    pub fn push_to_all(&mut self, ev: AsyncEvent) {
        for o in self.owners.values_mut() {
            let before = o.events.len();
            o.events.push(ev);
            self.queued += o.events.len() - before;
        }
    }

    /// `owner`'s oldest event; when there is none, its next pending event is signalled again.
    pub fn pop(&mut self, owner: OwnerId) -> Option<AsyncEvent> {
        let o = self.owners.get_mut(&owner.0)?;
        let ev = o.events.pop();
        match ev {
            Some(_) => self.queued -= 1,
            None => o.signalled = false,
        }
        ev
    }

    /// Whether any owner has events queued.
    pub fn any_queued(&self) -> bool {
        self.queued > 0
    }

    /// Sets what is called when `owner`'s events become pending.
    pub fn set_notifier(&mut self, owner: OwnerId, n: Notifier) {
        if let Some(o) = self.owners.get_mut(&owner.0) {
            o.notifier = Some(n);
            o.signalled = false;
        }
    }

    /// Calls the notifier of every owner with events queued that was not signalled since it
    /// last drained them.
    pub fn signal(&mut self) {
        for o in self.owners.values_mut() {
            if let Some(n) = &o.notifier {
                if !o.events.is_empty() && !o.signalled {
                    o.signalled = true;
                    (n.0)();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Element, EventType};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn ev(qpn: u32) -> AsyncEvent {
        AsyncEvent {
            event_type: EventType::SqDrained,
            element: Element::Qp(qpn),
        }
    }

    #[test]
    fn pd_handles_are_unique_across_owners() {
        let mut o = Owners::default();
        let (a, b) = (o.add(), o.add());
        let pds: Vec<PdHandle> = (0..4)
            .map(|i| o.alloc_pd(if i % 2 == 0 { a } else { b }))
            .collect();
        let mut unique = pds.clone();
        unique.dedup();
        assert_eq!(unique.len(), 4, "{pds:?}");
        assert_eq!(o.owner_of(pds[0]), a);
        assert_eq!(o.owner_of(pds[1]), b);
        assert_eq!(o.owner_of(PdHandle(999)), DEFAULT_OWNER);
        o.dealloc_pd(pds[0]);
        assert_eq!(o.owner_of(pds[0]), DEFAULT_OWNER);
    }

    #[test]
    fn events_go_to_the_owner_of_the_pd_only() {
        let mut o = Owners::default();
        let (a, b) = (o.add(), o.add());
        let (pa, pb) = (o.alloc_pd(a), o.alloc_pd(b));
        let rang = Arc::new(AtomicUsize::new(0));
        let r = rang.clone();
        o.set_notifier(
            a,
            Notifier(Arc::new(move || {
                r.fetch_add(1, Ordering::Relaxed);
            })),
        );
        o.push(pa, ev(1));
        o.push(pb, ev(2));
        o.push(pa, ev(3));
        o.signal();
        o.signal();
        assert_eq!(
            rang.load(Ordering::Relaxed),
            1,
            "signalled once until drained"
        );
        assert_eq!(o.pop(b), Some(ev(2)));
        assert_eq!(o.pop(b), None);
        assert_eq!(o.pop(a), Some(ev(1)));
        assert_eq!(o.pop(a), Some(ev(3)));
        assert_eq!(o.pop(a), None);
        assert!(!o.any_queued());
        o.push(pa, ev(4));
        o.signal();
        assert_eq!(
            rang.load(Ordering::Relaxed),
            2,
            "drained, so signalled again"
        );
    }

    #[test]
    fn a_removed_owner_takes_its_events_and_pds_with_it() {
        let mut o = Owners::default();
        let a = o.add();
        let pa = o.alloc_pd(a);
        o.push(pa, ev(1));
        assert!(o.any_queued());
        o.remove(a);
        assert!(!o.any_queued());
        assert_eq!(o.pop(a), None);
        assert_eq!(o.owner_of(pa), DEFAULT_OWNER);
        o.remove(DEFAULT_OWNER);
        o.push(PdHandle(7), ev(2));
        assert_eq!(o.pop(DEFAULT_OWNER), Some(ev(2)), "the default owner stays");
    }
}
