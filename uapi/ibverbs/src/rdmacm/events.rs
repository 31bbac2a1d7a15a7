//! Event channels and events (rdma-core 44 `librdmacm/cma.c`): `rdma_create_event_channel`,
//! `rdma_destroy_event_channel`, `rdma_get_cm_event`, `rdma_ack_cm_event`, and the names of the
//! event types, `rdma_event_str`.

use std::ffi::CStr;

use libc::{c_char, c_int};

use super::abi::{rdma_cm_event, rdma_cm_event_type, rdma_event_channel};
use super::source;
use super::state::{SoftChannel, SoftEvent};
use super::{fail, fail_null};
use crate::export::export_rdmacm;
use crate::ffi::catch;
use softrnic_uapi::cm::EventChannel;
use std::ptr::null_mut;

export_rdmacm! {
    /// `struct rdma_event_channel *rdma_create_event_channel(void)`: a channel whose `fd` is
    /// readable while events wait; NULL with `errno` (`EMFILE`, `ENOMEM`).
    unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
        catch(null_mut(), || {
            source::install();
            match EventChannel::new() {
                Ok(ch) => SoftChannel::publish(ch),
                Err(e) => fail_null(e.raw_os_error().unwrap_or(libc::ENOMEM)),
            }
        })
    }
}

export_rdmacm! {
    /// `void rdma_destroy_event_channel(struct rdma_event_channel *channel)`: frees it
    /// (its ids must be destroyed first, as librdmacm requires); a pointer that is not a
    /// live channel is ignored.
    unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
        catch((), || {
            // SAFETY: the program gives the channel up.
            unsafe { SoftChannel::free(channel) }
        })
    }
}

export_rdmacm! {
    /// `int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event
    /// **event)`: the next event, waiting for one unless the program made `fd` non-blocking
    /// (then -1 with `errno = EAGAIN`); -1 with `EINVAL` for a bad channel or NULL `event`.
    unsafe extern "C" fn rdma_get_cm_event(
        channel: *mut rdma_event_channel,
        event: *mut *mut rdma_cm_event,
    ) -> c_int {
        catch(-1, || {
            let Some(ch) = SoftChannel::of(channel) else { return fail(libc::EINVAL) };
            if event.is_null() {
                return fail(libc::EINVAL);
            }
            match ch.ch.get_event() {
                Ok(e) => {
                    // SAFETY: non-NULL; the program passes a writable pointer.
                    unsafe { *event = SoftEvent::publish(SoftEvent::new(e)) };
                    0
                }
                Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO)),
            }
        })
    }
}

export_rdmacm! {
    /// `int rdma_ack_cm_event(struct rdma_cm_event *event)`: frees the event and
    /// acknowledges it (`rdma_destroy_id` waits for that); -1 with `EINVAL` for a pointer
    /// that is not an event handed out.
    unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
        catch(-1, || match SoftEvent::take(event) {
            Some(e) => {
                drop(e);
                0
            }
            None => fail(libc::EINVAL),
        })
    }
}

/// The names `rdma_event_str` gives `enum rdma_cm_event_type`, by value: the enumerator's own
/// name, as rdma-core 44's.
const EVENT_NAMES: &[&CStr] = &[
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

export_rdmacm! {
    /// `const char *rdma_event_str(enum rdma_cm_event_type event)`: the event type's name, or
    /// "UNKNOWN EVENT" for a value that is not one. A static string.
    unsafe extern "C" fn rdma_event_str(event: rdma_cm_event_type) -> *const c_char {
        usize::try_from(event)
            .ok()
            .and_then(|i| EVENT_NAMES.get(i))
            .copied()
            .unwrap_or(c"UNKNOWN EVENT")
            .as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmacm::abi::*;

    fn name(event: rdma_cm_event_type) -> &'static str {
        // SAFETY: rdma_event_str returns a static NUL-terminated string.
        unsafe { CStr::from_ptr(rdma_event_str(event)) }
            .to_str()
            .expect("ASCII")
    }

    #[test]
    fn every_event_type_has_its_enumerators_name() {
        let all = [
            (RDMA_CM_EVENT_ADDR_RESOLVED, "RDMA_CM_EVENT_ADDR_RESOLVED"),
            (RDMA_CM_EVENT_ADDR_ERROR, "RDMA_CM_EVENT_ADDR_ERROR"),
            (RDMA_CM_EVENT_ROUTE_RESOLVED, "RDMA_CM_EVENT_ROUTE_RESOLVED"),
            (RDMA_CM_EVENT_ROUTE_ERROR, "RDMA_CM_EVENT_ROUTE_ERROR"),
            (
                RDMA_CM_EVENT_CONNECT_REQUEST,
                "RDMA_CM_EVENT_CONNECT_REQUEST",
            ),
            (
                RDMA_CM_EVENT_CONNECT_RESPONSE,
                "RDMA_CM_EVENT_CONNECT_RESPONSE",
            ),
            (RDMA_CM_EVENT_CONNECT_ERROR, "RDMA_CM_EVENT_CONNECT_ERROR"),
            (RDMA_CM_EVENT_UNREACHABLE, "RDMA_CM_EVENT_UNREACHABLE"),
            (RDMA_CM_EVENT_REJECTED, "RDMA_CM_EVENT_REJECTED"),
            (RDMA_CM_EVENT_ESTABLISHED, "RDMA_CM_EVENT_ESTABLISHED"),
            (RDMA_CM_EVENT_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED"),
            (RDMA_CM_EVENT_DEVICE_REMOVAL, "RDMA_CM_EVENT_DEVICE_REMOVAL"),
            (RDMA_CM_EVENT_MULTICAST_JOIN, "RDMA_CM_EVENT_MULTICAST_JOIN"),
            (
                RDMA_CM_EVENT_MULTICAST_ERROR,
                "RDMA_CM_EVENT_MULTICAST_ERROR",
            ),
            (RDMA_CM_EVENT_ADDR_CHANGE, "RDMA_CM_EVENT_ADDR_CHANGE"),
            (RDMA_CM_EVENT_TIMEWAIT_EXIT, "RDMA_CM_EVENT_TIMEWAIT_EXIT"),
        ];
        for (event, expected) in all {
            assert_eq!(name(event), expected);
        }
    }

    #[test]
    fn a_value_that_is_no_event_type_is_unknown() {
        assert_eq!(name(16), "UNKNOWN EVENT");
        assert_eq!(name(u32::MAX), "UNKNOWN EVENT");
    }
}
