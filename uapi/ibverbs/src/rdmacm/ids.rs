//! Identifiers, their addresses and routes (rdma-core 44 `librdmacm/cma.c`): `rdma_create_id`,
//! `rdma_destroy_id`, `rdma_migrate_id`, `rdma_set_option`, `rdma_bind_addr`,
//! `rdma_resolve_addr`, `rdma_resolve_route`, and the ports of an id's addresses,
//! `rdma_get_src_port` and `rdma_get_dst_port`.

use libc::{c_int, c_void, sockaddr};

use super::abi::{
    rdma_cm_id, rdma_event_channel, rdma_port_space, rdma_sockaddr, sockaddr_ib, AF_IB,
};
use std::time::Duration;

use softrnic_uapi::cm::{CmId, CmOption};

use super::abi::{
    RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
    RDMA_OPTION_ID_AFONLY, RDMA_OPTION_ID_REUSEADDR, RDMA_OPTION_ID_TOS,
};
use super::state::{from_sockaddr, port_space, SoftChannel, SoftId};
use super::{fail, source, status};
use crate::export::export_rdmacm;
use crate::ffi::catch;

export_rdmacm! {
    /// `int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
    /// void *context, enum rdma_port_space ps)`: an id of port space `ps` (RC for TCP and IB,
    /// UD for UDP and IPoIB) reporting to `channel`, synchronous if it is NULL. -1 with
    /// `EINVAL` for a bad channel, NULL `id` or an unknown port space.
    unsafe extern "C" fn rdma_create_id(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut c_void,
        ps: rdma_port_space,
    ) -> c_int {
        catch(-1, || {
            source::install();
            let ch = if channel.is_null() {
                None
            } else {
                match SoftChannel::of(channel) {
                    Some(c) => Some(c.ch.clone()),
                    None => return fail(libc::EINVAL),
                }
            };
            let Ok(space) = port_space(ps) else { return fail(libc::EINVAL) };
            if id.is_null() {
                return fail(libc::EINVAL);
            }
            match CmId::new(ch.as_ref(), space) {
                Ok(cm) => {
                    // SAFETY: non-NULL; the program passes a writable pointer.
                    unsafe { *id = SoftId::publish(cm, channel, context) };
                    0
                }
                Err(e) => fail(e.raw_os_error().unwrap_or(libc::ENOMEM)),
            }
        })
    }
}

export_rdmacm! {
    /// `int rdma_destroy_id(struct rdma_cm_id *id)`: stops listening, ends the connection as
    /// the peer expects (REJ, DREQ or DREP), and returns once every event of the id was
    /// acknowledged; the id's QP is the program's to destroy (`rdma_destroy_qp`). -1 with
    /// `EINVAL` for a pointer that is not a live id.
    unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            soft.keep_event(None);
            let cm = soft.id.clone();
            // Destroyed first: an event another thread took just now still finds this C
            // struct (and the program's context in it) through the word, and `destroy`
            // waits until that event is acknowledged.
            cm.clone().destroy();
            cm.set_user_word(0);
            // SAFETY: the program gives the id up; its events were acknowledged.
            unsafe { SoftId::free(id) };
            0
        })
    }
}

export_rdmacm! {
    /// `int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)`: the
    /// id reports to `channel` from now on (its own, synchronous, when NULL), its waiting
    /// events moved along.
    unsafe extern "C" fn rdma_migrate_id(
        id: *mut rdma_cm_id,
        channel: *mut rdma_event_channel,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let target = if channel.is_null() {
                None
            } else {
                match SoftChannel::of(channel) {
                    Some(c) => Some(c.ch.clone()),
                    None => return fail(libc::EINVAL),
                }
            };
            if let Err(e) = soft.id.migrate(target.as_ref()) {
                return fail(e.raw_os_error().unwrap_or(libc::ENOMEM));
            }
            let old = (soft.own_channel, soft.c.channel);
            if channel.is_null() {
                soft.c.channel = SoftChannel::publish(soft.id.channel());
                soft.own_channel = true;
            } else {
                soft.c.channel = channel;
                soft.own_channel = false;
            }
            if old.0 {
                // SAFETY: the id's own channel, which nothing else reports to.
                unsafe { SoftChannel::free(old.1) };
            }
            0
        })
    }
}

export_rdmacm! {
    /// `int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
    /// size_t optlen)`: `RDMA_OPTION_ID` `TOS` (u8), `REUSEADDR` and `AFONLY` (int, before
    /// binding), `ACK_TIMEOUT` (u8). -1 with `EINVAL` for another option, a wrong `optlen`
    /// or NULL `optval`; `RDMA_OPTION_IB_PATH` (setting the path of an InfiniBand route)
    /// is `ENOSYS`, RoCE routes having no path records to set.
    unsafe extern "C" fn rdma_set_option(
        id: *mut rdma_cm_id,
        level: c_int,
        optname: c_int,
        optval: *mut c_void,
        optlen: usize,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            if optval.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL, and `optlen` bytes long (checked before each read).
            let byte = || unsafe { *optval.cast::<u8>() };
            // SAFETY: as above, for an int.
            let int = || unsafe { optval.cast::<c_int>().read_unaligned() };
            let opt = match (level, optname, optlen) {
                (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, 1) => CmOption::Tos(byte()),
                (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, 1) => CmOption::AckTimeout(byte()),
                (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, 4) => CmOption::ReuseAddr(int() != 0),
                (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, 4) => CmOption::AfOnly(int() != 0),
                (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, _) => return fail(libc::ENOSYS),
                _ => return fail(libc::EINVAL),
            };
            status(soft.id.set_option(opt))
        })
    }
}

export_rdmacm! {
    /// `int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)`: binds to a local
    /// address (a wildcard covers every device) and port (0: an ephemeral one); `id->verbs`
    /// is then the address's device. -1 with `EINVAL` (bound already, NULL), `EAFNOSUPPORT`,
    /// or `EADDRNOTAVAIL` for an address that is not local.
    unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let a = match from_sockaddr(addr) {
                Ok(a) => a,
                Err(e) => return fail(e),
            };
            let r = soft.id.bind_addr(a).map_err(not_local);
            soft.refresh();
            status(r)
        })
    }
}

export_rdmacm! {
    /// `int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
    /// struct sockaddr *dst_addr, int timeout_ms)`: binds to `src_addr` if given, else to the
    /// address a route lookup picks for `dst_addr`; then `RDMA_CM_EVENT_ADDR_RESOLVED` (or
    /// `ADDR_ERROR`). A synchronous id waits for it and fails with its status.
    unsafe extern "C" fn rdma_resolve_addr(
        id: *mut rdma_cm_id,
        src_addr: *mut sockaddr,
        dst_addr: *mut sockaddr,
        timeout_ms: c_int,
    ) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let src = if src_addr.is_null() {
                None
            } else {
                match from_sockaddr(src_addr) {
                    Ok(a) => Some(a),
                    Err(e) => return fail(e),
                }
            };
            let dst = match from_sockaddr(dst_addr) {
                Ok(a) => a,
                Err(e) => return fail(e),
            };
            let wait = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
            let r = soft.id.resolve_addr(src, dst, wait).map_err(not_local);
            finish(soft, r)
        })
    }
}

export_rdmacm! {
    /// `int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)`: on RoCE the path is
    /// the device's own: `RDMA_CM_EVENT_ROUTE_RESOLVED` at once, and `id->route` gets one path
    /// record. -1 with `EINVAL` before the address is resolved.
    unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
        catch(-1, || {
            let Some(soft) = SoftId::of(id) else { return fail(libc::EINVAL) };
            let wait = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
            let r = soft.id.resolve_route(wait);
            finish(soft, r)
        })
    }
}

/// An address that is not this host's: the kernel's `EADDRNOTAVAIL` (softrnic's device
/// lookup says "not found").
fn not_local(e: std::io::Error) -> std::io::Error {
    if e.kind() == std::io::ErrorKind::AddrNotAvailable && e.raw_os_error().is_none() {
        std::io::Error::from_raw_os_error(libc::EADDRNOTAVAIL)
    } else {
        e
    }
}

/// After a call that may have waited (a synchronous id): keeps its event as `id->event`,
/// writes the id's C fields, and returns `r` as librdmacm does.
pub(super) fn finish(soft: &mut SoftId, r: std::io::Result<()>) -> c_int {
    if soft.id.is_sync() {
        let e = soft.id.take_event();
        soft.keep_event(e);
    }
    soft.refresh();
    status(r)
}

/// The port of an address of an id, in network order, as rdma-core's `ucma_get_port`:
/// `sin_port`, `sin6_port`, the low 16 bits of an `AF_IB` service ID, 0 for another family.
fn port_of(addr: &rdma_sockaddr) -> u16 {
    // SAFETY: every member of the union starts with the family, and the union is a C struct's
    // initialized memory; each member read below is the one the family says it is.
    unsafe {
        match c_int::from(addr.addr.sa_family) {
            libc::AF_INET => addr.sin.sin_port,
            libc::AF_INET6 => addr.sin6.sin6_port,
            AF_IB => {
                // `sockaddr_ib` (48 bytes) fits in the union's `sockaddr_storage`, and has its
                // 8-byte alignment.
                let sib = &*(addr as *const rdma_sockaddr).cast::<sockaddr_ib>();
                (u64::from_be(sib.sib_sid) as u16).to_be()
            }
            _ => 0,
        }
    }
}

export_rdmacm! {
    /// `__be16 rdma_get_src_port(struct rdma_cm_id *id)`: the port of
    /// `id->route.addr.src_addr`, in network order (0 for a NULL id).
    unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
        // SAFETY: the caller passes an id of this library, or NULL.
        unsafe { id.as_ref() }.map_or(0, |id| port_of(&id.route.addr.src_addr))
    }
}

export_rdmacm! {
    /// `__be16 rdma_get_dst_port(struct rdma_cm_id *id)`: the port of
    /// `id->route.addr.dst_addr`, in network order (0 for a NULL id).
    unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
        // SAFETY: the caller passes an id of this library, or NULL.
        unsafe { id.as_ref() }.map_or(0, |id| port_of(&id.route.addr.dst_addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmacm::abi::{RDMA_IB_IP_PS_TCP, RDMA_PS_TCP};

    /// A zeroed id, as a C program would see one before any address is set.
    fn id() -> Box<rdma_cm_id> {
        // SAFETY: rdma_cm_id is integers, raw pointers and unions of them: all-zero is valid.
        Box::new(unsafe { std::mem::zeroed() })
    }

    #[test]
    fn ports_of_ipv4_and_ipv6_addresses_in_network_order() {
        let mut id = id();
        id.route.addr.src_addr.sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: 7471u16.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 49, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        id.route.addr.dst_addr.sin6 = libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as u16,
            sin6_port: 20079u16.to_be(),
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr { s6_addr: [0; 16] },
            sin6_scope_id: 0,
        };
        let id: *mut rdma_cm_id = &mut *id;
        // SAFETY: a live id.
        unsafe {
            assert_eq!(rdma_get_src_port(id), 7471u16.to_be());
            assert_eq!(rdma_get_dst_port(id), 20079u16.to_be());
        }
    }

    #[test]
    fn the_port_of_an_af_ib_address_is_in_its_service_id() {
        let mut id = id();
        let sib = sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_sid: (RDMA_IB_IP_PS_TCP | 7471).to_be(),
            ..Default::default()
        };
        // SAFETY: sockaddr_ib fits in the union (see port_of).
        unsafe {
            (&mut id.route.addr.dst_addr as *mut rdma_sockaddr)
                .cast::<sockaddr_ib>()
                .write(sib);
        }
        assert_eq!(RDMA_IB_IP_PS_TCP >> 16, u64::from(RDMA_PS_TCP));
        // SAFETY: a live id.
        assert_eq!(unsafe { rdma_get_dst_port(&mut *id) }, 7471u16.to_be());
    }

    #[test]
    fn other_families_and_null_ids_have_port_zero() {
        let mut id = id();
        id.route.addr.src_addr.addr.sa_family = libc::AF_UNIX as u16;
        // SAFETY: a live id, then NULL.
        unsafe {
            assert_eq!(rdma_get_src_port(&mut *id), 0);
            assert_eq!(rdma_get_dst_port(&mut *id), 0, "AF_UNSPEC");
            assert_eq!(rdma_get_src_port(std::ptr::null_mut()), 0);
        }
    }
}

#[cfg(test)]
mod teardown_tests {
    use super::*;
    use crate::rdmacm::abi::{rdma_cm_event, RDMA_PS_TCP};
    use crate::rdmacm::events::{rdma_ack_cm_event, rdma_create_event_channel, rdma_get_cm_event};
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// An event taken while its id is being destroyed (rping's event thread, its main thread
    /// in `rdma_destroy_id`) names that id, with the context the program gave it: the id's
    /// C struct lives until the event is acknowledged. A program that finds its state
    /// through `event->id->context` must never read a NULL context.
    #[test]
    fn an_event_taken_during_rdma_destroy_id_names_its_id() {
        const IDS: usize = 3000;
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(Ipv4Addr::new(127, 0, 49, 21)).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: plain C calls on objects this test creates and owns.
        unsafe {
            let channel = rdma_create_event_channel();
            assert!(!channel.is_null());
            let channel_word = channel as usize;
            let stop = AtomicBool::new(false);
            let (got, contextless) = (AtomicUsize::new(0), AtomicUsize::new(0));
            std::thread::scope(|s| {
                s.spawn(|| {
                    // rping's cm_thread: take, look at the context, acknowledge.
                    let channel = channel_word as *mut rdma_event_channel;
                    let fd = (*channel).fd;
                    let flags = libc::fcntl(fd, libc::F_GETFL);
                    libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                    while !stop.load(Ordering::Acquire) {
                        let mut e: *mut rdma_cm_event = std::ptr::null_mut();
                        if rdma_get_cm_event(channel, &mut e) != 0 {
                            std::hint::spin_loop();
                            continue;
                        }
                        got.fetch_add(1, Ordering::Relaxed);
                        if (*(*e).id).context.is_null() {
                            contextless.fetch_add(1, Ordering::Relaxed);
                        }
                        rdma_ack_cm_event(e);
                    }
                });
                for i in 0..IDS {
                    let mut id = std::ptr::null_mut();
                    let context = (i + 1) as *mut c_void;
                    assert_eq!(rdma_create_id(channel, &mut id, context, RDMA_PS_TCP), 0);
                    let mut dst = addr;
                    let dst: *mut sockaddr = (&mut dst as *mut libc::sockaddr_in).cast();
                    assert_eq!(rdma_resolve_addr(id, std::ptr::null_mut(), dst, 1000), 0);
                    assert_eq!(rdma_destroy_id(id), 0);
                }
                stop.store(true, Ordering::Release);
            });
            eprintln!(
                "{} of {IDS} events taken before their id was destroyed",
                got.load(Ordering::Relaxed)
            );
            assert_eq!(
                contextless.load(Ordering::Relaxed),
                0,
                "events with a NULL context"
            );
            crate::rdmacm::events::rdma_destroy_event_channel(channel);
        }
    }
}
