//! Device, port, GID and P_Key queries: `ibv_query_device`, `ibv_query_port` (exported, and
//! the `verbs_context` ops `query_port` and `query_device_ex` that verbs.h's inline
//! `ibv_query_port`/`ibv_query_device_ex` prefer), `ibv_query_gid`, `_ibv_query_gid_ex`,
//! `_ibv_query_gid_table`, `ibv_query_gid_type`, `ibv_query_pkey`, `ibv_get_pkey_index`.
//!
//! Return conventions are rdma-core's: the `*_ex` verbs and `ibv_query_device`/`_port` return
//! an errno value; `ibv_query_gid`, `ibv_query_pkey`, `ibv_query_gid_type` return -1 and set
//! `errno`; `_ibv_query_gid_table` returns a count or a negative errno.

use libc::{c_int, c_uint, size_t, ssize_t};
use softrnic_provider::device::{DeviceAttr, GidEntry, PortAttr};
use softrnic_provider::mr::{ODP_GENERAL_CAPS, ODP_TRANSPORT_CAPS};

use crate::abi::attr::{
    ibv_device_attr, ibv_device_attr_ex, ibv_gid, ibv_gid_entry, ibv_odp_caps,
    ibv_odp_per_transport_caps, ibv_port_attr, ibv_query_device_ex_input, COMPAT_PORT_ATTR_SIZE,
};
use crate::abi::context::ibv_context;
use crate::context::{self, SoftContext};
use crate::export::export;
use crate::ffi::{c_chars, catch, copy_sized, set_errno};

/// The default P_Key, the only entry of the table.
const DEFAULT_PKEY: u16 = 0xffff;
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (`enum ibv_gid_type_sysfs`, rdma-core's `driver.h`).
const GID_TYPE_SYSFS_ROCE_V2: c_uint = 1;

/// Runs `f` on the open context `ctx`, or gives `bad` for anything else; panics give `bad`.
fn with_ctx<R: Copy>(ctx: *const ibv_context, bad: R, f: impl FnOnce(&SoftContext) -> R) -> R {
    catch(bad, || match context::lookup(ctx) {
        Some(c) => f(c),
        None => bad,
    })
}

/// `struct ibv_device_attr` of softrnic's attributes.
pub(crate) fn device_attr(a: &DeviceAttr) -> ibv_device_attr {
    ibv_device_attr {
        fw_ver: c_chars(&a.fw_ver),
        node_guid: a.node_guid.to_be(),
        sys_image_guid: a.sys_image_guid.to_be(),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: a.max_qp,
        max_qp_wr: a.max_qp_wr,
        device_cap_flags: a.device_cap_flags.bits(),
        max_sge: a.max_sge,
        max_sge_rd: a.max_sge_rd,
        max_cq: a.max_cq,
        max_cqe: a.max_cqe,
        max_mr: a.max_mr,
        max_pd: a.max_pd,
        max_qp_rd_atom: a.max_qp_rd_atom,
        max_ee_rd_atom: a.max_ee_rd_atom,
        max_res_rd_atom: a.max_res_rd_atom,
        max_qp_init_rd_atom: a.max_qp_init_rd_atom,
        max_ee_init_rd_atom: a.max_ee_init_rd_atom,
        atomic_cap: a.atomic_cap as c_uint,
        max_ee: a.max_ee,
        max_rdd: a.max_rdd,
        max_mw: a.max_mw,
        max_raw_ipv6_qp: a.max_raw_ipv6_qp,
        max_raw_ethy_qp: a.max_raw_ethy_qp,
        max_mcast_grp: a.max_mcast_grp,
        max_mcast_qp_attach: a.max_mcast_qp_attach,
        max_total_mcast_qp_attach: a.max_total_mcast_qp_attach,
        max_ah: a.max_ah,
        max_fmr: a.max_fmr,
        max_map_per_fmr: a.max_map_per_fmr,
        max_srq: a.max_srq,
        max_srq_wr: a.max_srq_wr,
        max_srq_sge: a.max_srq_sge,
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    }
}

/// `struct ibv_device_attr_ex`: the base attributes, one port, explicit on-demand paging
/// (`verbs/odp.rs`), no other extended capability.
pub(crate) fn device_attr_ex(a: &DeviceAttr) -> ibv_device_attr_ex {
    ibv_device_attr_ex {
        orig_attr: device_attr(a),
        comp_mask: 0,
        odp_caps: ibv_odp_caps {
            general_caps: ODP_GENERAL_CAPS.bits(),
            per_transport_caps: ibv_odp_per_transport_caps {
                rc_odp_caps: ODP_TRANSPORT_CAPS.rc.bits(),
                uc_odp_caps: ODP_TRANSPORT_CAPS.uc.bits(),
                ud_odp_caps: ODP_TRANSPORT_CAPS.ud.bits(),
            },
        },
        completion_timestamp_mask: 0,
        hca_core_clock: 0,
        device_cap_flags_ex: u64::from(a.device_cap_flags.bits()),
        tso_caps: Default::default(),
        rss_caps: Default::default(),
        max_wq_type_rq: 0,
        packet_pacing_caps: Default::default(),
        raw_packet_caps: 0,
        tm_caps: Default::default(),
        cq_mod_caps: Default::default(),
        max_dm_size: softrnic_uapi::MAX_DM_SIZE as u64,
        pci_atomic_caps: Default::default(),
        xrc_odp_caps: ODP_TRANSPORT_CAPS.xrc.bits(),
        phys_port_cnt_ex: u32::from(a.phys_port_cnt),
    }
}

/// `struct ibv_port_attr` of softrnic's port attributes.
pub(crate) fn port_attr(p: &PortAttr) -> ibv_port_attr {
    ibv_port_attr {
        state: p.state as c_uint,
        max_mtu: p.max_mtu as c_uint,
        active_mtu: p.active_mtu as c_uint,
        gid_tbl_len: p.gid_tbl_len,
        port_cap_flags: p.port_cap_flags.bits(),
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: p.link_layer,
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2,
    }
}

/// `struct ibv_gid_entry` of a table entry (port 1).
fn gid_entry(e: &GidEntry) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: ibv_gid {
            raw: e.gid.to_raw(),
        },
        gid_index: e.index,
        port_num: 1,
        gid_type: e.gid_type.ibv(),
        ndev_ifindex: e.ndev_ifindex,
    }
}

/// The entry at `index` of port `port`: `Err(EINVAL)` for another port or an index at or
/// past `gid_tbl_len`.
fn gid_at(c: &SoftContext, port: u32, index: i64) -> Result<GidEntry, c_int> {
    if port != 1 {
        return Err(libc::EINVAL);
    }
    u32::try_from(index)
        .ok()
        .and_then(|i| c.dev.gids.get(i))
        .ok_or(libc::EINVAL)
}

export! { "IBVERBS_1.1";
    /// `int ibv_query_device(struct ibv_context *, struct ibv_device_attr *)`: 0 or `EINVAL`.
    unsafe extern "C" fn ibv_query_device(context: *mut ibv_context, device_attr: *mut ibv_device_attr) -> c_int {
        with_ctx(context, libc::EINVAL, |c| {
            if device_attr.is_null() {
                return libc::EINVAL;
            }
            // SAFETY: the caller passes a writable struct ibv_device_attr.
            unsafe { device_attr.write(self::device_attr(&c.dev.attr)) };
            0
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_query_port(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *)`:
    /// the exported fallback of the inline `ibv_query_port`, writing the 48-byte compat struct
    /// (`ibv_port_attr` without `port_cap_flags2`). 0 or `EINVAL`.
    unsafe extern "C" fn ibv_query_port(context: *mut ibv_context, port_num: u8, port_attr: *mut ibv_port_attr) -> c_int {
        // SAFETY: the compat struct the caller passes has COMPAT_PORT_ATTR_SIZE bytes.
        unsafe { op_query_port(context, port_num, port_attr, COMPAT_PORT_ATTR_SIZE) }
    }
}

/// `verbs_context.query_port`: writes `port_attr_len` bytes (softrnic's struct, cut or
/// zero-extended). 0, or `EINVAL` for a port other than 1 or a NULL output.
///
/// # Safety
/// `port_attr` is NULL or writable for `port_attr_len` bytes.
pub(crate) unsafe extern "C" fn op_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: size_t,
) -> c_int {
    with_ctx(context, libc::EINVAL, |c| {
        if port_num != 1 || port_attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's promise about port_attr_len.
        unsafe {
            copy_sized(
                &self::port_attr(&c.dev.port),
                port_attr.cast(),
                port_attr_len,
            )
        };
        0
    })
}

/// `verbs_context.query_device_ex`: writes `attr_size` bytes of `ibv_device_attr_ex`. 0, or
/// `EINVAL` for a non-zero `input->comp_mask`, a NULL output or one smaller than
/// `ibv_device_attr`.
///
/// # Safety
/// `input` is NULL or readable; `attr` is NULL or writable for `attr_size` bytes.
pub(crate) unsafe extern "C" fn op_query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: size_t,
) -> c_int {
    with_ctx(context, libc::EINVAL, |c| {
        // SAFETY: input is NULL or readable (the caller's promise).
        if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
            return libc::EINVAL;
        }
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's promise about attr_size.
        unsafe { copy_sized(&device_attr_ex(&c.dev.attr), attr.cast(), attr_size) };
        0
    })
}

export! { "IBVERBS_1.1";
    /// `int ibv_query_gid(struct ibv_context *, uint8_t port, int index, union ibv_gid *)`:
    /// 0, or -1 with `errno` `EINVAL` past `gid_tbl_len`, for another port or a NULL output.
    unsafe extern "C" fn ibv_query_gid(context: *mut ibv_context, port_num: u8, index: c_int, gid: *mut ibv_gid) -> c_int {
        let r = with_ctx(context, Err(libc::EINVAL), |c| {
            let e = gid_at(c, port_num.into(), index.into())?;
            if gid.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller passes a writable union ibv_gid.
            unsafe { gid.write(ibv_gid { raw: e.gid.to_raw() }) };
            Ok(())
        });
        r.map_or_else(|e| { set_errno(e); -1 }, |()| 0)
    }
}

export! { "IBVERBS_1.11";
    /// `int _ibv_query_gid_ex(struct ibv_context *, uint32_t port, uint32_t index,
    /// struct ibv_gid_entry *, uint32_t flags, size_t entry_size)`: 0, or `EINVAL` for
    /// non-zero flags, a bad port or index, a NULL or too small entry.
    unsafe extern "C" fn _ibv_query_gid_ex(
        context: *mut ibv_context,
        port_num: u32,
        gid_index: u32,
        entry: *mut ibv_gid_entry,
        flags: u32,
        entry_size: size_t,
    ) -> c_int {
        with_ctx(context, libc::EINVAL, |c| {
            if flags != 0 || entry.is_null() || entry_size < size_of::<ibv_gid_entry>() {
                return libc::EINVAL;
            }
            match gid_at(c, port_num, gid_index.into()) {
                Ok(e) => {
                    // SAFETY: entry is writable for entry_size bytes (the caller's promise).
                    unsafe { copy_sized(&gid_entry(&e), entry.cast(), entry_size) };
                    0
                }
                Err(err) => err,
            }
        })
    }
}

export! { "IBVERBS_1.11";
    /// `ssize_t _ibv_query_gid_table(struct ibv_context *, struct ibv_gid_entry *entries,
    /// size_t max_entries, uint32_t flags, size_t entry_size)`: the number of entries
    /// written (`entry_size` apart), or `-EINVAL` for non-zero flags, NULL or too small
    /// entries, or a table that does not fit in `max_entries` (the kernel's
    /// `rdma_query_gid_table` and rdma-core's sysfs fallback both say `EINVAL` there, and
    /// rdma-core's `test_query_gid_table_bad_flow` expects it).
    unsafe extern "C" fn _ibv_query_gid_table(
        context: *mut ibv_context,
        entries: *mut ibv_gid_entry,
        max_entries: size_t,
        flags: u32,
        entry_size: size_t,
    ) -> ssize_t {
        let einval = -(libc::EINVAL as ssize_t);
        with_ctx(context, einval, |c| {
            if flags != 0 || entries.is_null() || entry_size < size_of::<ibv_gid_entry>() {
                return einval;
            }
            if c.dev.gids.len() > max_entries {
                return einval;
            }
            for (i, e) in c.dev.gids.iter().enumerate() {
                // SAFETY: i < len <= max_entries, and the caller passes max_entries slots of
                // entry_size bytes.
                unsafe { copy_sized(&gid_entry(&e), entries.cast::<u8>().add(i * entry_size), entry_size) };
            }
            c.dev.gids.len() as ssize_t
        })
    }
}

export! { "IBVERBS_PRIVATE_34";
    /// `int ibv_query_gid_type(struct ibv_context *, uint8_t port, unsigned int index,
    /// enum ibv_gid_type_sysfs *type)` (rdma-core's `driver.h`; `ibv_devinfo` calls it):
    /// `IBV_GID_TYPE_SYSFS_ROCE_V2` for every entry; -1 with `errno` `EINVAL` as
    /// `ibv_query_gid`.
    unsafe extern "C" fn ibv_query_gid_type(context: *mut ibv_context, port_num: u8, index: c_uint, gid_type: *mut c_uint) -> c_int {
        let r = with_ctx(context, Err(libc::EINVAL), |c| {
            gid_at(c, port_num.into(), index.into())?;
            if gid_type.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller passes a writable enum.
            unsafe { gid_type.write(GID_TYPE_SYSFS_ROCE_V2) };
            Ok(())
        });
        r.map_or_else(|e| { set_errno(e); -1 }, |()| 0)
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_query_pkey(struct ibv_context *, uint8_t port, int index, __be16 *pkey)`:
    /// index 0 holds the default P_Key 0xffff; -1 with `errno` `EINVAL` otherwise.
    unsafe extern "C" fn ibv_query_pkey(context: *mut ibv_context, port_num: u8, index: c_int, pkey: *mut u16) -> c_int {
        let r = with_ctx(context, Err(libc::EINVAL), |_| {
            if port_num != 1 || index != 0 || pkey.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: the caller passes a writable __be16.
            unsafe { pkey.write(DEFAULT_PKEY.to_be()) };
            Ok(())
        });
        r.map_or_else(|e| { set_errno(e); -1 }, |()| 0)
    }
}

export! { "IBVERBS_1.5";
    /// `int ibv_get_pkey_index(struct ibv_context *, uint8_t port, __be16 pkey)`: 0 for the
    /// default P_Key, -1 with `errno` `EINVAL` otherwise.
    unsafe extern "C" fn ibv_get_pkey_index(context: *mut ibv_context, port_num: u8, pkey: u16) -> c_int {
        let r = with_ctx(context, Err(libc::EINVAL), |_| {
            if port_num == 1 && u16::from_be(pkey) == DEFAULT_PKEY { Ok(0) } else { Err(libc::EINVAL) }
        });
        r.unwrap_or_else(|e| { set_errno(e); -1 })
    }
}
