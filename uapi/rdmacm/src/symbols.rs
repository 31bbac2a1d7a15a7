// The `rdma_*` functions of rdma-core 44's `librdmacm.so.1` that softrnic implements inside its
// `libibverbs.so.1`, as `softrnic_<name>@@SOFTRNIC_RDMACM_PRIVATE`: each with the version node
// the real library exports it under and its C signature (`<rdma/rdma_cma.h>`, and
// `<rdma/rdma_verbs.h>` for the SRQ calls), in the type names of the C headers.
//
// This is the one list of those signatures. It is `include!`d, after each defines the macro
// `rdmacm_functions!` its own way, by
// * the shim, `uapi/rdmacm/src/forward.rs`: one forwarder per line, exported as `name@@version`
//   (there the struct names are opaque aliases of `c_void`: the shim only passes pointers on);
// * the implementation, `uapi/ibverbs/src/rdmacm/signatures.rs`: a compile-time check that each
//   implementation has exactly this signature, with the real `#[repr(C)]` structs;
// * the tests: `uapi/rdmacm/tests/signatures.rs` compiles each line as a C redeclaration against
//   the installed headers, and `uapi/ibverbs/tests/symbols.rs` checks that the built
//   `libibverbs.so.1` exports every `softrnic_<name>` the shim looks up.
//
// Type names: `c_int`, `c_char`, `c_void`, `u8`, `u16` (`__be16`), `usize` (`size_t`),
// `sockaddr`, the enums `rdma_port_space`, `rdma_cm_event_type` and `ibv_event_type`, and the
// structs of the headers by their C names. The rsocket family (`rsocket` ... `riomap`, also
// RDMACM_1.0) is not here: the shim implements it itself (`uapi/rdmacm/src/rsocket.rs`).

rdmacm_functions! {
    // Event channels and events.
    "RDMACM_1.0" fn rdma_create_event_channel() -> *mut rdma_event_channel;
    "RDMACM_1.0" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel);
    "RDMACM_1.0" fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int;
    "RDMACM_1.0" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int;
    "RDMACM_1.0" fn rdma_event_str(event: rdma_cm_event_type) -> *const c_char;

    // Identifiers, addresses and routes.
    "RDMACM_1.0" fn rdma_create_id(channel: *mut rdma_event_channel, id: *mut *mut rdma_cm_id, context: *mut c_void, ps: rdma_port_space) -> c_int;
    "RDMACM_1.0" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int;
    "RDMACM_1.0" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int;
    "RDMACM_1.0" fn rdma_set_option(id: *mut rdma_cm_id, level: c_int, optname: c_int, optval: *mut c_void, optlen: usize) -> c_int;
    "RDMACM_1.0" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int;
    "RDMACM_1.0" fn rdma_resolve_addr(id: *mut rdma_cm_id, src_addr: *mut sockaddr, dst_addr: *mut sockaddr, timeout_ms: c_int) -> c_int;
    "RDMACM_1.0" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int;
    "RDMACM_1.0" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16;
    "RDMACM_1.0" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16;

    // Connections.
    "RDMACM_1.0" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int;
    "RDMACM_1.0" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int;
    "RDMACM_1.0" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int;
    "RDMACM_1.0" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int;
    "RDMACM_1.0" fn rdma_reject(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int;
    "RDMACM_1.0" fn rdma_notify(id: *mut rdma_cm_id, event: ibv_event_type) -> c_int;
    "RDMACM_1.0" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int;
    "RDMACM_1.2" fn rdma_establish(id: *mut rdma_cm_id) -> c_int;
    "RDMACM_1.3" fn rdma_reject_ece(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int;

    // Enhanced connection establishment (ECE).
    "RDMACM_1.3" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int;
    "RDMACM_1.3" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int;

    // QPs and SRQs on an identifier.
    "RDMACM_1.0" fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int;
    "RDMACM_1.0" fn rdma_create_qp_ex(id: *mut rdma_cm_id, qp_init_attr: *mut ibv_qp_init_attr_ex) -> c_int;
    "RDMACM_1.0" fn rdma_destroy_qp(id: *mut rdma_cm_id);
    "RDMACM_1.2" fn rdma_init_qp_attr(id: *mut rdma_cm_id, qp_attr: *mut ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int;
    "RDMACM_1.0" fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int;
    "RDMACM_1.0" fn rdma_create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> c_int;
    "RDMACM_1.0" fn rdma_destroy_srq(id: *mut rdma_cm_id);

    // Endpoints: an identifier, its address or listen, and its QP in one call.
    "RDMACM_1.0" fn rdma_create_ep(id: *mut *mut rdma_cm_id, res: *mut rdma_addrinfo, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int;
    "RDMACM_1.0" fn rdma_destroy_ep(id: *mut rdma_cm_id);

    // Multicast.
    "RDMACM_1.0" fn rdma_join_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr, context: *mut c_void) -> c_int;
    "RDMACM_1.1" fn rdma_join_multicast_ex(id: *mut rdma_cm_id, mc_join_attr: *mut rdma_cm_join_mc_attr_ex, context: *mut c_void) -> c_int;
    "RDMACM_1.0" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int;

    // Address translation.
    "RDMACM_1.0" fn rdma_getaddrinfo(node: *const c_char, service: *const c_char, hints: *const rdma_addrinfo, res: *mut *mut rdma_addrinfo) -> c_int;
    "RDMACM_1.0" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo);

    // Devices.
    "RDMACM_1.0" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context;
    "RDMACM_1.0" fn rdma_free_devices(list: *mut *mut ibv_context);
}
