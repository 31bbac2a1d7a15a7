//! The objects of one kind a process has alive, by address: a C pointer is used only if it
//! is one of them, so a stale or foreign pointer gets `EINVAL` instead of a crash.

use std::sync::Mutex;

/// A set of live object addresses.
pub(crate) struct Live(Mutex<Vec<usize>>);

impl Live {
    /// An empty set.
    pub const fn new() -> Live {
        Live(Mutex::new(Vec::new()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `p` as alive.
    pub fn insert<T>(&self, p: *const T) {
        self.lock().push(p as usize);
    }

    /// Whether `p` is alive.
    pub fn contains<T>(&self, p: *const T) -> bool {
        !p.is_null() && self.lock().contains(&(p as usize))
    }

    /// Forgets `p`; `false` if it was not alive (so the caller must not free it).
    pub fn remove<T>(&self, p: *const T) -> bool {
        let mut all = self.lock();
        match all.iter().position(|a| *a == p as usize) {
            Some(i) => {
                all.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// The first live object for which `pred` holds, or NULL; `pred` runs under the set's
    /// lock, so no object of the set can be removed (and freed) meanwhile.
    pub fn find<T>(&self, pred: impl Fn(*const T) -> bool) -> *const T {
        self.lock()
            .iter()
            .map(|a| *a as *const T)
            .find(|p| pred(*p))
            .unwrap_or(std::ptr::null())
    }
}
