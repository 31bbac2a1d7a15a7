//! A WR's `num_sge` is checked against the queue's granted `max_sge` before it says how many
//! SGEs to read: a C program puts a one-SGE list against an inaccessible page and posts it
//! with `num_sge` of 2 and `INT_MAX` to a QP's send and receive queues and to an SRQ (each
//! `EINVAL`, `bad_wr` naming the WR, nothing read past the list); the same list with
//! `num_sge` 1 posts and completes.

mod common;

const PROGRAM: &str = r#"
#include <limits.h>
#include <sys/mman.h>
#include "softrnic_test.h"

int main(void)
{
    /* One SGE, the last thing before a page that cannot be read. */
    char *pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(pages != MAP_FAILED, 20);
    CHECK(mprotect(pages + 4096, 4096, PROT_NONE) == 0, 21);
    struct ibv_sge *edge = (struct ibv_sge *)(pages + 4096) - 1;

    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 4096, IBV_ACCESS_LOCAL_WRITE, &buf, &mr);

    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 22);
    struct ibv_qp *qp = rc_qp_to_self(ctx, pd, cq, IBV_ACCESS_LOCAL_WRITE);

    int too_many[] = { 2, INT_MAX };
    for (int i = 0; i < 2; i++) {
        *edge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
        struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = edge, .num_sge = too_many[i] };
        struct ibv_recv_wr *bad_rwr = NULL;
        CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == EINVAL && bad_rwr == &rwr, 30 + i);
        struct ibv_send_wr swr = { .wr_id = 2, .sg_list = edge, .num_sge = too_many[i],
                                   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
        struct ibv_send_wr *bad_swr = NULL;
        CHECK(ibv_post_send(qp, &swr, &bad_swr) == EINVAL && bad_swr == &swr, 32 + i);
    }

    struct ibv_srq_init_attr sinit = { .attr = { .max_wr = 4, .max_sge = 1 } };
    struct ibv_srq *srq = ibv_create_srq(pd, &sinit);
    CHECK(srq && sinit.attr.max_sge == 1, 40);
    for (int i = 0; i < 2; i++) {
        struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = edge, .num_sge = too_many[i] };
        struct ibv_recv_wr *bad_rwr = NULL;
        CHECK(ibv_post_srq_recv(srq, &rwr, &bad_rwr) == EINVAL && bad_rwr == &rwr, 41 + i);
    }
    CHECK(ibv_destroy_srq(srq) == 0, 43);

    /* The same list, with its true length, works. */
    struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = edge, .num_sge = 1 }, *bad_rwr = NULL;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 50);
    strcpy(buf, "sge ok");
    struct ibv_send_wr swr = { .wr_id = 2, .sg_list = edge, .num_sge = 1,
                               .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
    struct ibv_send_wr *bad_swr = NULL;
    CHECK(ibv_post_send(qp, &swr, &bad_swr) == 0, 51);
    struct ibv_wc wc[2];
    CHECK(poll_n(cq, 2, wc) == 2, 52);
    CHECK(wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS, 53);

    CHECK(ibv_destroy_qp(qp) == 0, 60);
    CHECK(ibv_destroy_cq(cq) == 0, 61);
    close_mr_and_device(list, ctx, pd, mr, 62);
    munmap(pages, 8192);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn num_sge_beyond_max_sge_is_einval_and_nothing_is_read() {
    let Some(exe) = common::compile_c("post_args", PROGRAM, "num_sge_beyond_max_sge") else {
        return;
    };
    let out = common::run(&exe, &[], Some("127.0.94.11"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{:?}\n{stdout}{stderr}", out.status);
    assert_eq!(stdout.trim(), "ok");
}
