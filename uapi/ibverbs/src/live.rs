//! The objects of one kind a process has alive, by address: a C pointer is used only if it
//! is one of them, so a stale or foreign pointer gets `EINVAL` instead of a crash.
//!
//! `ibv_post_send`, `ibv_poll_cq` and their kin look their object up on every call, so the set
//! is a hash set: a program with thousands of QPs pays what a program with one does.

use std::collections::HashSet;
use std::sync::Mutex;

use rustc_hash::FxBuildHasher;

/// A set of live object addresses.
pub(crate) struct Live(Mutex<HashSet<usize, FxBuildHasher>>);

impl Live {
    /// An empty set.
    pub const fn new() -> Live {
        Live(Mutex::new(HashSet::with_hasher(FxBuildHasher)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<usize, FxBuildHasher>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `p` as alive.
    pub fn insert<T>(&self, p: *const T) {
        self.lock().insert(p as usize);
    }

    /// Whether `p` is alive.
    pub fn contains<T>(&self, p: *const T) -> bool {
        !p.is_null() && self.lock().contains(&(p as usize))
    }

    /// Forgets `p`; `false` if it was not alive (so the caller must not free it).
    pub fn remove<T>(&self, p: *const T) -> bool {
        self.lock().remove(&(p as usize))
    }

    /// Every live object for which `pred` holds (run under the set's lock, as in
    /// [`Live::find`]).
    pub fn all<T>(&self, pred: impl Fn(*const T) -> bool) -> Vec<*const T> {
        self.lock()
            .iter()
            .map(|a| *a as *const T)
            .filter(|p| pred(*p))
            .collect()
    }

    /// A live object for which `pred` holds, or NULL; `pred` runs under the set's lock, so no
    /// object of the set can be removed (and freed) meanwhile.
    pub fn find<T>(&self, pred: impl Fn(*const T) -> bool) -> *const T {
        self.lock()
            .iter()
            .map(|a| *a as *const T)
            .find(|p| pred(*p))
            .unwrap_or(std::ptr::null())
    }
}

#[cfg(test)]
mod tests {
    use super::Live;

    #[test]
    fn insert_contains_remove_find() {
        let set = Live::new();
        let (a, b) = (0x1000 as *const u8, 0x2000 as *const u8);
        assert!(!set.contains(a));
        assert!(!set.contains(std::ptr::null::<u8>()));
        set.insert(a);
        set.insert(b);
        assert!(set.contains(a) && set.contains(b));
        assert_eq!(set.find(|p: *const u8| p as usize == 0x2000), b);
        assert!(set.find(|p: *const u8| p as usize == 0x3000).is_null());
        let mut both = set.all(|_: *const u8| true);
        both.sort();
        assert_eq!(both, [a, b]);
        assert!(set.all(|p: *const u8| p as usize == 0x3000).is_empty());
        assert!(set.remove(a));
        assert!(!set.remove(a), "only once");
        assert!(!set.contains(a) && set.contains(b));
    }
}
