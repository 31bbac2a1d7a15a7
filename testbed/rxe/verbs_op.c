/*
 * verbs_op: drive one RC operation that perftest 4.5 cannot (RDMA WRITE WITH
 * IMMEDIATE, ATOMIC WRITE) between two hosts and check every result, so that
 * softrnic can be tested against kernel rxe in both directions.
 *
 *   server: verbs_op -o OP -g GIDIDX -m MTU -n ITERS -s SIZE -p PORT
 *   client: verbs_op -o OP -g GIDIDX -m MTU -n ITERS -s SIZE -p PORT SERVER_IPV4
 *
 * OP is write_imm or atomic_write. Uses the first device, port 1. The two
 * sides swap LID, QPN, PSN, GID, buffer address and rkey over TCP, then run in
 * lock step: the client posts one operation, waits for its send completion
 * and tells the server (4-byte iteration number over TCP); the server checks
 * its completion (write_imm only) and its buffer, reposts a receive and
 * answers 'k' (or 'x' on a mismatch). The server's buffer is therefore never
 * overwritten before it has been checked.
 *   write_imm: iteration k writes SIZE bytes, byte i = (k*7 + i) & 0xff, with
 *     immediate htonl(k); the server wants IBV_WC_RECV_RDMA_WITH_IMM, success,
 *     that immediate, byte_len == SIZE and the pattern in its buffer.
 *   atomic_write: iteration k stores the 8 bytes of value(k) at the server's
 *     buffer (ibv_wr_atomic_write); the server wants exactly those bytes.
 * Exit 0: all checked; 1: a failure (printed); 2: the operation is not
 * supported here (e.g. ATOMIC WRITE on a kernel without it).
 *
 * Build (Debian bookworm, libibverbs-dev):
 *   cc -O1 -Wall -Wextra -o verbs_op verbs_op.c -libverbs
 */
#define _XOPEN_SOURCE 700 /* lrand48 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { OP_WRITE_IMM, OP_ATOMIC_WRITE };
#define MSG_DONE 0xfffffffdu        /* client -> server: all iterations sent */
#define MSG_FAILED 0xfffffffeu      /* client -> server: client-side failure */
#define MSG_UNSUPPORTED 0xffffffffu /* client -> server: op not supported */
#define POLL_TIMEOUT_S 10

struct peer { /* what the sides exchange; sent as text */
	unsigned lid, qpn, psn, rkey;
	unsigned long long addr;
	union ibv_gid gid;
};

static const char *opname;

static void fail(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", opname ? opname : "verbs_op");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void xfer(int fd, void *buf, size_t len, int out)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
		if (n <= 0)
			fail(1, "tcp %s: %s", out ? "write" : "read",
			     n == 0 ? "peer closed the connection" : strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void send_u32(int fd, uint32_t v) { v = htonl(v); xfer(fd, &v, 4, 1); }
static uint32_t recv_u32(int fd) { uint32_t v; xfer(fd, &v, 4, 0); return ntohl(v); }

static int tcp_connect(const char *server, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1, tries;
	if (inet_pton(AF_INET, server, &sa.sin_addr) != 1)
		fail(1, "bad IPv4 address %s", server);
	for (tries = 0;; tries++) { /* the server may not be listening yet */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			fail(1, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			break;
		close(fd);
		if (tries == 50)
			fail(1, "connect %s:%d: %s", server, port, strerror(errno));
		nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
		fail(1, "TCP_NODELAY: %s", strerror(errno));
	return fd;
}

static int tcp_accept(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd, one = 1;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1))
		fail(1, "listen on port %d: %s", port, strerror(errno));
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fail(1, "accept: %s", strerror(errno));
	close(lfd);
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
		fail(1, "TCP_NODELAY: %s", strerror(errno));
	return fd;
}

static void exchange(int fd, const struct peer *me, struct peer *rem)
{
	char msg[128], gid[33];
	int i;
	for (i = 0; i < 16; i++)
		sprintf(gid + 2 * i, "%02x", me->gid.raw[i]);
	memset(msg, 0, sizeof msg);
	snprintf(msg, sizeof msg, "%04x:%06x:%06x:%08x:%016llx:%s", me->lid, me->qpn,
		 me->psn, me->rkey, me->addr, gid);
	xfer(fd, msg, sizeof msg, 1);
	xfer(fd, msg, sizeof msg, 0);
	msg[sizeof msg - 1] = 0;
	if (!strcmp(msg, "UNSUPPORTED"))
		fail(2, "the client's device cannot post it: not supported");
	if (sscanf(msg, "%x:%x:%x:%x:%llx:%32s", &rem->lid, &rem->qpn, &rem->psn,
		   &rem->rkey, &rem->addr, gid) != 6 || strlen(gid) != 32)
		fail(1, "bad peer message '%s'", msg);
	for (i = 0; i < 16; i++) {
		unsigned b;
		sscanf(gid + 2 * i, "%2x", &b);
		rem->gid.raw[i] = (uint8_t)b;
	}
}

/* One completion, or fail after POLL_TIMEOUT_S seconds. */
static void poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	int n;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > POLL_TIMEOUT_S)
			fail(1, "no completion within %d s", POLL_TIMEOUT_S);
	}
	if (n < 0)
		fail(1, "ibv_poll_cq failed");
}

static void post_recv(struct ibv_qp *qp)
{
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = NULL, .num_sge = 0 }, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		fail(1, "ibv_post_recv failed");
}

static unsigned char pattern(uint32_t k, size_t i) { return (unsigned char)((k * 7 + i) & 0xff); }

static void atomic_value(uint32_t k, unsigned char v[8])
{
	uint64_t x = 0x0123456789abcdefull ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull);
	memcpy(v, &x, 8);
}

static void connect_qp(struct ibv_qp *qp, const struct peer *me, const struct peer *rem,
		       int gidx, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = rem->qpn,
		.rq_psn = rem->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .dlid = (uint16_t)rem->lid, .port_num = 1,
			     .grh = { .dgid = rem->gid, .sgid_index = (uint8_t)gidx,
				      .hop_limit = 64 } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		fail(1, "modify QP to RTR failed");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 18; /* 1.07 s: an emulated peer pauses for half a second at times */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		fail(1, "modify QP to RTS failed");
}

/* Makes the buffer differ everywhere from what iteration k must leave there. */
static void poison(unsigned char *buf, size_t size, int op, uint32_t k)
{
	size_t i;
	unsigned char v[8];
	if (op == OP_ATOMIC_WRITE) {
		atomic_value(k, v);
		for (i = 0; i < 8; i++)
			buf[i] = (unsigned char)~v[i];
	} else {
		for (i = 0; i < size; i++)
			buf[i] = (unsigned char)~pattern(k, i);
	}
}

/* Server side of iteration k: the client says its operation completed. */
static int server_check(struct ibv_cq *cq, struct ibv_qp *qp, int op, uint32_t k,
			const unsigned char *buf, size_t size)
{
	struct ibv_wc wc;
	unsigned char v[8];
	size_t i;
	if (op == OP_ATOMIC_WRITE) {
		atomic_value(k, v);
		for (i = 0; i < 8; i++)
			if (buf[i] != v[i]) {
				fprintf(stderr, "atomic_write: iteration %u: byte %zu is 0x%02x, "
					"want 0x%02x\n", k, i, buf[i], v[i]);
				return 0;
			}
		return 1;
	}
	poll_one(cq, &wc);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
	    !(wc.wc_flags & IBV_WC_WITH_IMM) || wc.imm_data != htonl(k) ||
	    wc.byte_len != size) {
		fprintf(stderr, "write_imm: iteration %u: completion status %s opcode %d "
			"flags 0x%x imm 0x%08x byte_len %u; want success, %d, imm 0x%08x, "
			"byte_len %zu\n", k, ibv_wc_status_str(wc.status), wc.opcode,
			wc.wc_flags, ntohl(wc.imm_data), wc.byte_len,
			IBV_WC_RECV_RDMA_WITH_IMM, k, size);
		return 0;
	}
	for (i = 0; i < size; i++)
		if (buf[i] != pattern(k, i)) {
			fprintf(stderr, "write_imm: iteration %u: byte %zu is 0x%02x, want "
				"0x%02x\n", k, i, buf[i], pattern(k, i));
			return 0;
		}
	post_recv(qp);
	return 1;
}

/* Client side of iteration k: post one operation and wait for its completion.
 * Returns 1 done, 0 failed, -1 not supported. */
static int client_op(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, int op,
		     uint32_t k, size_t size, const struct peer *rem)
{
	unsigned char *buf = mr->addr;
	struct ibv_wc wc;
	size_t i;
	int ret;
	if (op == OP_ATOMIC_WRITE) {
		struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
		atomic_value(k, buf);
		ibv_wr_start(qpx);
		qpx->wr_id = k;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_write(qpx, rem->rkey, rem->addr, buf);
		ret = ibv_wr_complete(qpx);
		if (ret) {
			fprintf(stderr, "atomic_write: ibv_wr_complete: %s\n", strerror(ret));
			return ret == EOPNOTSUPP ? -1 : 0;
		}
	} else {
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = (uint32_t)size,
				       .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED,
					  .imm_data = htonl(k) }, *bad;
		wr.wr.rdma.remote_addr = rem->addr;
		wr.wr.rdma.rkey = rem->rkey;
		for (i = 0; i < size; i++)
			buf[i] = pattern(k, i);
		if ((ret = ibv_post_send(qp, &wr, &bad))) {
			fprintf(stderr, "write_imm: ibv_post_send: %s\n", strerror(ret));
			return 0;
		}
	}
	poll_one(cq, &wc);
	if (wc.status == IBV_WC_SUCCESS && wc.wr_id == k &&
	    wc.opcode == (op == OP_ATOMIC_WRITE ? IBV_WC_ATOMIC_WRITE : IBV_WC_RDMA_WRITE))
		return 1;
	fprintf(stderr, "%s: iteration %u: send completion status %s opcode %d wr_id %llu\n",
		opname, k, ibv_wc_status_str(wc.status), wc.opcode,
		(unsigned long long)wc.wr_id);
	/* A kernel without ATOMIC WRITE rejects the opcode locally or remotely. */
	if (op == OP_ATOMIC_WRITE && k == 0 &&
	    (wc.status == IBV_WC_LOC_QP_OP_ERR || wc.status == IBV_WC_REM_INV_REQ_ERR))
		return -1;
	if (op == OP_ATOMIC_WRITE && k == 0 && wc.status == IBV_WC_RETRY_EXC_ERR)
		fprintf(stderr, "atomic_write: (a responder without ATOMIC WRITE may drop "
			"it silently)\n");
	return 0;
}

static enum ibv_mtu mtu_of(int m)
{
	switch (m) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	fail(1, "bad MTU %d (256, 512, 1024, 2048 or 4096)", m);
	return IBV_MTU_1024;
}

int main(int argc, char **argv)
{
	int op = -1, gidx = 0, mtu = 1024, port = 18515, c, fd, access;
	long iters = 100, size = 4096;
	const char *server_ip = NULL;
	int client;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_port_attr pa;
	struct peer me, rem;
	unsigned char *buf;
	size_t len;
	uint32_t k, msg;
	char reply;

	while ((c = getopt(argc, argv, "o:g:m:n:s:p:")) != -1) {
		switch (c) {
		case 'o':
			opname = optarg;
			op = !strcmp(optarg, "write_imm") ? OP_WRITE_IMM :
			     !strcmp(optarg, "atomic_write") ? OP_ATOMIC_WRITE : -1;
			break;
		case 'g': gidx = atoi(optarg); break;
		case 'm': mtu = atoi(optarg); break;
		case 'n': iters = atol(optarg); break;
		case 's': size = atol(optarg); break;
		case 'p': port = atoi(optarg); break;
		default: op = -1; optind = argc + 1; break;
		}
	}
	if (optind == argc - 1)
		server_ip = argv[optind];
	else if (optind != argc)
		op = -1;
	if (op < 0 || iters < 1 || iters > 0x7fffffff || size < 1 || size > 1 << 30) {
		fprintf(stderr, "usage: %s -o write_imm|atomic_write [-g GIDIDX] [-m MTU] "
			"[-n ITERS] [-s SIZE] [-p PORT] [SERVER_IPV4]\n", argv[0]);
		return 1;
	}
	if (op == OP_ATOMIC_WRITE)
		size = 8;
	len = (size_t)size;

	devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		fail(1, "no RDMA device");
	if (!(ctx = ibv_open_device(devs[0])))
		fail(1, "cannot open %s", ibv_get_device_name(devs[0]));
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gidx, &me.gid))
		fail(1, "cannot query port 1 / GID index %d", gidx);
	if (posix_memalign((void **)&buf, 4096, len))
		fail(1, "out of memory");
	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (op == OP_ATOMIC_WRITE)
		access |= IBV_ACCESS_REMOTE_ATOMIC;
	if (!(pd = ibv_alloc_pd(ctx)) || !(mr = ibv_reg_mr(pd, buf, len, access)) ||
	    !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		fail(1, "cannot allocate PD, MR or CQ");

	client = server_ip != NULL;
	fd = client ? tcp_connect(server_ip, port) : tcp_accept(port);
	{
		struct ibv_qp_init_attr_ex ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
		};
		if (client && op == OP_ATOMIC_WRITE) { /* only the client posts it */
			ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
		}
		qp = ibv_create_qp_ex(ctx, &ia);
		if (!qp && client && op == OP_ATOMIC_WRITE) {
			char no[128] = "UNSUPPORTED";
			xfer(fd, no, sizeof no, 1);
			fail(2, "%s cannot create a QP that posts ATOMIC WRITE (%s): not "
			     "supported", ibv_get_device_name(devs[0]), strerror(errno));
		}
		if (!qp)
			fail(1, "ibv_create_qp_ex: %s", strerror(errno));
	}
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = access & ~IBV_ACCESS_LOCAL_WRITE };
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
			fail(1, "modify QP to INIT failed");
	}
	if (!client && op == OP_WRITE_IMM)
		post_recv(qp);
	srand48(getpid() ^ time(NULL));
	me.lid = pa.lid;
	me.qpn = qp->qp_num;
	me.psn = (unsigned)lrand48() & 0xffffff;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	exchange(fd, &me, &rem);
	connect_qp(qp, &me, &rem, gidx, mtu_of(mtu));
	if (!client)
		poison(buf, len, op, 0);
	reply = 'r'; /* both sides ready to send and receive */
	xfer(fd, &reply, 1, 1);
	xfer(fd, &reply, 1, 0);

	for (k = 0;; k++) {
		if (client) {
			int r = k < iters ? client_op(qp, cq, mr, op, k, len, &rem) : 1;
			send_u32(fd, k == iters ? MSG_DONE : r > 0 ? k : r < 0 ?
				 MSG_UNSUPPORTED : MSG_FAILED);
			if (r < 0)
				fail(2, "the devices do not support it");
			if (r == 0)
				fail(1, "failed at iteration %u", k);
			xfer(fd, &reply, 1, 0);
			if (reply != 'k')
				fail(1, "the server found a mismatch at iteration %u", k);
			if (k == iters)
				break;
		} else {
			msg = recv_u32(fd);
			if (msg == MSG_UNSUPPORTED)
				fail(2, "the client's device does not support it");
			if (msg == MSG_FAILED)
				fail(1, "the client failed at iteration %u", k);
			if (msg == MSG_DONE && k == iters) {
				struct ibv_wc wc;
				if (ibv_poll_cq(cq, 1, &wc) != 0)
					fail(1, "an unexpected completion after the last "
					     "iteration");
				reply = 'k';
				xfer(fd, &reply, 1, 1);
				break;
			}
			if (msg != k)
				fail(1, "the client sent %u at iteration %u", msg, k);
			reply = server_check(cq, qp, op, k, buf, len) ? 'k' : 'x';
			if (reply == 'k')
				poison(buf, len, op, k + 1);
			xfer(fd, &reply, 1, 1);
			if (reply != 'k')
				return 1;
		}
	}
	printf("%s: %ld iterations of %zu bytes ok (%s, %s)\n", opname, iters, len,
	       client ? "client" : "server", ibv_get_device_name(devs[0]));
	close(fd);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	free(buf);
	return 0;
}
