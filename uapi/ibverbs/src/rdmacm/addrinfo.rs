//! Address translation, `rdma_getaddrinfo` and `rdma_freeaddrinfo`, with the semantics of
//! rdma-core 44 `librdmacm/addrinfo.c`, on `getaddrinfo(3)`.
//!
//! * No node, no service and no hints: -1 with `errno = EINVAL`.
//! * A node or a service: `getaddrinfo(3)` resolves them, with the hints translated
//!   (`RAI_PASSIVE` -> `AI_PASSIVE`, `RAI_NUMERICHOST` -> `AI_NUMERICHOST`, the family, the
//!   socket type from `ai_qp_type`: RC, UC and XRC are `SOCK_STREAM`, UD `SOCK_DGRAM`, the
//!   protocol from `ai_port_space`: TCP or UDP), or with no hints at all if the caller gave
//!   none. Its error code (`EAI_*`, negative) is returned as is, as rdma-core does, for
//!   `gai_strerror`. The first answer becomes the one entry: the QP type and port space of
//!   the hints, else RC for a stream and UD for a datagram, `RDMA_PS_TCP` for TCP and
//!   `RDMA_PS_UDP` for UDP; the address is the source if passive (and the entry's flags
//!   `RAI_PASSIVE`), else the destination.
//! * Neither: the entry copies the hints' flags, family, QP type, port space and destination.
//! * Either way, a source address in the hints is the entry's when it has none.
//! * `RAI_FAMILY` with family `AF_IB` and `RAI_NUMERICHOST`: the address (an IPv6-form GID)
//!   becomes a `sockaddr_ib` with P_Key 0xFFFF and the service ID of the port space and port.
//!   rdma-core asks `getaddrinfo(3)` for any family there and reads the answer as IPv6 whatever
//!   it is; softrnic asks for IPv6, so an IPv4 node is an error rather than a garbled GID.
//!
//! rdma-core then asks the ibacm service for a route (unless `RAI_NOROUTE`) when one runs;
//! on softrnic there is none (RoCE routes are computed by `rdma_resolve_route`), so
//! `ai_route` is always NULL and `RAI_NOROUTE` changes nothing. Everything is allocated with
//! `malloc`, as rdma-core's, and freed by `rdma_freeaddrinfo` with `free`.

use std::ptr::{null, null_mut, NonNull};

use libc::{addrinfo, c_char, c_int, c_void, sockaddr, sockaddr_in6, socklen_t};

use super::abi::{
    ib_addr, rdma_addrinfo, sockaddr_ib, AF_IB, IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
    IBV_QPT_XRC_RECV, IBV_QPT_XRC_SEND, RAI_FAMILY, RAI_NUMERICHOST, RAI_PASSIVE,
    RDMA_IB_IP_PORT_MASK, RDMA_IB_IP_PS_MASK, RDMA_PS_IB, RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP,
};
use crate::export::export_rdmacm;
use crate::ffi::{catch, set_errno};

/// The port spaces as `rdma_addrinfo.ai_port_space` holds them (`int`).
const PS_TCP: c_int = RDMA_PS_TCP as c_int;
const PS_UDP: c_int = RDMA_PS_UDP as c_int;
const PS_IPOIB: c_int = RDMA_PS_IPOIB as c_int;
const PS_IB: c_int = RDMA_PS_IB as c_int;

/// How `rdma_getaddrinfo` fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Error {
    /// -1 with this `errno`.
    Errno(c_int),
    /// `getaddrinfo(3)`'s code, returned as is.
    Resolver(c_int),
}

impl Error {
    /// The return value, `errno` set if it is -1.
    fn report(self) -> c_int {
        match self {
            Error::Errno(e) => {
                set_errno(e);
                -1
            }
            Error::Resolver(code) => code,
        }
    }
}

/// An entry being built, with everything it points to; freed on drop unless
/// [`Entry::into_raw`] hands it to the caller.
struct Entry(NonNull<rdma_addrinfo>);

impl Entry {
    /// A zeroed entry.
    fn new() -> Result<Entry, Error> {
        // SAFETY: calloc of one rdma_addrinfo; all-zero is a valid one (integers, pointers).
        let p = unsafe { libc::calloc(1, size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
        NonNull::new(p).map(Entry).ok_or(Error::Errno(libc::ENOMEM))
    }

    fn get(&mut self) -> &mut rdma_addrinfo {
        // SAFETY: a live allocation this Entry owns.
        unsafe { self.0.as_mut() }
    }

    /// The entry, for the caller to free with `rdma_freeaddrinfo`.
    fn into_raw(self) -> *mut rdma_addrinfo {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: an entry of this module, not handed out.
        unsafe { free_list(self.0.as_ptr()) };
    }
}

/// A `malloc`ed copy of the `len` bytes of the address at `addr`.
///
/// # Safety
/// `addr` must be readable for `len` bytes.
unsafe fn copy_addr(addr: *const sockaddr, len: socklen_t) -> Result<*mut sockaddr, Error> {
    let n = len as usize;
    // SAFETY: malloc of n bytes.
    let p = unsafe { libc::malloc(n) }.cast::<sockaddr>();
    if p.is_null() {
        return Err(Error::Errno(libc::ENOMEM));
    }
    // SAFETY: the caller's `addr` has n readable bytes; `p` is a fresh n-byte allocation.
    unsafe { std::ptr::copy_nonoverlapping(addr.cast::<u8>(), p.cast::<u8>(), n) };
    Ok(p)
}

/// The `AF_IB` form of an IPv6-form address, as rdma-core's `ucma_convert_in6`: the GID,
/// flow label and scope of `sin6`, P_Key 0xFFFF, and the service ID `(ps << 16) + port` with
/// its mask (the port-space bits if `ps` is set, the port bits if the port is).
fn af_ib(ps: c_int, sin6: &sockaddr_in6) -> sockaddr_ib {
    let port = u16::from_be(sin6.sin6_port);
    let mut mask = 0;
    if ps != 0 {
        mask |= RDMA_IB_IP_PS_MASK;
    }
    if port != 0 {
        mask |= RDMA_IB_IP_PORT_MASK;
    }
    sockaddr_ib {
        sib_family: AF_IB as u16,
        sib_pkey: 0xFFFFu16.to_be(),
        sib_flowinfo: sin6.sin6_flowinfo,
        sib_addr: ib_addr {
            ib_u: sin6.sin6_addr.s6_addr,
        },
        // The port space is not negative: a `c_int` holding an `enum rdma_port_space`.
        sib_sid: (((ps as u64) << 16) + u64::from(port)).to_be(),
        sib_sid_mask: mask.to_be(),
        sib_scope_id: u64::from(sin6.sin6_scope_id),
    }
}

/// Whether the hints ask for `AF_IB` addresses made from numeric IPv6-form GIDs.
fn wants_af_ib(hints: &rdma_addrinfo) -> bool {
    hints.ai_flags & RAI_FAMILY != 0
        && hints.ai_family == AF_IB
        && hints.ai_flags & RAI_NUMERICHOST != 0
}

/// The `getaddrinfo(3)` hints for `hints` (rdma-core's `ucma_convert_to_ai`).
fn resolver_hints(hints: &rdma_addrinfo) -> addrinfo {
    // SAFETY: addrinfo is integers and pointers: all-zero is the "no preference" hints.
    let mut ai: addrinfo = unsafe { std::mem::zeroed() };
    if hints.ai_flags & RAI_PASSIVE != 0 {
        ai.ai_flags |= libc::AI_PASSIVE;
    }
    if hints.ai_flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    ai.ai_family = match hints.ai_family {
        AF_IB if wants_af_ib(hints) => libc::AF_INET6,
        AF_IB => libc::AF_UNSPEC,
        family => family,
    };
    ai.ai_socktype = match hints.ai_qp_type {
        IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => libc::SOCK_STREAM,
        IBV_QPT_UD => libc::SOCK_DGRAM,
        _ => 0,
    };
    ai.ai_protocol = match hints.ai_port_space {
        PS_TCP => libc::IPPROTO_TCP,
        PS_IPOIB | PS_UDP => libc::IPPROTO_UDP,
        PS_IB if ai.ai_socktype == libc::SOCK_STREAM => libc::IPPROTO_TCP,
        PS_IB if ai.ai_socktype == libc::SOCK_DGRAM => libc::IPPROTO_UDP,
        _ => 0,
    };
    ai
}

/// A `getaddrinfo(3)` answer, freed on drop.
struct Answer(NonNull<addrinfo>);

impl Drop for Answer {
    fn drop(&mut self) {
        // SAFETY: an answer of getaddrinfo, freed once.
        unsafe { libc::freeaddrinfo(self.0.as_ptr()) };
    }
}

/// `getaddrinfo(node, service, hints)`.
///
/// # Safety
/// `node` and `service` must be NULL or NUL-terminated strings.
unsafe fn resolve(
    node: *const c_char,
    service: *const c_char,
    hints: Option<&addrinfo>,
) -> Result<Answer, Error> {
    let mut res: *mut addrinfo = null_mut();
    let hints = hints.map_or(null(), |h| h as *const addrinfo);
    // SAFETY: the caller's strings; `hints` NULL or a live addrinfo; `res` written on success.
    let code = unsafe { libc::getaddrinfo(node, service, hints, &mut res) };
    if code != 0 {
        return Err(Error::Resolver(code));
    }
    NonNull::new(res)
        .map(Answer)
        .ok_or(Error::Resolver(libc::EAI_NONAME))
}

/// Fills `rai` from the first answer of `getaddrinfo(3)` (rdma-core's `ucma_convert_to_rai`).
fn fill_from_answer(
    rai: &mut rdma_addrinfo,
    hints: &rdma_addrinfo,
    ai: &addrinfo,
) -> Result<(), Error> {
    rai.ai_qp_type = match (hints.ai_qp_type, ai.ai_socktype) {
        (0, libc::SOCK_STREAM) => IBV_QPT_RC,
        (0, libc::SOCK_DGRAM) => IBV_QPT_UD,
        (qp_type, _) => qp_type,
    };
    rai.ai_port_space = match (hints.ai_port_space, ai.ai_protocol) {
        (0, libc::IPPROTO_TCP) => PS_TCP,
        (0, libc::IPPROTO_UDP) => PS_UDP,
        (ps, _) => ps,
    };
    let passive = hints.ai_flags & RAI_PASSIVE != 0;
    rai.ai_flags = if passive { RAI_PASSIVE } else { 0 };
    let canonname = if ai.ai_canonname.is_null() {
        null_mut()
    } else {
        // SAFETY: getaddrinfo's NUL-terminated name.
        let copy = unsafe { libc::strdup(ai.ai_canonname) };
        if copy.is_null() {
            return Err(Error::Errno(libc::ENOMEM));
        }
        copy
    };
    let (addr, len) = if wants_af_ib(hints) {
        if ai.ai_family != libc::AF_INET6 || (ai.ai_addrlen as usize) < size_of::<sockaddr_in6>() {
            return Err(Error::Errno(libc::EINVAL));
        }
        // SAFETY: an AF_INET6 answer's address is a sockaddr_in6 (length checked).
        let sin6 = unsafe { &*ai.ai_addr.cast::<sockaddr_in6>() };
        let sib = af_ib(rai.ai_port_space, sin6);
        rai.ai_family = AF_IB;
        let len = size_of::<sockaddr_ib>() as socklen_t;
        // SAFETY: `sib` is `len` bytes.
        (
            unsafe { copy_addr((&sib as *const sockaddr_ib).cast(), len) },
            len,
        )
    } else {
        rai.ai_family = ai.ai_family;
        // SAFETY: getaddrinfo's address has ai_addrlen bytes.
        (
            unsafe { copy_addr(ai.ai_addr, ai.ai_addrlen) },
            ai.ai_addrlen,
        )
    };
    let addr = match addr {
        Ok(a) => a,
        Err(e) => {
            // SAFETY: the copy above, owned by nothing yet.
            unsafe { libc::free(canonname.cast()) };
            return Err(e);
        }
    };
    if passive {
        (rai.ai_src_canonname, rai.ai_src_addr, rai.ai_src_len) = (canonname, addr, len);
    } else {
        (rai.ai_dst_canonname, rai.ai_dst_addr, rai.ai_dst_len) = (canonname, addr, len);
    }
    Ok(())
}

/// `rdma_getaddrinfo`'s work: the one-entry list.
///
/// # Safety
/// As `rdma_getaddrinfo`: `node` and `service` NULL or NUL-terminated strings; the hints'
/// addresses readable for their lengths.
unsafe fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: Option<&rdma_addrinfo>,
) -> Result<*mut rdma_addrinfo, Error> {
    if node.is_null() && service.is_null() && hints.is_none() {
        return Err(Error::Errno(libc::EINVAL));
    }
    // SAFETY: all-zero is a valid rdma_addrinfo: rdma-core's `nohints`.
    let no_hints: rdma_addrinfo = unsafe { std::mem::zeroed() };
    let given = hints.is_some();
    let hints = hints.unwrap_or(&no_hints);
    let mut entry = Entry::new()?;
    let rai = entry.get();
    if !node.is_null() || !service.is_null() {
        let ai_hints = given.then(|| resolver_hints(hints));
        // SAFETY: the caller's strings.
        let answer = unsafe { resolve(node, service, ai_hints.as_ref()) }?;
        // SAFETY: the first answer, alive as long as `answer`.
        fill_from_answer(rai, hints, unsafe { answer.0.as_ref() })?;
    } else {
        rai.ai_flags = hints.ai_flags;
        rai.ai_family = hints.ai_family;
        rai.ai_qp_type = hints.ai_qp_type;
        rai.ai_port_space = hints.ai_port_space;
        if hints.ai_dst_len != 0 {
            // SAFETY: the caller's destination address has ai_dst_len bytes.
            rai.ai_dst_addr = unsafe { copy_addr(hints.ai_dst_addr, hints.ai_dst_len) }?;
            rai.ai_dst_len = hints.ai_dst_len;
        }
    }
    if rai.ai_src_len == 0 && hints.ai_src_len != 0 {
        // SAFETY: the caller's source address has ai_src_len bytes.
        rai.ai_src_addr = unsafe { copy_addr(hints.ai_src_addr, hints.ai_src_len) }?;
        rai.ai_src_len = hints.ai_src_len;
    }
    Ok(entry.into_raw())
}

/// Frees a list of entries and everything they point to (all `malloc`ed).
///
/// # Safety
/// `res` must be NULL or a list of this module, not used afterwards.
unsafe fn free_list(mut res: *mut rdma_addrinfo) {
    while let Some(rai) = NonNull::new(res) {
        // SAFETY: a live entry; each pointer NULL or malloc'ed, freed once.
        unsafe {
            let r = rai.as_ptr().read();
            for p in [
                r.ai_connect,
                r.ai_route,
                r.ai_src_canonname.cast::<c_void>(),
                r.ai_dst_canonname.cast(),
                r.ai_src_addr.cast(),
                r.ai_dst_addr.cast(),
            ] {
                libc::free(p);
            }
            libc::free(rai.as_ptr().cast());
            res = r.ai_next;
        }
    }
}

export_rdmacm! {
    /// `int rdma_getaddrinfo(const char *node, const char *service,
    /// const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)`: 0 and `*res`, -1 with
    /// `errno`, or `getaddrinfo(3)`'s error code (see the module doc). `res` NULL is `EINVAL`.
    unsafe extern "C" fn rdma_getaddrinfo(
        node: *const c_char,
        service: *const c_char,
        hints: *const rdma_addrinfo,
        res: *mut *mut rdma_addrinfo,
    ) -> c_int {
        catch(-1, || {
            if res.is_null() {
                return Error::Errno(libc::EINVAL).report();
            }
            // SAFETY: the caller's contract: strings, hints NULL or live, `res` writable.
            match unsafe { getaddrinfo(node, service, hints.as_ref()) } {
                Ok(list) => {
                    // SAFETY: `res` is non-NULL and writable (the caller's contract).
                    unsafe { *res = list };
                    0
                }
                Err(e) => e.report(),
            }
        })
    }
}

export_rdmacm! {
    /// `void rdma_freeaddrinfo(struct rdma_addrinfo *res)`: frees a list `rdma_getaddrinfo`
    /// returned, NULL included.
    unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
        // SAFETY: the caller's list, not used afterwards.
        catch((), || unsafe { free_list(res) })
    }
}

#[cfg(test)]
mod tests;
