//! Inline sends through `ibv_post_send`, from a C program compiled against the installed
//! verbs.h, on an RC QP connected to itself: inline data needs no lkey (ibv_post_send(3)), so
//! a SEND and an RDMA WRITE with `IBV_SEND_INLINE` from a stack buffer outside every
//! registered region, with lkey 0 and two SGEs, deliver their bytes; the buffer is changed
//! right after the post returns and the receiver still gets the bytes of post time. Inline
//! data longer than softrnic takes (256 bytes), and an SGE at address NULL, are `EINVAL` with
//! `bad_wr` naming the WR. (rdma-core's `rdma_client` sends this way.)

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 8192, IBV_ACCESS_LOCAL_WRITE |
                                       IBV_ACCESS_REMOTE_WRITE, &buf, &mr);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 14);
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 1,
                 .max_inline_data = 64 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp, 15);
    CHECK(connect_to_self(ctx, qp, IBV_ACCESS_REMOTE_WRITE) == 0, 16);

    /* Never registered: the stack. */
    char head[8] = "inline ", tail[16] = "from the stack";
    struct ibv_sge sges[2] = { { (uintptr_t)head, 7, 0 }, { (uintptr_t)tail, 15, 0 } };
    struct ibv_sge rsge = { (uintptr_t)buf, 64, mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 20);
    struct ibv_send_wr wr = { .wr_id = 2, .sg_list = sges, .num_sge = 2, .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0, 21);
    memset(tail, 'x', sizeof tail - 1); /* the post has copied the bytes */
    struct ibv_wc wc;
    int got_send = 0, got_recv = 0;
    for (int i = 0; i < 2; i++) {
        CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 22);
        if (wc.wr_id == 2)
            got_send = wc.opcode == IBV_WC_SEND;
        else
            got_recv = wc.wr_id == 1 && wc.opcode == IBV_WC_RECV && wc.byte_len == 22;
    }
    CHECK(got_send && got_recv, 23);
    CHECK(memcmp(buf, "inline from the stack", 22) == 0, 24);

    /* An inline RDMA WRITE from the stack. */
    char word[6] = "write";
    struct ibv_sge wsge = { (uintptr_t)word, 6, 0 };
    wr = (struct ibv_send_wr){ .wr_id = 3, .sg_list = &wsge, .num_sge = 1,
                               .opcode = IBV_WR_RDMA_WRITE,
                               .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED };
    wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
    wr.wr.rdma.rkey = mr->rkey;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0, 30);
    CHECK(poll_one(cq, &wc) == 1 && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS, 31);
    CHECK(wc.opcode == IBV_WC_RDMA_WRITE && strcmp(buf + 4096, "write") == 0, 32);

    /* Too long to be inline, and a NULL address: refused at post. */
    static char big[300];
    struct ibv_sge bsge = { (uintptr_t)big, sizeof big, 0 };
    struct ibv_send_wr first = { .wr_id = 4, .sg_list = &wsge, .num_sge = 1,
                                 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_INLINE };
    struct ibv_send_wr second = { .wr_id = 5, .sg_list = &bsge, .num_sge = 1,
                                  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_INLINE };
    first.next = &second;
    rwr.wr_id = 6;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 40);
    CHECK(ibv_post_send(qp, &first, &bad) == EINVAL && bad == &second, 41);
    struct ibv_sge nsge = { 0, 8, 0 };
    second.sg_list = &nsge;
    CHECK(ibv_post_send(qp, &second, &bad) == EINVAL && bad == &second, 42);
    /* The first WR of the chain went: unsignaled, it completes only at the receiver. */
    CHECK(poll_one(cq, &wc) == 1 && wc.wr_id == 6 && wc.byte_len == 6, 43);

    CHECK(ibv_destroy_qp(qp) == 0, 50);
    CHECK(ibv_destroy_cq(cq) == 0, 51);
    close_mr_and_device(list, ctx, pd, mr, 52);
    printf("ok\n");
    return 0;
}
"#;

#[test]
fn inline_sends_need_no_registered_memory() {
    let Some(exe) = common::compile_c("inline", PROGRAM, "inline_sends_need_no_registered_memory")
    else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.54.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
