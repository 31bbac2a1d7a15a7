/* What the C test programs of uapi/ibverbs/tests share: the CHECK macro (print the failed
 * condition and errno, return the given exit code), polling one completion with a bound,
 * and an RC QP connected to itself through its device's GID 1. */
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

/* RESET -> INIT (with `access` for the peer) -> RTR -> RTS, the peer being the QP itself:
 * 0, or the step that failed (1 INIT, 2 GID, 3 RTR, 4 RTS). */
static inline int connect_to_self(struct ibv_context *ctx, struct ibv_qp *qp, int access)
{
    struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1,
                                .qp_access_flags = access };
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                      IBV_QP_ACCESS_FLAGS) != 0)
        return 1;
    union ibv_gid gid;
    if (ibv_query_gid(ctx, 1, 1, &gid) != 0)
        return 2;
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = qp->qp_num;
    attr.rq_psn = 1;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = 1;
    attr.ah_attr.grh.hop_limit = 1;
    attr.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return 3;
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = 1;
    attr.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return 4;
    return 0;
}

#endif
