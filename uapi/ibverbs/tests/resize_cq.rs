//! `ibv_resize_cq` through the C ABI, from a C program compiled against the installed verbs.h
//! (`ibv_resize_cq(3)`): a CQ holding completions (receives flushed by moving their QP to ERR)
//! is resized larger, takes completions it had no room for before, is resized smaller down to
//! what it holds, and gives every completion back in order (polled two, one, then the rest at
//! a time); `cq->cqe` follows each resize.
//! Sizes below what it holds, 0, negative or above `max_cqe`, and a NULL or destroyed CQ, are
//! `EINVAL`, leaving the CQ as it was.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

/* An RC QP on `cq` with `n` receives posted (wr_id first, first + 1, ...) then moved to ERR,
 * which flushes them into `cq`: the QP, or NULL. */
static struct ibv_qp *flushed_receives(struct ibv_pd *pd, struct ibv_cq *cq, int first, int n)
{
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 1, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    struct ibv_qp_attr attr;
    if (!qp || modify_to_init(qp, &attr, 0) != 0)
        return NULL;
    for (int i = 0; i < n; i++) {
        struct ibv_recv_wr wr = { .wr_id = first + i }, *bad;
        if (ibv_post_recv(qp, &wr, &bad) != 0)
            return NULL;
    }
    attr.qp_state = IBV_QPS_ERR;
    return ibv_modify_qp(qp, &attr, IBV_QP_STATE) == 0 ? qp : NULL;
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    CHECK(pd, 12);
    struct ibv_device_attr dev;
    CHECK(ibv_query_device(ctx, &dev) == 0, 13);
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    CHECK(cq && cq->cqe == 4, 14);

    struct ibv_qp *a = flushed_receives(pd, cq, 0, 3);
    CHECK(a, 15);
    CHECK(ibv_resize_cq(cq, 8) == 0 && cq->cqe >= 8, 16);
    struct ibv_qp *b = flushed_receives(pd, cq, 3, 4); /* 7 in all: more than the old 4 */
    CHECK(b, 17);
    CHECK(ibv_resize_cq(cq, 7) == 0 && cq->cqe == 7, 18);

    CHECK(ibv_resize_cq(cq, 6) == EINVAL && cq->cqe == 7, 19);
    CHECK(ibv_resize_cq(cq, 0) == EINVAL && cq->cqe == 7, 20);
    CHECK(ibv_resize_cq(cq, -1) == EINVAL && cq->cqe == 7, 21);
    CHECK(ibv_resize_cq(cq, dev.max_cqe + 1) == EINVAL && cq->cqe == 7, 22);
    CHECK(ibv_resize_cq(NULL, 8) == EINVAL, 23);

    /* In three polls: two, one, then the rest (a call for one or two completions takes its
     * own path). */
    struct ibv_wc wc[8];
    CHECK(ibv_poll_cq(cq, 2, wc) == 2, 24);
    CHECK(ibv_poll_cq(cq, 1, wc + 2) == 1, 24);
    CHECK(ibv_poll_cq(cq, 8, wc + 3) == 4, 24);
    CHECK(ibv_poll_cq(cq, 2, wc) == 0, 24);
    for (int i = 0; i < 7; i++) {
        if (wc[i].wr_id != (uint64_t)i || wc[i].status != IBV_WC_WR_FLUSH_ERR) {
            fprintf(stderr, "completion %d: wr_id %llu status %d\n", i,
                    (unsigned long long)wc[i].wr_id, wc[i].status);
            return 25;
        }
    }
    CHECK(ibv_resize_cq(cq, 1) == 0 && cq->cqe == 1, 26);

    CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0, 27);
    CHECK(ibv_destroy_cq(cq) == 0, 28);
    CHECK(ibv_resize_cq(cq, 8) == EINVAL, 29);
    CHECK(ibv_dealloc_pd(pd) == 0, 30);
    CHECK(ibv_close_device(ctx) == 0, 31);
    ibv_free_device_list(list);
    puts("ok");
    return 0;
}
"#;

#[test]
fn resize_cq_from_c() {
    let Some(exe) = common::compile_c("resize_cq", PROGRAM, "resize_cq_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.31.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "ok\n");
    assert_eq!(stderr, "");
}
