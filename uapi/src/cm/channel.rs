//! Event channels (`rdma_create_event_channel`, `rdma_get_cm_event`): a queue of events
//! behind an eventfd in semaphore mode, one count per queued event. The fd is readable
//! exactly while events wait, so programs `poll(2)` it; getting an event waits on a blocking
//! fd and fails with `EAGAIN` on one the program made `O_NONBLOCK`, as librdmacm's does. The
//! count changes only with the queue, under its lock, so the two always agree.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::id::IdInner;
use super::CmEvent;

/// An event channel. Cheap to clone: the clones are the same channel.
#[derive(Clone)]
pub struct EventChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

pub(crate) struct ChannelInner {
    fd: OwnedFd,
    queue: Mutex<VecDeque<CmEvent>>,
}

impl std::fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventChannel(fd {})", self.fd())
    }
}

impl EventChannel {
    /// `rdma_create_event_channel`.
    ///
    /// # Errors
    /// `eventfd(2)`'s (`EMFILE`, `ENOMEM`).
    pub fn new() -> io::Result<EventChannel> {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EventChannel {
            inner: Arc::new(ChannelInner {
                // SAFETY: `fd` was just opened and nothing else owns it.
                fd: unsafe { OwnedFd::from_raw_fd(fd) },
                queue: Mutex::new(VecDeque::new()),
            }),
        })
    }

    /// The pollable file descriptor (`channel->fd`).
    pub fn fd(&self) -> RawFd {
        self.inner.fd.as_raw_fd()
    }

    /// `rdma_get_cm_event`: the next event, waiting for one unless the program made the fd
    /// non-blocking (`fcntl(fd, F_SETFL, O_NONBLOCK)`).
    ///
    /// # Errors
    /// `EAGAIN` on a non-blocking fd with no event; `EINTR`.
    pub fn get_event(&self) -> io::Result<CmEvent> {
        loop {
            if let Some(e) = self.try_get_event() {
                return Ok(e);
            }
            // SAFETY: fcntl on our own fd.
            let flags = unsafe { libc::fcntl(self.fd(), libc::F_GETFL) };
            if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            let mut p = libc::pollfd {
                fd: self.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `p` is one valid pollfd.
            if unsafe { libc::poll(&mut p, 1, -1) } < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }

    /// The next event if one waits, never blocking.
    pub fn try_get_event(&self) -> Option<CmEvent> {
        let mut q = self.inner.lock();
        let e = q.pop_front()?;
        self.inner.take_count();
        Some(e)
    }

    /// Whether `self` and `other` are the same channel.
    pub fn same(&self, other: &EventChannel) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl ChannelInner {
    fn lock(&self) -> MutexGuard<'_, VecDeque<CmEvent>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `e` and counts it on the fd.
    pub(crate) fn push(&self, e: CmEvent) {
        let mut q = self.lock();
        q.push_back(e);
        let one = 1u64.to_ne_bytes();
        // SAFETY: `one` is 8 readable bytes. A semaphore eventfd only fails to count at
        // 2^64 - 2 events, which memory runs out long before.
        unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Withdraws the queued events about `id` (it is being destroyed, or moves to another
    /// channel), with their counts: its own, and, for a listener, the connection requests
    /// it has not taken (their events are about the new ids, and counted as the
    /// listener's).
    pub(crate) fn withdraw(&self, id: &Arc<IdInner>) -> Vec<CmEvent> {
        let mut q = self.lock();
        let mut gone = Vec::new();
        let mut kept = VecDeque::with_capacity(q.len());
        for e in q.drain(..) {
            let listener = e
                .listen_id
                .as_ref()
                .is_some_and(|l| Arc::ptr_eq(&l.inner, id));
            if Arc::ptr_eq(&e.id.inner, id) || listener {
                gone.push(e);
            } else {
                kept.push_back(e);
            }
        }
        *q = kept;
        for _ in &gone {
            self.take_count();
        }
        gone
    }

    /// Takes one count off the fd. The queue's lock is held, and the count equals the
    /// queue's length under it, so there is one to take: the read never blocks.
    fn take_count(&self) {
        let mut count = [0u8; 8];
        // SAFETY: `count` is 8 writable bytes, what an eventfd read needs.
        unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }
}
