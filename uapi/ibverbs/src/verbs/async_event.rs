//! Asynchronous events: `ibv_context.async_fd`, `ibv_get_async_event`, `ibv_ack_async_event`
//! (IBTA 11.6.3; `ibv_get_async_event(3)`).
//!
//! Each open context has an [`AsyncEvents`]: a semaphore eventfd, which is the context's
//! `async_fd`, and the queue of `struct ibv_async_event`s it counts. The provider keeps its
//! events in its own queue and wakes a notifier when they become pending
//! (`Context::set_async_notifier`), so once the device runs (the first PD) a watcher thread
//! sleeps until then (or at most [`WATCH_INTERVAL`], a fallback), takes them, turns each into the
//! C event (the element found by QP number or SRQ handle among this context's live objects;
//! an event whose object is gone is dropped), queues it and adds 1 to the eventfd. poll(2)
//! then sees `async_fd` readable; `ibv_get_async_event` reads 1 (blocking, or `EAGAIN` if the
//! application made the fd non-blocking, as rdma-core's examples do) and takes the oldest.
//! `ibv_ack_async_event` counts the event in its object's `events_completed`, under the
//! object's mutex, as rdma-core does (softrnic's destroy verbs do not wait for the acks).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use libc::c_int;
use softrnic_uapi::{AsyncEvent, Context, Element, EventType};

use crate::abi::context::ibv_context;
use crate::abi::qp_attr::{ibv_async_event, ibv_async_event_element};
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::verbs::{qp, srq};

/// The longest the watcher sleeps without being woken. The provider signals events raised
/// by packets and timers in the same round of progress and those raised by API calls (a
/// modify to ERR) in the next round (at most a few milliseconds later); this is a fallback
/// only, so that a missed wake-up costs latency, never an event.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// The queue behind `async_fd`.
struct Queue {
    fd: c_int,
    events: Mutex<VecDeque<ibv_async_event>>,
    stop: AtomicBool,
}

// SAFETY: the queued events hold pointers only as values for the application; the queue
// never dereferences them.
unsafe impl Send for Queue {}
// SAFETY: as above; the deque is behind a mutex.
unsafe impl Sync for Queue {}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ibv_async_event>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `ev` and wakes the fd.
    fn push(&self, ev: ibv_async_event) {
        self.lock().push_back(ev);
        let one: u64 = 1;
        // SAFETY: `fd` is our eventfd, open while the queue lives; 8 readable bytes.
        let _ = unsafe { libc::write(self.fd, (&one as *const u64).cast(), 8) };
    }
}

/// A context's async events: the eventfd and, once the device runs, the watcher thread.
pub(crate) struct AsyncEvents {
    queue: Arc<Queue>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

impl AsyncEvents {
    /// A new eventfd and an empty queue.
    ///
    /// # Errors
    /// The errno of `eventfd`.
    pub fn new() -> Result<AsyncEvents, c_int> {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        Ok(AsyncEvents {
            queue: Arc::new(Queue {
                fd,
                events: Mutex::new(VecDeque::new()),
                stop: AtomicBool::new(false),
            }),
            watcher: Mutex::new(None),
        })
    }

    /// The eventfd: the context's `async_fd`.
    pub fn fd(&self) -> c_int {
        self.queue.fd
    }

    /// Starts the watcher for the device `rt` of the context `ctx` (once; later calls do
    /// nothing). Without a thread the fd simply never becomes readable.
    pub fn watch(&self, rt: &Context, ctx: *const ibv_context) {
        let mut w = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_some() {
            return;
        }
        let (queue, rt, ctx) = (self.queue.clone(), rt.clone(), ctx as usize);
        let notify_rt = rt.clone();
        *w = std::thread::Builder::new()
            .name("softrnic-async".into())
            .spawn(move || {
                while !queue.stop.load(Ordering::Acquire) {
                    while let Some(ev) = rt.get_async_event() {
                        if let Some(c) = to_c(ev, ctx as *const ibv_context) {
                            queue.push(c);
                        }
                    }
                    std::thread::park_timeout(WATCH_INTERVAL);
                }
            })
            .ok();
        if let Some(t) = w.as_ref() {
            // The device wakes the watcher when events become pending.
            let thread = t.thread().clone();
            notify_rt.set_async_notifier(move || thread.unpark());
        }
    }
}

impl Drop for AsyncEvents {
    fn drop(&mut self) {
        self.queue.stop.store(true, Ordering::Release);
        let w = self.watcher.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = w.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        // SAFETY: our eventfd; the watcher, its only other user, has stopped.
        unsafe { libc::close(self.queue.fd) };
    }
}

/// The C form of `ev` for the context `ctx`, if its object is still alive there.
fn to_c(ev: AsyncEvent, ctx: *const ibv_context) -> Option<ibv_async_event> {
    let element = match ev.element {
        Element::Qp(qpn) => ibv_async_event_element {
            qp: qp::qp_by_num(ctx, qpn)?,
        },
        Element::Srq(handle) => ibv_async_event_element {
            srq: srq::srq_by_handle(ctx, handle)?,
        },
        Element::Port(port) => ibv_async_event_element {
            port_num: c_int::from(port),
        },
        // The provider raises no CQ events (every CQ error is a work completion).
        Element::Cq(_) => return None,
    };
    Some(ibv_async_event {
        element,
        event_type: ev.event_type.ibv(),
    })
}

export! { "IBVERBS_1.1";
    /// `int ibv_get_async_event(struct ibv_context *, struct ibv_async_event *)`: the oldest
    /// event, waiting for one unless `async_fd` is non-blocking. 0, or -1 with `errno`:
    /// `EINVAL` for a bad context or NULL `event`, `EAGAIN` when none waits on a non-blocking
    /// fd.
    unsafe extern "C" fn ibv_get_async_event(context: *mut ibv_context, event: *mut ibv_async_event) -> c_int {
        catch(-1, || {
            let Some(c) = context::lookup(context) else {
                set_errno(libc::EINVAL);
                return -1;
            };
            if event.is_null() {
                set_errno(libc::EINVAL);
                return -1;
            }
            let q = &c.events.queue;
            let mut count: u64 = 0;
            // SAFETY: our eventfd, open while the context is; 8 writable bytes. (errno is
            // left as read(2) set it on failure.)
            let n = unsafe { libc::read(q.fd, (&mut count as *mut u64).cast(), 8) };
            if n != 8 {
                return -1;
            }
            let Some(ev) = q.lock().pop_front() else {
                // Cannot happen: each count follows its event into the queue.
                set_errno(libc::EIO);
                return -1;
            };
            // SAFETY: non-NULL; the caller passes a writable ibv_async_event.
            unsafe { event.write(ev) };
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `void ibv_ack_async_event(struct ibv_async_event *)`: counts the event in its QP's or
    /// SRQ's `events_completed` (if the object is still alive).
    unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
        catch((), || {
            if event.is_null() {
                return;
            }
            // SAFETY: non-NULL; the caller passes an event ibv_get_async_event filled in.
            let ev = unsafe { *event };
            let element = ev.element;
            if is_qp_event(ev.event_type) {
                // SAFETY: the union member QP events carry (written by `to_c`); the QP is
                // used only if still alive.
                qp::ack_event(unsafe { element.qp });
            } else if is_srq_event(ev.event_type) {
                // SAFETY: as above, for SRQs.
                srq::ack_event(unsafe { element.srq });
            }
        })
    }
}

fn is_qp_event(t: u32) -> bool {
    use EventType::*;
    [
        QpFatal,
        QpReqErr,
        QpAccessErr,
        CommEst,
        SqDrained,
        PathMig,
        PathMigErr,
        QpLastWqeReached,
    ]
    .iter()
    .any(|e| e.ibv() == t)
}

fn is_srq_event(t: u32) -> bool {
    t == EventType::SrqErr.ibv() || t == EventType::SrqLimitReached.ibv()
}

/// Adds 1 to `events_completed` under `mutex` and signals `cond`, as rdma-core's
/// `ibv_ack_async_event` does for a QP or SRQ.
///
/// # Safety
/// The three pointers must be fields of one live object.
pub(crate) unsafe fn count_ack(
    mutex: *mut libc::pthread_mutex_t,
    cond: *mut libc::pthread_cond_t,
    events_completed: *mut u32,
) {
    // SAFETY: forwarded from the caller; the mutex and cond are initialized (all-zero is
    // their static initializer on glibc).
    unsafe {
        libc::pthread_mutex_lock(mutex);
        *events_completed += 1;
        libc::pthread_cond_signal(cond);
        libc::pthread_mutex_unlock(mutex);
    }
}
