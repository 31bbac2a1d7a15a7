//! `ibv_modify_qp`: `struct ibv_qp_attr` + `IBV_QP_*` mask onto softrnic's [`QpAttr`] +
//! [`AttrMask`] (same bit values), the peer's address from the IPv4-mapped (or IPv6) GID in
//! `ah_attr.grh.dgid`. Only the fields the mask names are read.

use std::net::{IpAddr, Ipv6Addr};

use libc::c_int;
use softrnic_uapi::{Access, AttrMask, Gid, Mtu, QpAttr, QpState};

use crate::abi::objects::ibv_qp;
use crate::abi::qp_attr::ibv_qp_attr;
use crate::export::export;
use crate::ffi::catch;
use crate::verbs::qp::qp_of;

/// The IP address a RoCE v2 GID stands for: IPv4 for an IPv4-mapped GID, else IPv6.
pub(crate) fn gid_to_ip(raw: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(raw);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// Writes softrnic's attributes `q` into the C struct `a` (`rdma_init_qp_attr`): what
/// `ibv_modify_qp` would take back with the same mask. The address vector is RoCEv2's: a
/// GRH whose GID is the peer's address, source GID index 1 (the device's own address).
pub(crate) fn from_qp_attr(q: &QpAttr, a: &mut ibv_qp_attr) {
    a.qp_state = q.qp_state.ibv();
    a.cur_qp_state = q.cur_qp_state.ibv();
    a.path_mtu = q.path_mtu.ibv();
    a.qkey = q.qkey;
    a.rq_psn = q.rq_psn;
    a.sq_psn = q.sq_psn;
    a.dest_qp_num = q.dest_qp_num;
    a.qp_access_flags = q.qp_access_flags.bits();
    a.pkey_index = q.pkey_index;
    a.port_num = q.port_num;
    a.max_rd_atomic = q.max_rd_atomic;
    a.max_dest_rd_atomic = q.max_dest_rd_atomic;
    a.min_rnr_timer = q.min_rnr_timer;
    a.timeout = q.timeout;
    a.retry_cnt = q.retry_cnt;
    a.rnr_retry = q.rnr_retry;
    a.en_sqd_async_notify = q.en_sqd_async_notify;
    a.ah_attr.grh.dgid.raw = Gid::from_ip(q.dest).to_raw();
    a.ah_attr.grh.sgid_index = 1;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
}

/// softrnic's attributes for the fields of `a` that `mask` names.
///
/// # Errors
/// `EINVAL` for an unknown state or MTU, or an address vector without a GRH (RoCE needs one).
pub(crate) fn to_qp_attr(a: &ibv_qp_attr, mask: AttrMask) -> Result<QpAttr, c_int> {
    let einval = |_| libc::EINVAL;
    let mut q = QpAttr::default();
    if mask.contains(AttrMask::STATE) {
        q.qp_state = QpState::from_ibv(a.qp_state).map_err(einval)?;
    }
    if mask.contains(AttrMask::CUR_STATE) {
        q.cur_qp_state = QpState::from_ibv(a.cur_qp_state).map_err(einval)?;
    }
    if mask.contains(AttrMask::PATH_MTU) {
        q.path_mtu = Mtu::from_ibv(a.path_mtu).map_err(einval)?;
    }
    if mask.contains(AttrMask::AV) {
        if a.ah_attr.is_global == 0 {
            return Err(libc::EINVAL);
        }
        q.dest = gid_to_ip(a.ah_attr.grh.dgid.raw);
    }
    q.qp_access_flags = Access::from_bits_retain(a.qp_access_flags);
    q.pkey_index = a.pkey_index;
    q.port_num = a.port_num;
    q.rq_psn = a.rq_psn;
    q.sq_psn = a.sq_psn;
    q.dest_qp_num = a.dest_qp_num;
    q.max_rd_atomic = a.max_rd_atomic;
    q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    q.min_rnr_timer = a.min_rnr_timer;
    q.timeout = a.timeout;
    q.retry_cnt = a.retry_cnt;
    q.rnr_retry = a.rnr_retry;
    q.en_sqd_async_notify = a.en_sqd_async_notify;
    q.qkey = a.qkey;
    Ok(q)
}

/// A change the connection manager made to the live QP `qp` (not through `ibv_modify_qp`):
/// kept for `ibv_query_qp`, with the QP's `state` field.
pub(crate) fn remember_cm(qp: *mut ibv_qp, q: &QpAttr, mask: AttrMask) {
    let Some(soft) = qp_of(qp) else { return };
    // SAFETY: all-zero is a valid ibv_qp_attr.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    from_qp_attr(q, &mut a);
    remember(
        &mut soft.attr.lock().unwrap_or_else(|p| p.into_inner()),
        &a,
        mask,
    );
    if mask.contains(AttrMask::STATE) {
        // SAFETY: `qp` is live; `state` is a plain field the application reads between verbs
        // calls.
        unsafe { (*qp).state = a.qp_state };
    }
}

/// Copies into `kept` (what `ibv_query_qp` reports) the fields of `a` that `mask` names.
fn remember(kept: &mut ibv_qp_attr, a: &ibv_qp_attr, mask: AttrMask) {
    let set = |bit: AttrMask| mask.contains(bit);
    if set(AttrMask::ACCESS_FLAGS) {
        kept.qp_access_flags = a.qp_access_flags;
    }
    if set(AttrMask::PKEY_INDEX) {
        kept.pkey_index = a.pkey_index;
    }
    if set(AttrMask::QKEY) {
        kept.qkey = a.qkey;
    }
    if set(AttrMask::PORT) {
        kept.port_num = a.port_num;
    }
    if set(AttrMask::AV) {
        kept.ah_attr = a.ah_attr;
    }
    if set(AttrMask::PATH_MTU) {
        kept.path_mtu = a.path_mtu;
    }
    if set(AttrMask::TIMEOUT) {
        kept.timeout = a.timeout;
    }
    if set(AttrMask::RETRY_CNT) {
        kept.retry_cnt = a.retry_cnt;
    }
    if set(AttrMask::RNR_RETRY) {
        kept.rnr_retry = a.rnr_retry;
    }
    if set(AttrMask::RQ_PSN) {
        kept.rq_psn = a.rq_psn;
    }
    if set(AttrMask::SQ_PSN) {
        kept.sq_psn = a.sq_psn;
    }
    if set(AttrMask::MAX_QP_RD_ATOMIC) {
        kept.max_rd_atomic = a.max_rd_atomic;
    }
    if set(AttrMask::MAX_DEST_RD_ATOMIC) {
        kept.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if set(AttrMask::MIN_RNR_TIMER) {
        kept.min_rnr_timer = a.min_rnr_timer;
    }
    if set(AttrMask::DEST_QPN) {
        kept.dest_qp_num = a.dest_qp_num;
    }
    if set(AttrMask::EN_SQD_ASYNC_NOTIFY) {
        kept.en_sqd_async_notify = a.en_sqd_async_notify;
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask)`: 0, or the
    /// errno (`EINVAL` for a bad QP, a refused transition, mask or value, as
    /// `softrnic_provider::qp_state` checks them). On success `qp->state` follows.
    unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int {
        catch(libc::EIO, || {
            let Some(soft) = qp_of(qp) else { return libc::EINVAL };
            if attr.is_null() {
                return libc::EINVAL;
            }
            // SAFETY: non-NULL; the caller passes a valid ibv_qp_attr.
            let a = unsafe { *attr };
            let mask = AttrMask::from_bits_retain(attr_mask as u32);
            let q = match to_qp_attr(&a, mask) {
                Ok(q) => q,
                Err(e) => return e,
            };
            if let Err(e) = soft.qp.modify(&q, mask) {
                return e.errno();
            }
            remember(&mut soft.attr.lock().unwrap_or_else(|p| p.into_inner()), &a, mask);
            if mask.contains(AttrMask::STATE) {
                // SAFETY: `qp` is live; `state` is a plain field the application reads
                // between verbs calls, as rdma-core updates it.
                unsafe { (*qp).state = a.qp_state };
            }
            0
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn gids_become_addresses() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[127, 0, 0, 2]);
        assert_eq!(gid_to_ip(raw), IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        let v6 = "fe80::1".parse::<Ipv6Addr>().unwrap();
        assert_eq!(gid_to_ip(v6.octets()), IpAddr::V6(v6));
    }

    #[test]
    fn only_masked_enums_are_checked() {
        let a = ibv_qp_attr {
            qp_state: 99,
            path_mtu: 3,
            ..Default::default()
        };
        assert_eq!(
            to_qp_attr(&a, AttrMask::PATH_MTU).unwrap().path_mtu,
            Mtu::Mtu1024
        );
        assert_eq!(to_qp_attr(&a, AttrMask::STATE).err(), Some(libc::EINVAL));
        assert_eq!(
            to_qp_attr(&a, AttrMask::AV).err(),
            Some(libc::EINVAL),
            "no GRH"
        );
    }
}
