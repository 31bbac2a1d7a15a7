//! Completion channels: `ibv_create_comp_channel`, `ibv_destroy_comp_channel`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`.
//!
//! A channel's `fd` is a semaphore eventfd: an armed CQ of the channel (see
//! `softrnic_uapi::Cq::set_notifier`) queues its address and adds 1, so poll(2) sees the fd
//! readable while events wait, and each `ibv_get_cq_event` reads one (blocking, or `EAGAIN`
//! if the application made the fd non-blocking) and takes the oldest CQ.

use std::collections::VecDeque;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use libc::{c_int, c_uint, c_void};

use crate::abi::context::ibv_context;
use crate::abi::objects::{ibv_comp_channel, ibv_cq};
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;

/// What a channel's CQs signal: the eventfd and the CQs whose events wait, oldest first.
pub(crate) struct Events {
    fd: c_int,
    cqs: Mutex<VecDeque<usize>>,
}

impl Events {
    /// Queues an event of `cq` and wakes the fd.
    pub fn signal(&self, cq: *mut ibv_cq) {
        self.cqs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(cq as usize);
        let one: u64 = 1;
        // SAFETY: `fd` is our eventfd, open until the channel is destroyed (which no CQ
        // outlives); 8 readable bytes.
        let _ = unsafe { libc::write(self.fd, (&one as *const u64).cast(), 8) };
    }
}

/// A completion channel.
#[repr(C)]
pub(crate) struct SoftChannel {
    ibv: ibv_comp_channel,
    pub events: Arc<Events>,
}

pub(crate) static CHANNELS: Live = Live::new();

/// The channel at `ch`, if alive. Valid until `ibv_destroy_comp_channel(ch)`, which the
/// application must not race with other uses of the channel.
pub(crate) fn channel_of<'a>(ch: *const ibv_comp_channel) -> Option<&'a SoftChannel> {
    // SAFETY: a live channel pointer is the `ibv` field, at offset 0, of a boxed SoftChannel.
    CHANNELS
        .contains(ch)
        .then(|| unsafe { &*ch.cast::<SoftChannel>() })
}

/// The channel's `refcnt` (its CQs), updated atomically: CQs of one channel may be created
/// and destroyed from several threads.
fn refcnt(ch: &SoftChannel) -> &AtomicI32 {
    // SAFETY: `refcnt` is an aligned c_int (i32) of a live channel, and softrnic only ever
    // accesses it atomically (the application only reads it).
    unsafe { AtomicI32::from_ptr(std::ptr::addr_of!(ch.ibv.refcnt).cast_mut()) }
}

/// Counts a CQ in (`+1`) or out (`-1`) of its channel's `refcnt`.
pub(crate) fn count_cq(ch: &SoftChannel, delta: c_int) {
    refcnt(ch).fetch_add(delta, Ordering::AcqRel);
}

export! { "IBVERBS_1.0";
    /// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *)`: NULL with
    /// `errno` `EINVAL` for a bad context, or the errno of `eventfd`.
    unsafe extern "C" fn ibv_create_comp_channel(context: *mut ibv_context) -> *mut ibv_comp_channel {
        catch(null_mut(), || {
            if context::lookup(context).is_none() {
                set_errno(libc::EINVAL);
                return null_mut();
            }
            // SAFETY: plain syscall.
            let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
            if fd < 0 {
                return null_mut(); // errno set by eventfd
            }
            let events = Arc::new(Events { fd, cqs: Mutex::new(VecDeque::new()) });
            let ibv = ibv_comp_channel { context, fd, refcnt: 0 };
            let p = Box::into_raw(Box::new(SoftChannel { ibv, events })).cast::<ibv_comp_channel>();
            CHANNELS.insert(p);
            p
        })
    }
}

export! { "IBVERBS_1.0";
    /// `int ibv_destroy_comp_channel(struct ibv_comp_channel *)`: 0; `EBUSY` while a CQ
    /// uses it; `EINVAL` for a pointer that is not a live channel.
    unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
        catch(libc::EIO, || {
            let Some(ch) = channel_of(channel) else { return libc::EINVAL };
            if refcnt(ch).load(Ordering::Acquire) > 0 {
                return libc::EBUSY;
            }
            CHANNELS.remove(channel);
            // SAFETY: live until just now, from Box::into_raw; removed, so the only release.
            let soft = unsafe { Box::from_raw(channel.cast::<SoftChannel>()) };
            // SAFETY: our eventfd; no CQ uses the channel any more, so nothing writes it.
            unsafe { libc::close(soft.events.fd) };
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_get_cq_event(struct ibv_comp_channel *, struct ibv_cq **cq, void **cq_context)`:
    /// waits for the next event (unless the fd is non-blocking: -1 with `errno` `EAGAIN`),
    /// and gives its CQ and that CQ's `cq_context`; -1 with `errno` `EINVAL` for a bad
    /// channel or NULL outputs.
    unsafe extern "C" fn ibv_get_cq_event(channel: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int {
        catch(-1, || {
            let Some(ch) = channel_of(channel) else {
                set_errno(libc::EINVAL);
                return -1;
            };
            if cq.is_null() || cq_context.is_null() {
                set_errno(libc::EINVAL);
                return -1;
            }
            let events = ch.events.clone();
            let mut v: u64 = 0;
            // SAFETY: our eventfd; 8 writable bytes. Blocks as the fd's flags say.
            let n = unsafe { libc::read(events.fd, (&mut v as *mut u64).cast(), 8) };
            if n != 8 {
                return -1; // errno set by read
            }
            let front = events.cqs.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
            let Some(c) = front else {
                set_errno(libc::EIO);
                return -1;
            };
            let c = c as *mut ibv_cq;
            // SAFETY: the CQ of an unacknowledged event is alive (the application may not
            // destroy a CQ before acknowledging its events); outputs are non-NULL.
            unsafe {
                *cq = c;
                *cq_context = (*c).cq_context;
            }
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `void ibv_ack_cq_events(struct ibv_cq *, unsigned int nevents)`: counts `nevents`
    /// into `comp_events_completed` (a bad CQ is ignored).
    unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
        catch((), || {
            if crate::verbs::cq::cq_of(cq).is_some() {
                // SAFETY: a live CQ; the field is the application's to read between calls.
                unsafe {
                    (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(nevents);
                }
            }
        })
    }
}
