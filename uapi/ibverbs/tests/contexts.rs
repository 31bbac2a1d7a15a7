//! Two contexts of one device in one C process, as rdma-core's own tests (two "players") and
//! the connection manager open them: `ibv_open_device` twice, a PD in each (which failed with
//! `EIO` while a device allowed one context per address), their QPs connected to each other
//! through the device, a SEND one way and an RDMA WRITE the other; an rkey of one context is
//! refused to the other's QP; closing the first context leaves the second working. And
//! `ibv_close_device` of a context whose objects are still alive destroys them, as the
//! kernel does when a context's file closes.

mod common;

/// The players (a context each, with a PD, a buffer, a CQ and an RC QP) and their WRs.
const PRELUDE: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

#define ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct player {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    char *buf;
    struct ibv_mr *mr;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
};

static void player(struct ibv_device *dev, struct player *p)
{
    p->ctx = ibv_open_device(dev);
    REQUIRE(p->ctx, 11);
    p->pd = pd_with_buffer(p->ctx, 8192, ALL, &p->buf, &p->mr);
    p->cq = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
    REQUIRE(p->cq, 14);
    struct ibv_qp_init_attr init = {
        .send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    p->qp = ibv_create_qp(p->pd, &init);
    REQUIRE(p->qp, 15);
}

static void teardown(struct player *p, int code)
{
    REQUIRE(ibv_destroy_qp(p->qp) == 0, code);
    REQUIRE(ibv_destroy_cq(p->cq) == 0, code + 1);
    REQUIRE(ibv_dereg_mr(p->mr) == 0, code + 2);
    REQUIRE(ibv_dealloc_pd(p->pd) == 0, code + 3);
    REQUIRE(ibv_close_device(p->ctx) == 0, code + 4);
    free(p->buf);
}

/* A signaled WR of `len` bytes from the start of `from`'s buffer; a remote one for WRITE. */
static int post(struct player *from, enum ibv_wr_opcode op, uint32_t len, uint64_t raddr,
                uint32_t rkey)
{
    struct ibv_sge sge = { .addr = (uintptr_t)from->buf, .length = len, .lkey = from->mr->lkey };
    struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED,
                              .wr = { .rdma = { .remote_addr = raddr, .rkey = rkey } } };
    struct ibv_send_wr *bad;
    return ibv_post_send(from->qp, &wr, &bad);
}
"#;

const TWO_CONTEXTS: &str = r#"
int main(void)
{
    int n = -1;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n == 1, 10);
    struct player a, b, c;
    player(list[0], &a);
    player(list[0], &b);
    CHECK(a.ctx != b.ctx && a.pd->handle != b.pd->handle, 20);
    CHECK(connect_on_device(a.ctx, a.qp, ALL, b.qp->qp_num) == 0, 21);
    CHECK(connect_on_device(b.ctx, b.qp, ALL, a.qp->qp_num) == 0, 22);

    /* SEND from a to b. */
    struct ibv_sge rsge = { .addr = (uintptr_t)b.buf + 4096, .length = 64, .lkey = b.mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rsge, .num_sge = 1 }, *rbad;
    CHECK(ibv_post_recv(b.qp, &rwr, &rbad) == 0, 23);
    strcpy(a.buf, "from context a");
    CHECK(post(&a, IBV_WR_SEND, 15, 0, 0) == 0, 24);
    struct ibv_wc wc;
    CHECK(poll_one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 25);
    CHECK(poll_one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 15, 26);
    CHECK(strcmp(b.buf + 4096, "from context a") == 0, 27);

    /* RDMA WRITE from b into a's buffer. */
    strcpy(b.buf, "written by b");
    CHECK(post(&b, IBV_WR_RDMA_WRITE, 13, (uintptr_t)a.buf + 1024, a.mr->rkey) == 0, 28);
    CHECK(poll_one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 29);
    CHECK(strcmp(a.buf + 1024, "written by b") == 0, 30);

    /* A third context's rkey through a's QP: b's PD is not c's, so b refuses it. */
    player(list[0], &c);
    strcpy(c.buf, "c's own");
    CHECK(post(&a, IBV_WR_RDMA_WRITE, 15, (uintptr_t)c.buf, c.mr->rkey) == 0, 31);
    CHECK(poll_one(a.cq, &wc) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, 32);
    CHECK(strcmp(c.buf, "c's own") == 0, 33);

    /* Closing a and b leaves c working: its QP connected to itself sends. */
    teardown(&a, 40);
    teardown(&b, 45);
    CHECK(connect_to_self(c.ctx, c.qp, ALL) == 0, 50);
    struct ibv_sge csge = { .addr = (uintptr_t)c.buf + 4096, .length = 64, .lkey = c.mr->lkey };
    struct ibv_recv_wr cwr = { .wr_id = 3, .sg_list = &csge, .num_sge = 1 };
    CHECK(ibv_post_recv(c.qp, &cwr, &rbad) == 0, 51);
    CHECK(post(&c, IBV_WR_SEND, 8, 0, 0) == 0, 52);
    CHECK(poll_one(c.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 53);
    CHECK(poll_one(c.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 54);
    CHECK(strcmp(c.buf + 4096, "c's own") == 0, 55);
    teardown(&c, 60);
    ibv_free_device_list(list);
    puts("ok");
    return 0;
}
"#;

/// `a` is closed with its QP, CQ, MR and PD alive: they are destroyed (their pointers are no
/// longer live), `b`'s RDMA WRITE with `a`'s old rkey reaches no QP (retry exceeded, as a
/// peer of a closed kernel context sees) and no memory, and `b` goes on working.
const CLOSE_WITH_LIVE_OBJECTS: &str = r#"
int main(void)
{
    int n = -1;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n == 1, 10);
    struct player a, b;
    player(list[0], &a);
    player(list[0], &b);
    CHECK(connect_on_device(a.ctx, a.qp, ALL, b.qp->qp_num) == 0, 21);
    CHECK(connect_on_device(b.ctx, b.qp, ALL, a.qp->qp_num) == 0, 22);
    struct ibv_wc wc;
    strcpy(b.buf, "written by b");
    CHECK(post(&b, IBV_WR_RDMA_WRITE, 13, (uintptr_t)a.buf + 1024, a.mr->rkey) == 0, 23);
    CHECK(poll_one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 24);
    CHECK(strcmp(a.buf + 1024, "written by b") == 0, 25);

    uint32_t a_rkey = a.mr->rkey;
    CHECK(ibv_close_device(a.ctx) == 0, 30);
    /* Destroyed, not leaked: the verbs refuse them (no longer live objects). */
    CHECK(ibv_dereg_mr(a.mr) == EINVAL, 31);
    CHECK(ibv_destroy_cq(a.cq) == EINVAL, 32);
    CHECK(ibv_dealloc_pd(a.pd) == EINVAL, 33);
    CHECK(ibv_destroy_qp(a.qp) == EINVAL, 34);

    strcpy(b.buf, "too late");
    CHECK(post(&b, IBV_WR_RDMA_WRITE, 9, (uintptr_t)a.buf + 2048, a_rkey) == 0, 35);
    CHECK(poll_one(b.cq, &wc) == 1, 36);
    if (wc.status != IBV_WC_RETRY_EXC_ERR) {
        fprintf(stderr, "status %d\n", wc.status);
        return 37;
    }
    CHECK(a.buf[2048] == 0, 38);

    /* b, reset and connected to itself, still works. */
    struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
    CHECK(ibv_modify_qp(b.qp, &reset, IBV_QP_STATE) == 0, 40);
    CHECK(connect_to_self(b.ctx, b.qp, ALL) == 0, 41);
    struct ibv_sge sge = { .addr = (uintptr_t)b.buf + 4096, .length = 64, .lkey = b.mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1 }, *rbad;
    CHECK(ibv_post_recv(b.qp, &rwr, &rbad) == 0, 42);
    CHECK(post(&b, IBV_WR_SEND, 9, 0, 0) == 0, 43);
    CHECK(poll_one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 44);
    CHECK(poll_one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 45);
    CHECK(strcmp(b.buf + 4096, "too late") == 0, 46);
    teardown(&b, 50);
    free(a.buf);
    ibv_free_device_list(list);
    puts("ok");
    return 0;
}
"#;

#[test]
fn two_contexts_of_one_device_in_one_c_process() {
    let program = format!("{PRELUDE}{TWO_CONTEXTS}");
    let Some(exe) = common::compile_c("contexts", &program, "two_contexts_of_one_device") else {
        return;
    };
    let out = common::run(&exe, &[], Some("127.0.40.9"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "ok\n");
    assert_eq!(stderr, "");
}

#[test]
fn closing_a_context_destroys_the_objects_it_still_has() {
    let program = format!("{PRELUDE}{CLOSE_WITH_LIVE_OBJECTS}");
    let Some(exe) = common::compile_c("close_live", &program, "close_with_live_objects") else {
        return;
    };
    let out = common::run(&exe, &[], Some("127.0.46.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "ok\n");
    assert_eq!(stderr, "");
}
