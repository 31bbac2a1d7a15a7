//! Shared receive queues through the C ABI, from a C program compiled against the installed
//! verbs.h: `ibv_create_srq` writes the granted attributes back, `ibv_query_srq` and
//! `ibv_modify_srq` (resize, arm the limit, refused values), `ibv_post_srq_recv` until the SRQ
//! is full (`ENOMEM`, `bad_wr` the WR refused), a QP created with the SRQ refuses
//! `ibv_post_recv`, receives a SEND from itself into an SRQ WQE (the armed limit then reads
//! 0: it fired), `ibv_destroy_srq` is `EBUSY` while the QP exists, and bad or stale pointers
//! get `EINVAL`. Async events: the limit's `IBV_EVENT_SRQ_LIMIT_REACHED` (with the SRQ) and,
//! once the QP is in ERR, `IBV_EVENT_QP_LAST_WQE_REACHED` (with the QP) make the non-blocking
//! `async_fd` readable for poll(2); `ibv_get_async_event` takes them (`EAGAIN` when none
//! waits) and `ibv_ack_async_event` counts them in `events_completed`.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    CHECK(ctx->async_fd >= 0, 60);
    int flags = fcntl(ctx->async_fd, F_GETFL);
    CHECK(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0, 61);
    struct ibv_async_event ev;
    errno = 0;
    CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, 62);
    errno = 0;
    CHECK(ibv_get_async_event(NULL, &ev) == -1 && errno == EINVAL, 63);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 8192, IBV_ACCESS_LOCAL_WRITE, &buf, &mr);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 14);

    struct ibv_srq_init_attr sinit = { .srq_context = (void *)0x77,
                                       .attr = { .max_wr = 0, .max_sge = 1 } };
    errno = 0;
    CHECK(!ibv_create_srq(pd, &sinit) && errno == EINVAL, 15);
    errno = 0;
    CHECK(!ibv_create_srq(NULL, &sinit) && errno == EINVAL, 16);
    sinit.attr.max_wr = 2;
    struct ibv_srq *srq = ibv_create_srq(pd, &sinit);
    CHECK(srq && srq->context == ctx && srq->pd == pd && srq->srq_context == (void *)0x77, 17);
    CHECK(sinit.attr.max_wr >= 2 && sinit.attr.max_sge >= 1, 18);

    struct ibv_srq_attr sattr;
    CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.max_wr == 2 && sattr.srq_limit == 0, 19);
    sattr.max_wr = 4;
    CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR) == 0, 20);
    sattr.srq_limit = 5;
    CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == EINVAL, 21);
    sattr.srq_limit = 3;
    CHECK(ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) == 0, 22);
    CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.max_wr == 4 && sattr.srq_limit == 3, 23);

    struct ibv_sge rsge[5];
    struct ibv_recv_wr rwr[5], *bad_rwr = NULL;
    for (int i = 0; i < 5; i++) {
        rsge[i] = (struct ibv_sge){ .addr = (uintptr_t)buf + 4096, .length = 4096, .lkey = mr->lkey };
        rwr[i] = (struct ibv_recv_wr){ .wr_id = 100 + i, .sg_list = &rsge[i], .num_sge = 1,
                                       .next = i < 4 ? &rwr[i + 1] : NULL };
    }
    CHECK(ibv_post_srq_recv(srq, rwr, &bad_rwr) == ENOMEM && bad_rwr == &rwr[4], 24);

    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_send_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp && qp->srq == srq, 25);
    CHECK(ibv_destroy_srq(srq) == EBUSY, 26);
    CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.srq_limit == 3, 27);
    bad_rwr = NULL;
    rwr[4].next = NULL;
    CHECK(ibv_post_recv(qp, &rwr[4], &bad_rwr) == EINVAL && bad_rwr == &rwr[4], 28);

    CHECK(connect_to_self(ctx, qp, 0) == 0, 29);
    struct ibv_qp_attr attr;

    strcpy(buf, "hello srq");
    struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = 10, .lkey = mr->lkey };
    struct ibv_send_wr swr = { .wr_id = 99, .sg_list = &ssge, .num_sge = 1,
                               .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_swr;
    CHECK(ibv_post_send(qp, &swr, &bad_swr) == 0, 33);
    int seen = 0;
    struct ibv_wc wc;
    for (int k = 0; k < 2; k++) {
        CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.qp_num == qp->qp_num, 34);
        if (wc.wr_id == 99) {
            seen |= 1;
        } else {
            CHECK(wc.wr_id == 100 && wc.opcode == IBV_WC_RECV && wc.byte_len == 10, 35);
            CHECK(strcmp(buf + 4096, "hello srq") == 0, 36);
            seen |= 2;
        }
    }
    CHECK(seen == 3, 37);
    /* 3 WQEs left: not below the limit 3 yet; the next one taken is. */
    CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.srq_limit == 3, 38);
    CHECK(ibv_post_send(qp, &swr, &bad_swr) == 0, 39);
    for (int k = 0; k < 2; k++)
        CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 40);
    CHECK(ibv_query_srq(srq, &sattr) == 0 && sattr.srq_limit == 0, 41);

    /* The limit event, through poll(2) on async_fd. */
    struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
    CHECK(poll(&pfd, 1, 10000) == 1 && (pfd.revents & POLLIN), 64);
    CHECK(ibv_get_async_event(ctx, &ev) == 0, 65);
    CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq, 66);
    ibv_ack_async_event(&ev);
    CHECK(srq->events_completed == 1, 67);
    errno = 0;
    CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, 68);

    /* A QP with an SRQ that enters ERR takes no more WQEs from it: LAST_WQE_REACHED. */
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_ERR;
    CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == 0, 69);
    CHECK(poll(&pfd, 1, 10000) == 1 && (pfd.revents & POLLIN), 70);
    CHECK(ibv_get_async_event(ctx, &ev) == 0, 71);
    CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == qp, 72);
    ibv_ack_async_event(&ev);
    CHECK(qp->events_completed == 1, 73);

    CHECK(ibv_destroy_qp(qp) == 0, 42);
    CHECK(ibv_destroy_srq(srq) == 0, 43);
    CHECK(ibv_destroy_srq(srq) == EINVAL, 44);
    CHECK(ibv_query_srq(srq, &sattr) == EINVAL, 45);
    CHECK(ibv_destroy_cq(cq) == 0, 46);
    close_mr_and_device(list, ctx, pd, mr, 47);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn srq_from_c() {
    let Some(exe) = common::compile_c("srq", PROGRAM, "srq_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.19.3"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
