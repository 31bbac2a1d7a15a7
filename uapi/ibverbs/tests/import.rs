//! `ibv_import_device`, `ibv_import_pd`, `ibv_import_mr`, `ibv_import_dm` and their unimports from a C program
//! compiled against the installed verbs.h: a dup of a context's `cmd_fd` opens a second
//! `ibv_context` on it, whose imported PD and MR (same handle, keys and length; `addr` NULL)
//! carry an RDMA WRITE on a QP of the second context whose CQ is the first's; unknown handles
//! are `EINVAL`, an fd that is not open `EINVAL`, one of no context `EOPNOTSUPP`; closing the
//! imported context closes the fd it was given and leaves the first's objects working;
//! `ibv_dereg_mr` of an imported MR deregisters the MR; an imported DM is the same memory.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

static int write_to_self(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, char *buf,
                         uint64_t id)
{
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
    struct ibv_send_wr wr = {
        .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = { .remote_addr = (uintptr_t)buf + 4096, .rkey = mr->rkey },
    }, *bad;
    struct ibv_wc wc;
    if (ibv_post_send(qp, &wr, &bad) != 0)
        return -1;
    return poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == id ? 0 : -2;
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    char *buf;
    struct ibv_mr *mr;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    struct ibv_pd *pd = pd_with_buffer(ctx, 8192, access, &buf, &mr);
    struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
    CHECK(cq, 14);

    /* Not a context's fd. */
    CHECK(ctx->cmd_fd >= 0, 20);
    errno = 0;
    CHECK(!ibv_import_device(-1) && errno == EINVAL, 21);
    int other = dup(0);
    errno = 0;
    CHECK(!ibv_import_device(other) && errno == EOPNOTSUPP, 22);
    close(other);

    int cmd = dup(ctx->cmd_fd);
    struct ibv_context *ictx = ibv_import_device(cmd);
    CHECK(ictx && ictx != ctx && ictx->cmd_fd == cmd && ictx->device == ctx->device, 23);
    errno = 0;
    CHECK(!ibv_import_pd(ictx, pd->handle + 1000) && errno == EINVAL, 24);
    struct ibv_pd *ipd = ibv_import_pd(ictx, pd->handle);
    CHECK(ipd && ipd != pd && ipd->context == ictx && ipd->handle == pd->handle, 25);
    errno = 0;
    CHECK(!ibv_import_mr(ipd, mr->handle + 1000) && errno == EINVAL, 26);
    struct ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
    CHECK(imr && imr->pd == ipd && imr->context == ictx && imr->addr == NULL, 27);
    CHECK(imr->lkey == mr->lkey && imr->rkey == mr->rkey && imr->length == mr->length, 28);

    /* The imported objects and the first context's CQ, on a QP of the imported context. */
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(ipd, &init);
    CHECK(qp && qp->context == ictx, 30);
    CHECK(connect_to_self(ictx, qp, access) == 0, 31);
    memcpy(buf, "imported context", 16);
    CHECK(write_to_self(qp, cq, imr, buf, 1) == 0, 32);
    CHECK(memcmp(buf + 4096, "imported context", 16) == 0, 33);

    /* Unimports free only the views; closing the import closes its fd. */
    CHECK(ibv_destroy_qp(qp) == 0, 40);
    ibv_unimport_mr(imr);
    ibv_unimport_pd(ipd);
    CHECK(ibv_close_device(ictx) == 0, 41);
    CHECK(fcntl(cmd, F_GETFD) == -1 && errno == EBADF, 42);
    CHECK(fcntl(ctx->cmd_fd, F_GETFD) >= 0, 43);
    qp = ibv_create_qp(pd, &init);
    CHECK(qp && connect_to_self(ctx, qp, access) == 0, 44);
    memset(buf + 4096, 0, 16);
    CHECK(write_to_self(qp, cq, mr, buf, 2) == 0 && memcmp(buf + 4096, "imported context", 16) == 0, 45);
    CHECK(ibv_destroy_qp(qp) == 0, 46);

    /* Deregistering an imported MR deregisters the MR. */
    ictx = ibv_import_device(dup(ctx->cmd_fd));
    CHECK(ictx, 50);
    ipd = ibv_import_pd(ictx, pd->handle);
    imr = ipd ? ibv_import_mr(ipd, mr->handle) : NULL;
    CHECK(imr && ibv_dereg_mr(imr) == 0, 51);
    CHECK(ibv_dereg_mr(mr) == EINVAL, 52);
    CHECK(ibv_close_device(ictx) == 0, 53);

    /* Device memory: the imported DM is the same memory. */
    struct ibv_alloc_dm_attr dattr = { .length = 4096 };
    struct ibv_dm *dm = ibv_alloc_dm(ctx, &dattr);
    CHECK(dm, 55);
    ictx = ibv_import_device(dup(ctx->cmd_fd));
    CHECK(ictx, 56);
    errno = 0;
    CHECK(!ibv_import_dm(ictx, dm->handle + 1000) && errno == EINVAL, 57);
    struct ibv_dm *idm = ibv_import_dm(ictx, dm->handle);
    CHECK(idm && idm != dm && idm->context == ictx && idm->handle == dm->handle, 58);
    uint32_t word = 0xabcdef01, back = 0;
    CHECK(ibv_memcpy_to_dm(dm, 8, &word, 4) == 0 && ibv_memcpy_from_dm(&back, idm, 8, 4) == 0, 59);
    CHECK(back == word, 62);
    ibv_unimport_dm(idm);
    CHECK(ibv_close_device(ictx) == 0 && ibv_free_dm(dm) == 0, 63);

    CHECK(ibv_destroy_cq(cq) == 0, 60);
    close_device(list, ctx, pd, 61);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn imports_from_c() {
    let Some(exe) = common::compile_c("import", PROGRAM, "imports_from_c") else {
        return;
    };
    let out = common::run(&exe, &[], Some("127.0.65.2"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{} {stdout}{stderr}", out.status);
    assert_eq!(stdout.trim(), "ok");
}
