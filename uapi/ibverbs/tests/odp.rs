//! On-demand paging from a C program compiled against the installed verbs.h:
//! `ibv_query_device_ex` reports explicit and implicit ODP for every RC operation,
//! `IBV_ACCESS_ON_DEMAND` regions register (`ibv_reg_mr`, `ibv_reg_mr_iova2`) and carry RDMA
//! WRITE and READ on a QP connected to itself, an implicit region (NULL, SIZE_MAX) carries
//! them too and turns an access to an unmapped page into an error completion (local and
//! remote) with the process alive, and `ibv_advise_mr` prefetches with every advice (also
//! through the implicit region's lkey) and gives `ibv_advise_mr(3)`'s errno for each kind of
//! bad input.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

#define RC_ALL (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | \
                IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV)
#define ODP_ALL (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static int rdma(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, struct ibv_mr *local,
                struct ibv_mr *remote, uint32_t len)
{
    struct ibv_sge sge = { (uintptr_t)local->addr, len, local->lkey };
    struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.wr.rdma.remote_addr = (uintptr_t)remote->addr;
    wr.wr.rdma.rkey = remote->rkey;
    if (ibv_post_send(qp, &wr, &bad) != 0)
        return -1;
    struct ibv_wc wc;
    if (poll_one(cq, &wc) != 1)
        return -2;
    return wc.status;
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);

    struct ibv_device_attr_ex attr;
    CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0, 10);
    CHECK(attr.odp_caps.general_caps & IBV_ODP_SUPPORT, 11);
    CHECK(attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT, 12);
    CHECK((attr.odp_caps.per_transport_caps.rc_odp_caps & RC_ALL) == RC_ALL, 13);
    CHECK(attr.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND, 14);

    struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
    CHECK(pd && pd2, 15);
    size_t len = 2 * 4096;
    char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *c = malloc(len);
    CHECK(a != MAP_FAILED && b != MAP_FAILED && c, 16);
    struct ibv_mr *ma = ibv_reg_mr(pd, a, len, ODP_ALL);
    struct ibv_mr *mb = ibv_reg_mr_iova2(pd, b, len, (uintptr_t)b, ODP_ALL);
    struct ibv_mr *plain = ibv_reg_mr(pd, c, len, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *ro = ibv_reg_mr(pd, c, len, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);
    CHECK(ma && mb && plain && ro, 17);

    /* Implicit ODP: the whole address space, only with ON_DEMAND; NULL is otherwise invalid. */
    struct ibv_mr *imp = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ALL);
    CHECK(imp && imp->addr == NULL && imp->length == SIZE_MAX, 18);
    errno = 0;
    CHECK(ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL, 19);
    errno = 0;
    CHECK(ibv_reg_mr(pd, NULL, 4096, ODP_ALL) == NULL && errno == EINVAL, 60);

    /* Prefetch: every advice, with and without the flush flag. */
    struct ibv_sge sg[2] = { { (uintptr_t)a, len, ma->lkey }, { (uintptr_t)b + 100, 200, mb->lkey } };
    enum ibv_advise_mr_advice advices[] = { IBV_ADVISE_MR_ADVICE_PREFETCH,
        IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT };
    for (int i = 0; i < 3; i++) {
        CHECK(ibv_advise_mr(pd, advices[i], IBV_ADVISE_MR_FLAG_FLUSH, sg, 2) == 0, 20 + i);
        CHECK(ibv_advise_mr(pd, advices[i], 0, sg, 2) == 0, 23 + i);
    }

    /* Bad input, each with its errno. */
    struct ibv_sge bad = sg[0];
    CHECK(ibv_advise_mr(pd, 7, 0, sg, 1) == EOPNOTSUPP, 30);
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 1 << 3, sg, 1) == EINVAL, 31);
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sg, 0) == EINVAL, 32);
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, NULL, 1) == EINVAL, 33);
    bad.lkey = ma->lkey ^ 0x80;
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1) == EFAULT, 34);
    bad = sg[0];
    bad.length = len + 1;
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1) == EFAULT, 35);
    CHECK(ibv_advise_mr(pd2, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sg, 1) == EPERM, 36);
    struct ibv_sge s_ro = { (uintptr_t)c, 64, ro->lkey }, s_plain = { (uintptr_t)c, 64, plain->lkey };
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &s_ro, 1) == EPERM, 37);
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s_ro, 1) == 0, 38);
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s_plain, 1) == ENOENT, 39);

    /* Traffic between ODP regions: WRITE a into b, READ b back into a's second page. */
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    CHECK(cq, 40);
    struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 } };
    struct ibv_qp *qp = ibv_create_qp(pd, &qia);
    CHECK(qp, 41);
    CHECK(connect_to_self(ctx, qp, ODP_ALL) == 0, 42);
    for (size_t i = 0; i < 4096; i++)
        a[i] = (char)(i * 7 + 1);
    CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, ma, mb, 4096) == IBV_WC_SUCCESS, 43);
    CHECK(memcmp(a, b, 4096) == 0, 44);
    struct ibv_mr half = *ma;
    half.addr = a + 4096;
    CHECK(rdma(qp, cq, IBV_WR_RDMA_READ, &half, mb, 4096) == IBV_WC_SUCCESS, 45);
    CHECK(memcmp(a + 4096, b, 4096) == 0, 46);

    /* The same through the implicit region's keys, on malloc'd memory no region names. */
    struct ibv_sge isg = { (uintptr_t)c, len, imp->lkey };
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
                        &isg, 1) == 0, 61);
    struct ibv_mr isrc = *imp, idst = *imp;
    for (size_t i = 0; i < 4096; i++)
        c[i] = (char)(i * 13 + 5);
    memset(c + 4096, 0, 4096);
    isrc.addr = c;
    idst.addr = c + 4096;
    CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, &isrc, &idst, 4096) == IBV_WC_SUCCESS, 62);
    CHECK(memcmp(c, c + 4096, 4096) == 0, 63);
    memset(a, 0, 4096);
    CHECK(rdma(qp, cq, IBV_WR_RDMA_READ, ma, &idst, 4096) == IBV_WC_SUCCESS, 64);
    CHECK(memcmp(a, c, 4096) == 0, 65);

    /* An unmapped page: a hole in the address space, not a crash. */
    char *hole = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(hole != MAP_FAILED && munmap(hole, 4096) == 0, 66);
    struct ibv_sge hsg = { (uintptr_t)hole, 64, imp->lkey };
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &hsg, 1) ==
          EFAULT, 67);
    struct ibv_mr ihole = *imp;
    ihole.addr = hole;
    /* Local: a source in the hole completes with a local protection error (QP now in error). */
    CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, &ihole, mb, 64) == IBV_WC_LOC_PROT_ERR, 68);
    /* Remote, between two QPs (the responder's QP enters the error state too): the responder
     * NAKs, the requester completes with a remote access error. */
    struct ibv_qp *qp2 = ibv_create_qp(pd, &qia), *qp3 = ibv_create_qp(pd, &qia);
    CHECK(qp2 && qp3, 69);
    CHECK(connect_on_device(ctx, qp2, ODP_ALL, qp3->qp_num) == 0 &&
          connect_on_device(ctx, qp3, ODP_ALL, qp2->qp_num) == 0, 70);
    CHECK(rdma(qp2, cq, IBV_WR_RDMA_WRITE, &isrc, &ihole, 64) == IBV_WC_REM_ACCESS_ERR, 71);
    CHECK(ibv_destroy_qp(qp2) == 0 && ibv_destroy_qp(qp3) == 0 && ibv_dereg_mr(imp) == 0, 72);

    CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0, 50);
    CHECK(ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0, 51);
    CHECK(ibv_dereg_mr(plain) == 0 && ibv_dereg_mr(ro) == 0, 52);
    /* A deregistered region's lkey is no region's. */
    CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sg, 1) == EFAULT, 53);
    CHECK(ibv_dealloc_pd(pd) == 0 && ibv_dealloc_pd(pd2) == 0, 54);
    CHECK(ibv_close_device(ctx) == 0, 55);
    ibv_free_device_list(list);
    munmap(a, len);
    munmap(b, len);
    free(c);
    puts("ok");
    return 0;
}
"#;

#[test]
fn odp_regions_and_advise_mr_from_c() {
    let Some(exe) = common::compile_c("odp", PROGRAM, "odp_regions_and_advise_mr_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.61.10"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "ok\n");
}
