//! XRC through the C ABI (IBTA annex A14; `ibv_open_xrcd(3)`, `ibv_create_srq_ex(3)`,
//! `ibv_get_srq_num(3)`, `ibv_create_qp_ex(3)`), from a C program compiled against the
//! installed verbs.h: an XRC INI QP connected to an XRC TGT QP of the same device sends a
//! message into the XRC SRQ its WR names, which completes on that SRQ's CQ with the TGT QP's
//! number; an RDMA WRITE, an RDMA READ and a fetch-and-add go through the same connection;
//! a SEND naming the SRQ of another XRC domain is refused (NAK Invalid Request:
//! `IBV_WC_REM_INV_REQ_ERR`) and reaches no SRQ; a domain in use does not close.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

static struct ibv_srq *xrc_srq(struct ibv_context *ctx, struct ibv_pd *pd,
                               struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
    struct ibv_srq_init_attr_ex a = {
        .attr = { .max_wr = 8, .max_sge = 1 },
        .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                     IBV_SRQ_INIT_ATTR_CQ,
        .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd, .cq = cq,
    };
    return ibv_create_srq_ex(ctx, &a);
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, struct ibv_mr *mr, char *local,
                uint32_t len, uint64_t remote, uint32_t srqn, uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = mr->lkey };
    struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = remote;
        wr.wr.atomic.rkey = mr->rkey;
        wr.wr.atomic.compare_add = 5;
    } else {
        wr.wr.rdma.remote_addr = remote;
        wr.wr.rdma.rkey = mr->rkey;
    }
    wr.qp_type.xrc.remote_srqn = srqn;
    return ibv_post_send(qp, &wr, &bad);
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_pd *pd = pd_with_buffer(ctx, 16384, access, &buf, &mr);
    struct ibv_device_attr dattr;
    CHECK(ibv_query_device(ctx, &dattr) == 0 && (dattr.device_cap_flags & IBV_DEVICE_XRC), 14);

    struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
                                                  IBV_XRCD_INIT_ATTR_OFLAGS,
                                     .fd = -1, .oflags = O_CREAT };
    struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa), *other = ibv_open_xrcd(ctx, &xa);
    CHECK(xrcd && other && xrcd != other, 15);
    struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_cq *ocq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(scq && rcq && ocq, 16);
    struct ibv_srq *srq = xrc_srq(ctx, pd, xrcd, rcq), *osrq = xrc_srq(ctx, pd, other, ocq);
    CHECK(srq && osrq, 17);
    struct ibv_srq_init_attr_ex no_cq = {
        .attr = { .max_wr = 8, .max_sge = 1 },
        .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD,
        .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd,
    };
    CHECK(!ibv_create_srq_ex(ctx, &no_cq) && errno == EINVAL, 18);
    uint32_t srqn = 0, osrqn = 0;
    CHECK(ibv_get_srq_num(srq, &srqn) == 0 && ibv_get_srq_num(osrq, &osrqn) == 0, 19);
    CHECK(srqn != osrqn && srqn < (1u << 24), 20);

    struct ibv_qp_init_attr_ex ta = { .qp_type = IBV_QPT_XRC_RECV,
                                      .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd };
    struct ibv_qp *tgt = ibv_create_qp_ex(ctx, &ta);
    struct ibv_qp_init_attr_ex ia = { .qp_type = IBV_QPT_XRC_SEND, .send_cq = scq,
                                      .cap = { .max_send_wr = 8, .max_send_sge = 1 },
                                      .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd };
    struct ibv_qp *ini = ibv_create_qp_ex(ctx, &ia);
    CHECK(tgt && ini, 21);

    /* The masks of the kernel's XRC_TGT / XRC_INI columns. */
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, 22);
    struct ibv_qp_attr a;
    CHECK(modify_to_init(tgt, &a, access) == 0 && modify_to_init(ini, &a, 0) == 0, 23);
    CHECK(modify_to_rtr(tgt, &a, gid, ini->qp_num) == 0, 24);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.sq_psn = 1;
    CHECK(ibv_modify_qp(tgt, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN) == 0, 25);
    CHECK(modify_to_rtr(ini, &a, gid, tgt->qp_num) == EINVAL, 26); /* no responder attrs */
    CHECK(ibv_modify_qp(ini, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN) == 0, 27);
    CHECK(modify_to_rts(ini, &a) == 0, 28);

    /* SEND into the SRQ. */
    struct ibv_sge rsge = { .addr = (uintptr_t)buf + 4096, .length = 64, .lkey = mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 }, *rbad = NULL;
    CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, 29);
    for (int i = 0; i < 64; i++)
        buf[i] = (char)(i * 3 + 1);
    CHECK(post(ini, IBV_WR_SEND, mr, buf, 64, 0, srqn, 1) == 0, 30);
    struct ibv_wc wc;
    CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1, 31);
    CHECK(poll_one(rcq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, 32);
    CHECK(wc.byte_len == 64 && wc.qp_num == tgt->qp_num && wc.opcode == IBV_WC_RECV, 33);
    CHECK(memcmp(buf + 4096, buf, 64) == 0, 34);

    /* RDMA WRITE, READ and fetch-and-add, in the SRQ's PD. */
    CHECK(post(ini, IBV_WR_RDMA_WRITE, mr, buf, 32, (uintptr_t)buf + 8192, srqn, 2) == 0, 35);
    CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 36);
    CHECK(memcmp(buf + 8192, buf, 32) == 0, 37);
    CHECK(post(ini, IBV_WR_RDMA_READ, mr, buf + 10240, 32, (uintptr_t)buf + 8192, srqn, 3) == 0, 38);
    CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 39);
    CHECK(memcmp(buf + 10240, buf, 32) == 0, 40);
    uint64_t *counter = (uint64_t *)(buf + 12288);
    *counter = 100;
    CHECK(post(ini, IBV_WR_ATOMIC_FETCH_AND_ADD, mr, buf + 12296, 8, (uintptr_t)counter, srqn, 4) == 0, 41);
    CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, 42);
    CHECK(*counter == 105 && *(uint64_t *)(buf + 12296) == 100, 43);
    CHECK(ibv_poll_cq(rcq, 1, &wc) == 0, 44);

    /* A domain in use does not close. */
    CHECK(ibv_close_xrcd(xrcd) == EBUSY, 45);

    /* The SRQ of another domain: refused, and nothing reaches it. */
    rsge.addr = (uintptr_t)buf + 14336;
    CHECK(ibv_post_srq_recv(osrq, &rwr, &rbad) == 0, 46);
    CHECK(post(ini, IBV_WR_SEND, mr, buf, 64, 0, osrqn, 5) == 0, 47);
    CHECK(poll_one(scq, &wc) == 1 && wc.wr_id == 5 && wc.status == IBV_WC_REM_INV_REQ_ERR, 48);
    CHECK(ibv_poll_cq(ocq, 1, &wc) == 0 && buf[14336] == 0, 49);

    CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_qp(tgt) == 0, 50);
    CHECK(ibv_destroy_srq(srq) == 0 && ibv_destroy_srq(osrq) == 0, 51);
    CHECK(ibv_close_xrcd(xrcd) == 0 && ibv_close_xrcd(other) == 0, 52);
    CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(rcq) == 0 && ibv_destroy_cq(ocq) == 0, 53);
    close_mr_and_device(list, ctx, pd, mr, 54);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn xrc_through_the_c_abi() {
    let Some(exe) = common::compile_c("xrc_c", PROGRAM, "xrc_through_the_c_abi") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.66.10"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
