//! The `rdma_*` entry points: each forwards its arguments, unchanged, to its implementation in
//! softrnic's `libibverbs.so.1` ([`crate::lookup`]), or fails with `errno = ENOSYS` (-1, NULL,
//! nothing for `void`) if there is none.
//!
//! The functions and their C signatures are the lines of `symbols.rs`, the list the ibverbs
//! crate checks its implementations against; the macro below turns each line into a
//! forwarder exported with its rdma-core version.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_void, sockaddr};

use crate::export::export;
use crate::ffi::{catch, Failure};
use crate::lookup::Implementation;

// The C types of the signatures. The shim never looks inside them, so each struct is an alias
// of `c_void`; the enums are `unsigned int`, as the C compiler stores an enum with no negative
// value (the ibverbs crate defines them the same way, and checks them).
type rdma_event_channel = c_void;
type rdma_cm_event = c_void;
type rdma_cm_id = c_void;
type rdma_conn_param = c_void;
type rdma_addrinfo = c_void;
type rdma_cm_join_mc_attr_ex = c_void;
type ibv_context = c_void;
type ibv_pd = c_void;
type ibv_qp_init_attr = c_void;
type ibv_qp_init_attr_ex = c_void;
type ibv_qp_attr = c_void;
type ibv_srq_init_attr = c_void;
type ibv_srq_init_attr_ex = c_void;
type ibv_ece = c_void;
type rdma_cm_event_type = libc::c_uint;
type rdma_port_space = libc::c_uint;
type ibv_event_type = libc::c_uint;

/// One forwarder per line of `symbols.rs`: `rdma_x@@version` calls `softrnic_rdma_x`.
macro_rules! rdmacm_functions {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {$(
        export! { $ver;
            #[doc = concat!("`", stringify!($name), "`: forwarded to `softrnic_", stringify!($name), "` of softrnic's `libibverbs.so.1`.")]
            unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
                /// The signature of the implementation: this function's own.
                type Signature = unsafe extern "C" fn($($ty),*) $(-> $ret)?;
                static IMPLEMENTATION: Implementation =
                    Implementation::new(concat!("softrnic_", stringify!($name), "\0"));
                catch(|| match IMPLEMENTATION.get() {
                    // SAFETY: the ibverbs crate checks at compile time that `softrnic_<name>`
                    // has this signature (the same line of symbols.rs); the caller's arguments
                    // are passed on unchanged, with the contract of the C function.
                    Some(f) => unsafe {
                        std::mem::transmute::<crate::lookup::Function, Signature>(f)($($arg),*)
                    },
                    None => Failure::failure(),
                })
            }
        }
    )*};
}

include!("symbols.rs");
