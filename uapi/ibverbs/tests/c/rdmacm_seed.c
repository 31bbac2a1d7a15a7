/* Seed pages through the connection manager: a server hands a client read access to a few
 * pages of its memory, as a program written for rdma-core's librdmacm does it (synchronous
 * endpoints and the helpers of <rdma/rdma_verbs.h>, like rdma-core's rdma_server.c and
 * rdma_client.c examples).
 *
 *   rdmacm_seed server ADDR PORT
 *     rdma_getaddrinfo (passive), rdma_create_ep, rdma_listen, rdma_get_request (the new id
 *     has a QP), then rdma_reg_read on SEED_LEN bytes of known content that lie between two
 *     unregistered canary pages, and rdma_accept with the region's address, rkey and length
 *     in the private data. It waits for the client's disconnect, checks that the seed and
 *     both canaries are exactly as written, then rdma_disconnect, rdma_dereg_mr and
 *     rdma_destroy_ep.
 *
 *   rdmacm_seed client ADDR PORT
 *     rdma_getaddrinfo, rdma_create_ep (address and route resolved, a QP), rdma_reg_msgs for
 *     its landing buffer, rdma_connect (the private data of the ESTABLISHED event, id->event,
 *     describes the region), then
 *       1. rdma_post_read of the whole region with a context pointer: the completion is
 *          IBV_WC_SUCCESS, an RDMA READ of SEED_LEN bytes whose wr_id is that pointer, and the
 *          bytes are the seed;
 *       2. rdma_post_read of 128 bytes starting 64 before the region's end, with another
 *          context: the completion is IBV_WC_REM_ACCESS_ERR with that context as wr_id;
 *     then rdma_disconnect, rdma_dereg_mr and rdma_destroy_ep.
 *
 * Every call's result is checked; the first failure prints what failed (with errno) and
 * exits 1. The client exits 2 if nobody listens at ADDR PORT yet (the REQ was rejected), so
 * that whoever starts both processes can retry it. Each side prints one line per thing it
 * checked, and "<side>: ok" at the end.
 *
 * Send queues use registered memory only, never IBV_SEND_INLINE. */

#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define PAGE 4096
/* The region the server registers: two pages, so a READ of all of it needs several
 * response packets at any MTU. */
#define SEED_LEN (2 * PAGE)
/* The READ that runs past the region's end: its last 64 bytes lie beyond it. */
#define PAST_LEN 128
#define PAST_OFFSET (SEED_LEN - PAST_LEN / 2)

static const char *side = "?";

/* Exits 1 with a message naming the side, what failed and errno if `cond` is false. */
#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            int saved_errno = errno;                                               \
            fprintf(stderr, "%s: failed: ", side);                                 \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, " [%s] (errno %d: %s)\n", #cond, saved_errno,          \
                    strerror(saved_errno));                                        \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* What the server tells the client in the private data of its REP (all big-endian). */
struct seed_desc {
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
};

/* The seed's byte at offset i: differs between neighbouring bytes and between pages. */
static uint8_t seed_byte(size_t i)
{
    return (uint8_t)(i * 131 + (i / PAGE) * 17 + 1);
}

/* The canaries around the seed: one value before it, another after it. */
#define CANARY_BEFORE 0xa5
#define CANARY_AFTER 0x5a

/* The first rdma_addrinfo for ADDR PORT in the TCP port space; `passive` for a listener. */
static struct rdma_addrinfo *addrinfo_of(const char *addr, const char *port, int passive)
{
    struct rdma_addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_port_space = RDMA_PS_TCP;
    if (passive)
        hints.ai_flags = RAI_PASSIVE;
    int ret = rdma_getaddrinfo(addr, port, &hints, &res);
    EXPECT(ret == 0 && res != NULL, "rdma_getaddrinfo(%s, %s) returned %d", addr, port, ret);
    EXPECT(res->ai_qp_type == IBV_QPT_RC, "rdma_getaddrinfo gave QP type %d, not RC",
           res->ai_qp_type);
    return res;
}

/* Index of the first byte of `buf[0..len)` that is not `want(i)`, or -1. */
static long first_difference(const uint8_t *buf, size_t len, uint8_t (*want)(size_t))
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != want(i))
            return (long)i;
    return -1;
}

static uint8_t canary_before(size_t i) { (void)i; return CANARY_BEFORE; }
static uint8_t canary_after(size_t i) { (void)i; return CANARY_AFTER; }

static int server(const char *addr, const char *port)
{
    side = "server";
    struct rdma_addrinfo *res = addrinfo_of(addr, port, 1);

    /* The attributes of the QP each request's id gets (rdma_get_request makes it). The
     * server only answers READs, which take no receive or send work requests of its own. */
    struct ibv_qp_init_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    struct rdma_cm_id *listen_id = NULL;
    EXPECT(rdma_create_ep(&listen_id, res, NULL, &attr) == 0 && listen_id != NULL,
           "rdma_create_ep (passive)");
    EXPECT(rdma_listen(listen_id, 1) == 0, "rdma_listen");
    printf("server: listening on %s port %s\n", addr, port);
    fflush(stdout);

    struct rdma_cm_id *id = NULL;
    EXPECT(rdma_get_request(listen_id, &id) == 0 && id != NULL, "rdma_get_request");
    EXPECT(id->qp != NULL && id->pd != NULL, "the request's id has no QP or PD");
    EXPECT(id->event != NULL && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST,
           "id->event is not the CONNECT_REQUEST");
    printf("server: rdma_get_request gave an id with a QP (qpn %u)\n", id->qp->qp_num);

    /* canary page | SEED_LEN bytes of seed | canary page; only the seed is registered. */
    uint8_t *pages = aligned_alloc(PAGE, PAGE + SEED_LEN + PAGE);
    EXPECT(pages != NULL, "aligned_alloc");
    uint8_t *seed = pages + PAGE, *after = seed + SEED_LEN;
    memset(pages, CANARY_BEFORE, PAGE);
    for (size_t i = 0; i < SEED_LEN; i++)
        seed[i] = seed_byte(i);
    memset(after, CANARY_AFTER, PAGE);
    struct ibv_mr *mr = rdma_reg_read(id, seed, SEED_LEN);
    EXPECT(mr != NULL, "rdma_reg_read of %d bytes", SEED_LEN);
    EXPECT(mr->addr == seed && mr->length == SEED_LEN, "rdma_reg_read's MR is not the seed");
    printf("server: rdma_reg_read registered %d bytes (rkey 0x%x)\n", SEED_LEN, mr->rkey);

    /* Accept with the region in the private data; RDMA_MAX_RESP_RES: as many READs at
     * once as the device and the client allow (librdmacm takes 0 to mean none). */
    struct seed_desc desc = {
        .addr = htobe64((uintptr_t)seed),
        .rkey = htobe32(mr->rkey),
        .len = htobe32(SEED_LEN),
    };
    struct rdma_conn_param param;
    memset(&param, 0, sizeof param);
    param.private_data = &desc;
    param.private_data_len = sizeof desc;
    param.responder_resources = RDMA_MAX_RESP_RES;
    param.initiator_depth = RDMA_MAX_INIT_DEPTH;
    EXPECT(rdma_accept(id, &param) == 0, "rdma_accept");
    EXPECT(id->event != NULL && id->event->event == RDMA_CM_EVENT_ESTABLISHED,
           "after rdma_accept, id->event is not ESTABLISHED");
    printf("server: accepted, the region's address, rkey and length in the private data\n");
    fflush(stdout);

    /* The client reads, then disconnects: the id's channel becomes readable with that
     * DISCONNECTED event. Waiting with poll leaves the event for rdma_disconnect, which on a
     * synchronous id waits for (takes) the id's next event. */
    struct pollfd p = { .fd = id->channel->fd, .events = POLLIN };
    int n;
    do
        n = poll(&p, 1, -1);
    while (n < 0 && errno == EINTR);
    EXPECT(n == 1 && (p.revents & POLLIN), "poll on the id's event channel");

    long d = first_difference(seed, SEED_LEN, seed_byte);
    EXPECT(d < 0, "the seed changed at offset %ld", d);
    d = first_difference(pages, PAGE, canary_before);
    EXPECT(d < 0, "the canary before the seed changed at offset %ld", d);
    d = first_difference(after, PAGE, canary_after);
    EXPECT(d < 0, "the canary after the seed changed at offset %ld", d);
    printf("server: the seed and the canaries around it are unchanged\n");

    EXPECT(rdma_disconnect(id) == 0, "rdma_disconnect");
    EXPECT(id->event != NULL && id->event->event == RDMA_CM_EVENT_DISCONNECTED,
           "after rdma_disconnect, id->event is not DISCONNECTED");
    printf("server: disconnected\n");
    EXPECT(rdma_dereg_mr(mr) == 0, "rdma_dereg_mr");
    rdma_destroy_ep(id);
    rdma_destroy_ep(listen_id);
    rdma_freeaddrinfo(res);
    free(pages);
    printf("server: ok\n");
    return 0;
}

/* One send completion of the client's id (rdma_get_send_comp waits on its channel). */
static struct ibv_wc send_completion(struct rdma_cm_id *id)
{
    struct ibv_wc wc;
    int ret;
    do
        ret = rdma_get_send_comp(id, &wc);
    while (ret == 0);
    EXPECT(ret == 1, "rdma_get_send_comp returned %d", ret);
    return wc;
}

static int client(const char *addr, const char *port)
{
    side = "client";
    struct rdma_addrinfo *res = addrinfo_of(addr, port, 0);

    struct ibv_qp_init_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 2;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    struct rdma_cm_id *id = NULL;
    EXPECT(rdma_create_ep(&id, res, NULL, &attr) == 0 && id != NULL, "rdma_create_ep (active)");
    EXPECT(id->qp != NULL && id->pd != NULL && id->send_cq != NULL,
           "rdma_create_ep's id has no QP, PD or send CQ");

    /* Where the READs land, registered for local writes. */
    uint8_t *land = aligned_alloc(PAGE, SEED_LEN);
    EXPECT(land != NULL, "aligned_alloc");
    memset(land, 0, SEED_LEN);
    struct ibv_mr *mr = rdma_reg_msgs(id, land, SEED_LEN);
    EXPECT(mr != NULL, "rdma_reg_msgs");

    /* NULL parameters: librdmacm offers as many READs at once as the device allows. */
    int connected = rdma_connect(id, NULL);
    if (connected != 0 && errno == ECONNREFUSED) {
        fprintf(stderr, "client: rdma_connect refused: nobody listens yet\n");
        exit(2);
    }
    EXPECT(connected == 0, "rdma_connect");
    struct rdma_cm_event *est = id->event;
    EXPECT(est != NULL && est->event == RDMA_CM_EVENT_ESTABLISHED,
           "after rdma_connect, id->event is not ESTABLISHED");
    EXPECT(est->param.conn.private_data != NULL &&
           est->param.conn.private_data_len >= sizeof(struct seed_desc),
           "the REP carried %u bytes of private data, not the region",
           est->param.conn.private_data_len);
    struct seed_desc desc;
    memcpy(&desc, est->param.conn.private_data, sizeof desc);
    uint64_t raddr = be64toh(desc.addr);
    uint32_t rkey = be32toh(desc.rkey), rlen = be32toh(desc.len);
    EXPECT(rlen == SEED_LEN, "the server's region is %u bytes, not %d", rlen, SEED_LEN);
    printf("client: connected; the region is %u bytes at 0x%llx, rkey 0x%x\n", rlen,
           (unsigned long long)raddr, rkey);

    /* 1. The whole region. The context is any pointer; the completion gives it back. */
    static int whole_ctx, past_ctx;
    EXPECT(rdma_post_read(id, &whole_ctx, land, SEED_LEN, mr, IBV_SEND_SIGNALED, raddr,
                          rkey) == 0, "rdma_post_read of the region");
    struct ibv_wc wc = send_completion(id);
    EXPECT(wc.status == IBV_WC_SUCCESS, "the READ completed with %s",
           ibv_wc_status_str(wc.status));
    EXPECT(wc.wr_id == (uintptr_t)&whole_ctx, "the READ's wr_id is 0x%llx, not its context %p",
           (unsigned long long)wc.wr_id, (void *)&whole_ctx);
    EXPECT(wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == SEED_LEN,
           "the READ's completion has opcode %d, byte_len %u", wc.opcode, wc.byte_len);
    long d = first_difference(land, SEED_LEN, seed_byte);
    EXPECT(d < 0, "the bytes read differ from the seed at offset %ld", d);
    printf("client: rdma_post_read of %d bytes: IBV_WC_SUCCESS, wr_id is the context, "
           "the bytes are the seed\n", SEED_LEN);

    /* 2. A READ whose last PAST_LEN / 2 bytes lie beyond the region: the server's device
     * refuses it (NAK, remote access error); the completion still carries the context. */
    EXPECT(rdma_post_read(id, &past_ctx, land, PAST_LEN, mr, IBV_SEND_SIGNALED,
                          raddr + PAST_OFFSET, rkey) == 0, "rdma_post_read past the region");
    wc = send_completion(id);
    EXPECT(wc.status == IBV_WC_REM_ACCESS_ERR,
           "the READ past the region completed with %s, not IBV_WC_REM_ACCESS_ERR",
           ibv_wc_status_str(wc.status));
    EXPECT(wc.wr_id == (uintptr_t)&past_ctx, "the failed READ's wr_id is 0x%llx, not %p",
           (unsigned long long)wc.wr_id, (void *)&past_ctx);
    printf("client: rdma_post_read of %d bytes from %d before the region's end: "
           "IBV_WC_REM_ACCESS_ERR, wr_id is the context\n", PAST_LEN, PAST_LEN / 2);

    /* A synchronous id's rdma_disconnect returns with the DISCONNECTED event. */
    EXPECT(rdma_disconnect(id) == 0, "rdma_disconnect");
    EXPECT(id->event != NULL && id->event->event == RDMA_CM_EVENT_DISCONNECTED,
           "after rdma_disconnect, id->event is not DISCONNECTED");
    printf("client: disconnected\n");
    EXPECT(rdma_dereg_mr(mr) == 0, "rdma_dereg_mr");
    rdma_destroy_ep(id);
    rdma_freeaddrinfo(res);
    free(land);
    printf("client: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    return strcmp(argv[1], "server") == 0 ? server(argv[2], argv[3])
                                           : client(argv[2], argv[3]);
}
