//! Identifiers, their addresses and routes (rdma-core 44 `librdmacm/cma.c`): `rdma_create_id`,
//! `rdma_destroy_id`, `rdma_migrate_id`, `rdma_set_option`, `rdma_bind_addr`,
//! `rdma_resolve_addr`, `rdma_resolve_route`, and the ports of an id's addresses,
//! `rdma_get_src_port` and `rdma_get_dst_port`.

use libc::{c_int, c_void, sockaddr};

use super::abi::{
    rdma_cm_id, rdma_event_channel, rdma_port_space, rdma_sockaddr, sockaddr_ib, AF_IB,
};
use super::not_yet;
use crate::export::export_rdmacm;

export_rdmacm! {
    /// `int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
    /// void *context, enum rdma_port_space ps)`: not implemented yet.
    unsafe extern "C" fn rdma_create_id(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut c_void,
        ps: rdma_port_space,
    ) -> c_int {
        let _ = (channel, id, context, ps);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_destroy_id(struct rdma_cm_id *id)`: not implemented yet.
    unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
        let _ = id;
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)`: not
    /// implemented yet.
    unsafe extern "C" fn rdma_migrate_id(
        id: *mut rdma_cm_id,
        channel: *mut rdma_event_channel,
    ) -> c_int {
        let _ = (id, channel);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
    /// size_t optlen)`: not implemented yet.
    unsafe extern "C" fn rdma_set_option(
        id: *mut rdma_cm_id,
        level: c_int,
        optname: c_int,
        optval: *mut c_void,
        optlen: usize,
    ) -> c_int {
        let _ = (id, level, optname, optval, optlen);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)`: not implemented yet.
    unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
        let _ = (id, addr);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
    /// struct sockaddr *dst_addr, int timeout_ms)`: not implemented yet.
    unsafe extern "C" fn rdma_resolve_addr(
        id: *mut rdma_cm_id,
        src_addr: *mut sockaddr,
        dst_addr: *mut sockaddr,
        timeout_ms: c_int,
    ) -> c_int {
        let _ = (id, src_addr, dst_addr, timeout_ms);
        not_yet(-1)
    }
}

export_rdmacm! {
    /// `int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)`: not implemented yet.
    unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
        let _ = (id, timeout_ms);
        not_yet(-1)
    }
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
