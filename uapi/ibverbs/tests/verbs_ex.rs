//! The extended verbs from a C program compiled against the installed verbs.h: a CQ made by
//! the inline `ibv_create_cq_ex` (unsupported `wc_flags` refused with `EOPNOTSUPP`, the same
//! object polled as an `ibv_cq` through `ibv_cq_ex_to_cq`), completions walked with
//! `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll` and the `ibv_wc_read_*` accessors
//! (opcodes, statuses, byte_len, imm data, QP numbers), on an RC QP connected to itself that
//! the inline `ibv_create_qp_ex` made with send ops (a CQ ex with a completion channel signals
//! it; a plain PD as parent domain is `EINVAL`, flags beyond SINGLE_THREADED `EOPNOTSUPP`; a QP made with only
//! `IBV_QP_INIT_ATTR_PD` has no `ibv_qp_ex`); `ibv_qp_to_qp_ex` and the `ibv_wr_*`
//! builder post SEND_WITH_IMM (inline), RDMA WRITE, RDMA READ, FETCH_ADD, CMP_SWP and ATOMIC
//! WRITE in one batch (memory checked); a failed builder call makes `ibv_wr_complete` return
//! its errno and post nothing, `ibv_wr_abort` drops a batch; inline data from a list of
//! buffers, and an unsignaled WR that completes without a completion; inline data and the
//! ATOMIC WRITE operand are copied when set (stack buffers, changed before `wr_complete`),
//! and inline data beyond what softrnic takes (256 bytes) is `ENOMEM`; an SGE list longer
//! than `max_send_sge` is `EINVAL`, none of it read.

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

struct seen { uint64_t wr_id; int status; int opcode; uint32_t byte_len, imm, qp_num, src_qp, flags; };

/* Polls `want` completions with the extended API into `out`. */
static int poll_ex(struct ibv_cq_ex *cq, int want, struct seen *out)
{
    int got = 0;
    for (long i = 0; i < 100000000 && got < want; i++) {
        struct ibv_poll_cq_attr pa = { 0 };
        int rc = ibv_start_poll(cq, &pa);
        if (rc == ENOENT)
            continue;
        if (rc != 0)
            return -rc;
        do {
            struct seen *s = &out[got++];
            s->wr_id = cq->wr_id;
            s->status = cq->status;
            s->opcode = ibv_wc_read_opcode(cq);
            s->byte_len = ibv_wc_read_byte_len(cq);
            s->imm = ibv_wc_read_imm_data(cq);
            s->qp_num = ibv_wc_read_qp_num(cq);
            s->src_qp = ibv_wc_read_src_qp(cq);
            s->flags = ibv_wc_read_wc_flags(cq);
            rc = got < want ? ibv_next_poll(cq) : ENOENT;
        } while (rc == 0);
        ibv_end_poll(cq);
        if (rc != ENOENT)
            return -rc;
    }
    return got;
}

static struct seen *find(struct seen *s, int n, uint64_t wr_id)
{
    for (int i = 0; i < n; i++)
        if (s[i].wr_id == wr_id)
            return &s[i];
    return NULL;
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 16384, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, &buf, &mr);

    struct ibv_cq_init_attr_ex cattr = {
        .cqe = 16, .cq_context = (void *)0x1234,
        .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                    IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
    };
    errno = 0;
    CHECK(!ibv_create_cq_ex(ctx, &cattr) && errno == EOPNOTSUPP, 14);
    cattr.wc_flags &= ~(uint64_t)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    cattr.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
    cattr.parent_domain = pd;
    errno = 0;
    CHECK(!ibv_create_cq_ex(ctx, &cattr) && errno == EINVAL, 140);
    cattr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    cattr.parent_domain = NULL;
    cattr.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
    errno = 0;
    CHECK(!ibv_create_cq_ex(ctx, &cattr) && errno == EOPNOTSUPP, 141);
    cattr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    CHECK(ch, 142);
    cattr.channel = ch;
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cattr);
    CHECK(cqx && cqx->context == ctx && cqx->cq_context == (void *)0x1234, 15);
    CHECK(cqx->read_byte_len && !cqx->read_completion_ts && !cqx->read_sl, 16);
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(cq, 1, &wc) == 0, 17);
    struct ibv_poll_cq_attr pa = { 0 };
    CHECK(ibv_start_poll(cqx, &pa) == ENOENT, 18);
    CHECK(ibv_req_notify_cq(cq, 0) == 0, 143);

    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 1,
                 .max_inline_data = 64 },
    };
    struct ibv_qp *plain = ibv_create_qp(pd, &init);
    CHECK(plain, 19);
    errno = 0;
    CHECK(!ibv_qp_to_qp_ex(plain) && errno == EOPNOTSUPP, 60);
    CHECK(ibv_destroy_qp(plain) == 0, 61);
    struct ibv_qp_init_attr_ex pd_only = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = init.cap,
        .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
    };
    plain = ibv_create_qp_ex(ctx, &pd_only);
    CHECK(plain && !ibv_qp_to_qp_ex(plain) && ibv_destroy_qp(plain) == 0, 66);
    errno = 0;
    CHECK(!ibv_qp_to_qp_ex(plain) && errno == EINVAL, 62);
    struct ibv_qp_init_attr_ex xinit = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = init.cap,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
        .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO,
    };
    errno = 0;
    CHECK(!ibv_create_qp_ex(ctx, &xinit) && errno == EOPNOTSUPP, 63);
    xinit.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
        IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
        IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
        IBV_QP_EX_WITH_ATOMIC_WRITE;
    struct ibv_qp *qp = ibv_create_qp_ex(ctx, &xinit);
    CHECK(qp && qp->pd == pd && qp->send_cq == cq, 64);
    struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
    CHECK(qpx && &qpx->qp_base == qp, 65);
    CHECK(ibv_destroy_cq(cq) == EBUSY, 20);

    CHECK(connect_to_self(ctx, qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) == 0, 21);

    /* SEND_WITH_IMM and RDMA WRITE through ibv_post_send, completions through the CQ ex. */
    struct ibv_sge rsge = { .addr = (uintptr_t)buf + 4096, .length = 1024, .lkey = mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr = NULL;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 25);
    strcpy(buf, "hello cq ex");
    struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = 12, .lkey = mr->lkey };
    struct ibv_send_wr w2 = { .wr_id = 3, .sg_list = &ssge, .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
                              .wr.rdma = { .remote_addr = (uintptr_t)buf + 8192, .rkey = mr->rkey } };
    struct ibv_send_wr w1 = { .wr_id = 2, .next = &w2, .sg_list = &ssge, .num_sge = 1,
                              .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
                              .imm_data = htonl(0xa1b2c3d4) }, *bad_swr = NULL;
    CHECK(ibv_post_send(qp, &w1, &bad_swr) == 0, 26);
    struct seen s[16];
    CHECK(poll_ex(cqx, 3, s) == 3, 27);
    struct seen *r = find(s, 3, 1), *a = find(s, 3, 2), *b = find(s, 3, 3);
    CHECK(r && a && b, 28);
    CHECK(r->status == IBV_WC_SUCCESS && r->opcode == IBV_WC_RECV && r->byte_len == 12, 29);
    CHECK((r->flags & IBV_WC_WITH_IMM) && r->imm == htonl(0xa1b2c3d4), 30);
    CHECK(r->qp_num == qp->qp_num && r->src_qp == qp->qp_num, 31);
    CHECK(a->status == IBV_WC_SUCCESS && a->opcode == IBV_WC_SEND && a->qp_num == qp->qp_num, 32);
    CHECK(b->status == IBV_WC_SUCCESS && b->opcode == IBV_WC_RDMA_WRITE, 33);
    CHECK(strcmp(buf + 4096, "hello cq ex") == 0 && strcmp(buf + 8192, "hello cq ex") == 0, 34);
    CHECK(ibv_start_poll(cqx, &pa) == ENOENT, 35);
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0, 144);
    CHECK(ev_cq == cq && ev_ctx == (void *)0x1234, 145);
    ibv_ack_cq_events(cq, 1);

    /* The same object as an ibv_cq: the classic poll sees the next completion. */
    CHECK(ibv_post_send(qp, &w2, &bad_swr) == 0, 36);
    int n = -1;
    for (long i = 0; i < 100000000 && (n = ibv_poll_cq(cq, 1, &wc)) == 0; i++)
        ;
    CHECK(n == 1 && wc.wr_id == 3 && wc.opcode == IBV_WC_RDMA_WRITE && wc.status == 0, 37);

    /* The builder: one batch of six operations. */
    memset(buf, 0, 16384);
    strcpy(buf + 100, "inline data");
    strcpy(buf + 200, "written by wr_*");
    strcpy(buf + 300, "READSRC");
    *(uint64_t *)(buf + 512) = 10;
    *(uint64_t *)(buf + 528) = 7;
    rwr.wr_id = 10;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 40);
    uint64_t base = (uintptr_t)buf;
    ibv_wr_start(qpx);
    qpx->wr_flags = IBV_SEND_SIGNALED;
    qpx->wr_id = 11;
    ibv_wr_send_imm(qpx, htonl(0x55667788));
    ibv_wr_set_inline_data(qpx, buf + 100, 12);
    qpx->wr_id = 12;
    ibv_wr_rdma_write(qpx, mr->rkey, base + 12288);
    ibv_wr_set_sge(qpx, mr->lkey, base + 200, 16);
    qpx->wr_id = 13;
    ibv_wr_rdma_read(qpx, mr->rkey, base + 300);
    struct ibv_sge rd[2] = { { base + 400, 4, mr->lkey }, { base + 450, 4, mr->lkey } };
    ibv_wr_set_sge_list(qpx, 2, rd);
    qpx->wr_id = 14;
    ibv_wr_atomic_fetch_add(qpx, mr->rkey, base + 512, 5);
    ibv_wr_set_sge(qpx, mr->lkey, base + 520, 8);
    qpx->wr_id = 15;
    ibv_wr_atomic_cmp_swp(qpx, mr->rkey, base + 528, 7, 99);
    ibv_wr_set_sge(qpx, mr->lkey, base + 536, 8);
    qpx->wr_id = 16;
    uint64_t value = 0x1122334455667788ull;
    ibv_wr_atomic_write(qpx, mr->rkey, base + 544, &value);
    value = 0;
    CHECK(ibv_wr_complete(qpx) == 0, 41);
    CHECK(poll_ex(cqx, 7, s) == 7, 42);
    for (int i = 0; i < 7; i++)
        CHECK(s[i].status == IBV_WC_SUCCESS && s[i].qp_num == qp->qp_num, 43);
    r = find(s, 7, 10);
    CHECK(r && r->opcode == IBV_WC_RECV && r->byte_len == 12 && r->imm == htonl(0x55667788), 44);
    CHECK(strcmp(buf + 4096, "inline data") == 0, 45);
    CHECK(find(s, 7, 11) && find(s, 7, 11)->opcode == IBV_WC_SEND, 46);
    CHECK(find(s, 7, 12) && find(s, 7, 12)->opcode == IBV_WC_RDMA_WRITE, 47);
    CHECK(strcmp(buf + 12288, "written by wr_*") == 0, 48);
    CHECK(find(s, 7, 13) && find(s, 7, 13)->opcode == IBV_WC_RDMA_READ &&
          find(s, 7, 13)->byte_len == 8, 49);
    CHECK(memcmp(buf + 400, "READ", 4) == 0 && memcmp(buf + 450, "SRC", 4) == 0, 50);
    CHECK(find(s, 7, 14) && find(s, 7, 14)->opcode == IBV_WC_FETCH_ADD, 51);
    CHECK(*(uint64_t *)(buf + 512) == 15 && *(uint64_t *)(buf + 520) == 10, 52);
    CHECK(find(s, 7, 15) && find(s, 7, 15)->opcode == IBV_WC_COMP_SWAP, 53);
    CHECK(*(uint64_t *)(buf + 528) == 99 && *(uint64_t *)(buf + 536) == 7, 54);
    CHECK(find(s, 7, 16) && find(s, 7, 16)->opcode == IBV_WC_ATOMIC_WRITE, 55);
    CHECK(*(uint64_t *)(buf + 544) == 0x1122334455667788ull, 56);

    /* Failed batches post nothing; an aborted one neither. */
    ibv_wr_start(qpx);
    ibv_wr_set_sge(qpx, mr->lkey, base, 4);
    CHECK(ibv_wr_complete(qpx) == EINVAL, 70);
    ibv_wr_start(qpx);
    ibv_wr_send(qpx);
    ibv_wr_set_inline_data(qpx, buf, 2000);
    CHECK(ibv_wr_complete(qpx) == ENOMEM, 71);
    ibv_wr_start(qpx);
    ibv_wr_send(qpx);
    ibv_wr_send_tso(qpx, NULL, 0, 0);
    CHECK(ibv_wr_complete(qpx) == EOPNOTSUPP, 72);
    /* An SGE count beyond max_send_sge is refused before it says how far to read. */
    ibv_wr_start(qpx);
    ibv_wr_send(qpx);
    ibv_wr_set_sge_list(qpx, (size_t)1 << 40, rd);
    CHECK(ibv_wr_complete(qpx) == EINVAL, 146);
    ibv_wr_start(qpx);
    qpx->wr_id = 17;
    ibv_wr_rdma_write(qpx, mr->rkey, base + 12288);
    ibv_wr_set_sge(qpx, mr->lkey, base + 300, 8);
    ibv_wr_abort(qpx);
    CHECK(ibv_wr_complete(qpx) == EINVAL, 73);
    ibv_wr_start(qpx);
    qpx->wr_id = 18;
    ibv_wr_rdma_write_imm(qpx, mr->rkey, base + 12288, htonl(42));
    ibv_wr_set_sge(qpx, mr->lkey, base + 300, 8);
    rwr.wr_id = 19;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 74);
    CHECK(ibv_wr_complete(qpx) == 0, 75);
    CHECK(poll_ex(cqx, 2, s) == 2, 76);
    CHECK(find(s, 2, 18) && find(s, 2, 18)->opcode == IBV_WC_RDMA_WRITE, 77);
    r = find(s, 2, 19);
    CHECK(r && r->opcode == IBV_WC_RECV_RDMA_WITH_IMM && r->imm == htonl(42), 78);
    CHECK(strcmp(buf + 12288, "READSRC") == 0, 79);

    /* Inline data from a list of buffers; an unsignaled WR completes silently. */
    struct ibv_data_buf parts[2] = { { buf + 100, 7 }, { buf + 200, 8 } };
    rwr.wr_id = 20;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 80);
    ibv_wr_start(qpx);
    qpx->wr_id = 21;
    qpx->wr_flags = 0;
    ibv_wr_rdma_write(qpx, mr->rkey, base + 12288);
    ibv_wr_set_sge(qpx, mr->lkey, base + 100, 6);
    qpx->wr_id = 22;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qpx);
    ibv_wr_set_inline_data_list(qpx, 2, parts);
    CHECK(ibv_wr_complete(qpx) == 0, 81);
    CHECK(poll_ex(cqx, 2, s) == 2 && find(s, 2, 20) && find(s, 2, 22) && !find(s, 2, 21), 82);
    CHECK(find(s, 2, 20)->byte_len == 15 && memcmp(buf + 4096, "inline written ", 15) == 0, 83);
    CHECK(memcmp(buf + 12288, "inline", 6) == 0, 84);

    /* Inline data is copied when it is set: a stack buffer, changed before wr_complete. */
    uint64_t on_stack = 0x0102030405060708ull;
    rwr.wr_id = 23;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 85);
    ibv_wr_start(qpx);
    qpx->wr_id = 24;
    ibv_wr_send(qpx);
    ibv_wr_set_inline_data(qpx, &on_stack, 8);
    on_stack = 0;
    CHECK(ibv_wr_complete(qpx) == 0, 86);
    CHECK(poll_ex(cqx, 2, s) == 2 && find(s, 2, 23) && find(s, 2, 23)->byte_len == 8, 87);
    CHECK(*(uint64_t *)(buf + 4096) == 0x0102030405060708ull, 88);

    CHECK(ibv_destroy_qp(qp) == 0, 90);
    CHECK(ibv_destroy_cq(cq) == 0, 91);
    CHECK(ibv_destroy_cq(cq) == EINVAL, 92);
    CHECK(ibv_destroy_comp_channel(ch) == 0, 96);
    close_mr_and_device(list, ctx, pd, mr, 93);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn extended_verbs_from_c() {
    let Some(exe) = common::compile_c("verbs_ex", PROGRAM, "extended_verbs_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.27.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
