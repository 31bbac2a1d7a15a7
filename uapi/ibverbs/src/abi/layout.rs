//! The layout test: every struct of [`super`] against the C compiler's view of rdma-core's
//! installed `<infiniband/verbs.h>`.
//!
//! [`table`] lists (C type, field path, offset, size) from `core::mem::offset_of!`; the test
//! writes a C program printing `offsetof`/`sizeof` of the same fields, compiles it with `cc`,
//! runs it and compares line by line. It skips (`softrnic_testkit::skip`) without `cc` or
//! without the libibverbs-dev headers. `crate::rdmacm::layout` does the same for `<rdma/rdma_cma.h>`
//! with the [`layout!`] macro and [`compare_with_headers`].

use core::mem::size_of;
use std::process::Command;

use super::attr::*;
use super::context::*;
use super::ex::*;
use super::objects::*;
use super::qp_attr::*;
use super::wr::*;

/// One line of the comparison: `field` is "-" for the size of the whole type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) c_type: &'static str,
    pub(crate) field: String,
    pub(crate) offset: usize,
    pub(crate) size: usize,
}

/// The size of the field a projection reaches.
pub(crate) fn size_of_field<T, F>(_: impl Fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// `layout!(c_type => RustType { field, nested.field, rust_name as "c_name" })`. A path may go
/// through a union field (the projection is only measured, never read), so the function the
/// table is built in needs `#[allow(unused_unsafe)]`.
macro_rules! layout {
    ($($c:literal => $t:ty { $($($f:ident).+ $(as $cf:literal)?),* $(,)? })*) => {{
        let mut v = Vec::new();
        $(
            v.push($crate::abi::layout::Entry {
                c_type: $c, field: "-".into(), offset: 0, size: core::mem::size_of::<$t>(),
            });
            $(
                #[allow(unused_mut, unused_assignments)]
                let mut name = stringify!($($f).+).replace(' ', "");
                $( name = $cf.to_string(); )?
                v.push($crate::abi::layout::Entry {
                    c_type: $c,
                    field: name,
                    offset: core::mem::offset_of!($t, $($f).+),
                    // SAFETY: a place expression measured, not read.
                    size: $crate::abi::layout::size_of_field(|x: &$t| unsafe { &x.$($f).+ }),
                });
            )*
        )*
        v
    }};
}

pub(crate) use layout;

#[allow(unused_unsafe)]
fn table() -> Vec<Entry> {
    layout! {
        "union ibv_gid" => ibv_gid { raw }
        "struct ibv_gid_entry" => ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        "struct ibv_device_attr" => ibv_device_attr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id,
            vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd,
            max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom,
            max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw,
            max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
            max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr,
            max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt,
        }
        "struct ibv_query_device_ex_input" => ibv_query_device_ex_input { comp_mask }
        "struct ibv_odp_caps" => ibv_odp_caps {
            general_caps, per_transport_caps, per_transport_caps.rc_odp_caps,
            per_transport_caps.uc_odp_caps, per_transport_caps.ud_odp_caps,
        }
        "struct ibv_tso_caps" => ibv_tso_caps { max_tso, supported_qpts }
        "struct ibv_rss_caps" => ibv_rss_caps {
            supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size,
            rx_hash_fields_mask, rx_hash_function,
        }
        "struct ibv_packet_pacing_caps" => ibv_packet_pacing_caps {
            qp_rate_limit_min, qp_rate_limit_max, supported_qpts,
        }
        "struct ibv_tm_caps" => ibv_tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }
        "struct ibv_cq_moderation_caps" => ibv_cq_moderation_caps { max_cq_count, max_cq_period }
        "struct ibv_pci_atomic_caps" => ibv_pci_atomic_caps { fetch_add, swap, compare_swap }
        "struct ibv_device_attr_ex" => ibv_device_attr_ex {
            orig_attr, comp_mask, odp_caps, completion_timestamp_mask, hca_core_clock,
            device_cap_flags_ex, tso_caps, rss_caps, max_wq_type_rq, packet_pacing_caps,
            raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size, pci_atomic_caps, xrc_odp_caps,
            phys_port_cnt_ex,
        }
        "struct ibv_port_attr" => ibv_port_attr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr,
            qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout,
            init_type_reply, active_width, active_speed, phys_state, link_layer, flags,
            port_cap_flags2,
        }
        "struct _ibv_device_ops" => _ibv_device_ops { _dummy1, _dummy2 }
        "struct ibv_device" => ibv_device {
            _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path,
        }
        "struct ibv_context_ops" => ibv_context_ops {
            _compat_query_device, _compat_query_port, _compat_alloc_pd, _compat_dealloc_pd,
            _compat_reg_mr, _compat_rereg_mr, _compat_dereg_mr, alloc_mw, bind_mw, dealloc_mw,
            _compat_create_cq, poll_cq, req_notify_cq, _compat_cq_event, _compat_resize_cq,
            _compat_destroy_cq, _compat_create_srq, _compat_modify_srq, _compat_query_srq,
            _compat_destroy_srq, post_srq_recv, _compat_create_qp, _compat_query_qp,
            _compat_modify_qp, _compat_destroy_qp, post_send, post_recv, _compat_create_ah,
            _compat_destroy_ah, _compat_attach_mcast, _compat_detach_mcast, _compat_async_event,
        }
        "struct ibv_context" => ibv_context {
            device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat,
        }
        "struct verbs_context" => verbs_context {
            query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
            create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm,
            modify_flow_action_esp, destroy_flow_action, create_flow_action_esp,
            modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
            post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
            create_wq, query_rt_values, create_cq_ex, priv_ as "priv", query_device_ex,
            ibv_destroy_flow, ABI_placeholder2, ibv_create_flow, ABI_placeholder1, open_qp,
            create_qp_ex, get_srq_num, create_srq_ex, open_xrcd, close_xrcd, _ABI_placeholder3,
            sz, context,
        }
        "struct ibv_pd" => ibv_pd { context, handle }
        "struct ibv_td" => ibv_td { context }
        "struct ibv_td_init_attr" => ibv_td_init_attr { comp_mask }
        "struct ibv_parent_domain_init_attr" => ibv_parent_domain_init_attr {
            pd, td, comp_mask, alloc, free, pd_context,
        }
        "struct ibv_mr" => ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        "struct ibv_alloc_dm_attr" => ibv_alloc_dm_attr { length, log_align_req, comp_mask }
        "struct ibv_dm" => ibv_dm { context, memcpy_to_dm, memcpy_from_dm, comp_mask, handle }
        "struct ibv_mw" => ibv_mw { context, pd, rkey, handle, type_ as "type" }
        "struct ibv_ah" => ibv_ah { context, pd, handle }
        "struct ibv_comp_channel" => ibv_comp_channel { context, fd, refcnt }
        "struct ibv_cq" => ibv_cq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed,
        }
        "struct ibv_xrcd" => ibv_xrcd { context }
        "struct ibv_xrcd_init_attr" => ibv_xrcd_init_attr { comp_mask, fd, oflags }
        "struct ibv_srq" => ibv_srq {
            context, srq_context, pd, handle, mutex, cond, events_completed,
        }
        "struct ibv_qp" => ibv_qp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type,
            mutex, cond, events_completed,
        }
        "struct ibv_sge" => ibv_sge { addr, length, lkey }
        "struct ibv_mw_bind_info" => ibv_mw_bind_info { mr, addr, length, mw_access_flags }
        "struct ibv_send_wr" => ibv_send_wr {
            wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type, bind_mw,
        }
        "struct ibv_recv_wr" => ibv_recv_wr { wr_id, next, sg_list, num_sge }
        "struct ibv_wc" => ibv_wc {
            wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags,
            pkey_index, slid, sl, dlid_path_bits,
        }
        "struct ibv_mw_bind" => ibv_mw_bind { wr_id, send_flags, bind_info }
        "struct ibv_global_route" => ibv_global_route {
            dgid, flow_label, sgid_index, hop_limit, traffic_class,
        }
        "struct ibv_ah_attr" => ibv_ah_attr {
            grh, dlid, sl, src_path_bits, static_rate, is_global, port_num,
        }
        "struct ibv_qp_cap" => ibv_qp_cap {
            max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data,
        }
        "struct ibv_qp_init_attr" => ibv_qp_init_attr {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all,
        }
        "struct ibv_qp_attr" => ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn,
            dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index,
            en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
            port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, rate_limit,
        }
        "struct ibv_srq_attr" => ibv_srq_attr { max_wr, max_sge, srq_limit }
        "struct ibv_srq_init_attr" => ibv_srq_init_attr { srq_context, attr }
        "struct ibv_async_event" => ibv_async_event { element, event_type }
        "struct ibv_poll_cq_attr" => ibv_poll_cq_attr { comp_mask }
        "struct ibv_cq_ex" => ibv_cq_ex {
            cq.context as "context", cq.channel as "channel", cq.cq_context as "cq_context",
            cq.handle as "handle", cq.cqe as "cqe", cq.mutex as "mutex", cq.cond as "cond",
            cq.comp_events_completed as "comp_events_completed",
            cq.async_events_completed as "async_events_completed",
            ex.comp_mask as "comp_mask", ex.status as "status", ex.wr_id as "wr_id",
            ex.start_poll as "start_poll", ex.next_poll as "next_poll", ex.end_poll as "end_poll",
            ex.read_opcode as "read_opcode", ex.read_vendor_err as "read_vendor_err",
            ex.read_byte_len as "read_byte_len", ex.read_imm_data as "read_imm_data",
            ex.read_qp_num as "read_qp_num", ex.read_src_qp as "read_src_qp",
            ex.read_wc_flags as "read_wc_flags", ex.read_slid as "read_slid",
            ex.read_sl as "read_sl", ex.read_dlid_path_bits as "read_dlid_path_bits",
            ex.read_completion_ts as "read_completion_ts", ex.read_cvlan as "read_cvlan",
            ex.read_flow_tag as "read_flow_tag", ex.read_tm_info as "read_tm_info",
            ex.read_completion_wallclock_ns as "read_completion_wallclock_ns",
        }
        "struct ibv_cq_init_attr_ex" => ibv_cq_init_attr_ex {
            cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain,
        }
        "struct ibv_data_buf" => ibv_data_buf { addr, length }
        "struct ibv_rx_hash_conf" => ibv_rx_hash_conf {
            rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask,
        }
        "struct ibv_qp_init_attr_ex" => ibv_qp_init_attr_ex {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
            create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags,
        }
        "struct ibv_qp_ex" => ibv_qp_ex {
            qp_base, ex.comp_mask as "comp_mask", ex.wr_id as "wr_id", ex.wr_flags as "wr_flags",
            ex.wr_atomic_cmp_swp as "wr_atomic_cmp_swp",
            ex.wr_atomic_fetch_add as "wr_atomic_fetch_add", ex.wr_bind_mw as "wr_bind_mw",
            ex.wr_local_inv as "wr_local_inv", ex.wr_rdma_read as "wr_rdma_read",
            ex.wr_rdma_write as "wr_rdma_write", ex.wr_rdma_write_imm as "wr_rdma_write_imm",
            ex.wr_send as "wr_send", ex.wr_send_imm as "wr_send_imm",
            ex.wr_send_inv as "wr_send_inv", ex.wr_send_tso as "wr_send_tso",
            ex.wr_set_ud_addr as "wr_set_ud_addr", ex.wr_set_xrc_srqn as "wr_set_xrc_srqn",
            ex.wr_set_inline_data as "wr_set_inline_data",
            ex.wr_set_inline_data_list as "wr_set_inline_data_list",
            ex.wr_set_sge as "wr_set_sge", ex.wr_set_sge_list as "wr_set_sge_list",
            ex.wr_start as "wr_start", ex.wr_complete as "wr_complete",
            ex.wr_abort as "wr_abort", ex.wr_atomic_write as "wr_atomic_write",
        }
    }
}

/// The C program printing the compiler's view of every entry, one `type|field|offset|size`
/// line each, after including `headers`.
fn c_program(headers: &[&str], entries: &[Entry]) -> String {
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n");
    for h in headers {
        c.push_str(&format!("#include <{h}>\n"));
    }
    c.push_str("int main(void) {\n");
    for e in entries {
        let (off, size) = if e.field == "-" {
            ("(size_t)0".to_string(), format!("sizeof({})", e.c_type))
        } else {
            (
                format!("offsetof({}, {})", e.c_type, e.field),
                format!("sizeof((({} *)0)->{})", e.c_type, e.field),
            )
        };
        c.push_str(&format!(
            "  printf(\"%s|%s|%zu|%zu\\n\", \"{}\", \"{}\", {off}, {size});\n",
            e.c_type, e.field
        ));
    }
    c.push_str("  return 0;\n}\n");
    c
}

#[test]
fn sizes_known_from_the_issue() {
    assert_eq!(size_of::<verbs_context>(), 648);
    assert_eq!(size_of::<ibv_device_attr>(), 232);
    assert_eq!(COMPAT_PORT_ATTR_SIZE, 48);
}

#[test]
fn structs_match_the_installed_verbs_h() {
    compare_with_headers(
        "structs_match_the_installed_verbs_h",
        &["infiniband/verbs.h"],
        "libibverbs-dev",
        &table(),
    );
}

/// The test `test`: `entries` against the C compiler's view of `headers` (under
/// `/usr/include`, from the Debian package `package`); skips (`softrnic_testkit::skip`) if a
/// header or `cc` is missing.
pub(crate) fn compare_with_headers(test: &str, headers: &[&str], package: &str, entries: &[Entry]) {
    for h in headers {
        let header = std::path::Path::new("/usr/include").join(h);
        if !header.exists() {
            let reason = format!("no {} (apt-get install {package})", header.display());
            softrnic_testkit::skip(test, &reason);
            return;
        }
    }
    let dir = std::env::temp_dir().join(format!("softrnic-layout-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c_program(headers, entries)).expect("writing layout.c");
    let cc = match Command::new("cc").arg("-o").arg(&exe).arg(&src).output() {
        Ok(out) => out,
        Err(e) => {
            softrnic_testkit::skip(test, &format!("cannot run cc: {e}"));
            return;
        }
    };
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe)
        .output()
        .expect("running the layout program");
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).expect("ASCII output");
    let c: Vec<Entry> = text
        .lines()
        .zip(entries)
        .map(|(line, e)| {
            let parts: Vec<&str> = line.split('|').collect();
            Entry {
                c_type: e.c_type,
                field: parts[1].to_string(),
                offset: parts[2].parse().expect("offset"),
                size: parts[3].parse().expect("size"),
            }
        })
        .collect();
    assert_eq!(c.len(), entries.len());
    let wrong: Vec<String> = entries
        .iter()
        .zip(&c)
        .filter(|(r, c)| *r != *c)
        .map(|(r, c)| {
            format!(
                "{} {}: Rust offset {} size {}, C offset {} size {}",
                r.c_type, r.field, r.offset, r.size, c.offset, c.size
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "layout differs from {}:\n{}",
        headers.join(", "),
        wrong.join("\n")
    );
    eprintln!(
        "{} fields of {} types match {}",
        entries.len(),
        entries.iter().filter(|e| e.field == "-").count(),
        headers.join(", ")
    );
}
