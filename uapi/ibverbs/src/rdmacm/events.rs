//! Event channels and events (rdma-core 44 `librdmacm/cma.c`): `rdma_create_event_channel`,
//! `rdma_destroy_event_channel`, `rdma_get_cm_event`, `rdma_ack_cm_event`, and the names of the
//! event types, `rdma_event_str`.

use std::ffi::CStr;

use libc::{c_char, c_int};

use super::abi::{rdma_cm_event, rdma_cm_event_type, rdma_event_channel};
use super::not_yet;
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `struct rdma_event_channel *rdma_create_event_channel(void)`: not implemented yet.
    unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
        not_yet(std::ptr::null_mut())
    }
}

export_rdmacm! {
    /// `void rdma_destroy_event_channel(struct rdma_event_channel *channel)`: not implemented
    /// yet.
    unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
        let _ = channel;
        not_yet(())
    }
}

export_rdmacm! {
    /// `int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event
    /// **event)`: not implemented yet.
    unsafe extern "C" fn rdma_get_cm_event(
        channel: *mut rdma_event_channel,
        event: *mut *mut rdma_cm_event,
    ) -> c_int {
        let _ = (channel, event);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_ack_cm_event(struct rdma_cm_event *event)`: not implemented yet.
    unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
        let _ = event;
        not_yet(-1)
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
