//! Thread domains and parent domains from a C program compiled against the installed verbs.h
//! (`ibv_alloc_td`, `ibv_alloc_parent_domain`, `ibv_dealloc_pd`, `ibv_dealloc_td`): a parent
//! domain stands for its PD (an MR registered on it, an RC QP and an extended CQ made with it
//! carry an RDMA WRITE whose bytes land, checked by the PD's own keys); its allocators are
//! accepted and never called; the PD and the thread domain refuse deallocation (`EBUSY`) while
//! the parent domain holds them; bad attributes are `EINVAL`; closing the device frees a
//! parent domain left behind.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

static int alloc_calls, free_calls;

static void *count_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
                         uint64_t resource_type)
{
    (void)pd; (void)pd_context; (void)size; (void)alignment; (void)resource_type;
    alloc_calls++;
    return IBV_ALLOCATOR_USE_DEFAULT;
}

static void count_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type)
{
    (void)pd; (void)pd_context; (void)ptr; (void)resource_type;
    free_calls++;
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    CHECK(pd, 12);

    /* Thread domains: comp_mask must be 0. */
    struct ibv_td_init_attr tda = { .comp_mask = 1 };
    errno = 0;
    CHECK(!ibv_alloc_td(ctx, &tda) && errno == EINVAL, 20);
    tda.comp_mask = 0;
    struct ibv_td *td = ibv_alloc_td(ctx, &tda);
    CHECK(td && td->context == ctx, 21);

    /* Bad parent domain attributes. */
    struct ibv_parent_domain_init_attr pda = { .pd = NULL };
    errno = 0;
    CHECK(!ibv_alloc_parent_domain(ctx, &pda) && errno == EINVAL, 22);
    pda.pd = pd;
    pda.comp_mask = 1 << 7;
    errno = 0;
    CHECK(!ibv_alloc_parent_domain(ctx, &pda) && errno == EINVAL, 23);
    pda.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS; /* without the callbacks */
    errno = 0;
    CHECK(!ibv_alloc_parent_domain(ctx, &pda) && errno == EINVAL, 24);

    pda = (struct ibv_parent_domain_init_attr){
        .pd = pd, .td = td,
        .comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
        .alloc = count_alloc, .free = count_free, .pd_context = (void *)0x5eed,
    };
    struct ibv_pd *parent = ibv_alloc_parent_domain(ctx, &pda);
    CHECK(parent && parent != pd && parent->context == ctx, 25);
    pda.pd = parent; /* a parent domain of a parent domain */
    errno = 0;
    CHECK(!ibv_alloc_parent_domain(ctx, &pda) && errno == EINVAL, 26);

    /* What it holds cannot go while it lives. */
    CHECK(ibv_dealloc_pd(pd) == EBUSY, 27);
    CHECK(ibv_dealloc_td(td) == EBUSY, 28);

    /* Everything made with the parent domain works as on its PD. */
    char *buf = aligned_alloc(4096, 8192);
    memset(buf, 0, 8192);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    struct ibv_mr *mr = ibv_reg_mr(parent, buf, 8192, access);
    CHECK(mr && mr->pd == parent, 30);
    struct ibv_cq_init_attr_ex cattr = {
        .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS,
        .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = pd,
    };
    errno = 0;
    CHECK(!ibv_create_cq_ex(ctx, &cattr) && errno == EINVAL, 31); /* a PD is no parent domain */
    cattr.parent_domain = parent;
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cattr);
    CHECK(cqx, 32);
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(parent, &init);
    CHECK(qp && qp->pd == parent, 33);
    CHECK(connect_to_self(ctx, qp, access) == 0, 34);

    memcpy(buf, "through a parent domain", 23);
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 23, .lkey = mr->lkey };
    struct ibv_send_wr wr = {
        .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = { .remote_addr = (uintptr_t)buf + 4096, .rkey = mr->rkey },
    };
    struct ibv_send_wr *bad;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0, 35);
    struct ibv_wc wc;
    CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, 36);
    CHECK(memcmp(buf + 4096, "through a parent domain", 23) == 0, 37);
    CHECK(alloc_calls == 0 && free_calls == 0, 38);

    CHECK(ibv_destroy_qp(qp) == 0, 40);
    CHECK(ibv_destroy_cq(cq) == 0, 41);
    CHECK(ibv_dereg_mr(mr) == 0, 42);
    CHECK(ibv_dealloc_pd(parent) == 0, 43);
    CHECK(ibv_dealloc_pd(parent) == EINVAL, 44);
    CHECK(ibv_dealloc_td(td) == 0, 45);

    /* One left behind is freed with the device, before its PD. */
    pda.pd = pd;
    pda.td = NULL;
    CHECK(ibv_alloc_parent_domain(ctx, &pda), 50);
    CHECK(ibv_close_device(ctx) == 0, 51);
    ibv_free_device_list(list);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn parent_domains_from_c() {
    let Some(exe) = common::compile_c("parent_domain", PROGRAM, "parent_domains_from_c") else {
        return;
    };
    let out = common::run(&exe, &[], Some("127.0.65.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
