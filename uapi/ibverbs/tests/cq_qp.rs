//! CQs and QPs through the C ABI, from a C program compiled against the installed verbs.h: a
//! QP connected to itself sends with immediate data and polls it back through the inline
//! `ibv_poll_cq` (every `ibv_wc` field checked, `imm_data` in network order) after its armed
//! CQ signalled the completion channel (poll(2) on its fd, `ibv_get_cq_event`), `ibv_destroy_cq`
//! is `EBUSY` while a QP uses the CQ, `ibv_query_qp` reports state and capacities, refused
//! transitions and bad or stale pointers get their errno, and `bad_wr` names the WR refused.

mod common;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
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
    char *buf;
    struct ibv_mr *mr;
    struct ibv_pd *pd = pd_with_buffer(ctx, 8192, IBV_ACCESS_LOCAL_WRITE, &buf, &mr);

    errno = 0;
    CHECK(!ibv_create_cq(ctx, 0, NULL, NULL, 0) && errno == EINVAL, 14);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    CHECK(ch && ch->fd >= 0 && ch->context == ctx, 50);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, (void *)0x1234, ch, 0);
    CHECK(cq && cq->context == ctx && cq->cq_context == (void *)0x1234 && cq->cqe >= 16, 15);
    CHECK(cq->channel == ch && ibv_destroy_comp_channel(ch) == EBUSY, 51);
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(cq, 1, &wc) == 0, 16);
    CHECK(ibv_req_notify_cq(cq, 0) == 0, 17);

    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    errno = 0;
    CHECK(!ibv_create_qp(pd, &init) && errno == EOPNOTSUPP, 18);
    init.qp_type = IBV_QPT_UC;
    struct ibv_qp *uc = ibv_create_qp(pd, &init);
    CHECK(uc && uc->qp_type == IBV_QPT_UC && uc->state == IBV_QPS_RESET, 60);
    CHECK(ibv_destroy_qp(uc) == 0, 61);
    init.qp_type = IBV_QPT_UD;
    struct ibv_qp *ud = ibv_create_qp(pd, &init);
    CHECK(ud && ud->qp_type == IBV_QPT_UD, 62);
    union ibv_gid peer;
    CHECK(ibv_query_gid(ctx, 1, 1, &peer) == 0, 63);
    struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = peer } };
    struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
    CHECK(ah && ah->pd == pd && ah->context == ctx, 64);
    ah_attr.is_global = 0;
    CHECK(!ibv_create_ah(pd, &ah_attr), 65);
    CHECK(ibv_destroy_ah(ah) == 0, 66);
    CHECK(ibv_destroy_qp(ud) == 0, 67);
    init.qp_type = IBV_QPT_RC;
    init.qp_context = (void *)0x5678;
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp && qp->qp_num != 0 && qp->state == IBV_QPS_RESET && qp->send_cq == cq, 19);
    CHECK(qp->qp_context == (void *)0x5678 && qp->pd == pd && qp->context == ctx, 20);
    CHECK(ibv_destroy_cq(cq) == EBUSY, 21);

    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr got;
    CHECK(ibv_query_qp(qp, &attr, IBV_QP_CAP, &got) == 0, 22);
    CHECK(attr.qp_state == IBV_QPS_RESET && got.cap.max_recv_wr == 4 && got.send_cq == cq, 23);

    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL, 24);
    CHECK(modify_to_init(qp, &attr, 0) == 0, 25);
    CHECK(qp->state == IBV_QPS_INIT, 26);

    struct ibv_sge rsge = { .addr = (uintptr_t)buf + 4096, .length = 4096, .lkey = mr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 77, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr = NULL;
    CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0, 27);

    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, 28);
    CHECK(modify_to_rtr_self(qp, &attr, gid) == 0, 29);

    /* Not in RTS yet: the send is refused and bad_wr names it. */
    strcpy(buf, "hello softrnic");
    struct ibv_sge ssge = { .addr = (uintptr_t)buf, .length = 15, .lkey = mr->lkey };
    struct ibv_send_wr swr = { .wr_id = 99, .sg_list = &ssge, .num_sge = 1,
                               .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
                               .imm_data = htonl(0x01020304) }, *bad_swr = NULL;
    CHECK(ibv_post_send(qp, &swr, &bad_swr) != 0 && bad_swr == &swr, 30);

    CHECK(modify_to_rts(qp, &attr) == 0, 31);
    CHECK(ibv_query_qp(qp, &attr, IBV_QP_STATE, &got) == 0 && attr.qp_state == IBV_QPS_RTS, 32);
    CHECK(attr.dest_qp_num == qp->qp_num && attr.path_mtu == IBV_MTU_1024 && attr.timeout == 14, 33);

    struct ibv_send_wr bad_op = swr;
    bad_op.opcode = 12345;
    swr.next = &bad_op;
    bad_swr = NULL;
    CHECK(ibv_post_send(qp, &swr, &bad_swr) == EINVAL && bad_swr == &bad_op, 34);

    struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
    CHECK(poll(&pfd, 1, 10000) == 1 && (pfd.revents & POLLIN), 52);
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0, 53);
    CHECK(ev_cq == cq && ev_ctx == (void *)0x1234, 54);
    ibv_ack_cq_events(cq, 1);
    CHECK(cq->comp_events_completed == 1, 55);

    int seen = 0;
    for (int k = 0; k < 2; k++) {
        CHECK(poll_one(cq, &wc) == 1, 35);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.qp_num == qp->qp_num, 36);
        if (wc.wr_id == 99) {
            CHECK(wc.opcode == IBV_WC_SEND, 37);
            seen |= 1;
        } else {
            CHECK(wc.wr_id == 77 && wc.opcode == IBV_WC_RECV && wc.byte_len == 15, 38);
            CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0x01020304), 39);
            CHECK(wc.src_qp == qp->qp_num && strcmp(buf + 4096, "hello softrnic") == 0, 40);
            seen |= 2;
        }
    }
    CHECK(seen == 3, 41);

    CHECK(ibv_destroy_qp(qp) == 0, 42);
    CHECK(ibv_destroy_qp(qp) == EINVAL, 43);
    CHECK(ibv_destroy_cq(cq) == 0, 44);
    CHECK(ibv_destroy_cq(cq) == EINVAL, 45);
    CHECK(ibv_destroy_comp_channel(ch) == 0, 56);
    CHECK(ibv_destroy_comp_channel(ch) == EINVAL, 57);
    close_mr_and_device(list, ctx, pd, mr, 46);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn cq_and_qp_from_c() {
    let Some(exe) = common::compile_c("cq_qp", PROGRAM, "cq_and_qp_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.12.3"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}
