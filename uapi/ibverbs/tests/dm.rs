//! Device memory through the C ABI, from a C program compiled against the installed verbs.h
//! (whose inline `ibv_alloc_dm`, `ibv_memcpy_to_dm`, `ibv_reg_dm_mr`, `ibv_free_dm` call the
//! ops and `struct ibv_dm`'s pointers): `max_dm_size` reported, a bad `comp_mask` `EINVAL`,
//! more than the device has `ENOMEM`, copies out of bounds `EFAULT` and unaligned `EINVAL`;
//! a zero-based region over part of the DM (`addr` NULL) refused without
//! `IBV_ACCESS_ZERO_BASED` or beyond the DM; then, on a QP connected to itself, the region as
//! a local SGE (an RDMA WRITE out of it), as an RDMA WRITE target, an RDMA READ source and an
//! atomic target, each checked through the copies; `ibv_free_dm` `EBUSY` while the region
//! exists and 0 after it.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

/* Posts one signaled WR and waits for it; returns its status (or -1). */
static int post_wait(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    struct ibv_wc wc;
    if (ibv_post_send(qp, wr, &bad) != 0 || poll_one(cq, &wc) != 1 || wc.wr_id != wr->wr_id)
        return -1;
    return wc.status;
}

/* An RDMA `op` of `len` bytes between the local (`laddr`, `lkey`) and the remote (`raddr`,
 * `rkey`); returns the status. */
static int rdma(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, uint64_t laddr,
                uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len)
{
    struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
    struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED };
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return post_wait(qp, cq, &wr);
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
             IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_pd *pd = pd_with_buffer(ctx, 4096, rw, &buf, &mr);

    struct ibv_device_attr_ex attr;
    CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0, 20);
    CHECK(attr.max_dm_size == 256 * 1024, 21);

    struct ibv_alloc_dm_attr bad_mask = { .length = 4096, .comp_mask = 1 };
    errno = 0;
    CHECK(!ibv_alloc_dm(ctx, &bad_mask) && errno == EINVAL, 22);
    struct ibv_alloc_dm_attr too_big = { .length = attr.max_dm_size + 1 };
    errno = 0;
    CHECK(!ibv_alloc_dm(ctx, &too_big) && errno == ENOMEM, 23);
    struct ibv_alloc_dm_attr dm_attr = { .length = 4096, .log_align_req = 6 };
    struct ibv_dm *dm = ibv_alloc_dm(ctx, &dm_attr);
    CHECK(dm && dm->context == ctx, 24);
    /* The rest of the budget, and not a byte more. */
    struct ibv_alloc_dm_attr rest = { .length = attr.max_dm_size - 4096 };
    errno = 0;
    CHECK(!ibv_alloc_dm(ctx, &(struct ibv_alloc_dm_attr){ .length = rest.length + 4 }) &&
          errno == ENOMEM, 25);
    struct ibv_dm *rest_dm = ibv_alloc_dm(ctx, &rest);
    CHECK(rest_dm && ibv_free_dm(rest_dm) == 0, 26);

    char word[8] = "dm-data", back[8] = { 0 };
    CHECK(ibv_memcpy_from_dm(back, dm, 0, 8) == 0 && memcmp(back, "\0\0\0\0\0\0\0", 8) == 0, 27);
    CHECK(ibv_memcpy_to_dm(dm, 4096, word, 4) == EFAULT, 28);
    CHECK(ibv_memcpy_to_dm(dm, 4092, word, 8) == EFAULT, 29);
    CHECK(ibv_memcpy_to_dm(dm, 1, word, 4) == EINVAL, 30);
    CHECK(ibv_memcpy_from_dm(back, dm, 0, 6) == EINVAL, 31);

    errno = 0;
    CHECK(!ibv_reg_dm_mr(pd, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, 32);
    errno = 0;
    CHECK(!ibv_reg_dm_mr(pd, dm, 4000, 100, rw | IBV_ACCESS_ZERO_BASED) && errno == EINVAL, 33);
    errno = 0;
    CHECK(!ibv_reg_dm_mr(pd, dm, 0, 64, rw | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND) &&
          errno == EINVAL, 34);
    struct ibv_mr *dmr = ibv_reg_dm_mr(pd, dm, 1024, 2048, rw | IBV_ACCESS_ZERO_BASED);
    CHECK(dmr && dmr->addr == NULL && dmr->length == 2048 && dmr->pd == pd, 35);
    CHECK(ibv_free_dm(dm) == EBUSY, 36);

    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 37);
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp, 38);
    CHECK(connect_to_self(ctx, qp, rw) == 0, 39);

    /* The region as the local source: DM offset 1024 is its address 0. */
    CHECK(ibv_memcpy_to_dm(dm, 1024, word, 8) == 0, 40);
    CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, 0, dmr->lkey, (uintptr_t)buf, mr->rkey, 8) ==
          IBV_WC_SUCCESS, 41);
    CHECK(memcmp(buf, "dm-data", 8) == 0, 42);

    /* The region as a WRITE target, at its address 16 (DM offset 1040). */
    strcpy(buf + 64, "remote!");
    CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, (uintptr_t)buf + 64, mr->lkey, 16, dmr->rkey, 8) ==
          IBV_WC_SUCCESS, 43);
    CHECK(ibv_memcpy_from_dm(back, dm, 1040, 8) == 0 && memcmp(back, "remote!", 8) == 0, 44);

    /* A READ source. */
    CHECK(rdma(qp, cq, IBV_WR_RDMA_READ, (uintptr_t)buf + 128, mr->lkey, 16, dmr->rkey, 8) ==
          IBV_WC_SUCCESS, 45);
    CHECK(memcmp(buf + 128, "remote!", 8) == 0, 46);

    /* An atomic target: fetch-and-add 5 on the zeroed word at address 32 (DM offset 1056). */
    struct ibv_sge asge = { .addr = (uintptr_t)buf + 256, .length = 8, .lkey = mr->lkey };
    struct ibv_send_wr awr = { .wr_id = 9, .sg_list = &asge, .num_sge = 1,
                               .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                               .send_flags = IBV_SEND_SIGNALED };
    awr.wr.atomic.remote_addr = 32;
    awr.wr.atomic.rkey = dmr->rkey;
    awr.wr.atomic.compare_add = 5;
    CHECK(post_wait(qp, cq, &awr) == IBV_WC_SUCCESS, 47);
    uint64_t old, now;
    memcpy(&old, buf + 256, 8);
    CHECK(ibv_memcpy_from_dm(&now, dm, 1056, 8) == 0 && old == 0 && now == 5, 48);

    /* Beyond the region (DM offset 3072, still inside the DM): refused, nothing written. */
    int st = rdma(qp, cq, IBV_WR_RDMA_WRITE, (uintptr_t)buf + 64, mr->lkey, 2048, dmr->rkey, 8);
    CHECK(st == IBV_WC_REM_ACCESS_ERR || st == IBV_WC_WR_FLUSH_ERR, 49);
    CHECK(ibv_memcpy_from_dm(back, dm, 3072, 8) == 0 && back[0] == 0, 50);

    CHECK(ibv_destroy_qp(qp) == 0, 51);
    CHECK(ibv_destroy_cq(cq) == 0, 52);
    CHECK(ibv_dereg_mr(dmr) == 0, 53);
    CHECK(ibv_free_dm(dm) == 0, 54);
    close_mr_and_device(list, ctx, pd, mr, 55);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn device_memory_from_c() {
    let Some(exe) = common::compile_c("dm", PROGRAM, "device_memory_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.62.10"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
