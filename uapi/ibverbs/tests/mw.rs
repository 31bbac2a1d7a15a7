//! Memory windows through the C ABI, from a C program compiled against the installed verbs.h,
//! on a QP connected to itself: a type 1 window allocated with the inline `ibv_alloc_mw`,
//! bound with `ibv_bind_mw` (`mw->rkey` becomes `ibv_inc_rkey` of the old key), written
//! through, `ibv_dereg_mr` `EBUSY` while it is bound, `ibv_dealloc_mw`; a type 2 window bound
//! by an `IBV_WR_BIND_MW` WR, written through, invalidated by `IBV_WR_LOCAL_INV`, bound again
//! and invalidated by a `IBV_WR_SEND_WITH_INV` (the receive reports `invalidated_rkey`), bound
//! by the extended builder's `ibv_wr_bind_mw` (a bind beyond the MR fails the batch), and a
//! WRITE with its dead key failing without touching memory (`IBV_WC_REM_ACCESS_ERR`, or a
//! flush: the QP is its own responder, which the access error puts in the error state).

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

/* Posts one WR and waits for its completion; returns its status (or -1). */
static int post_wait(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr, enum ibv_wc_opcode op)
{
    struct ibv_send_wr *bad = NULL;
    struct ibv_wc wc;
    if (ibv_post_send(qp, wr, &bad) != 0 || poll_one(cq, &wc) != 1)
        return -1;
    if (wc.wr_id != wr->wr_id || (wc.status == IBV_WC_SUCCESS && wc.opcode != op))
        return -1;
    return wc.status;
}

/* An RDMA WRITE of 16 bytes of `src` to `addr` with `rkey`; returns the status. */
static int write16(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, char *src,
                   uint64_t addr, uint32_t rkey)
{
    struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 16, .lkey = mr->lkey };
    struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    return post_wait(qp, cq, &wr, IBV_WC_RDMA_WRITE);
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 16384, IBV_ACCESS_LOCAL_WRITE |
                                       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND, &buf, &mr);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 14);
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp, 15);

    CHECK(connect_to_self(ctx, qp, IBV_ACCESS_REMOTE_WRITE) == 0, 16);
    strcpy(buf, "through a window");
    struct ibv_wc wc;

    /* Type 1. */
    errno = 0;
    CHECK(!ibv_alloc_mw(pd, 7) && errno == EINVAL, 20);
    struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
    CHECK(mw1 && mw1->type == IBV_MW_TYPE_1 && mw1->pd == pd && mw1->context == ctx, 21);
    uint32_t old = mw1->rkey;
    struct ibv_mw_bind bind = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
        .bind_info = { .mr = mr, .addr = (uintptr_t)buf + 4096, .length = 4096,
                       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } };
    CHECK(ibv_bind_mw(qp, mw1, &bind) == 0, 22);
    CHECK(mw1->rkey == ibv_inc_rkey(old), 23);
    CHECK(poll_one(cq, &wc) == 1 && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS, 24);
    CHECK(wc.opcode == IBV_WC_BIND_MW, 25);
    CHECK(write16(qp, cq, mr, buf, (uintptr_t)buf + 4096, mw1->rkey) == IBV_WC_SUCCESS, 26);
    CHECK(memcmp(buf + 4096, "through a window", 16) == 0, 27);
    struct ibv_mw_bind outside = bind;
    outside.bind_info.length = 16384;
    CHECK(ibv_bind_mw(qp, mw1, &outside) == EINVAL, 28);
    CHECK(ibv_dereg_mr(mr) == EBUSY, 29);
    CHECK(mr->lkey != 0, 30);
    CHECK(ibv_dealloc_mw(mw1) == 0, 31);

    /* Type 2: BIND_MW, LOCAL_INV. */
    struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    CHECK(mw2 && mw2->type == IBV_MW_TYPE_2, 32);
    CHECK(ibv_bind_mw(qp, mw2, &bind) == EINVAL, 33);
    struct ibv_send_wr bwr = { .wr_id = 2, .opcode = IBV_WR_BIND_MW,
                               .send_flags = IBV_SEND_SIGNALED };
    bwr.bind_mw.mw = mw2;
    bwr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
    bwr.bind_mw.bind_info = bind.bind_info;
    bwr.bind_mw.bind_info.addr = (uintptr_t)buf + 8192;
    CHECK(post_wait(qp, cq, &bwr, IBV_WC_BIND_MW) == IBV_WC_SUCCESS, 34);
    CHECK(mw2->rkey == bwr.bind_mw.rkey, 35);
    CHECK(write16(qp, cq, mr, buf, (uintptr_t)buf + 8192, mw2->rkey) == IBV_WC_SUCCESS, 36);
    CHECK(memcmp(buf + 8192, "through a window", 16) == 0, 37);
    CHECK(ibv_dereg_mr(mr) == EBUSY, 38);
    struct ibv_send_wr inv = { .wr_id = 3, .opcode = IBV_WR_LOCAL_INV,
                               .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = mw2->rkey };
    CHECK(post_wait(qp, cq, &inv, IBV_WC_LOCAL_INV) == IBV_WC_SUCCESS, 39);

    /* Type 2 again: SEND_WITH_INV. */
    bwr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
    bwr.bind_mw.bind_info.addr = (uintptr_t)buf + 12288;
    CHECK(post_wait(qp, cq, &bwr, IBV_WC_BIND_MW) == IBV_WC_SUCCESS, 40);
    struct ibv_sge rsge = { .addr = (uintptr_t)buf + 64, .length = 64, .lkey = mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 8, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr = NULL;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 41);
    struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
    struct ibv_send_wr swr = { .wr_id = 4, .sg_list = &ssge, .num_sge = 1,
                               .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
                               .invalidate_rkey = mw2->rkey }, *bad_swr = NULL;
    CHECK(ibv_post_send(qp, &swr, &bad_swr) == 0, 42);
    int seen = 0;
    for (int k = 0; k < 2; k++) {
        CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 43);
        if (wc.wr_id == 4) {
            seen |= 1;
        } else {
            CHECK(wc.wr_id == 8 && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_INV), 44);
            CHECK(wc.invalidated_rkey == mw2->rkey, 45);
            seen |= 2;
        }
    }
    CHECK(seen == 3, 46);

    /* Type 2 through the extended builder: ibv_wr_bind_mw. */
    struct ibv_qp_init_attr_ex xattr = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
        .send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_RDMA_WRITE,
    };
    struct ibv_qp *xqp = ibv_create_qp_ex(ctx, &xattr);
    CHECK(xqp && connect_to_self(ctx, xqp, IBV_ACCESS_REMOTE_WRITE) == 0, 60);
    struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(xqp);
    struct ibv_mw_bind_info info = bind.bind_info;
    info.addr = (uintptr_t)buf + 8192;
    uint32_t nkey = ibv_inc_rkey(mw2->rkey);
    ibv_wr_start(qpx);
    qpx->wr_id = 9;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_bind_mw(qpx, mw2, nkey, &info);
    CHECK(ibv_wr_complete(qpx) == 0, 61);
    CHECK(poll_one(cq, &wc) == 1 && wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS, 62);
    CHECK(wc.opcode == IBV_WC_BIND_MW && mw2->rkey == nkey, 63);
    memset(buf + 8192, 0, 16);
    CHECK(write16(xqp, cq, mr, buf, (uintptr_t)buf + 8192, nkey) == IBV_WC_SUCCESS, 64);
    CHECK(memcmp(buf + 8192, "through a window", 16) == 0, 65);
    info.length = 1 << 20; /* beyond the MR: the batch fails, nothing is bound */
    ibv_wr_start(qpx);
    ibv_wr_bind_mw(qpx, mw2, ibv_inc_rkey(nkey), &info);
    CHECK(ibv_wr_complete(qpx) == EINVAL && mw2->rkey == nkey, 66);
    inv.invalidate_rkey = nkey;
    CHECK(post_wait(qp, cq, &inv, IBV_WC_LOCAL_INV) == IBV_WC_SUCCESS, 67);
    CHECK(ibv_destroy_qp(xqp) == 0, 68);

    /* Dead key: an error, nothing written. (The QP is its own responder, whose access error
     * puts the QP in the error state: the WRITE may be flushed before the NAK arrives.) */
    int st = write16(qp, cq, mr, buf, (uintptr_t)buf + 12288, mw2->rkey);
    CHECK(st == IBV_WC_REM_ACCESS_ERR || st == IBV_WC_WR_FLUSH_ERR, 47);
    CHECK(buf[12288] == 0, 48);

    CHECK(ibv_dealloc_mw(mw2) == 0, 49);
    CHECK(ibv_destroy_qp(qp) == 0, 51);
    CHECK(ibv_destroy_cq(cq) == 0, 52);
    close_mr_and_device(list, ctx, pd, mr, 53);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn memory_windows_from_c() {
    let Some(exe) = common::compile_c("mw", PROGRAM, "memory_windows_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.20.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
