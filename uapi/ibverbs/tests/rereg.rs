//! `ibv_rereg_mr` from a C program compiled against the installed verbs.h: each change
//! (access, PD, translation) updates the `ibv_mr`, a new translation with new keys, new
//! rights or PD with the same ones; bad input is
//! `IBV_REREG_MR_ERR_INPUT` with `EINVAL`, a refused change `IBV_REREG_MR_ERR_CMD`, and in
//! both cases the MR is unchanged and still deregisters.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
    CHECK(pd && pd2, 12);
    size_t len = 8192;
    char *a = aligned_alloc(4096, len), *b = aligned_alloc(4096, 2 * len);
    struct ibv_mr *mr = ibv_reg_mr(pd, a, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    CHECK(mr, 13);
    uint32_t k0 = mr->lkey;

    /* Access: the same keys, which carry the new rights. */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0, 20);
    CHECK(mr->lkey == k0 && mr->rkey == k0, 21);

    /* PD: the same keys too. */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0, 22);
    CHECK(mr->pd == pd2 && mr->lkey == k0 && mr->rkey == k0, 23);

    /* Translation: new keys. */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, 2 * len, 0) == 0, 24);
    CHECK(mr->addr == b && mr->length == 2 * len, 25);
    CHECK(mr->lkey != k0 && mr->rkey == mr->lkey, 26);
    uint32_t k3 = mr->lkey;

    /* Bad input: unknown flag, translation without the flag, the flag without one. */
    errno = 0;
    CHECK(ibv_rereg_mr(mr, 1 << 5, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, 30);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, a, len, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, 31);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, 32);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, 33);
    /* A refused change: REMOTE_WRITE without LOCAL_WRITE. */
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_CMD && errno == EINVAL, 34);
    CHECK(mr->lkey == k3 && mr->addr == b && mr->pd == pd2, 35);

    CHECK(ibv_dereg_mr(mr) == 0, 40);
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, 41);
    CHECK(ibv_dealloc_pd(pd) == 0 && ibv_dealloc_pd(pd2) == 0, 42);
    CHECK(ibv_close_device(ctx) == 0, 43);
    ibv_free_device_list(list);
    free(a);
    free(b);
    puts("ok");
    return 0;
}
"#;

#[test]
fn rereg_mr_from_c() {
    let Some(exe) = common::compile_c("rereg", PROGRAM, "rereg_mr_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.26.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "ok\n");
}
