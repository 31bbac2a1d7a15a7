//! The layout test of [`super::abi`]: every struct against the C compiler's view of the
//! installed `<rdma/rdma_cma.h>` (with `<infiniband/ib.h>` for `sockaddr_ib`), in the way of
//! `crate::abi::layout`. Skips (`softrnic_testkit::skip`) without `cc` or without the
//! librdmacm-dev headers.

use super::abi::*;
use crate::abi::layout::{compare_with_headers, layout, Entry};

#[allow(unused_unsafe)]
fn table() -> Vec<Entry> {
    layout! {
        "struct rdma_ib_addr" => rdma_ib_addr { sgid, dgid, pkey }
        "struct rdma_addr" => rdma_addr {
            src_addr.addr as "src_addr", src_addr.sin as "src_sin", src_addr.sin6 as "src_sin6",
            src_addr.storage as "src_storage", dst_addr.addr as "dst_addr",
            dst_addr.sin as "dst_sin", dst_addr.sin6 as "dst_sin6",
            dst_addr.storage as "dst_storage", addr, addr.ibaddr,
        }
        "struct rdma_route" => rdma_route { addr, path_rec, num_paths }
        "struct rdma_event_channel" => rdma_event_channel { fd }
        "struct rdma_cm_id" => rdma_cm_id {
            verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq,
            recv_cq_channel, recv_cq, srq, pd, qp_type,
        }
        "struct rdma_conn_param" => rdma_conn_param {
            private_data, private_data_len, responder_resources, initiator_depth, flow_control,
            retry_count, rnr_retry_count, srq, qp_num,
        }
        "struct rdma_ud_param" => rdma_ud_param {
            private_data, private_data_len, ah_attr, qp_num, qkey,
        }
        "struct rdma_cm_event" => rdma_cm_event {
            id, listen_id, event, status, param, param.conn, param.ud,
        }
        "struct rdma_addrinfo" => rdma_addrinfo {
            ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len, ai_src_addr,
            ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route,
            ai_connect_len, ai_connect, ai_next,
        }
        "struct rdma_cm_join_mc_attr_ex" => rdma_cm_join_mc_attr_ex { comp_mask, join_flags, addr }
        "struct ibv_ece" => ibv_ece { vendor_id, options, comp_mask }
        "struct ibv_tm_cap" => ibv_tm_cap { max_num_tags, max_ops }
        "struct ibv_srq_init_attr_ex" => ibv_srq_init_attr_ex {
            srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap,
        }
        "struct ibv_sa_path_rec" => ibv_sa_path_rec {
            dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class,
            reversible, numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate,
            packet_life_time_selector, packet_life_time, preference,
        }
        "struct ib_addr" => ib_addr { ib_u }
        "struct sockaddr_ib" => sockaddr_ib {
            sib_family, sib_pkey, sib_flowinfo, sib_addr, sib_sid, sib_sid_mask, sib_scope_id,
        }
    }
}

#[test]
fn sizes_known_from_the_notes() {
    // rdma-core 44 on x86-64 (shared/notes/rdma-cm.md).
    assert_eq!(size_of::<rdma_cm_id>(), 416);
    assert_eq!(size_of::<rdma_route>(), 312);
    assert_eq!(size_of::<rdma_conn_param>(), 24);
    assert_eq!(size_of::<rdma_ud_param>(), 56);
    assert_eq!(size_of::<rdma_cm_event>(), 80);
    assert_eq!(size_of::<rdma_addrinfo>(), 96);
    assert_eq!(core::mem::offset_of!(rdma_cm_id, qp_type), 408);
}

#[test]
fn structs_match_the_installed_rdma_cma_h() {
    compare_with_headers(
        "structs_match_the_installed_rdma_cma_h",
        &["rdma/rdma_cma.h", "infiniband/ib.h"],
        "librdmacm-dev",
        &table(),
    );
}
