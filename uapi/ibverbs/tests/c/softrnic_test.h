/* What the C test programs of uapi/ibverbs/tests share: the CHECK macro (print the failed
 * condition and errno, return the given exit code), opening the only device, a PD with a
 * registered buffer, closing them again, polling one completion with a bound, and an RC QP
 * brought to RTS connected to itself through its device's GID 1 (at once or step by step, or
 * made so with one SGE per WR), and a UD QP in RTS. */
#ifndef SOFTRNIC_TEST_H
#define SOFTRNIC_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(cond, code) do { if (!(cond)) { fprintf(stderr, "failed: %s (errno %d)\n", #cond, errno); return code; } } while (0)

/* One completion (or 0 after a long while, so that a lost one fails the test, not hangs it). */
static inline int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
    for (long i = 0; i < 200000000; i++) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n != 0)
            return n;
    }
    return 0;
}

/* `n` completions into `wc` (fewer after a long while): how many came. */
static inline int poll_n(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    int got = 0;
    for (long i = 0; i < 200000000 && got < n; i++)
        got += ibv_poll_cq(cq, n - got, wc + got);
    return got;
}

/* CHECK for the helpers below, which return no exit code: exits with `code` instead. */
#define REQUIRE(cond, code) do { if (!(cond)) { fprintf(stderr, "failed: %s (errno %d)\n", #cond, errno); exit(code); } } while (0)

/* The device list, which must hold exactly one device (else exit 10), and that device opened
 * (else exit 11). */
static inline struct ibv_context *open_only_device(struct ibv_device ***list_out)
{
    int n = -1;
    struct ibv_device **list = ibv_get_device_list(&n);
    REQUIRE(list && n == 1, 10);
    struct ibv_context *ctx = ibv_open_device(list[0]);
    REQUIRE(ctx, 11);
    *list_out = list;
    return ctx;
}

/* A PD on `ctx` (else exit 12) and `len` zeroed page-aligned bytes in `*buf_out`, registered
 * in it with `access` as `*mr_out` (else exit 13). */
static inline struct ibv_pd *pd_with_buffer(struct ibv_context *ctx, size_t len, int access,
                                            char **buf_out, struct ibv_mr **mr_out)
{
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    REQUIRE(pd, 12);
    char *buf = aligned_alloc(4096, len);
    memset(buf, 0, len);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);
    REQUIRE(mr, 13);
    *buf_out = buf;
    *mr_out = mr;
    return pd;
}

/* Deallocates `pd` (else exit `code`), closes `ctx` (else exit `code` + 1), frees `list`. */
static inline void close_device(struct ibv_device **list, struct ibv_context *ctx,
                                struct ibv_pd *pd, int code)
{
    REQUIRE(ibv_dealloc_pd(pd) == 0, code);
    REQUIRE(ibv_close_device(ctx) == 0, code + 1);
    ibv_free_device_list(list);
}

/* Deregisters `mr` (else exit `code`), then close_device from `code` + 1. */
static inline void close_mr_and_device(struct ibv_device **list, struct ibv_context *ctx,
                                       struct ibv_pd *pd, struct ibv_mr *mr, int code)
{
    REQUIRE(ibv_dereg_mr(mr) == 0, code);
    close_device(list, ctx, pd, code + 1);
}

/* RESET -> INIT on port 1 with `access` for the peer, through `attr`: ibv_modify_qp's result. */
static inline int modify_to_init(struct ibv_qp *qp, struct ibv_qp_attr *attr, int access)
{
    *attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
                                  .qp_access_flags = access };
    return ibv_modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                         IBV_QP_ACCESS_FLAGS);
}

/* The UD QP `qp` from RESET to INIT (port 1, P_Key index 0, Q_Key `qkey`), RTR and RTS
 * (first PSN `sq_psn`), through `attr`; exits `code`, `code` + 1 or `code` + 2 when the
 * first, second or third modify fails. A UD QP needs no peer. */
static inline void ud_to_rts(struct ibv_qp *qp, struct ibv_qp_attr *attr, uint32_t qkey,
                             uint32_t sq_psn, int code)
{
    *attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                                  .qkey = qkey };
    REQUIRE(ibv_modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                          IBV_QP_QKEY) == 0, code);
    attr->qp_state = IBV_QPS_RTR;
    REQUIRE(ibv_modify_qp(qp, attr, IBV_QP_STATE) == 0, code + 1);
    attr->qp_state = IBV_QPS_RTS;
    attr->sq_psn = sq_psn;
    REQUIRE(ibv_modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, code + 2);
}

/* A UD QP on `pd` whose queues complete on `cq` (4 WRs of one SGE each way), brought to
 * RTS with Q_Key `qkey` (a UD QP needs no peer); exits 20-23 when a step fails. */
static inline struct ibv_qp *ud_qp_in_rts(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qkey)
{
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    REQUIRE(qp, 20);
    struct ibv_qp_attr attr;
    ud_to_rts(qp, &attr, qkey, 0, 21);
    return qp;
}

/* INIT -> RTR towards QP `dest_qpn` at `gid` (GID index 1, MTU 1024, PSN 1), through `attr`
 * (cleared first): ibv_modify_qp's result. */
static inline int modify_to_rtr(struct ibv_qp *qp, struct ibv_qp_attr *attr, union ibv_gid gid,
                                uint32_t dest_qpn)
{
    memset(attr, 0, sizeof *attr);
    attr->qp_state = IBV_QPS_RTR;
    attr->path_mtu = IBV_MTU_1024;
    attr->dest_qp_num = dest_qpn;
    attr->rq_psn = 1;
    attr->max_dest_rd_atomic = 1;
    attr->min_rnr_timer = 12;
    attr->ah_attr.is_global = 1;
    attr->ah_attr.grh.dgid = gid;
    attr->ah_attr.grh.sgid_index = 1;
    attr->ah_attr.grh.hop_limit = 1;
    attr->ah_attr.port_num = 1;
    return ibv_modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

/* INIT -> RTR towards the QP itself at `gid`: modify_to_rtr's result. */
static inline int modify_to_rtr_self(struct ibv_qp *qp, struct ibv_qp_attr *attr, union ibv_gid gid)
{
    return modify_to_rtr(qp, attr, gid, qp->qp_num);
}

/* RTR -> RTS (timeout 14, retries 7, PSN 1), through `attr` as RTR left it: ibv_modify_qp's
 * result. */
static inline int modify_to_rts(struct ibv_qp *qp, struct ibv_qp_attr *attr)
{
    attr->qp_state = IBV_QPS_RTS;
    attr->timeout = 14;
    attr->retry_cnt = 7;
    attr->rnr_retry = 7;
    attr->sq_psn = 1;
    attr->max_rd_atomic = 1;
    return ibv_modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* RESET -> INIT (with `access` for the peer) -> RTR -> RTS, the peer being QP `dest_qpn` of
 * the same device: 0, or the step that failed (1 INIT, 2 GID, 3 RTR, 4 RTS). */
static inline int connect_on_device(struct ibv_context *ctx, struct ibv_qp *qp, int access,
                                    uint32_t dest_qpn)
{
    struct ibv_qp_attr attr;
    if (modify_to_init(qp, &attr, access) != 0)
        return 1;
    union ibv_gid gid;
    if (ibv_query_gid(ctx, 1, 1, &gid) != 0)
        return 2;
    if (modify_to_rtr(qp, &attr, gid, dest_qpn) != 0)
        return 3;
    if (modify_to_rts(qp, &attr) != 0)
        return 4;
    return 0;
}

/* connect_on_device, the peer being the QP itself. */
static inline int connect_to_self(struct ibv_context *ctx, struct ibv_qp *qp, int access)
{
    return connect_on_device(ctx, qp, access, qp->qp_num);
}

/* An RC QP on `pd` whose queues complete on `cq` (4 WRs of one SGE each way), in RTS
 * connected to itself with `access` for the peer; exits 24 or 25 when a step fails. */
static inline struct ibv_qp *rc_qp_to_self(struct ibv_context *ctx, struct ibv_pd *pd,
                                           struct ibv_cq *cq, int access)
{
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    REQUIRE(qp && init.cap.max_send_sge == 1 && init.cap.max_recv_sge == 1, 24);
    REQUIRE(connect_to_self(ctx, qp, access) == 0, 25);
    return qp;
}

#endif
