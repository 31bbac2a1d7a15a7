//! `ibv_init_ah_from_wc` (rdma-core 44 `libibverbs/verbs.c`, man page
//! `ibv_create_ah_from_wc(3)`): the address vector back to the sender of a received datagram.
//!
//! On RoCE v2 the 40 bytes in front of a UD receive's payload (`struct ibv_grh`) hold the IP
//! header of the packet: an IPv6 header fills them, an IPv4 header fills the last 20 (bytes
//! 20..40), which is how softrnic's UD responder writes them (`ah.rs`) and how the kernel's
//! RoCE drivers do. The answer, as rdma-core computes it:
//!
//! * always: `port_num`; `dlid` = `wc.slid`, `sl` = `wc.sl`, `src_path_bits` =
//!   `wc.dlid_path_bits`; the flow label from the GRH's first word.
//! * with `IBV_WC_GRH` in `wc.wc_flags`, `is_global` and the GRH: the IP version first (IPv6
//!   if byte 0 says 6, unless bytes 20..40 are an IPv4 header with a correct checksum, which an
//!   IPv6 header's addresses almost never are; else IPv4 if byte 20 says 4; else
//!   `EPROTONOSUPPORT`). Then `dgid` is the packet's source address, `sgid_index` the index in
//!   this device's GID table of its destination address (of type RoCE v2; an IPv6 next header
//!   0x1b, RoCE v1, finds nothing here), `hop_limit` its TTL or hop limit and `traffic_class`
//!   its TOS or traffic class. A multicast destination is refused (`EINVAL`): it is no GID of
//!   the table to answer from.
//!
//! It returns 0, or -1 with `errno` (`EINVAL` also for a destination not in the GID table,
//! where rdma-core's search ends on the failing `ibv_query_gid` past the table).

use std::net::Ipv4Addr;

use libc::c_int;
use softrnic_provider::device::Gid;

use crate::abi::attr::ibv_gid;
use crate::abi::context::ibv_context;
use crate::abi::qp_attr::{ibv_ah_attr, ibv_global_route};
use crate::abi::wr::ibv_wc;
use crate::context;
use crate::export::export;
use crate::ffi::{catch, set_errno};

/// `IBV_WC_GRH`: the receive buffer starts with a valid GRH.
const WC_GRH: u32 = 1;
/// The IPv6 next header of RoCE v2 (UDP).
const IPPROTO_UDP: u8 = 17;

/// The IP header in a GRH, by the rules of the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IpVersion {
    V4,
    V6,
}

/// The Internet checksum of the 20-byte IPv4 header `h` with its checksum field (bytes
/// 10..12) taken as zero (RFC 791 § 3.1, RFC 1071).
fn ipv4_header_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks_exact(2)
        .enumerate()
        .filter(|&(i, _)| i != 5)
        .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Which IP header the GRH holds, as rdma-core's `get_grh_header_version` decides it.
fn ip_version(grh: &[u8; 40]) -> Result<IpVersion, c_int> {
    let v4 = &grh[20..40];
    if grh[0] >> 4 != 6 {
        return if v4[0] >> 4 == 4 {
            Ok(IpVersion::V4)
        } else {
            Err(libc::EPROTONOSUPPORT)
        };
    }
    // Version 6 in byte 0 might still be an IPv4 packet whose GRH area before the header holds
    // anything: believe IPv4 only for a 20-byte header (RoCE v2 has no options) whose checksum
    // is right.
    let ok = v4[0] & 0x0f == 5 && ipv4_header_checksum(v4) == u16::from_be_bytes([v4[10], v4[11]]);
    Ok(if ok { IpVersion::V4 } else { IpVersion::V6 })
}

/// The address vector back to the sender of the datagram `wc` completed on port `port`, with
/// `grh` the first 40 bytes of its receive buffer; `find` gives the GID table index of a RoCE
/// v2 GID of this device. An errno on failure.
fn ah_attr_from_wc(
    wc: &ibv_wc,
    grh: &[u8; 40],
    port: u8,
    find: impl Fn(Gid) -> Option<u32>,
) -> Result<ibv_ah_attr, c_int> {
    let word0 = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
    let mut attr = ibv_ah_attr {
        grh: ibv_global_route {
            flow_label: word0 & 0xf_ffff,
            ..Default::default()
        },
        dlid: wc.slid,
        sl: wc.sl,
        src_path_bits: wc.dlid_path_bits,
        port_num: port,
        ..Default::default()
    };
    if wc.wc_flags & WC_GRH == 0 {
        return Ok(attr);
    }
    attr.is_global = 1;
    let (src, dst, hop_limit, traffic_class) = match ip_version(grh)? {
        IpVersion::V4 => {
            let h = &grh[20..40];
            let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
            let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
            if dst.is_multicast() {
                return Err(libc::EINVAL);
            }
            (
                Gid::from_ip(src.into()),
                Gid::from_ip(dst.into()),
                h[8],
                h[1],
            )
        }
        IpVersion::V6 => {
            let src: [u8; 16] = grh[8..24].try_into().expect("16 bytes");
            let dst: [u8; 16] = grh[24..40].try_into().expect("16 bytes");
            if dst[0] == 0xff {
                return Err(libc::EINVAL);
            }
            if grh[6] != IPPROTO_UDP {
                // 0x1b is RoCE v1, whose GIDs softrnic's table has none of; anything else is
                // no RoCE at all.
                return Err(if grh[6] == 0x1b {
                    libc::EINVAL
                } else {
                    libc::EPROTONOSUPPORT
                });
            }
            (
                Gid::from_raw(src),
                Gid::from_raw(dst),
                grh[7],
                (word0 >> 20) as u8,
            )
        }
    };
    let index = find(dst).ok_or(libc::EINVAL)?;
    attr.grh.dgid = ibv_gid { raw: src.to_raw() };
    attr.grh.sgid_index = u8::try_from(index).map_err(|_| libc::EINVAL)?;
    attr.grh.hop_limit = hop_limit;
    attr.grh.traffic_class = traffic_class;
    Ok(attr)
}

export! { "IBVERBS_1.1";
    /// `int ibv_init_ah_from_wc(struct ibv_context *, uint8_t port_num, struct ibv_wc *,
    /// struct ibv_grh *, struct ibv_ah_attr *)`: fills `*ah_attr` (see the module doc); 0, or
    /// -1 with `errno`: `EINVAL` also for a context that is not open, a port other than 1 or
    /// NULL pointers.
    unsafe extern "C" fn ibv_init_ah_from_wc(
        context: *mut ibv_context,
        port_num: u8,
        wc: *mut ibv_wc,
        grh: *mut libc::c_void,
        ah_attr: *mut ibv_ah_attr,
    ) -> c_int {
        let r = catch(Err(libc::EIO), || {
            let Some(c) = context::lookup(context) else { return Err(libc::EINVAL) };
            if wc.is_null() || grh.is_null() || ah_attr.is_null() || port_num != 1 {
                return Err(libc::EINVAL);
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_wc and the 40-byte GRH of its
            // receive buffer (any bytes are valid for a byte array; read unaligned).
            let (wc, bytes) = unsafe { (*wc, grh.cast::<[u8; 40]>().read_unaligned()) };
            let attr = ah_attr_from_wc(&wc, &bytes, port_num, |g| c.dev.gids.find(g));
            // rdma-core clears the output first and leaves what it filled on failure; the
            // caller uses it only on success, so write it only then.
            // SAFETY: non-NULL; the caller passes a writable ibv_ah_attr.
            attr.map(|a| unsafe { ah_attr.write(a) })
        });
        r.map_or_else(|e| { set_errno(e); -1 }, |()| 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This device's table in the tests: index 1 is 127.0.59.1, index 2 fd00::59:1.
    fn find(g: Gid) -> Option<u32> {
        let v4 = Gid::from_ip("127.0.59.1".parse().unwrap());
        let v6 = Gid::from_ip("fd00::59:1".parse().unwrap());
        [(v4, 1), (v6, 2)]
            .into_iter()
            .find(|(t, _)| *t == g)
            .map(|(_, i)| i)
    }

    fn wc() -> ibv_wc {
        ibv_wc {
            wr_id: 0,
            status: 0,
            opcode: 128, // IBV_WC_RECV
            vendor_err: 0,
            byte_len: 40 + 8,
            imm_data: 0,
            qp_num: 5,
            src_qp: 9,
            wc_flags: WC_GRH,
            pkey_index: 0,
            slid: 0x1234,
            sl: 3,
            dlid_path_bits: 2,
        }
    }

    /// The GRH area of an IPv4 packet from 127.0.59.2 to `dst`: TOS 0x28, TTL 64, a correct
    /// checksum; the first 20 bytes zero.
    fn v4_grh(dst: [u8; 4]) -> [u8; 40] {
        let mut g = [0u8; 40];
        let h = &mut g[20..40];
        h[..12].copy_from_slice(&[0x45, 0x28, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        h[12..16].copy_from_slice(&[127, 0, 59, 2]);
        h[16..20].copy_from_slice(&dst);
        let sum = ipv4_header_checksum(h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        g
    }

    /// The GRH of an IPv6 packet from fd00::59:2 to `dst`: traffic class 0xb8, flow label
    /// 0x12345, next header `next`, hop limit 7.
    fn v6_grh(dst: &str, next: u8) -> [u8; 40] {
        let mut g = [0u8; 40];
        g[..4].copy_from_slice(&(6u32 << 28 | 0xb8 << 20 | 0x12345).to_be_bytes());
        g[6] = next;
        g[7] = 7;
        g[8..24].copy_from_slice(&"fd00::59:2".parse::<std::net::Ipv6Addr>().unwrap().octets());
        g[24..40].copy_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
        g
    }

    #[test]
    fn ipv4_answers_from_the_ip_header() {
        let a = ah_attr_from_wc(&wc(), &v4_grh([127, 0, 59, 1]), 1, find).unwrap();
        assert_eq!(a.is_global, 1);
        assert_eq!(
            a.grh.dgid.raw,
            Gid::from_ip("127.0.59.2".parse().unwrap()).to_raw()
        );
        assert_eq!(
            (a.grh.sgid_index, a.grh.hop_limit, a.grh.traffic_class),
            (1, 64, 0x28)
        );
        assert_eq!(
            (a.dlid, a.sl, a.src_path_bits, a.port_num),
            (0x1234, 3, 2, 1)
        );
        assert_eq!(a.grh.flow_label, 0);
    }

    #[test]
    fn ipv6_answers_from_the_grh() {
        let a = ah_attr_from_wc(&wc(), &v6_grh("fd00::59:1", 17), 1, find).unwrap();
        assert_eq!(a.is_global, 1);
        assert_eq!(
            a.grh.dgid.raw,
            Gid::from_ip("fd00::59:2".parse().unwrap()).to_raw()
        );
        assert_eq!(
            (a.grh.sgid_index, a.grh.hop_limit, a.grh.traffic_class),
            (2, 7, 0xb8)
        );
        assert_eq!(a.grh.flow_label, 0x12345);
    }

    #[test]
    fn an_ipv4_header_with_a_wrong_checksum_after_version_6_is_ipv6() {
        let mut g = v4_grh([127, 0, 59, 1]);
        g[0] = 0x60;
        assert_eq!(ip_version(&g), Ok(IpVersion::V4));
        g[30] ^= 1;
        assert_eq!(ip_version(&g), Ok(IpVersion::V6));
        assert_eq!(ip_version(&[0; 40]), Err(libc::EPROTONOSUPPORT));
    }

    #[test]
    fn refusals() {
        let e = |w: &ibv_wc, g: &[u8; 40]| ah_attr_from_wc(w, g, 1, find).unwrap_err();
        // Multicast destinations, a destination not in the table, RoCE v1, not UDP.
        assert_eq!(e(&wc(), &v4_grh([224, 0, 0, 1])), libc::EINVAL);
        assert_eq!(e(&wc(), &v6_grh("ff0e::1", 17)), libc::EINVAL);
        assert_eq!(e(&wc(), &v4_grh([127, 0, 59, 3])), libc::EINVAL);
        assert_eq!(e(&wc(), &v6_grh("fd00::59:1", 0x1b)), libc::EINVAL);
        assert_eq!(e(&wc(), &v6_grh("fd00::59:1", 6)), libc::EPROTONOSUPPORT);
    }

    #[test]
    fn without_a_grh_only_the_wc_fields() {
        let mut w = wc();
        w.wc_flags = 0;
        let a = ah_attr_from_wc(&w, &[0; 40], 1, find).unwrap();
        assert_eq!((a.is_global, a.dlid, a.sl, a.port_num), (0, 0x1234, 3, 1));
        assert_eq!(a.grh.dgid.raw, [0; 16]);
    }
}
