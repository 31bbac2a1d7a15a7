/*
 * An unmodified librpma (1.2) on softrnic: a server and a client over one RC connection that
 * librpma sets up with rdma_cm.
 *
 *   rpma_test server ADDR PORT
 *   rpma_test client ADDR PORT
 *
 * The server registers memory of known content surrounded by canaries, listens, waits for
 * the request on the endpoint's fd, checks the client's private data in it, and accepts the
 * connection with its memory region's descriptor in the private data (the REP's). The
 * client takes the descriptor from the private data, checks the error cases of
 * rpma_mr_remote_from_descriptor, then reads, writes, flushes (visibility), writes 8 bytes
 * atomically, and reads again to see its writes; it sends a message, which the server
 * receives into a buffer posted before the accept (rpma_conn_req_recv), and the server
 * answers with a message of its own (rpma_send, rpma_recv). The server then checks its memory:
 * the client's writes there, everything else (canaries, the read region) untouched. The
 * client disconnects; both see RPMA_CONN_CLOSED (the server after its event fd said so).
 *
 * Both connections have a receive CQ of their own: the server's CQs each on a completion
 * channel of its own (rpma_cq_wait), the client's both on one (rpma_conn_wait). Every
 * completion is waited for and checked (rpma_cq_get_wc): status, opcode, op context (wr_id),
 * and for a receive its length and bytes.
 *
 * Exit status: 0 when every check passed, 1 on any failure, 2 when the client's connection
 * was rejected or unreachable (the server is not listening yet: the caller may retry).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librpma.h>

/* The process's role, for the messages. */
static const char *role = "?";

#define FAIL(...)                                                                         \
	do {                                                                              \
		fprintf(stderr, "%s: FAIL %s:%d: ", role, __FILE__, __LINE__);           \
		fprintf(stderr, __VA_ARGS__);                                             \
		fprintf(stderr, "\n");                                                    \
		exit(1);                                                                  \
	} while (0)

/* Calls an rpma_* function that must return 0. */
#define RPMA_OK(call)                                                                     \
	do {                                                                              \
		int ret_ = (call);                                                        \
		if (ret_ != 0)                                                            \
			FAIL("%s returned %d (%s)", #call, ret_, rpma_err_2str(ret_));    \
	} while (0)

/* Calls an rpma_* function that must fail with `expected`. */
#define RPMA_FAILS(call, expected)                                                        \
	do {                                                                              \
		int ret_ = (call);                                                        \
		if (ret_ != (expected))                                                   \
			FAIL("%s returned %d (%s), not %s", #call, ret_,                  \
			     rpma_err_2str(ret_), #expected);                             \
	} while (0)

/* Fails, saying `cond` and the message, unless `cond` holds. */
#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s: FAIL %s:%d: (%s) ", role, __FILE__, __LINE__,   \
				#cond);                                                   \
			fprintf(stderr, __VA_ARGS__);                                     \
			fprintf(stderr, "\n");                                            \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

/*
 * The server's memory region: canaries everywhere but in three regions.
 *   READ_OFF: READ_LEN bytes of read_pattern, which the client reads.
 *   WRITE_OFF: WRITE_LEN bytes, zero, which the client overwrites with write_pattern.
 *   ATOMIC_OFF: 8 bytes, zero, which the client overwrites with ATOMIC_VALUE atomically.
 */
#define SERVER_SIZE 4096
#define READ_OFF 64
#define READ_LEN 256
#define WRITE_OFF 512
#define WRITE_LEN 256
#define ATOMIC_OFF 1024
#define CANARY 0xA5

/* The size of a REP's private data field: the most an accept can send. */
#define PDATA_MAX 196

static const char ATOMIC_VALUE[8] = { 'a', 't', 'o', 'm', 'i', 'c', '!', '\n' };

/* Messages, each side's own. */
#define MSG_SIZE 64
static const char CLIENT_MSG[] = "client: reads, writes, atomic write and flush done";
static const char SERVER_MSG[] = "server: memory checked, goodbye";
/* The client's private data, in the REQ. */
static const char HELLO[] = "rpma_test client";

/* Op contexts: the wr_id each completion must carry. */
static int ctx_read, ctx_write, ctx_atomic, ctx_flush, ctx_readback, ctx_readback_atomic,
	ctx_send, ctx_recv;

static uint8_t read_pattern(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

static uint8_t write_pattern(size_t i)
{
	return (uint8_t)(i * 13 + 5);
}

static int in_region(size_t i, size_t off, size_t len)
{
	return i >= off && i < off + len;
}

static void *alloc_page_aligned(size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), size) != 0)
		FAIL("posix_memalign(%zu) failed", size);
	memset(p, 0, size);
	return p;
}

static const char *opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_RECV: return "RECV";
	default: return "other";
	}
}

/*
 * A connection's CQs: `cq` for the sends (and, without `rcq`, receives), `rcq` for the
 * receives if the connection has one; `shared` when both report to one completion channel,
 * the connection's, which rpma_conn_wait waits on (else each CQ has its own, rpma_cq_wait).
 */
struct cqs {
	struct rpma_conn *conn;
	struct rpma_cq *cq;
	struct rpma_cq *rcq;
	int shared;
};

static struct cqs get_cqs(struct rpma_conn *conn, int shared)
{
	struct cqs c = { .conn = conn, .shared = shared };
	RPMA_OK(rpma_conn_get_cq(conn, &c.cq));
	RPMA_OK(rpma_conn_get_rcq(conn, &c.rcq));
	CHECK(c.cq != NULL && c.rcq != NULL && c.cq != c.rcq, "cq %p, rcq %p", (void *)c.cq,
	      (void *)c.rcq);
	return c;
}

/*
 * The next completion of `cq` (one of `c`'s): polls, and waits on its completion channel
 * while there is none. On a shared channel the event may be the other CQ's: its completions
 * stay queued for their own turn.
 */
static struct ibv_wc next_wc(const struct cqs *c, struct rpma_cq *cq)
{
	for (;;) {
		struct ibv_wc wc;
		int got = 0;
		int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
		if (ret == 0) {
			CHECK(got == 1, "rpma_cq_get_wc got %d completions", got);
			return wc;
		}
		if (ret != RPMA_E_NO_COMPLETION)
			FAIL("rpma_cq_get_wc returned %d (%s)", ret, rpma_err_2str(ret));
		if (!c->shared) {
			RPMA_OK(rpma_cq_wait(cq));
			continue;
		}
		struct rpma_cq *woken = NULL;
		bool is_rcq = false;
		RPMA_OK(rpma_conn_wait(c->conn, 0, &woken, &is_rcq));
		CHECK(woken == (is_rcq ? c->rcq : c->cq),
		      "rpma_conn_wait named CQ %p (is_rcq %d), not the connection's", (void *)woken,
		      is_rcq);
	}
}

/* Checks that `wc` is the successful completion of the operation `ctx` of opcode `op`. */
static void check_wc(const struct ibv_wc *wc, const void *ctx, const char *what,
		     enum ibv_wc_opcode op)
{
	if (wc->status != IBV_WC_SUCCESS)
		FAIL("%s: completion status %d (%s), wr_id 0x%" PRIx64, what, wc->status,
		     ibv_wc_status_str(wc->status), wc->wr_id);
	CHECK(wc->wr_id == (uint64_t)(uintptr_t)ctx,
	      "%s: wr_id 0x%" PRIx64 " is not its op context %p", what, wc->wr_id, ctx);
	CHECK(wc->opcode == op, "%s: opcode %d (%s), not %d (%s)", what, wc->opcode,
	      opcode_str(wc->opcode), op, opcode_str(op));
	printf("%s: completed (%s)\n", what, opcode_str(op));
}

/* Waits for the next completion of `cq` and checks it (check_wc). */
static struct ibv_wc expect_wc(const struct cqs *c, struct rpma_cq *cq, const void *ctx,
			       const char *what, enum ibv_wc_opcode op)
{
	struct ibv_wc wc = next_wc(c, cq);
	check_wc(&wc, ctx, what, op);
	return wc;
}

/* Checks that `wc` received `msg` (its terminating NUL included) into `buf`. */
static void check_received(const struct ibv_wc *wc, const char *buf, const char *msg)
{
	CHECK(wc->byte_len == strlen(msg) + 1, "received %u bytes, not %zu", wc->byte_len,
	      strlen(msg) + 1);
	CHECK(memcmp(buf, msg, strlen(msg) + 1) == 0, "received \"%.*s\", not \"%s\"",
	      (int)wc->byte_len, buf, msg);
	printf("received \"%s\"\n", buf);
}

/* Waits for the next connection event, which must be `expected`. */
static void expect_event(struct rpma_conn *conn, enum rpma_conn_event expected)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	RPMA_OK(rpma_conn_next_event(conn, &ev));
	CHECK(ev == expected, "connection event %s, not %s", rpma_utils_conn_event_2str(ev),
	      rpma_utils_conn_event_2str(expected));
	printf("event %s\n", rpma_utils_conn_event_2str(ev));
}

/* Waits until `fd` (an endpoint's or a connection's event fd) is readable. */
static void wait_readable(int fd, const char *what)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;
	while ((n = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	CHECK(n == 1 && (p.revents & POLLIN), "poll on the %s fd: %d, revents 0x%x (%s)", what, n,
	      p.revents, n < 0 ? strerror(errno) : "");
}

/* librpma's errors on stderr too (its default log function writes them to syslog only). */
static void log_errors_to_stderr(void)
{
	RPMA_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR));
}

static struct rpma_peer *new_peer(const char *addr, enum rpma_util_ibv_context_type type)
{
	struct ibv_context *ctx = NULL;
	RPMA_OK(rpma_utils_get_ibv_context(addr, type, &ctx));
	CHECK(ctx != NULL, "no ibv_context for %s", addr);
	struct rpma_peer *peer = NULL;
	RPMA_OK(rpma_peer_new(ctx, &peer));
	return peer;
}

static int server(const char *addr, const char *port)
{
	role = "server";
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL);

	uint8_t *mem = alloc_page_aligned(SERVER_SIZE);
	for (size_t i = 0; i < SERVER_SIZE; i++)
		mem[i] = CANARY;
	for (size_t i = 0; i < READ_LEN; i++)
		mem[READ_OFF + i] = read_pattern(i);
	memset(mem + WRITE_OFF, 0, WRITE_LEN);
	memset(mem + ATOMIC_OFF, 0, 8);
	struct rpma_mr_local *mr = NULL;
	RPMA_OK(rpma_mr_reg(peer, mem, SERVER_SIZE,
			    RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST |
				    RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
			    &mr));

	char *msg = alloc_page_aligned(2 * MSG_SIZE); /* [recv | send] */
	struct rpma_mr_local *msg_mr = NULL;
	RPMA_OK(rpma_mr_reg(peer, msg, 2 * MSG_SIZE, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
			    &msg_mr));

	/*
	 * The private data of the accept: the descriptor's size, then the descriptor (the
	 * client gets the REP's whole private data field, zero-padded, as with the kernel).
	 */
	size_t desc_size = 0;
	RPMA_OK(rpma_mr_get_descriptor_size(mr, &desc_size));
	char private_data[PDATA_MAX] = { 0 };
	CHECK(desc_size > 0 && desc_size < sizeof(private_data), "descriptor of %zu bytes",
	      desc_size);
	private_data[0] = (char)desc_size;
	RPMA_OK(rpma_mr_get_descriptor(mr, private_data + 1));

	struct rpma_ep *ep = NULL;
	RPMA_OK(rpma_ep_listen(peer, addr, port, &ep));
	printf("listening on %s:%s\n", addr, port);
	fflush(stdout);

	/* The endpoint's fd is readable when a request came (as event loops use it). */
	int ep_fd = -1;
	RPMA_OK(rpma_ep_get_fd(ep, &ep_fd));
	wait_readable(ep_fd, "endpoint");

	struct rpma_conn_req *req = NULL;
	/* A receive CQ of its own (rcq), each CQ with its own completion channel. */
	struct rpma_conn_cfg *cfg = NULL;
	RPMA_OK(rpma_conn_cfg_new(&cfg));
	RPMA_OK(rpma_conn_cfg_set_rcq_size(cfg, 8));
	RPMA_OK(rpma_ep_next_conn_req(ep, cfg, &req));
	struct rpma_conn_private_data hello = { 0 };
	RPMA_OK(rpma_conn_req_get_private_data(req, &hello));
	CHECK(hello.ptr != NULL && hello.len >= sizeof(HELLO) &&
		      memcmp(hello.ptr, HELLO, sizeof(HELLO)) == 0,
	      "the request's private data (%u bytes) is not \"%s\"", hello.len, HELLO);
	printf("request's private data: \"%s\"\n", (const char *)hello.ptr);
	/* The client sends right after the connection is established: receive before. */
	RPMA_OK(rpma_conn_req_recv(req, msg_mr, 0, MSG_SIZE, &ctx_recv));
	struct rpma_conn_private_data pdata = { .ptr = private_data,
						.len = (uint8_t)(1 + desc_size) };
	struct rpma_conn *conn = NULL;
	RPMA_OK(rpma_conn_req_connect(&req, &pdata, &conn));
	CHECK(req == NULL, "rpma_conn_req_connect left the request");
	expect_event(conn, RPMA_CONN_ESTABLISHED);

	struct cqs c = get_cqs(conn, 0);

	/* The client's message comes after its writes, flush and reads completed. */
	struct ibv_wc wc = expect_wc(&c, c.rcq, &ctx_recv, "recv", IBV_WC_RECV);
	check_received(&wc, msg, CLIENT_MSG);

	/* The memory: the client's writes, and nothing else changed. */
	size_t bad = 0;
	for (size_t i = 0; i < SERVER_SIZE; i++) {
		uint8_t want;
		if (in_region(i, READ_OFF, READ_LEN))
			want = read_pattern(i - READ_OFF);
		else if (in_region(i, WRITE_OFF, WRITE_LEN))
			want = write_pattern(i - WRITE_OFF);
		else if (in_region(i, ATOMIC_OFF, 8))
			want = (uint8_t)ATOMIC_VALUE[i - ATOMIC_OFF];
		else
			want = CANARY;
		if (mem[i] != want) {
			if (bad++ < 8)
				fprintf(stderr, "server: byte %zu is 0x%02x, not 0x%02x\n", i,
					mem[i], want);
		}
	}
	CHECK(bad == 0, "%zu bytes of the memory region are wrong", bad);
	printf("memory: the client's writes in place, canaries and read region untouched\n");

	memcpy(msg + MSG_SIZE, SERVER_MSG, sizeof(SERVER_MSG));
	RPMA_OK(rpma_send(conn, msg_mr, MSG_SIZE, sizeof(SERVER_MSG), RPMA_F_COMPLETION_ALWAYS,
			  &ctx_send));
	expect_wc(&c, c.cq, &ctx_send, "send", IBV_WC_SEND);

	/* The client disconnects when it has our message: the event fd says so. */
	int event_fd = -1;
	RPMA_OK(rpma_conn_get_event_fd(conn, &event_fd));
	wait_readable(event_fd, "connection's event");
	expect_event(conn, RPMA_CONN_CLOSED);
	RPMA_OK(rpma_conn_disconnect(conn));
	RPMA_OK(rpma_conn_delete(&conn));
	CHECK(conn == NULL, "rpma_conn_delete left the connection");

	RPMA_OK(rpma_ep_shutdown(&ep));
	RPMA_OK(rpma_conn_cfg_delete(&cfg));
	RPMA_OK(rpma_mr_dereg(&msg_mr));
	RPMA_OK(rpma_mr_dereg(&mr));
	RPMA_OK(rpma_peer_delete(&peer));
	free(msg);
	free(mem);
	printf("server: PASS\n");
	return 0;
}

/* rpma_mr_remote_from_descriptor's documented failures, on the descriptor `desc`. */
static void descriptor_errors(const void *desc, size_t size)
{
	/* A failing call must not set *mr_ptr. */
	struct rpma_mr_remote *const untouched = (struct rpma_mr_remote *)(uintptr_t)0x5a5a;
	struct rpma_mr_remote *mr = untouched;

	RPMA_FAILS(rpma_mr_remote_from_descriptor(NULL, size, &mr), RPMA_E_INVAL);
	RPMA_FAILS(rpma_mr_remote_from_descriptor(desc, size, NULL), RPMA_E_INVAL);
	RPMA_FAILS(rpma_mr_remote_from_descriptor(desc, 0, &mr), RPMA_E_INVAL);
	RPMA_FAILS(rpma_mr_remote_from_descriptor(desc, size - 1, &mr), RPMA_E_INVAL);
	CHECK(mr == untouched, "a failing rpma_mr_remote_from_descriptor set *mr_ptr");

	/*
	 * A descriptor of the right size that describes no memory region (all zeros: no
	 * address, size, key or usage). librpma.h documents RPMA_E_NOSUPP for it; librpma
	 * 1.2.0's code returns RPMA_E_INVAL (it checks the usage field only): either is a
	 * refusal.
	 */
	char zero[256] = { 0 };
	int ret = rpma_mr_remote_from_descriptor(zero, size, &mr);
	CHECK(ret == RPMA_E_NOSUPP || ret == RPMA_E_INVAL,
	      "a zeroed descriptor gave %d (%s), not RPMA_E_NOSUPP or RPMA_E_INVAL", ret,
	      rpma_err_2str(ret));
	CHECK(mr == untouched, "a failing rpma_mr_remote_from_descriptor set *mr_ptr");
	printf("descriptor error cases: as documented (invalid content: %s)\n",
	       rpma_err_2str(ret));
}

static int client(const char *addr, const char *port)
{
	role = "client";
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);

	/* [read dst | write src | read-back dst | atomic read-back dst] */
	uint8_t *mem = alloc_page_aligned(4 * 256);
	uint8_t *read_dst = mem, *write_src = mem + 256, *readback = mem + 512,
		*atomic_back = mem + 768;
	for (size_t i = 0; i < WRITE_LEN; i++)
		write_src[i] = write_pattern(i);
	struct rpma_mr_local *mr = NULL;
	RPMA_OK(rpma_mr_reg(peer, mem, 4 * 256,
			    RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC, &mr));

	char *msg = alloc_page_aligned(2 * MSG_SIZE); /* [recv | send] */
	struct rpma_mr_local *msg_mr = NULL;
	RPMA_OK(rpma_mr_reg(peer, msg, 2 * MSG_SIZE, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
			    &msg_mr));

	struct rpma_conn_req *req = NULL;
	/* A receive CQ of its own (rcq), both CQs on one completion channel (rpma_conn_wait). */
	struct rpma_conn_cfg *cfg = NULL;
	RPMA_OK(rpma_conn_cfg_new(&cfg));
	RPMA_OK(rpma_conn_cfg_set_rcq_size(cfg, 8));
	RPMA_OK(rpma_conn_cfg_set_compl_channel(cfg, true));
	RPMA_OK(rpma_conn_req_new(peer, addr, port, cfg, &req));
	struct rpma_conn *conn = NULL;
	struct rpma_conn_private_data hello = { .ptr = (void *)HELLO, .len = sizeof(HELLO) };
	RPMA_OK(rpma_conn_req_connect(&req, &hello, &conn));
	CHECK(req == NULL, "rpma_conn_req_connect left the request");

	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
	RPMA_OK(rpma_conn_next_event(conn, &ev));
	if (ev == RPMA_CONN_REJECTED || ev == RPMA_CONN_UNREACHABLE) {
		/* No server listening yet: the caller may try again. */
		fprintf(stderr, "client: NOT LISTENING: connection event %s\n",
			rpma_utils_conn_event_2str(ev));
		(void) rpma_conn_delete(&conn);
		(void) rpma_conn_cfg_delete(&cfg);
		return 2;
	}
	CHECK(ev == RPMA_CONN_ESTABLISHED, "connection event %s, not ESTABLISHED",
	      rpma_utils_conn_event_2str(ev));
	printf("event %s\n", rpma_utils_conn_event_2str(ev));

	/* The server's descriptor, from the REP's private data: its size, then itself. */
	struct rpma_conn_private_data pdata = { 0 };
	RPMA_OK(rpma_conn_get_private_data(conn, &pdata));
	CHECK(pdata.ptr != NULL && pdata.len > 0, "no private data");
	const uint8_t *pd = pdata.ptr;
	size_t desc_size = pd[0];
	CHECK(desc_size > 0 && 1 + desc_size <= pdata.len,
	      "a descriptor of %zu bytes in %u bytes of private data", desc_size, pdata.len);
	printf("private data: %u bytes, a descriptor of %zu\n", pdata.len, desc_size);
	descriptor_errors(pd + 1, desc_size);
	struct rpma_mr_remote *remote = NULL;
	RPMA_OK(rpma_mr_remote_from_descriptor(pd + 1, desc_size, &remote));
	size_t remote_size = 0;
	RPMA_OK(rpma_mr_remote_get_size(remote, &remote_size));
	CHECK(remote_size == SERVER_SIZE, "remote region of %zu bytes, not %d", remote_size,
	      SERVER_SIZE);
	int flush_type = 0;
	RPMA_OK(rpma_mr_remote_get_flush_type(remote, &flush_type));
	CHECK(flush_type & RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
	      "remote flush types 0x%x lack visibility", flush_type);

	struct cqs c = get_cqs(conn, 1);

	/* The server answers our message: a receive for it first. */
	RPMA_OK(rpma_recv(conn, msg_mr, 0, MSG_SIZE, &ctx_recv));

	RPMA_OK(rpma_read(conn, mr, 0, remote, READ_OFF, READ_LEN, RPMA_F_COMPLETION_ALWAYS,
			  &ctx_read));
	expect_wc(&c, c.cq, &ctx_read, "read", IBV_WC_RDMA_READ);
	for (size_t i = 0; i < READ_LEN; i++)
		CHECK(read_dst[i] == read_pattern(i), "read byte %zu is 0x%02x, not 0x%02x", i,
		      read_dst[i], read_pattern(i));
	printf("read: %d bytes as the server wrote them\n", READ_LEN);

	RPMA_OK(rpma_write(conn, remote, WRITE_OFF, mr, 256, WRITE_LEN,
			   RPMA_F_COMPLETION_ALWAYS, &ctx_write));
	expect_wc(&c, c.cq, &ctx_write, "write", IBV_WC_RDMA_WRITE);

	RPMA_OK(rpma_atomic_write(conn, remote, ATOMIC_OFF, ATOMIC_VALUE,
				  RPMA_F_COMPLETION_ALWAYS, &ctx_atomic));
	expect_wc(&c, c.cq, &ctx_atomic, "atomic write", IBV_WC_RDMA_WRITE);

	/* librpma 1.2 emulates a visibility flush with an RDMA READ (no native FLUSH). */
	RPMA_OK(rpma_flush(conn, remote, WRITE_OFF, ATOMIC_OFF + 8 - WRITE_OFF,
			   RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, &ctx_flush));
	expect_wc(&c, c.cq, &ctx_flush, "flush", IBV_WC_RDMA_READ);

	/* After the flush, the writes are visible to a read. */
	RPMA_OK(rpma_read(conn, mr, 512, remote, WRITE_OFF, WRITE_LEN, RPMA_F_COMPLETION_ALWAYS,
			  &ctx_readback));
	expect_wc(&c, c.cq, &ctx_readback, "read back", IBV_WC_RDMA_READ);
	CHECK(memcmp(readback, write_src, WRITE_LEN) == 0, "the written bytes did not read back");
	RPMA_OK(rpma_read(conn, mr, 768, remote, ATOMIC_OFF, 8, RPMA_F_COMPLETION_ALWAYS,
			  &ctx_readback_atomic));
	expect_wc(&c, c.cq, &ctx_readback_atomic, "read back atomic", IBV_WC_RDMA_READ);
	CHECK(memcmp(atomic_back, ATOMIC_VALUE, 8) == 0,
	      "the atomically written bytes did not read back");
	printf("read back: the write and the atomic write are visible\n");

	memcpy(msg + MSG_SIZE, CLIENT_MSG, sizeof(CLIENT_MSG));
	RPMA_OK(rpma_send(conn, msg_mr, MSG_SIZE, sizeof(CLIENT_MSG), RPMA_F_COMPLETION_ALWAYS,
			  &ctx_send));
	/* Our send's completion, and the server's answer on the receive CQ. */
	expect_wc(&c, c.cq, &ctx_send, "send", IBV_WC_SEND);
	struct ibv_wc wc = expect_wc(&c, c.rcq, &ctx_recv, "recv", IBV_WC_RECV);
	check_received(&wc, msg, SERVER_MSG);

	RPMA_OK(rpma_mr_remote_delete(&remote));
	RPMA_OK(rpma_conn_disconnect(conn));
	expect_event(conn, RPMA_CONN_CLOSED);
	RPMA_OK(rpma_conn_delete(&conn));
	CHECK(conn == NULL, "rpma_conn_delete left the connection");

	RPMA_OK(rpma_conn_cfg_delete(&cfg));
	RPMA_OK(rpma_mr_dereg(&msg_mr));
	RPMA_OK(rpma_mr_dereg(&mr));
	RPMA_OK(rpma_peer_delete(&peer));
	free(msg);
	free(mem);
	printf("client: PASS\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
		fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
		return 1;
	}
	log_errors_to_stderr();
	/* RPMA_TEST_DEBUG=1: all of librpma's messages, on stderr. */
	if (getenv("RPMA_TEST_DEBUG")) {
		RPMA_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG));
		RPMA_OK(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_DEBUG));
	}
	if (strcmp(argv[1], "server") == 0)
		return server(argv[2], argv[3]);
	return client(argv[2], argv[3]);
}
