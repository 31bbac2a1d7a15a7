//! `rdma_getaddrinfo` on numeric and passive inputs, hints, `AF_IB`, and its errors.

use std::ffi::CStr;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ptr::{null, null_mut};

use libc::{c_int, sockaddr_in, sockaddr_in6};

use super::*;

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Hints with only these flags.
fn hints(flags: c_int) -> rdma_addrinfo {
    // SAFETY: all-zero is a valid rdma_addrinfo.
    let mut h: rdma_addrinfo = unsafe { std::mem::zeroed() };
    h.ai_flags = flags;
    h
}

/// `rdma_getaddrinfo(node, service, hints)`: the answer's first entry (the list freed after
/// `check` looked at it), or the return value.
fn lookup(
    node: Option<&CStr>,
    service: Option<&CStr>,
    hints: Option<&rdma_addrinfo>,
    check: impl FnOnce(&rdma_addrinfo),
) -> c_int {
    let mut res: *mut rdma_addrinfo = null_mut();
    // SAFETY: NUL-terminated strings or NULL, live hints or NULL, a writable result.
    let ret = unsafe {
        rdma_getaddrinfo(
            node.map_or(null(), CStr::as_ptr),
            service.map_or(null(), CStr::as_ptr),
            hints.map_or(null(), |h| h as *const rdma_addrinfo),
            &mut res,
        )
    };
    if ret == 0 {
        // SAFETY: a list rdma_getaddrinfo returned.
        let entry = unsafe { &*res };
        assert!(entry.ai_next.is_null(), "one entry");
        assert!(entry.ai_route.is_null() && entry.ai_connect.is_null());
        check(entry);
        // SAFETY: the list, freed once.
        unsafe { rdma_freeaddrinfo(res) };
    } else {
        assert!(res.is_null(), "no list on failure");
    }
    ret
}

/// The IPv4 address and port (host order) of an entry's address.
fn ipv4(addr: *const sockaddr, len: socklen_t) -> (Ipv4Addr, u16) {
    assert_eq!(len as usize, size_of::<sockaddr_in>());
    // SAFETY: an AF_INET address of that length.
    let sin = unsafe { &*addr.cast::<sockaddr_in>() };
    assert_eq!(c_int::from(sin.sin_family), libc::AF_INET);
    (
        Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    )
}

#[test]
fn a_numeric_destination_is_rc_over_the_tcp_port_space_by_default() {
    let h = hints(RAI_NUMERICHOST);
    let ret = lookup(Some(c"127.0.49.1"), Some(c"7471"), Some(&h), |e| {
        assert_eq!(e.ai_flags, 0, "active");
        assert_eq!(e.ai_family, libc::AF_INET);
        assert_eq!(e.ai_qp_type, IBV_QPT_RC);
        assert_eq!(e.ai_port_space, PS_TCP);
        assert_eq!(
            ipv4(e.ai_dst_addr, e.ai_dst_len),
            (Ipv4Addr::new(127, 0, 49, 1), 7471)
        );
        assert!(e.ai_src_addr.is_null() && e.ai_src_len == 0);
    });
    assert_eq!(ret, 0);
}

#[test]
fn no_hints_at_all_resolves_the_node_alone() {
    let ret = lookup(Some(c"127.0.49.2"), None, None, |e| {
        assert_eq!((e.ai_qp_type, e.ai_port_space), (IBV_QPT_RC, PS_TCP));
        assert_eq!(
            ipv4(e.ai_dst_addr, e.ai_dst_len),
            (Ipv4Addr::new(127, 0, 49, 2), 0)
        );
    });
    assert_eq!(ret, 0);
}

#[test]
fn a_passive_lookup_gives_the_wildcard_source_address() {
    let h = hints(RAI_PASSIVE);
    let ret = lookup(None, Some(c"7471"), Some(&h), |e| {
        assert_eq!(e.ai_flags, RAI_PASSIVE);
        assert!(e.ai_dst_addr.is_null() && e.ai_dst_len == 0);
        assert!(!e.ai_src_addr.is_null());
        match e.ai_family {
            libc::AF_INET => {
                assert_eq!(
                    ipv4(e.ai_src_addr, e.ai_src_len),
                    (Ipv4Addr::UNSPECIFIED, 7471)
                );
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address.
                let sin6 = unsafe { &*e.ai_src_addr.cast::<sockaddr_in6>() };
                assert_eq!(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    Ipv6Addr::UNSPECIFIED
                );
                assert_eq!(u16::from_be(sin6.sin6_port), 7471);
            }
            f => panic!("family {f}"),
        }
    });
    assert_eq!(ret, 0);
}

#[test]
fn a_ud_qp_type_asks_for_datagrams_and_gets_the_udp_port_space() {
    let mut h = hints(RAI_NUMERICHOST);
    h.ai_qp_type = IBV_QPT_UD;
    let ret = lookup(Some(c"127.0.49.1"), Some(c"7174"), Some(&h), |e| {
        assert_eq!((e.ai_qp_type, e.ai_port_space), (IBV_QPT_UD, PS_UDP));
    });
    assert_eq!(ret, 0);
    // The hints' port space wins over the protocol's.
    h.ai_port_space = PS_IB;
    let ret = lookup(Some(c"127.0.49.1"), Some(c"7174"), Some(&h), |e| {
        assert_eq!((e.ai_qp_type, e.ai_port_space), (IBV_QPT_UD, PS_IB));
    });
    assert_eq!(ret, 0);
}

#[test]
fn an_ipv6_numeric_destination() {
    let h = hints(RAI_NUMERICHOST);
    let ret = lookup(Some(c"::1"), Some(c"7471"), Some(&h), |e| {
        assert_eq!(e.ai_family, libc::AF_INET6);
        assert_eq!(e.ai_dst_len as usize, size_of::<sockaddr_in6>());
        // SAFETY: an AF_INET6 address.
        let sin6 = unsafe { &*e.ai_dst_addr.cast::<sockaddr_in6>() };
        assert_eq!(Ipv6Addr::from(sin6.sin6_addr.s6_addr), Ipv6Addr::LOCALHOST);
    });
    assert_eq!(ret, 0);
}

/// `addr:port` as a `sockaddr_in`.
fn sin(addr: Ipv4Addr, port: u16) -> sockaddr_in {
    sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    }
}

#[test]
fn a_source_address_in_the_hints_is_copied() {
    let mut src = sin(Ipv4Addr::new(127, 0, 49, 2), 0);
    let mut h = hints(RAI_NUMERICHOST);
    h.ai_src_addr = (&mut src as *mut sockaddr_in).cast();
    h.ai_src_len = size_of::<sockaddr_in>() as socklen_t;
    let ret = lookup(Some(c"127.0.49.1"), Some(c"7471"), Some(&h), |e| {
        assert_ne!(e.ai_src_addr, h.ai_src_addr, "a copy");
        assert_eq!(
            ipv4(e.ai_src_addr, e.ai_src_len),
            (Ipv4Addr::new(127, 0, 49, 2), 0)
        );
        assert_eq!(
            ipv4(e.ai_dst_addr, e.ai_dst_len),
            (Ipv4Addr::new(127, 0, 49, 1), 7471)
        );
    });
    assert_eq!(ret, 0);
}

#[test]
fn hints_alone_are_copied() {
    let mut dst = sin(Ipv4Addr::new(127, 0, 49, 3), 7471);
    let mut h = hints(RAI_NUMERICHOST);
    h.ai_family = libc::AF_INET;
    h.ai_qp_type = IBV_QPT_UC;
    h.ai_port_space = PS_IB;
    h.ai_dst_addr = (&mut dst as *mut sockaddr_in).cast();
    h.ai_dst_len = size_of::<sockaddr_in>() as socklen_t;
    let ret = lookup(None, None, Some(&h), |e| {
        assert_eq!(
            (e.ai_flags, e.ai_family, e.ai_qp_type, e.ai_port_space),
            (RAI_NUMERICHOST, libc::AF_INET, IBV_QPT_UC, PS_IB)
        );
        assert_eq!(
            ipv4(e.ai_dst_addr, e.ai_dst_len),
            (Ipv4Addr::new(127, 0, 49, 3), 7471)
        );
        assert!(e.ai_src_addr.is_null());
    });
    assert_eq!(ret, 0);
}

#[test]
fn af_ib_turns_an_ipv6_form_gid_into_a_sockaddr_ib() {
    let mut h = hints(RAI_FAMILY | RAI_NUMERICHOST);
    h.ai_family = AF_IB;
    h.ai_port_space = PS_TCP;
    let ret = lookup(Some(c"fe80::1"), Some(c"7471"), Some(&h), |e| {
        assert_eq!(e.ai_family, AF_IB);
        assert_eq!(e.ai_dst_len as usize, size_of::<sockaddr_ib>());
        // SAFETY: an AF_IB address of that length.
        let sib = unsafe { &*e.ai_dst_addr.cast::<sockaddr_ib>() };
        assert_eq!(c_int::from(sib.sib_family), AF_IB);
        assert_eq!(u16::from_be(sib.sib_pkey), 0xFFFF);
        assert_eq!(
            sib.sib_addr.ib_u,
            "fe80::1".parse::<Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(u64::from_be(sib.sib_sid), 0x0106_0000 + 7471);
        assert_eq!(
            u64::from_be(sib.sib_sid_mask),
            u64::MAX,
            "port space and port"
        );
    });
    assert_eq!(ret, 0);
    // An IPv4 node is no GID: getaddrinfo's error (softrnic asks for IPv6 here).
    let ret = lookup(Some(c"127.0.49.1"), Some(c"7471"), Some(&h), |_| ());
    assert!(ret < -1, "an EAI_* code, got {ret}");
}

#[test]
fn nothing_to_look_up_is_einval() {
    assert_eq!(lookup(None, None, None, |_| ()), -1);
    assert_eq!(errno(), libc::EINVAL);
    // SAFETY: a valid node, NULL result pointer (refused before any write).
    let ret = unsafe { rdma_getaddrinfo(c"127.0.49.1".as_ptr(), null(), null(), null_mut()) };
    assert_eq!((ret, errno()), (-1, libc::EINVAL));
}

#[test]
fn a_resolver_error_is_returned_as_is() {
    let h = hints(RAI_NUMERICHOST);
    let ret = lookup(Some(c"not-an-address"), Some(c"7471"), Some(&h), |_| ());
    assert_eq!(ret, libc::EAI_NONAME);
    let ret = lookup(
        Some(c"127.0.49.1"),
        Some(c"no-such-service"),
        Some(&h),
        |_| (),
    );
    assert_eq!(ret, libc::EAI_SERVICE);
}

#[test]
fn freeing_null_is_nothing() {
    // SAFETY: NULL is an empty list.
    unsafe { rdma_freeaddrinfo(null_mut()) };
}
