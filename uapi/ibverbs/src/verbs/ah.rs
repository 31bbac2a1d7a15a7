//! Address handles: `ibv_create_ah`, `ibv_create_ah_from_wc`, `ibv_destroy_ah`. A [`SoftAh`]
//! is the C `ibv_ah` followed by the `softrnic_uapi` [`Ah`]; a UD send WR's `wr.ud.ah` is
//! looked up here ([`ud_dest`]). On RoCE the address vector must have a GRH (`is_global`):
//! its destination GID is the peer's address. An address handle back to the sender of a
//! received datagram comes from the GRH in front of it: on RoCE v2 its IP header (rdma-core's
//! `ibv_init_ah_from_wc` tells IPv6 from IPv4 the same way, by the IP version in the header).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ptr::null_mut;

use libc::{c_int, c_void};
use softrnic_uapi::{Ah, UdDest};

use crate::abi::objects::{ibv_ah, ibv_pd};
use crate::abi::qp_attr::ibv_ah_attr;
use crate::abi::wr::{ibv_send_wr_ud, ibv_wc};
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::live::Live;
use crate::verbs::modify::gid_to_ip;
use crate::verbs::pd::pd_of;

/// An address handle.
#[repr(C)]
pub(crate) struct SoftAh {
    pub ibv: ibv_ah,
    pub ah: Ah,
}

pub(crate) static AHS: Live = Live::new();

/// The AH at `ah`, if alive. Valid until `ibv_destroy_ah(ah)`.
fn ah_of<'a>(ah: *const ibv_ah) -> Option<&'a SoftAh> {
    // SAFETY: a live AH pointer is the `ibv` field, at offset 0, of a boxed SoftAh.
    AHS.contains(ah).then(|| unsafe { &*ah.cast::<SoftAh>() })
}

/// The destination of a UD send WR's `wr.ud`; `EINVAL` for a pointer that is not a live AH.
pub(crate) fn ud_dest(ud: &ibv_send_wr_ud) -> Result<UdDest, c_int> {
    let ah = ah_of(ud.ah).ok_or(libc::EINVAL)?;
    Ok(ah.ah.ud(ud.remote_qpn, ud.remote_qkey))
}

/// `IBV_WC_GRH`.
const WC_GRH: u32 = 1;

/// The source address in the 40-byte GRH of a received RoCE v2 datagram: the IPv6 header
/// (version 6 in byte 0), or the IPv4 header in bytes 20..40 (version 4, IHL 5); `None` for
/// anything else.
fn grh_source(grh: &[u8; 40]) -> Option<IpAddr> {
    if grh[0] >> 4 == 6 {
        let src: [u8; 16] = grh[8..24].try_into().ok()?;
        return Some(IpAddr::V6(Ipv6Addr::from(src)));
    }
    if grh[20] == 0x45 {
        let src: [u8; 4] = grh[32..36].try_into().ok()?;
        return Some(IpAddr::V4(Ipv4Addr::from(src)));
    }
    None
}

/// Makes a live `ibv_ah` on `pd` (live, `soft_pd`) to `dest`.
fn publish(pd: *mut ibv_pd, soft_pd: &crate::verbs::pd::SoftPd, dest: IpAddr) -> *mut ibv_ah {
    let ah = match soft_pd.pd.create_ah(dest) {
        Ok(ah) => ah,
        Err(e) => return fail(e.errno()),
    };
    let ibv = ibv_ah {
        context: soft_pd.ibv.context,
        pd,
        handle: 0,
    };
    let p = Box::into_raw(Box::new(SoftAh { ibv, ah })).cast::<ibv_ah>();
    AHS.insert(p);
    p
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

export! { "IBVERBS_1.1";
    /// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`: an address
    /// handle to `attr->grh.dgid`. NULL with `errno` `EINVAL` for a bad PD, a NULL `attr`, no
    /// GRH (`is_global` 0: RoCE needs one) or port other than 1.
    unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
        catch(null_mut(), || {
            let Some(soft_pd) = pd_of(pd) else { return fail(libc::EINVAL) };
            if attr.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_ah_attr.
            let a = unsafe { *attr };
            if a.is_global == 0 || a.port_num > 1 {
                return fail(libc::EINVAL);
            }
            publish(pd, soft_pd, gid_to_ip(a.grh.dgid.raw))
        })
    }
}

export! { "IBVERBS_1.1";
    /// `struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *, struct ibv_wc *, struct ibv_grh *,
    /// uint8_t port_num)`: an address handle back to the sender of the datagram `wc` completed,
    /// from the GRH at `grh` (the first 40 bytes of its receive buffer). NULL with `errno`
    /// `EINVAL` for a bad PD, NULL pointers, port other than 1, a completion without
    /// `IBV_WC_GRH`, or a GRH that is no IP header.
    unsafe extern "C" fn ibv_create_ah_from_wc(pd: *mut ibv_pd, wc: *mut ibv_wc, grh: *mut c_void, port_num: u8) -> *mut ibv_ah {
        catch(null_mut(), || {
            let Some(soft_pd) = pd_of(pd) else { return fail(libc::EINVAL) };
            if wc.is_null() || grh.is_null() || port_num != 1 {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_wc.
            let flags = unsafe { (*wc).wc_flags };
            if flags & WC_GRH == 0 {
                return fail(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes the 40-byte `struct ibv_grh` of the receive
            // buffer (any bytes are valid for a byte array; read unaligned).
            let bytes = unsafe { grh.cast::<[u8; 40]>().read_unaligned() };
            match grh_source(&bytes) {
                Some(src) => publish(pd, soft_pd, src),
                None => fail(libc::EINVAL),
            }
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_destroy_ah(struct ibv_ah *)`: 0, or `EINVAL` for a pointer that is not a live
    /// AH. (Send WRs already posted through it keep its address.)
    unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
        catch(libc::EIO, || {
            if !AHS.remove(ah) {
                return libc::EINVAL;
            }
            // SAFETY: `ah` was live, so it came from Box::into_raw of a SoftAh; removing it
            // from AHS makes this the only release.
            drop(unsafe { Box::from_raw(ah.cast::<SoftAh>()) });
            0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grh_source_is_the_ip_headers() {
        let mut v4 = [0u8; 40];
        v4[20] = 0x45;
        v4[32..36].copy_from_slice(&[127, 0, 24, 3]);
        assert_eq!(
            grh_source(&v4),
            Some(IpAddr::V4(Ipv4Addr::new(127, 0, 24, 3)))
        );
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[8..24].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        assert_eq!(grh_source(&v6), Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!(grh_source(&[0; 40]), None);
    }
}
