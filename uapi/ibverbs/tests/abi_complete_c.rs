//! The verbs rdma-core 44 exports that pyverbs needs and nothing else here exercises, through
//! the C ABI from a C program compiled against the installed verbs.h:
//!
//! * `ibv_query_gid_table`: the whole table, and `-EINVAL` for a buffer too small (rdma-core's
//!   `test_query_gid_table_bad_flow`);
//! * `ibv_init_ah_from_wc` on a real UD receive to the QP itself: the address vector back to
//!   the sender (its GID, the GID index of this device's address, the GRH's TTL and TOS), and
//!   `ibv_create_ah` from it reaches the sender again;
//! * `ibv_resolve_eth_l2_from_gid`: the device's own loopback address resolves to loopback's
//!   all-zero MAC and no VLAN, an IPv4 multicast group to its encoded MAC, a bad GID index
//!   fails;
//! * the fork ranges succeed and fork is `IBV_FORK_UNNEEDED`; `ibv_reg_dmabuf_mr` says
//!   `EOPNOTSUPP` (the imports: `import.rs`);
//!   `ibv_query_qp_data_in_order` says 0; a rate conversion.

mod common;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"
#define QKEY 0x11111111

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, char *at, uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)at, .length = 1024, .lkey = mr->lkey };
    struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
    return ibv_post_recv(qp, &wr, &bad);
}

static int send_to(struct ibv_qp *qp, struct ibv_ah *ah, struct ibv_mr *mr, char *src, uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = mr->lkey };
    struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
                              .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qp->qp_num;
    wr.wr.ud.remote_qkey = QKEY;
    return ibv_post_send(qp, &wr, &bad);
}

/* The receive completion among the next two (the other is the send's), or NULL. */
static struct ibv_wc *exchange(struct ibv_cq *cq, struct ibv_wc wc[2])
{
    int got = 0;
    for (long i = 0; i < 200000000 && got < 2; i++)
        got += ibv_poll_cq(cq, 2 - got, wc + got);
    if (got != 2 || wc[0].status != IBV_WC_SUCCESS || wc[1].status != IBV_WC_SUCCESS)
        return NULL;
    return wc[0].opcode == IBV_WC_RECV ? &wc[0] : &wc[1];
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 8192, IBV_ACCESS_LOCAL_WRITE, &buf, &mr);

    /* The GID table: whole, then into too small a buffer. */
    struct ibv_port_attr port;
    CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.gid_tbl_len >= 2, 20);
    struct ibv_gid_entry *entries = calloc(port.gid_tbl_len, sizeof *entries);
    ssize_t n = ibv_query_gid_table(ctx, entries, port.gid_tbl_len, 0);
    CHECK(n >= 2 && entries[1].gid_index == 1 && entries[1].gid_type == IBV_GID_TYPE_ROCE_V2, 21);
    CHECK(ibv_query_gid_table(ctx, entries, n - 1, 0) == -EINVAL, 22);
    CHECK(ibv_query_gid_table(ctx, entries, 0, 0) == -EINVAL, 23);
    union ibv_gid gid = entries[1].gid;
    free(entries);

    /* A UD QP sending to itself; the address back from the receive's GRH. */
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 30);
    struct ibv_qp *qp = ud_qp_in_rts(pd, cq, QKEY);
    CHECK(ibv_query_qp_data_in_order(qp, IBV_WR_SEND, 0) == 0, 35);
    CHECK(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0) == 0, 36);

    struct ibv_ah_attr to_self = { .is_global = 1, .port_num = 1,
                                   .grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 64 } };
    struct ibv_ah *ah = ibv_create_ah(pd, &to_self);
    CHECK(ah, 40);
    CHECK(post_recv(qp, mr, buf + 4096, 50) == 0 && send_to(qp, ah, mr, buf, 1) == 0, 41);
    struct ibv_wc wc[2];
    struct ibv_wc *recv = exchange(cq, wc);
    CHECK(recv && (recv->wc_flags & IBV_WC_GRH), 42);
    unsigned char *grh = (unsigned char *)buf + 4096;
    struct ibv_ah_attr back;
    memset(&back, 0xa5, sizeof back);
    CHECK(ibv_init_ah_from_wc(ctx, 1, recv, (struct ibv_grh *)grh, &back) == 0, 43);
    CHECK(back.is_global == 1 && back.port_num == 1 && back.grh.sgid_index == 1, 44);
    CHECK(memcmp(back.grh.dgid.raw, gid.raw, 16) == 0, 45);
    CHECK(back.grh.hop_limit == grh[28] && back.grh.traffic_class == grh[21], 46);
    CHECK(back.dlid == recv->slid && back.sl == recv->sl, 47);
    CHECK(ibv_init_ah_from_wc(ctx, 2, recv, (struct ibv_grh *)grh, &back) == -1 &&
          errno == EINVAL, 48);
    CHECK(ibv_init_ah_from_wc(ctx, 1, recv, (struct ibv_grh *)grh, &back) == 0, 49);
    struct ibv_ah *reply = ibv_create_ah(pd, &back);
    CHECK(reply, 50);
    CHECK(post_recv(qp, mr, buf + 4096, 51) == 0 && send_to(qp, reply, mr, buf, 2) == 0, 51);
    recv = exchange(cq, wc);
    CHECK(recv && recv->wr_id == 51 && recv->byte_len == 40 + 64, 52);

    /* Layer 2 behind GIDs. */
    uint8_t mac[6];
    memset(mac, 0xa5, sizeof mac);
    uint16_t vid = 0;
    CHECK(ibv_resolve_eth_l2_from_gid(ctx, &to_self, mac, &vid) == 0, 60);
    CHECK(memcmp(mac, "\0\0\0\0\0\0", 6) == 0 && vid == 0xffff, 61);
    struct ibv_ah_attr group = to_self;
    memset(group.grh.dgid.raw, 0, 16);
    memcpy(group.grh.dgid.raw + 10, "\xff\xff\xe0\x00\x00\xfb", 6); /* ::ffff:224.0.0.251 */
    CHECK(ibv_resolve_eth_l2_from_gid(ctx, &group, mac, NULL) == 0, 62);
    CHECK(memcmp(mac, "\x01\x00\x5e\x00\x00\xfb", 6) == 0, 63);
    struct ibv_ah_attr bad = to_self;
    bad.grh.sgid_index = 200;
    CHECK(ibv_resolve_eth_l2_from_gid(ctx, &bad, mac, &vid) == -1, 64);

    /* Fork, dma-buf, rates. */
    CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, 70);
    CHECK(ibv_dontfork_range(buf, 8192) == 0 && ibv_dofork_range(buf, 8192) == 0, 71);
    errno = 0;
    CHECK(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 0, IBV_ACCESS_LOCAL_WRITE) == NULL &&
          errno == EOPNOTSUPP, 76);
    CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 &&
          mbps_to_ibv_rate(103125) == IBV_RATE_100_GBPS, 77);
    CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && mult_to_ibv_rate(4) == IBV_RATE_10_GBPS, 78);

    CHECK(ibv_destroy_ah(reply) == 0 && ibv_destroy_ah(ah) == 0, 80);
    CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0, 81);
    close_mr_and_device(list, ctx, pd, mr, 82);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn the_remaining_verbs_through_the_c_abi() {
    let Some(exe) = common::compile_c(
        "abi_complete_c",
        PROGRAM,
        "the_remaining_verbs_through_the_c_abi",
    ) else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.59.4"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
