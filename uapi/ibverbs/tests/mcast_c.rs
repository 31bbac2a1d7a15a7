//! UD multicast through the C ABI over real UDP (loopback), from a C program compiled against
//! the installed verbs.h: two UD QPs attach to 239.1.32.5 (`ibv_attach_mcast`, twice for one
//! of them), a third with another Q_Key too, and a fourth sends through an address handle
//! whose GID is the group's, to QPN 0xFFFFFF. Each QP with the Q_Key gets its own completion
//! (the GRH's destination is the group), the other Q_Key gets nothing; after
//! `ibv_detach_mcast` only the first QP receives. The EINVAL cases of ibv_attach_mcast(3): an
//! RC QP, a unicast GID, detaching a group not attached, detaching twice.
//!
//! The datagram leaves the device and comes back through the kernel's multicast loopback,
//! which Linux does on `lo` without any setting; where joining fails the program exits 3 and
//! the test skips (`softrnic_testkit::skip`).

mod common;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"
#define QKEY 0x11111111

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, char *at, uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)at, .length = 1024, .lkey = mr->lkey };
    struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
    REQUIRE(ibv_post_recv(qp, &wr, &bad) == 0, 24);
}

static void send_to_group(struct ibv_qp *qp, struct ibv_ah *ah, struct ibv_mr *mr, char *src,
                          struct ibv_cq *cq)
{
    struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = mr->lkey };
    struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
                              .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = 0xffffff;
    wr.wr.ud.remote_qkey = QKEY;
    REQUIRE(ibv_post_send(qp, &wr, &bad) == 0, 25);
    struct ibv_wc wc;
    REQUIRE(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 26);
}

/* Receive completions within about half a second, into wc[0..max]. */
static int drain(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
    int got = 0;
    for (int i = 0; i < 500 && got < max; i++) {
        got += ibv_poll_cq(cq, max - got, wc + got);
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    return got;
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 16384, IBV_ACCESS_LOCAL_WRITE, &buf, &mr);
    struct ibv_cq *send_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_cq *recv_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(send_cq && recv_cq, 14);
    struct ibv_qp *sender = ud_qp_in_rts(pd, send_cq, QKEY);
    struct ibv_qp *r1 = ud_qp_in_rts(pd, recv_cq, QKEY), *r2 = ud_qp_in_rts(pd, recv_cq, QKEY);
    struct ibv_qp *other = ud_qp_in_rts(pd, recv_cq, 0x22222222);

    union ibv_gid mgid = { .raw = { [10] = 0xff, [11] = 0xff, 239, 1, 32, 5 } };
    union ibv_gid unicast;
    CHECK(ibv_query_gid(ctx, 1, 1, &unicast) == 0, 30);
    int r = ibv_attach_mcast(r1, &mgid, 0);
    if (r != 0) {
        fprintf(stderr, "cannot join 239.1.32.5: errno %d\n", r);
        return 3;
    }
    CHECK(ibv_attach_mcast(r1, &mgid, 0) == 0, 31); /* twice: no change */
    CHECK(ibv_attach_mcast(r2, &mgid, 0) == 0 && ibv_attach_mcast(other, &mgid, 0) == 0, 32);
    CHECK(ibv_attach_mcast(r2, &unicast, 0) == EINVAL, 33);
    CHECK(ibv_detach_mcast(sender, &mgid, 0) == EINVAL, 34);

    struct ibv_qp_init_attr rc_init = {
        .send_cq = send_cq, .recv_cq = send_cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *rc = ibv_create_qp(pd, &rc_init);
    CHECK(rc && ibv_attach_mcast(rc, &mgid, 0) == EINVAL, 35);

    post_recv(r1, mr, buf + 4096, 11);
    post_recv(r1, mr, buf + 5120, 12);
    post_recv(r2, mr, buf + 6144, 21);
    post_recv(r2, mr, buf + 7168, 22);
    post_recv(other, mr, buf + 8192, 31);
    struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1,
                                   .grh = { .dgid = mgid, .sgid_index = 1, .hop_limit = 1 } };
    struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
    CHECK(ah, 36);
    for (int i = 0; i < 64; i++)
        buf[i] = (char)(i * 5 + 2);

    send_to_group(sender, ah, mr, buf, send_cq);
    struct ibv_wc wc[4];
    int n = drain(recv_cq, wc, 4);
    CHECK(n == 2, 40);
    CHECK(wc[0].qp_num != wc[1].qp_num, 41);
    for (int i = 0; i < 2; i++) {
        CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len == 40 + 64, 42);
        CHECK(wc[i].src_qp == sender->qp_num && (wc[i].wc_flags & IBV_WC_GRH), 43);
        CHECK(wc[i].qp_num == r1->qp_num || wc[i].qp_num == r2->qp_num, 44);
        unsigned char *grh = (unsigned char *)buf + (wc[i].wr_id == 11 ? 4096 : 6144);
        CHECK(wc[i].wr_id == 11 || wc[i].wr_id == 21, 45);
        CHECK(memcmp(grh + 36, &mgid.raw[12], 4) == 0, 46); /* destination: the group */
        CHECK(memcmp(grh + 40, buf, 64) == 0, 47);
    }

    CHECK(ibv_detach_mcast(r2, &mgid, 0) == 0, 50);
    CHECK(ibv_detach_mcast(r2, &mgid, 0) == EINVAL, 51);
    send_to_group(sender, ah, mr, buf, send_cq);
    n = drain(recv_cq, wc, 4);
    CHECK(n == 1 && wc[0].wr_id == 12 && wc[0].status == IBV_WC_SUCCESS, 52);

    CHECK(ibv_detach_mcast(r1, &mgid, 0) == 0, 53);
    CHECK(ibv_destroy_ah(ah) == 0, 54);
    /* `other` is destroyed while attached: that detaches it. */
    CHECK(ibv_destroy_qp(other) == 0 && ibv_destroy_qp(rc) == 0, 55);
    CHECK(ibv_destroy_qp(r1) == 0 && ibv_destroy_qp(r2) == 0, 56);
    CHECK(ibv_destroy_qp(sender) == 0, 57);
    CHECK(ibv_destroy_cq(send_cq) == 0 && ibv_destroy_cq(recv_cq) == 0, 58);
    close_mr_and_device(list, ctx, pd, mr, 60);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn multicast_through_the_c_abi() {
    let test = "multicast_through_the_c_abi";
    let Some(exe) = common::compile_c("mcast_c", PROGRAM, test) else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.32.5"));
    let (stdout, stderr) = common::texts(&out);
    if out.status.code() == Some(3) {
        softrnic_testkit::skip(test, stderr.trim());
        return;
    }
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
