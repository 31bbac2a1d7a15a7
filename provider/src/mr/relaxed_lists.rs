//! The bookkeeping of one relaxed pool (`relaxed.rs`): which of its keys are free, and which
//! held key's region covers which pages.
//!
//! Plain data, kept under the pool's lock. Whether a held key's region is live or marked for
//! invalidation is not here: the slot's tag says it (valid or deferred), so that
//! deregistration changes one atomic and takes no lock. Each index the pool owns has a
//! *position* `0..owned`; positions are what the lists hold.

use rustc_hash::FxHashMap;

/// What a relaxed region covers: its page-rounded range and its rights. Two regions that
/// cover the same are interchangeable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Pages {
    pub start: usize,
    pub len: usize,
    pub access: u32,
}

/// The pool's lists (see the module doc).
#[derive(Debug)]
pub(super) struct Lists {
    /// What the region at each position covers (meaningful while it holds one).
    pages: Vec<Pages>,
    /// The next older held position whose region covers the same pages, or [`NONE`]: with
    /// `by_pages`, a list per `Pages`, newest first, that needs no allocation.
    older: Vec<u32>,
    /// Positions without a region.
    free: Vec<u32>,
    /// Held positions by what their region covers: the newest of each.
    by_pages: FxHashMap<Pages, u32>,
    /// The positions went back to the table for good.
    released: bool,
}

/// The end of a list of `older` positions.
const NONE: u32 = u32::MAX;

const NO_PAGES: Pages = Pages {
    start: 0,
    len: 0,
    access: 0,
};

impl Lists {
    /// Lists of `owned` positions, all free.
    pub fn new(owned: usize) -> Lists {
        Lists {
            pages: vec![NO_PAGES; owned],
            older: vec![NONE; owned],
            free: (0..owned as u32).rev().collect(),
            by_pages: FxHashMap::default(),
            released: false,
        }
    }

    /// How many positions are free.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// The held positions whose region covers exactly `pages`, newest first.
    pub fn find(&self, pages: Pages) -> impl Iterator<Item = u32> + '_ {
        let head = self.by_pages.get(&pages).copied().unwrap_or(NONE);
        std::iter::successors((head != NONE).then_some(head), |&pos| {
            let next = self.older[pos as usize];
            (next != NONE).then_some(next)
        })
    }

    /// A free position, now held by a region that covers `pages`.
    pub fn take(&mut self, pages: Pages) -> Option<u32> {
        let pos = self.free.pop()?;
        self.pages[pos as usize] = pages;
        self.older[pos as usize] = self.by_pages.insert(pages, pos).unwrap_or(NONE);
        Some(pos)
    }

    /// Frees a position taken by [`take`](Self::take) (its region is gone).
    pub fn put_back(&mut self, pos: u32) {
        let pages = self.pages[pos as usize];
        let next = std::mem::replace(&mut self.older[pos as usize], NONE);
        match self.by_pages.get(&pages).copied() {
            Some(head) if head == pos => {
                if next == NONE {
                    self.by_pages.remove(&pages);
                } else {
                    self.by_pages.insert(pages, next);
                }
            }
            Some(head) => {
                let mut cur = head;
                while cur != NONE && self.older[cur as usize] != pos {
                    cur = self.older[cur as usize];
                }
                if cur != NONE {
                    self.older[cur as usize] = next;
                }
            }
            None => {}
        }
        self.free.push(pos);
    }

    /// Whether every position is free; if so they are released for good (once).
    pub fn release(&mut self) -> bool {
        if self.released || self.free.len() != self.pages.len() {
            return false;
        }
        self.released = true;
        self.free.clear();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(start: usize) -> Pages {
        Pages {
            start,
            len: 4096,
            access: 1,
        }
    }

    fn found(l: &Lists, start: usize) -> Vec<u32> {
        l.find(pages(start)).collect()
    }

    #[test]
    fn positions_are_found_by_pages_newest_first_until_put_back() {
        let mut l = Lists::new(4);
        let a = l.take(pages(0x1000)).unwrap();
        let b = l.take(pages(0x1000)).unwrap();
        let c = l.take(pages(0x2000)).unwrap();
        let d = l.take(pages(0x1000)).unwrap();
        assert!(l.take(pages(0x3000)).is_none());
        assert_eq!(found(&l, 0x1000), vec![d, b, a]);
        assert_eq!(found(&l, 0x3000), vec![]);
        // From the middle, the head, the tail.
        l.put_back(b);
        assert_eq!(found(&l, 0x1000), vec![d, a]);
        l.put_back(d);
        assert_eq!(found(&l, 0x1000), vec![a]);
        let e = l.take(pages(0x1000)).unwrap();
        assert_eq!(found(&l, 0x1000), vec![e, a]);
        l.put_back(a);
        assert_eq!(found(&l, 0x1000), vec![e]);
        l.put_back(e);
        assert_eq!(found(&l, 0x1000), vec![]);
        assert_eq!(found(&l, 0x2000), vec![c]);
        assert!(!l.release(), "c is held");
        l.put_back(c);
        assert_eq!(l.free(), 4);
        assert!(l.release());
        assert!(!l.release(), "only once");
        assert_eq!(l.free(), 0);
    }
}
