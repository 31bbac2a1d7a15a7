//! Names of enum values: `ibv_wc_status_str`, `ibv_port_state_str`, `ibv_node_type_str`,
//! `ibv_event_type_str`. Each returns a static string, "unknown" for a value it doesn't know.

use std::ffi::CStr;

use libc::{c_char, c_int, c_uint};

use crate::export::export;

/// The text of `tbl[v]`, or "unknown".
fn pick(tbl: &[&'static CStr], v: i64) -> *const c_char {
    usize::try_from(v)
        .ok()
        .and_then(|i| tbl.get(i))
        .copied()
        .unwrap_or(c"unknown")
        .as_ptr()
}

/// `enum ibv_wc_status`, by value.
const WC_STATUS: &[&CStr] = &[
    c"success",
    c"local length error",
    c"local QP operation error",
    c"local EE context operation error",
    c"local protection error",
    c"Work Request Flushed Error",
    c"memory management operation error",
    c"bad response error",
    c"local access error",
    c"remote invalid request error",
    c"remote access error",
    c"remote operation error",
    c"transport retry counter exceeded",
    c"RNR retry counter exceeded",
    c"local RDD violation error",
    c"remote invalid RD request",
    c"aborted error",
    c"invalid EE context number",
    c"invalid EE context state",
    c"fatal error",
    c"response timeout error",
    c"general error",
    c"TM error",
    c"TM software rendezvous",
];

/// `enum ibv_port_state`, by value.
const PORT_STATE: &[&CStr] = &[
    c"no state change (NOP)",
    c"down",
    c"init",
    c"armed",
    c"active",
    c"active defer",
];

/// `enum ibv_node_type`, by value (`IBV_NODE_UNKNOWN`, -1, is "unknown").
const NODE_TYPE: &[&CStr] = &[
    c"unknown",
    c"InfiniBand channel adapter",
    c"InfiniBand switch",
    c"InfiniBand router",
    c"iWARP NIC",
    c"usNIC",
    c"usNIC UDP",
    c"unspecified",
];

/// `enum ibv_event_type`, by value.
const EVENT_TYPE: &[&CStr] = &[
    c"CQ error",
    c"local work queue catastrophic error",
    c"invalid request local work queue error",
    c"local access violation work queue error",
    c"communication established",
    c"send queue drained",
    c"path migrated",
    c"path migration request error",
    c"local catastrophic error",
    c"port active",
    c"port error",
    c"LID change",
    c"P_Key change",
    c"SM change",
    c"SRQ catastrophic error",
    c"SRQ limit reached",
    c"last WQE reached",
    c"client reregistration",
    c"GID table change",
    c"WQ fatal",
];

export! { "IBVERBS_1.1";
    /// `const char *ibv_wc_status_str(enum ibv_wc_status)`.
    unsafe extern "C" fn ibv_wc_status_str(status: c_uint) -> *const c_char {
        pick(WC_STATUS, status.into())
    }
}

export! { "IBVERBS_1.1";
    /// `const char *ibv_port_state_str(enum ibv_port_state)`.
    unsafe extern "C" fn ibv_port_state_str(port_state: c_uint) -> *const c_char {
        pick(PORT_STATE, port_state.into())
    }
}

export! { "IBVERBS_1.1";
    /// `const char *ibv_node_type_str(enum ibv_node_type)`.
    unsafe extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
        pick(NODE_TYPE, node_type.into())
    }
}

export! { "IBVERBS_1.1";
    /// `const char *ibv_event_type_str(enum ibv_event_type)`.
    unsafe extern "C" fn ibv_event_type_str(event: c_uint) -> *const c_char {
        pick(EVENT_TYPE, event.into())
    }
}
