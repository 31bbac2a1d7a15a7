//! PDs and MRs through the C ABI, from a C program compiled against the installed verbs.h:
//! the inline `ibv_reg_mr` with `IBV_ACCESS_RELAXED_ORDERING` (which goes through
//! `ibv_reg_mr_iova2`), the fields of `ibv_mr`, bad and stale pointers refused with `EINVAL`,
//! memory that is not there (or read-only, for a writable MR) refused with `EFAULT` as the
//! kernel's `ib_umem_get` refuses it, and `ibv_resize_cq` refusing a NULL CQ with `EINVAL`.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "softrnic_test.h"

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    CHECK(pd && pd->context == ctx, 12);

    size_t len = 65536;
    char *buf = aligned_alloc(4096, len);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE |
                                   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
    CHECK(mr, 13);
    CHECK(mr->addr == buf && mr->length == len && mr->pd == pd && mr->context == ctx, 14);
    CHECK(mr->lkey != 0 && mr->rkey != 0, 15);

    errno = 0;
    CHECK(!ibv_reg_mr(NULL, buf, len, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, 16);
    CHECK(ibv_dereg_mr(mr) == 0, 17);
    CHECK(ibv_dereg_mr(mr) == EINVAL, 18);

    // Read-only memory: an MR without write rights only. Inaccessible memory: none.
    char *ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ro != MAP_FAILED, 24);
    struct ibv_mr *ro_mr = ibv_reg_mr(pd, ro, 8192, IBV_ACCESS_REMOTE_READ);
    CHECK(ro_mr && ibv_dereg_mr(ro_mr) == 0, 25);
    errno = 0;
    CHECK(!ibv_reg_mr(pd, ro, 8192, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT, 26);
    CHECK(mprotect(ro + 4096, 4096, PROT_NONE) == 0, 27);
    errno = 0;
    CHECK(!ibv_reg_mr(pd, ro, 4097, 0) && errno == EFAULT, 28);
    CHECK(munmap(ro, 8192) == 0, 29);

    // An address vector without a GRH is refused (RoCE needs one); so is a NULL CQ.
    errno = 0;
    CHECK(!ibv_create_ah(pd, &(struct ibv_ah_attr){0}) && errno == EINVAL, 19);
    CHECK(ibv_resize_cq(NULL, 1) == EINVAL, 23);

    CHECK(ibv_dealloc_pd(pd) == 0, 20);
    CHECK(ibv_dealloc_pd(pd) == EINVAL, 21);
    CHECK(ibv_close_device(ctx) == 0, 22);
    ibv_free_device_list(list);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn pd_and_mr_from_c() {
    let Some(exe) = common::compile_c("pd_mr", PROGRAM, "pd_and_mr_from_c") else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.12.1"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "ok\n");
    assert_eq!(stderr, "");
}
