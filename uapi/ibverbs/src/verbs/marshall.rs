//! Copies between libibverbs' structs and the kernel's: `ibv_copy_ah_attr_from_kern`,
//! `ibv_copy_qp_attr_from_kern`, `ibv_copy_path_rec_from_kern`, `ibv_copy_path_rec_to_kern`
//! (rdma-core 44 `libibverbs/marshall.c`, declared in `<infiniband/marshall.h>`).
//!
//! The kernel's uverbs and `rdma_ucm` interfaces pass address vectors, QP attributes and path
//! records in their own layouts (`<rdma/ib_user_verbs.h>`, `<rdma/ib_user_sa.h>`): the same
//! fields in another order, with padding. rdma-core's `librdmacm` converts with these when it
//! talks to the kernel's `rdma_ucm`. softrnic's own connection manager never needs them, but
//! they are pure conversions and are done exactly as rdma-core does: field by field, values
//! unchanged (the network-order fields stay in network order), and only the fields rdma-core
//! copies (`ibv_copy_qp_attr_from_kern` leaves `qp_state` and `rate_limit` as they were).

use libc::c_void;

use crate::abi::attr::ibv_gid;
use crate::abi::qp_attr::{ibv_ah_attr, ibv_qp_attr};
use crate::export::export;
use crate::rdmacm::abi::ibv_sa_path_rec;

/// `struct ib_uverbs_global_route` (`<rdma/ib_user_verbs.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ib_uverbs_global_route {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reserved: u8,
}

/// `struct ib_uverbs_ah_attr` (`<rdma/ib_user_verbs.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ib_uverbs_ah_attr {
    pub grh: ib_uverbs_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
    pub reserved: u8,
}

/// `struct ib_uverbs_qp_attr` (`<rdma/ib_user_verbs.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ib_uverbs_qp_attr {
    pub qp_attr_mask: u32,
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub ah_attr: ib_uverbs_ah_attr,
    pub alt_ah_attr: ib_uverbs_ah_attr,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub reserved: [u8; 5],
}

/// `struct ib_user_path_rec` (`<rdma/ib_user_sa.h>`): a path record as `rdma_ucm` passes it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ib_user_path_rec {
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    /// `__be16`.
    pub dlid: u16,
    /// `__be16`.
    pub slid: u16,
    pub raw_traffic: u32,
    /// `__be32`.
    pub flow_label: u32,
    pub reversible: u32,
    pub mtu: u32,
    /// `__be16`.
    pub pkey: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub numb_path: u8,
    pub sl: u8,
    pub mtu_selector: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `src` into the fields of `dst` rdma-core's `ibv_copy_ah_attr_from_kern` sets (all of them).
fn ah_attr_from_kern(dst: &mut ibv_ah_attr, src: &ib_uverbs_ah_attr) {
    dst.grh.dgid = ibv_gid { raw: src.grh.dgid };
    dst.grh.flow_label = src.grh.flow_label;
    dst.grh.sgid_index = src.grh.sgid_index;
    dst.grh.hop_limit = src.grh.hop_limit;
    dst.grh.traffic_class = src.grh.traffic_class;
    dst.dlid = src.dlid;
    dst.sl = src.sl;
    dst.src_path_bits = src.src_path_bits;
    dst.static_rate = src.static_rate;
    dst.is_global = src.is_global;
    dst.port_num = src.port_num;
}

/// `src` into the fields of `dst` rdma-core's `ibv_copy_qp_attr_from_kern` sets: all but
/// `qp_state` and `rate_limit`.
fn qp_attr_from_kern(dst: &mut ibv_qp_attr, src: &ib_uverbs_qp_attr) {
    dst.cur_qp_state = src.cur_qp_state;
    dst.path_mtu = src.path_mtu;
    dst.path_mig_state = src.path_mig_state;
    dst.qkey = src.qkey;
    dst.rq_psn = src.rq_psn;
    dst.sq_psn = src.sq_psn;
    dst.dest_qp_num = src.dest_qp_num;
    dst.qp_access_flags = src.qp_access_flags;
    dst.cap.max_send_wr = src.max_send_wr;
    dst.cap.max_recv_wr = src.max_recv_wr;
    dst.cap.max_send_sge = src.max_send_sge;
    dst.cap.max_recv_sge = src.max_recv_sge;
    dst.cap.max_inline_data = src.max_inline_data;
    ah_attr_from_kern(&mut dst.ah_attr, &src.ah_attr);
    ah_attr_from_kern(&mut dst.alt_ah_attr, &src.alt_ah_attr);
    dst.pkey_index = src.pkey_index;
    dst.alt_pkey_index = src.alt_pkey_index;
    dst.en_sqd_async_notify = src.en_sqd_async_notify;
    dst.sq_draining = src.sq_draining;
    dst.max_rd_atomic = src.max_rd_atomic;
    dst.max_dest_rd_atomic = src.max_dest_rd_atomic;
    dst.min_rnr_timer = src.min_rnr_timer;
    dst.port_num = src.port_num;
    dst.timeout = src.timeout;
    dst.retry_cnt = src.retry_cnt;
    dst.rnr_retry = src.rnr_retry;
    dst.alt_port_num = src.alt_port_num;
    dst.alt_timeout = src.alt_timeout;
}

/// The kernel's path record as libibverbs'. (`raw_traffic`, `reversible` and `mtu` change
/// width: C's implicit conversions, which `as` spells here.)
fn path_rec_from_kern(dst: &mut ibv_sa_path_rec, src: &ib_user_path_rec) {
    dst.dgid = ibv_gid { raw: src.dgid };
    dst.sgid = ibv_gid { raw: src.sgid };
    dst.dlid = src.dlid;
    dst.slid = src.slid;
    dst.raw_traffic = src.raw_traffic as i32;
    dst.flow_label = src.flow_label;
    dst.hop_limit = src.hop_limit;
    dst.traffic_class = src.traffic_class;
    dst.reversible = src.reversible as i32;
    dst.numb_path = src.numb_path;
    dst.pkey = src.pkey;
    dst.sl = src.sl;
    dst.mtu_selector = src.mtu_selector;
    dst.mtu = src.mtu as u8;
    dst.rate_selector = src.rate_selector;
    dst.rate = src.rate;
    dst.packet_life_time = src.packet_life_time;
    dst.preference = src.preference;
    dst.packet_life_time_selector = src.packet_life_time_selector;
}

/// libibverbs' path record as the kernel's (the reverse of [`path_rec_from_kern`]).
fn path_rec_to_kern(dst: &mut ib_user_path_rec, src: &ibv_sa_path_rec) {
    dst.dgid = src.dgid.raw;
    dst.sgid = src.sgid.raw;
    dst.dlid = src.dlid;
    dst.slid = src.slid;
    dst.raw_traffic = src.raw_traffic as u32;
    dst.flow_label = src.flow_label;
    dst.hop_limit = src.hop_limit;
    dst.traffic_class = src.traffic_class;
    dst.reversible = src.reversible as u32;
    dst.numb_path = src.numb_path;
    dst.pkey = src.pkey;
    dst.sl = src.sl;
    dst.mtu_selector = src.mtu_selector;
    dst.mtu = u32::from(src.mtu);
    dst.rate_selector = src.rate_selector;
    dst.rate = src.rate;
    dst.packet_life_time = src.packet_life_time;
    dst.preference = src.preference;
    dst.packet_life_time_selector = src.packet_life_time_selector;
}

export! { "IBVERBS_1.1";
    /// `void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr
    /// *src)`: as rdma-core (see the module doc).
    unsafe extern "C" fn ibv_copy_ah_attr_from_kern(dst: *mut c_void, src: *const c_void) {
        // SAFETY: the caller passes a writable ibv_ah_attr and a readable ib_uverbs_ah_attr;
        // both are plain integers, valid for any bits (read unaligned all the same).
        unsafe {
            let mut d = dst.cast::<ibv_ah_attr>().read_unaligned();
            ah_attr_from_kern(&mut d, &src.cast::<ib_uverbs_ah_attr>().read_unaligned());
            dst.cast::<ibv_ah_attr>().write_unaligned(d);
        }
    }
}

export! { "IBVERBS_1.0";
    /// `void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr
    /// *src)`: as rdma-core (see the module doc).
    unsafe extern "C" fn ibv_copy_qp_attr_from_kern(dst: *mut c_void, src: *const c_void) {
        // SAFETY: as ibv_copy_ah_attr_from_kern, for ibv_qp_attr and ib_uverbs_qp_attr.
        unsafe {
            let mut d = dst.cast::<ibv_qp_attr>().read_unaligned();
            qp_attr_from_kern(&mut d, &src.cast::<ib_uverbs_qp_attr>().read_unaligned());
            dst.cast::<ibv_qp_attr>().write_unaligned(d);
        }
    }
}

export! { "IBVERBS_1.0";
    /// `void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct
    /// ib_user_path_rec *src)`: as rdma-core (see the module doc).
    unsafe extern "C" fn ibv_copy_path_rec_from_kern(dst: *mut c_void, src: *const c_void) {
        // SAFETY: as ibv_copy_ah_attr_from_kern, for ibv_sa_path_rec and ib_user_path_rec.
        unsafe {
            let mut d = dst.cast::<ibv_sa_path_rec>().read_unaligned();
            path_rec_from_kern(&mut d, &src.cast::<ib_user_path_rec>().read_unaligned());
            dst.cast::<ibv_sa_path_rec>().write_unaligned(d);
        }
    }
}

export! { "IBVERBS_1.0";
    /// `void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec
    /// *src)`: as rdma-core (see the module doc).
    unsafe extern "C" fn ibv_copy_path_rec_to_kern(dst: *mut c_void, src: *const c_void) {
        // SAFETY: as ibv_copy_ah_attr_from_kern, for ib_user_path_rec and ibv_sa_path_rec.
        unsafe {
            let mut d = dst.cast::<ib_user_path_rec>().read_unaligned();
            path_rec_to_kern(&mut d, &src.cast::<ibv_sa_path_rec>().read_unaligned());
            dst.cast::<ib_user_path_rec>().write_unaligned(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::layout::{compare_with_headers, layout, Entry};

    #[allow(unused_unsafe)]
    fn table() -> Vec<Entry> {
        layout! {
            "struct ib_uverbs_global_route" => ib_uverbs_global_route {
                dgid, flow_label, sgid_index, hop_limit, traffic_class, reserved,
            }
            "struct ib_uverbs_ah_attr" => ib_uverbs_ah_attr {
                grh, dlid, sl, src_path_bits, static_rate, is_global, port_num, reserved,
            }
            "struct ib_uverbs_qp_attr" => ib_uverbs_qp_attr {
                qp_attr_mask, qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn,
                sq_psn, dest_qp_num, qp_access_flags, ah_attr, alt_ah_attr, max_send_wr,
                max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, pkey_index,
                alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic,
                max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
                alt_port_num, alt_timeout, reserved,
            }
            "struct ib_user_path_rec" => ib_user_path_rec {
                dgid, sgid, dlid, slid, raw_traffic, flow_label, reversible, mtu, pkey,
                hop_limit, traffic_class, numb_path, sl, mtu_selector, rate_selector, rate,
                packet_life_time_selector, packet_life_time, preference,
            }
        }
    }

    #[test]
    fn kernel_structs_match_the_installed_headers() {
        compare_with_headers(
            "kernel_structs_match_the_installed_headers",
            &["rdma/ib_user_verbs.h", "rdma/ib_user_sa.h"],
            "linux-libc-dev",
            &table(),
        );
    }

    /// A kernel path record whose every field differs from every other.
    fn kern_path() -> ib_user_path_rec {
        ib_user_path_rec {
            dgid: core::array::from_fn(|i| i as u8 + 1),
            sgid: core::array::from_fn(|i| i as u8 + 0x41),
            dlid: 0x0102u16.to_be(),
            slid: 0x0304u16.to_be(),
            raw_traffic: 1,
            flow_label: 0x12345u32.to_be(),
            reversible: 1,
            mtu: 5,
            pkey: 0xffffu16.to_be(),
            hop_limit: 64,
            traffic_class: 0x28,
            numb_path: 2,
            sl: 3,
            mtu_selector: 4,
            rate_selector: 6,
            rate: 7,
            packet_life_time_selector: 8,
            packet_life_time: 9,
            preference: 10,
        }
    }

    #[test]
    fn a_path_record_survives_the_round_trip_through_the_c_entry_points() {
        let k = kern_path();
        let mut ours = ibv_sa_path_rec::default();
        let mut back = ib_user_path_rec::default();
        // SAFETY: pointers to a whole struct of each type.
        unsafe {
            ibv_copy_path_rec_from_kern((&raw mut ours).cast(), (&raw const k).cast());
            ibv_copy_path_rec_to_kern((&raw mut back).cast(), (&raw const ours).cast());
        }
        assert_eq!(ours.dgid.raw, k.dgid);
        assert_eq!(ours.sgid.raw, k.sgid);
        assert_eq!(
            (ours.dlid, ours.pkey, ours.flow_label),
            (k.dlid, k.pkey, k.flow_label)
        );
        assert_eq!((ours.mtu, ours.rate, ours.preference), (5, 7, 10));
        assert_eq!(back, k);
    }

    #[test]
    fn qp_attr_from_kern_keeps_qp_state_and_rate_limit() {
        let mut k = ib_uverbs_qp_attr {
            qp_state: 3,
            cur_qp_state: 2,
            qkey: 0x11111111,
            max_inline_data: 64,
            timeout: 14,
            alt_timeout: 15,
            ..Default::default()
        };
        k.ah_attr.grh.dgid = [7; 16];
        k.ah_attr.is_global = 1;
        k.alt_ah_attr.dlid = 9;
        let mut q = ibv_qp_attr {
            qp_state: 1,
            rate_limit: 99,
            ..Default::default()
        };
        // SAFETY: pointers to a whole struct of each type.
        unsafe { ibv_copy_qp_attr_from_kern((&raw mut q).cast(), (&raw const k).cast()) };
        assert_eq!((q.qp_state, q.rate_limit), (1, 99));
        assert_eq!(
            (q.cur_qp_state, q.qkey, q.cap.max_inline_data),
            (2, 0x11111111, 64)
        );
        assert_eq!((q.timeout, q.alt_timeout), (14, 15));
        assert_eq!((q.ah_attr.grh.dgid.raw, q.ah_attr.is_global), ([7; 16], 1));
        assert_eq!(q.alt_ah_attr.dlid, 9);
    }
}
