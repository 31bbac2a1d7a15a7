/*
 * softrnic/ext.h: softrnic's extensions to libibverbs, exported by softrnic's drop-in
 * libibverbs.so.1 with symbol version SOFTRNIC_1.0 (rdma-core's library has none of them).
 *
 * Include after <infiniband/verbs.h>; link with softrnic's libibverbs.so.1.
 */
#ifndef SOFTRNIC_EXT_H
#define SOFTRNIC_EXT_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Relaxed memory regions, as Solaris OFED's ibv_reg_mr_relaxed(3).
 *
 * ibv_reg_mr_relaxed registers from a per-PD pool of keys; access extends to the 4 KiB pages
 * the range touches. A registration of exactly the pages and access flags of a region
 * deregistered with ibv_dereg_mr_relaxed and not yet flushed takes that region back: same
 * lkey and rkey, no new key, no page check (the cache of an FMR pool). NULL with errno:
 * EINVAL (bad PD, NULL addr, zero length, bad flags), EFAULT (a page is not mapped, or not
 * writable when IBV_ACCESS_LOCAL_WRITE is asked for), EAGAIN (the pool is held by regions
 * awaiting invalidation: flush and retry), ENOMEM.
 *
 * ibv_dereg_mr_relaxed only marks the MR for invalidation and frees the struct ibv_mr:
 * 0, EINVAL (not a live relaxed MR), EBUSY (a memory window is bound).
 *
 * Window of vulnerability: the keys of a region deregistered with ibv_dereg_mr_relaxed (or
 * ibv_dereg_mr) keep reading and writing its pages, locally and for peers, until
 * ibv_flush_relaxed_mr(pd), or a flush softrnic makes on its own under pool pressure, has
 * returned. Keep the pages mapped until then.
 *
 * ibv_flush_relaxed_mr: 0 once no key of a deregistered relaxed MR of the PD reaches memory,
 * EINVAL for a bad PD.
 */
struct ibv_mr *ibv_reg_mr_relaxed(struct ibv_pd *pd, void *addr, size_t length, int access);
int ibv_dereg_mr_relaxed(struct ibv_mr *mr);
int ibv_flush_relaxed_mr(struct ibv_pd *pd);

/*
 * MR descriptors, byte for byte librpma's (rpma_mr_get_descriptor,
 * rpma_mr_remote_from_descriptor): 21 bytes, address u64 LE, length u64 LE, R_Key u32 LE,
 * usage u8 (the SOFTRNIC_MR_USAGE_* bits). Return codes are librpma's RPMA_E_* values.
 */
#define SOFTRNIC_E_NOSUPP (-100001) /* the content is not a memory region */
#define SOFTRNIC_E_NOMEM (-100003)  /* no memory for the remote region */
#define SOFTRNIC_E_INVAL (-100004)  /* NULL or stale argument, buffer shorter than 21 bytes */

#define SOFTRNIC_MR_DESC_SIZE 21

#define SOFTRNIC_MR_USAGE_READ_SRC (1 << 0)
#define SOFTRNIC_MR_USAGE_READ_DST (1 << 1)
#define SOFTRNIC_MR_USAGE_WRITE_SRC (1 << 2)
#define SOFTRNIC_MR_USAGE_WRITE_DST (1 << 3)
#define SOFTRNIC_MR_USAGE_FLUSH_TYPE_VISIBILITY (1 << 4)
#define SOFTRNIC_MR_USAGE_FLUSH_TYPE_PERSISTENT (1 << 5)
#define SOFTRNIC_MR_USAGE_SEND (1 << 6)
#define SOFTRNIC_MR_USAGE_RECV (1 << 7)

/* A peer's memory region, from its descriptor. */
struct softrnic_mr_remote {
	uint64_t addr;   /* first address, in the peer's address space */
	uint64_t length; /* bytes */
	uint32_t rkey;   /* the R_Key to reach it with */
	uint8_t usage;   /* SOFTRNIC_MR_USAGE_* bits */
};

/* SOFTRNIC_MR_DESC_SIZE. */
size_t softrnic_mr_descriptor_size(void);

/* Writes mr's descriptor to the SOFTRNIC_MR_DESC_SIZE bytes at desc. 0 or SOFTRNIC_E_INVAL. */
int softrnic_mr_get_descriptor(const struct ibv_mr *mr, void *desc);

/*
 * Parses the descriptor in the size bytes at desc (the first 21 of a longer buffer) into a new
 * *out. 0, SOFTRNIC_E_INVAL (NULL desc or out, size < 21), SOFTRNIC_E_NOSUPP (no usage bit,
 * zero length, a range past the end of the address space), SOFTRNIC_E_NOMEM.
 */
int softrnic_mr_remote_from_descriptor(const void *desc, size_t size,
				       struct softrnic_mr_remote **out);

/* Frees *mr and sets it to NULL. 0 (also for *mr NULL) or SOFTRNIC_E_INVAL. */
int softrnic_mr_remote_delete(struct softrnic_mr_remote **mr);

#ifdef __cplusplus
}
#endif

#endif /* SOFTRNIC_EXT_H */
