//! UD through the C ABI, from a C program compiled against the installed verbs.h: a UD QP
//! sends to itself through an address handle (`ibv_create_ah` on its own GID), with immediate
//! data and a Q_Key whose high bit selects the QP's; the receive completion has `src_qp`,
//! `IBV_WC_GRH` and `byte_len` = 40 + payload; the buffer's first 40 bytes are the GRH (IPv4
//! header in the last 20) and the payload follows; `ibv_create_ah_from_wc` on that completion
//! gives an address handle that reaches the sender again; a wrong Q_Key is dropped.

mod common;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"
#define QKEY 0x11111111

static int send_to(struct ibv_qp *qp, struct ibv_ah *ah, struct ibv_mr *mr, char *src, uint32_t qkey, uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = mr->lkey };
    struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
                              .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
                              .imm_data = htonl(0xa0b0c0d0) }, *bad = NULL;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qp->qp_num;
    wr.wr.ud.remote_qkey = qkey;
    return ibv_post_send(qp, &wr, &bad);
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 8192, IBV_ACCESS_LOCAL_WRITE, &buf, &mr);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(cq, 14);
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp, 15);
    struct ibv_qp_attr attr;
    ud_to_rts(qp, &attr, QKEY, 7, 16);
    struct ibv_qp_init_attr got;
    CHECK(ibv_query_qp(qp, &attr, IBV_QP_QKEY, &got) == 0 && attr.qkey == QKEY, 19);

    for (int i = 0; i < 2; i++) {
        struct ibv_sge rsge = { .addr = (uintptr_t)(buf + 4096 + i * 1024), .length = 1024,
                                .lkey = mr->lkey };
        struct ibv_recv_wr rwr = { .wr_id = 50 + i, .sg_list = &rsge, .num_sge = 1 }, *bad = NULL;
        CHECK(ibv_post_recv(qp, &rwr, &bad) == 0, 20);
    }

    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, 21);
    struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1,
                                   .grh = { .dgid = gid, .sgid_index = 1, .hop_limit = 1 } };
    struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
    CHECK(ah, 22);
    for (int i = 0; i < 64; i++)
        buf[i] = (char)(i * 3 + 1);
    /* A wrong Q_Key first (dropped), then the QP's own through the high bit. */
    CHECK(send_to(qp, ah, mr, buf, 0x22222222, 1) == 0, 23);
    CHECK(send_to(qp, ah, mr, buf, 0x80000000, 2) == 0, 24);

    struct ibv_wc wc[3];
    CHECK(poll_n(cq, 3, wc) == 3, 25);
    struct ibv_wc *recv = NULL;
    int sends = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(wc[i].status == IBV_WC_SUCCESS, 26);
        if (wc[i].opcode == IBV_WC_SEND)
            sends++;
        else
            recv = &wc[i];
    }
    CHECK(sends == 2 && recv, 27);
    CHECK(recv->wr_id == 50 && recv->opcode == IBV_WC_RECV && recv->byte_len == 40 + 64, 28);
    CHECK(recv->src_qp == qp->qp_num && (recv->wc_flags & IBV_WC_GRH), 29);
    CHECK((recv->wc_flags & IBV_WC_WITH_IMM) && recv->imm_data == htonl(0xa0b0c0d0), 30);
    unsigned char *grh = (unsigned char *)buf + 4096;
    CHECK(grh[20] == 0x45 && grh[29] == 17, 31);
    CHECK(memcmp(grh + 32, &gid.raw[12], 4) == 0 && memcmp(grh + 36, &gid.raw[12], 4) == 0, 32);
    CHECK(memcmp(buf + 4096 + 40, buf, 64) == 0, 33);

    /* Back to the sender through the completion's GRH. */
    struct ibv_ah *back = ibv_create_ah_from_wc(pd, recv, (struct ibv_grh *)grh, 1);
    CHECK(back, 34);
    CHECK(send_to(qp, back, mr, buf, QKEY, 3) == 0, 35);
    CHECK(poll_n(cq, 2, wc) == 2, 36);
    CHECK(wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS, 37);
    CHECK((wc[0].wr_id == 51) != (wc[1].wr_id == 51), 38);

    CHECK(ibv_destroy_ah(back) == 0 && ibv_destroy_ah(ah) == 0, 39);
    CHECK(ibv_destroy_ah(ah) == EINVAL, 40);
    CHECK(ibv_destroy_qp(qp) == 0, 41);
    CHECK(ibv_destroy_cq(cq) == 0, 42);
    close_mr_and_device(list, ctx, pd, mr, 43);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn ud_through_the_c_abi() {
    let Some(exe) = common::compile_c("ud_c", PROGRAM, "ud_through_the_c_abi") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.24.5"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
