//! The `ibv_qp_ex` builder on UD and UC QPs, and `ibv_create_qp_ex`'s creation flags, from a C
//! program compiled against the installed verbs.h.
//!
//! Creation: a UD builder takes SEND and SEND_WITH_IMM only, a UC builder SEND and RDMA WRITE
//! (with or without immediate) only; more is `EOPNOTSUPP`, as is a builder on another QP type.
//! `IBV_QP_INIT_ATTR_CREATE_FLAGS` with no flag is taken, with a flag (or a TSO header) it is
//! `EOPNOTSUPP`.
//!
//! UD: one batch of SEND (an SGE), SEND_WITH_IMM (inline data) and a zero-length SEND, each
//! addressed with `ibv_wr_set_ud_addr` to the QP itself, arrives (GRH, `src_qp`, immediate,
//! payload bytes); a WR without `wr_set_ud_addr`, one addressed with a pointer that is not an
//! AH, or an opcode the QP was not created with makes `ibv_wr_complete` fail and post nothing;
//! `wr_set_ud_addr` on an RC builder is `EOPNOTSUPP`; `wr_complete` on a QP in RESET is
//! `EINVAL`.
//!
//! UC: a QP connected to itself RDMA WRITEs with immediate and SENDs through the builder
//! (memory and completions checked).

mod common;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

#define QKEY 0x11111111

static struct ibv_wc *find(struct ibv_wc *wc, int n, uint64_t wr_id)
{
    for (int i = 0; i < n; i++)
        if (wc[i].wr_id == wr_id)
            return &wc[i];
    return NULL;
}

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, char *at, uint32_t len, uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)at, .length = len, .lkey = mr->lkey };
    struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
    return ibv_post_recv(qp, &wr, &bad);
}

/* An extended QP of `type` with `mask` and `ops` (NULL with errno on failure). */
static struct ibv_qp *create(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
                             enum ibv_qp_type type, uint32_t mask, uint64_t ops, uint32_t flags)
{
    struct ibv_qp_init_attr_ex a = {
        .send_cq = cq, .recv_cq = cq, .qp_type = type,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1,
                 .max_inline_data = 64 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | mask, .pd = pd, .send_ops_flags = ops,
        .create_flags = flags, .max_tso_header = (mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) ? 64 : 0,
    };
    errno = 0;
    return ibv_create_qp_ex(ctx, &a);
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 16384, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                       &buf, &mr);
    struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
    CHECK(cq, 14);
    const uint32_t OPS = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    const uint32_t FLAGS = IBV_QP_INIT_ATTR_CREATE_FLAGS;

    /* What each QP type's builder may be created with. */
    CHECK(!create(ctx, pd, cq, IBV_QPT_UD, OPS, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE, 0)
          && errno == EOPNOTSUPP, 30);
    CHECK(!create(ctx, pd, cq, IBV_QPT_UC, OPS, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ, 0)
          && errno == EOPNOTSUPP, 31);
    CHECK(!create(ctx, pd, cq, IBV_QPT_UC, OPS, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, 0)
          && errno == EOPNOTSUPP, 32);
    CHECK(!create(ctx, pd, cq, IBV_QPT_UC, OPS, IBV_QP_EX_WITH_SEND_WITH_INV, 0)
          && errno == EOPNOTSUPP, 33);
    CHECK(!create(ctx, pd, cq, IBV_QPT_RAW_PACKET, OPS, IBV_QP_EX_WITH_SEND, 0)
          && errno == EOPNOTSUPP, 34);
    /* Creation flags: none is no request; one softrnic cannot honour is refused. */
    CHECK(!create(ctx, pd, cq, IBV_QPT_UD, FLAGS, 0, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)
          && errno == EOPNOTSUPP, 35);
    CHECK(!create(ctx, pd, cq, IBV_QPT_RC, IBV_QP_INIT_ATTR_MAX_TSO_HEADER, 0, 0)
          && errno == EOPNOTSUPP, 36);
    struct ibv_qp *plain = create(ctx, pd, cq, IBV_QPT_RC, FLAGS, 0, 0);
    CHECK(plain && !ibv_qp_to_qp_ex(plain) && ibv_destroy_qp(plain) == 0, 37);
    struct ibv_qp *rc = create(ctx, pd, cq, IBV_QPT_RC, FLAGS | OPS, IBV_QP_EX_WITH_SEND, 0);
    CHECK(rc && ibv_qp_to_qp_ex(rc), 38);

    /* UD: SEND and SEND_WITH_IMM to the QP itself. */
    struct ibv_qp *ud = create(ctx, pd, cq, IBV_QPT_UD, OPS,
                               IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM, 0);
    CHECK(ud, 40);
    struct ibv_qp_ex *udx = ibv_qp_to_qp_ex(ud);
    CHECK(udx, 41);
    struct ibv_qp_attr attr;
    ud_to_rts(ud, &attr, QKEY, 1, 42);
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, 45);
    struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1,
                                   .grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 1 } };
    struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
    CHECK(ah, 46);

    for (int i = 0; i < 3; i++)
        CHECK(post_recv(ud, mr, buf + 4096 + i * 1024, 1024, 50 + i) == 0, 47);
    memcpy(buf, "a datagram through the builder, sixty-four bytes long at most...", 64);
    ibv_wr_start(udx);
    udx->wr_id = 1;
    udx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(udx);
    ibv_wr_set_ud_addr(udx, ah, ud->qp_num, QKEY);
    ibv_wr_set_sge(udx, mr->lkey, (uintptr_t)buf, 64);
    udx->wr_id = 2;
    ibv_wr_send_imm(udx, htonl(0xfeedbeef));
    ibv_wr_set_ud_addr(udx, ah, ud->qp_num, 0x80000000); /* high bit: the QP's own Q_Key */
    ibv_wr_set_inline_data(udx, "inline datagram", 15);
    udx->wr_id = 3;
    ibv_wr_send(udx);
    ibv_wr_set_ud_addr(udx, ah, ud->qp_num, QKEY);
    ibv_wr_set_sge(udx, mr->lkey, (uintptr_t)buf, 0);
    CHECK(ibv_wr_complete(udx) == 0, 48);
    struct ibv_wc wc[8];
    CHECK(poll_n(cq, 6, wc) == 6, 49);
    for (int i = 0; i < 6; i++)
        CHECK(wc[i].status == IBV_WC_SUCCESS, 50);
    CHECK(find(wc, 6, 1) && find(wc, 6, 1)->opcode == IBV_WC_SEND, 51);
    CHECK(find(wc, 6, 2) && find(wc, 6, 3), 52);
    struct ibv_wc *r0 = find(wc, 6, 50), *r1 = find(wc, 6, 51), *r2 = find(wc, 6, 52);
    CHECK(r0 && r1 && r2, 53);
    CHECK(r0->opcode == IBV_WC_RECV && r0->byte_len == 40 + 64 && (r0->wc_flags & IBV_WC_GRH)
          && !(r0->wc_flags & IBV_WC_WITH_IMM) && r0->src_qp == ud->qp_num, 54);
    CHECK(memcmp(buf + 4096 + 40, buf, 64) == 0, 55);
    CHECK(r1->byte_len == 40 + 15 && (r1->wc_flags & IBV_WC_WITH_IMM)
          && ntohl(r1->imm_data) == 0xfeedbeef, 56);
    CHECK(memcmp(buf + 5120 + 40, "inline datagram", 15) == 0, 57);
    CHECK(r2->byte_len == 40 && r2->src_qp == ud->qp_num, 58);

    /* Failed batches post nothing: no address, a pointer that is no AH, an op not created. */
    ibv_wr_start(udx);
    ibv_wr_send(udx);
    ibv_wr_set_sge(udx, mr->lkey, (uintptr_t)buf, 8);
    CHECK(ibv_wr_complete(udx) == EINVAL, 60);
    ibv_wr_start(udx);
    ibv_wr_send(udx);
    ibv_wr_set_ud_addr(udx, (struct ibv_ah *)buf, ud->qp_num, QKEY);
    ibv_wr_set_sge(udx, mr->lkey, (uintptr_t)buf, 8);
    CHECK(ibv_wr_complete(udx) == EINVAL, 61);
    ibv_wr_start(udx);
    ibv_wr_send(udx);
    ibv_wr_set_ud_addr(udx, ah, ud->qp_num, QKEY);
    ibv_wr_rdma_write(udx, mr->rkey, (uintptr_t)buf);
    CHECK(ibv_wr_complete(udx) == EOPNOTSUPP, 62);
    struct ibv_qp_ex *rcx = ibv_qp_to_qp_ex(rc);
    ibv_wr_start(rcx);
    ibv_wr_send(rcx);
    ibv_wr_set_ud_addr(rcx, ah, ud->qp_num, QKEY);
    CHECK(ibv_wr_complete(rcx) == EOPNOTSUPP, 63);
    CHECK(ibv_poll_cq(cq, 1, wc) == 0, 64);

    /* A QP in RESET takes no send. */
    attr.qp_state = IBV_QPS_RESET;
    CHECK(ibv_modify_qp(ud, &attr, IBV_QP_STATE) == 0, 65);
    ibv_wr_start(udx);
    ibv_wr_send(udx);
    ibv_wr_set_ud_addr(udx, ah, ud->qp_num, QKEY);
    ibv_wr_set_sge(udx, mr->lkey, (uintptr_t)buf, 8);
    CHECK(ibv_wr_complete(udx) == EINVAL, 66);
    CHECK(ibv_destroy_ah(ah) == 0 && ibv_destroy_qp(ud) == 0 && ibv_destroy_qp(rc) == 0, 67);

    /* UC: RDMA WRITE with immediate and SEND on a QP connected to itself. */
    struct ibv_qp *uc = create(ctx, pd, cq, IBV_QPT_UC, OPS,
                               IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND, 0);
    CHECK(uc, 70);
    struct ibv_qp_ex *ucx = ibv_qp_to_qp_ex(uc);
    CHECK(ucx, 71);
    CHECK(modify_to_init(uc, &attr, IBV_ACCESS_REMOTE_WRITE) == 0, 72);
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = uc->qp_num;
    attr.rq_psn = 1;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = 1;
    attr.ah_attr.grh.hop_limit = 1;
    attr.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(uc, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) == 0, 73);
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 1;
    CHECK(ibv_modify_qp(uc, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, 74);
    CHECK(post_recv(uc, mr, buf + 8192, 1024, 80) == 0 &&
          post_recv(uc, mr, buf + 9216, 1024, 81) == 0, 75);
    ibv_wr_start(ucx);
    ucx->wr_id = 10;
    ucx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write_imm(ucx, mr->rkey, (uintptr_t)(buf + 12288), htonl(7));
    ibv_wr_set_sge(ucx, mr->lkey, (uintptr_t)buf, 32);
    ucx->wr_id = 11;
    ibv_wr_send(ucx);
    ibv_wr_set_inline_data(ucx, "unreliable", 10);
    CHECK(ibv_wr_complete(ucx) == 0, 76);
    CHECK(poll_n(cq, 4, wc) == 4, 77);
    for (int i = 0; i < 4; i++)
        CHECK(wc[i].status == IBV_WC_SUCCESS, 78);
    struct ibv_wc *w = find(wc, 4, 80), *s = find(wc, 4, 81);
    CHECK(find(wc, 4, 10) && find(wc, 4, 11) && w && s, 79);
    CHECK(w->opcode == IBV_WC_RECV_RDMA_WITH_IMM && ntohl(w->imm_data) == 7 &&
          memcmp(buf + 12288, buf, 32) == 0, 82);
    CHECK(s->opcode == IBV_WC_RECV && s->byte_len == 10 && memcmp(buf + 9216, "unreliable", 10) == 0, 83);
    CHECK(ibv_destroy_qp(uc) == 0, 84);

    CHECK(ibv_destroy_cq(cq) == 0, 90);
    close_mr_and_device(list, ctx, pd, mr, 91);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn qp_ex_on_ud_and_uc_from_c() {
    let Some(exe) = common::compile_c("qp_ex_ud_uc", PROGRAM, "qp_ex_on_ud_and_uc_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.64.10"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
