//! softrnic's extensions (`include/softrnic/ext.h`, version node `SOFTRNIC_1.0`) from a C
//! program compiled against that header and the installed verbs.h: relaxed MRs
//! (`ibv_reg_mr_relaxed`, `ibv_dereg_mr_relaxed`, `ibv_flush_relaxed_mr`, `EAGAIN` when the
//! pool is held by regions awaiting invalidation and `ENOMEM` when by live ones, `EINVAL` for
//! a normal MR, `EBUSY` while a type 1 window bound with `ibv_bind_mw` is on it), and MR
//! descriptors (round trip, librpma's INVAL for a short or NULL buffer, NOSUPP for zero usage,
//! NOMEM when the remote region cannot be allocated (malloc interposed in the program), a stale
//! remote region refused); and that each is exported with version `SOFTRNIC_1.0`.

mod common;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include "softrnic_test.h"
#include EXT_H

_Static_assert(sizeof(struct softrnic_mr_remote) == 24, "softrnic_mr_remote layout");

#define POOL 1024 /* RELAXED_POOL_DEFAULT */

/* An RC QP connected to itself, in RTS. */
static struct ibv_qp *self_connected(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
    struct ibv_qp_init_attr init = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    if (!qp || connect_to_self(ctx, qp, 0) != 0)
        return NULL;
    return qp;
}

/* malloc, interposed for the whole process: fails once, on this thread only, for the size of
 * a remote region, when armed (the library's NOMEM path); otherwise glibc's. */
extern void *__libc_malloc(size_t);
static __thread int fail_remote_malloc;
void *malloc(size_t n)
{
    if (fail_remote_malloc && n == sizeof(struct softrnic_mr_remote)) {
        fail_remote_malloc = 0;
        return NULL;
    }
    return __libc_malloc(n);
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = open_only_device(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    CHECK(pd, 12);
    char *buf = aligned_alloc(4096, 16384);
    memset(buf, 0, 16384);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_MW_BIND;

    /* Relaxed registration. */
    errno = 0;
    CHECK(!ibv_reg_mr_relaxed(NULL, buf, 4096, access) && errno == EINVAL, 13);
    errno = 0;
    CHECK(!ibv_reg_mr_relaxed(pd, NULL, 4096, access) && errno == EINVAL, 14);
    struct ibv_mr *mr = ibv_reg_mr_relaxed(pd, buf + 100, 1000, access);
    CHECK(mr && mr->addr == buf + 100 && mr->length == 1000 && mr->pd == pd, 15);
    CHECK(mr->lkey != 0 && mr->rkey != 0, 16);

    /* Descriptors. */
    CHECK(softrnic_mr_descriptor_size() == SOFTRNIC_MR_DESC_SIZE, 20);
    unsigned char d[32];
    memset(d, 0xa5, sizeof d);
    CHECK(softrnic_mr_get_descriptor(NULL, d) == SOFTRNIC_E_INVAL, 21);
    CHECK(softrnic_mr_get_descriptor(mr, NULL) == SOFTRNIC_E_INVAL, 22);
    CHECK(softrnic_mr_get_descriptor(mr, d) == 0 && d[21] == 0xa5, 23);
    uint64_t addr = 0, len = 0;
    uint32_t rkey = 0;
    for (int i = 7; i >= 0; i--) {
        addr = addr << 8 | d[i];
        len = len << 8 | d[8 + i];
    }
    for (int i = 3; i >= 0; i--)
        rkey = rkey << 8 | d[16 + i];
    CHECK(addr == (uintptr_t)buf + 100 && len == 1000 && rkey == mr->rkey, 24);
    int want = SOFTRNIC_MR_USAGE_READ_SRC | SOFTRNIC_MR_USAGE_WRITE_DST | SOFTRNIC_MR_USAGE_RECV;
    CHECK((d[20] & want) == want, 25);

    struct softrnic_mr_remote *r = NULL;
    CHECK(softrnic_mr_remote_from_descriptor(d, SOFTRNIC_MR_DESC_SIZE, &r) == 0 && r, 26);
    CHECK(r->addr == addr && r->length == 1000 && r->rkey == mr->rkey && r->usage == d[20], 27);
    struct softrnic_mr_remote *stale = r;
    CHECK(softrnic_mr_remote_delete(&r) == 0 && r == NULL, 28);
    CHECK(softrnic_mr_remote_delete(&r) == 0, 29);
    CHECK(softrnic_mr_remote_delete(&stale) == SOFTRNIC_E_INVAL, 30);
    CHECK(softrnic_mr_remote_delete(NULL) == SOFTRNIC_E_INVAL, 31);
    CHECK(softrnic_mr_remote_from_descriptor(d, SOFTRNIC_MR_DESC_SIZE - 1, &r) == SOFTRNIC_E_INVAL, 32);
    CHECK(softrnic_mr_remote_from_descriptor(NULL, SOFTRNIC_MR_DESC_SIZE, &r) == SOFTRNIC_E_INVAL, 33);
    CHECK(softrnic_mr_remote_from_descriptor(d, SOFTRNIC_MR_DESC_SIZE, NULL) == SOFTRNIC_E_INVAL, 34);
    CHECK(r == NULL, 35);
    unsigned char z[SOFTRNIC_MR_DESC_SIZE];
    memcpy(z, d, sizeof z);
    z[20] = 0;
    CHECK(softrnic_mr_remote_from_descriptor(z, sizeof z, &r) == SOFTRNIC_E_NOSUPP && !r, 36);
    CHECK(softrnic_mr_remote_from_descriptor(d, sizeof d, &r) == 0 && r->rkey == mr->rkey, 37);
    CHECK(softrnic_mr_remote_delete(&r) == 0, 38);
    /* No memory for the remote region: NOMEM, *out untouched. */
    fail_remote_malloc = 1;
    CHECK(softrnic_mr_remote_from_descriptor(d, sizeof d, &r) == SOFTRNIC_E_NOMEM && !r, 39);
    CHECK(fail_remote_malloc == 0, 70);

    /* A type 1 window on the relaxed MR: EBUSY while bound. */
    struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
    CHECK(cq, 40);
    struct ibv_qp *qp = self_connected(ctx, pd, cq);
    CHECK(qp, 41);
    struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
    CHECK(mw, 42);
    struct ibv_mw_bind bind = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
        .bind_info = { .mr = mr, .addr = (uintptr_t)buf + 100, .length = 1000,
                       .mw_access_flags = IBV_ACCESS_REMOTE_READ } };
    CHECK(ibv_bind_mw(qp, mw, &bind) == 0, 43);
    struct ibv_wc wc;
    CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, 44);
    CHECK(ibv_dereg_mr_relaxed(mr) == EBUSY, 45);
    CHECK(ibv_dereg_mr(mr) == EBUSY, 46);
    CHECK(ibv_dealloc_mw(mw) == 0, 47);
    CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0, 48);

    /* Deregistration and flush. */
    struct ibv_mr *plain = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    CHECK(plain, 50);
    CHECK(ibv_dereg_mr_relaxed(plain) == EINVAL, 51);
    CHECK(ibv_dereg_mr(plain) == 0, 52);
    CHECK(ibv_dereg_mr_relaxed(mr) == 0, 53);
    CHECK(ibv_dereg_mr_relaxed(mr) == EINVAL, 54);
    CHECK(ibv_flush_relaxed_mr(NULL) == EINVAL, 55);
    CHECK(ibv_flush_relaxed_mr(pd) == 0, 56);

    /* The pool: every key live is ENOMEM; one awaiting invalidation is EAGAIN until a flush. */
    static struct ibv_mr *mrs[POOL];
    for (int i = 0; i < POOL; i++) {
        mrs[i] = ibv_reg_mr_relaxed(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
        CHECK(mrs[i], 60);
    }
    errno = 0;
    CHECK(!ibv_reg_mr_relaxed(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE) && errno == ENOMEM, 61);
    uint32_t marked_rkey = mrs[0]->rkey;
    CHECK(ibv_dereg_mr_relaxed(mrs[0]) == 0, 62);
    /* The pages and rights of the marked MR: it is taken back, keys and all. */
    mrs[0] = ibv_reg_mr_relaxed(pd, buf + 8, 32, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mrs[0] && mrs[0]->rkey == marked_rkey && mrs[0]->addr == buf + 8, 68);
    CHECK(ibv_dereg_mr_relaxed(mrs[0]) == 0, 69);
    /* Other pages: no free key, one awaiting invalidation. */
    errno = 0;
    CHECK(!ibv_reg_mr_relaxed(pd, buf + 4096, 64, IBV_ACCESS_LOCAL_WRITE) && errno == EAGAIN, 63);
    CHECK(ibv_flush_relaxed_mr(pd) == 0, 64);
    mrs[0] = ibv_reg_mr_relaxed(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mrs[0], 65);
    for (int i = 0; i < POOL; i++)
        CHECK(ibv_dereg_mr_relaxed(mrs[i]) == 0, 66);
    CHECK(ibv_flush_relaxed_mr(pd) == 0, 67);

    close_device(list, ctx, pd, 70);
    free(buf);
    puts("ok");
    return 0;
}
"#;

#[test]
fn relaxed_mrs_descriptors_and_a_window_from_c() {
    let header = concat!(env!("CARGO_MANIFEST_DIR"), "/include/softrnic/ext.h");
    let source = format!("#define EXT_H \"{header}\"\n{PROGRAM}");
    let Some(exe) = common::compile_c(
        "ext",
        &source,
        "relaxed_mrs_descriptors_and_a_window_from_c",
    ) else {
        return;
    };
    // An address of its own: the first PD binds the device's UDP port 4791 there.
    let out = common::run(&exe, &[], Some("127.0.20.2"));
    let (stdout, stderr) = common::texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "ok");
}

#[test]
fn the_extensions_are_exported_with_version_softrnic_1_0() {
    let Ok(out) = std::process::Command::new("objdump")
        .arg("-T")
        .arg(common::built_library())
        .output()
    else {
        softrnic_testkit::skip(
            "the_extensions_are_exported_with_version_softrnic_1_0",
            "no objdump (apt-get install binutils)",
        );
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "ibv_reg_mr_relaxed",
        "ibv_dereg_mr_relaxed",
        "ibv_flush_relaxed_mr",
        "softrnic_mr_descriptor_size",
        "softrnic_mr_get_descriptor",
        "softrnic_mr_remote_from_descriptor",
        "softrnic_mr_remote_delete",
    ] {
        let exported = text.lines().any(|l| {
            let mut f = l.split_whitespace().rev();
            f.next() == Some(name) && f.next() == Some("SOFTRNIC_1.0")
        });
        assert!(
            exported,
            "{name} not exported as {name}@@SOFTRNIC_1.0:\n{text}"
        );
    }
}
