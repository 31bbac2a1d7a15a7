/* rdma_join_multicast(_ex) and rdma_leave_multicast through the C ABI, on one synchronous UD
 * id bound to argv[1] (whose QP is made with rdma_create_qp): the argument checks in
 * rdma-core 44's order, then a join whose event (id->event) addresses the group and hands
 * the context back as param.ud.private_data, then the leave. Exit 0 when every check holds;
 * the failed check's line is on stderr otherwise. */
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include "softrnic_test.h"

#define FAILS_WITH(call, e) CHECK((call) == -1 && errno == (e), __LINE__)

int main(int argc, char **argv)
{
    CHECK(argc == 3, 2);
    struct sockaddr_in local = { .sin_family = AF_INET }, group = { .sin_family = AF_INET };
    CHECK(inet_pton(AF_INET, argv[1], &local.sin_addr) == 1, 3);
    CHECK(inet_pton(AF_INET, argv[2], &group.sin_addr) == 1, 4);

    struct rdma_cm_id *id;
    CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP) == 0, 5);
    /* Not on a device yet. */
    FAILS_WITH(rdma_join_multicast(id, (struct sockaddr *)&group, NULL), EINVAL);
    CHECK(rdma_bind_addr(id, (struct sockaddr *)&local) == 0, 6);
    struct ibv_qp_init_attr init = {
        .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    CHECK(rdma_create_qp(id, NULL, &init) == 0, 7);

    struct rdma_cm_join_mc_attr_ex attr = {
        .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
        .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER,
        .addr = (struct sockaddr *)&group,
    };
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
    FAILS_WITH(rdma_join_multicast_ex(id, &attr, NULL), ENOTSUP);
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    FAILS_WITH(rdma_join_multicast_ex(id, &attr, NULL), EINVAL);
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
    FAILS_WITH(rdma_join_multicast_ex(id, &attr, NULL), EINVAL);
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    attr.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
    FAILS_WITH(rdma_join_multicast_ex(id, &attr, NULL), EINVAL);
    struct sockaddr_un { sa_family_t family; char path[108]; } unix_addr = { .family = AF_UNIX };
    FAILS_WITH(rdma_join_multicast(id, (struct sockaddr *)&unix_addr, NULL), EINVAL);
    FAILS_WITH(rdma_join_multicast(id, (struct sockaddr *)&local, NULL), EINVAL);
    FAILS_WITH(rdma_leave_multicast(id, (struct sockaddr *)&group), EADDRNOTAVAIL);

    int context;
    CHECK(rdma_join_multicast(id, (struct sockaddr *)&group, &context) == 0, 8);
    struct rdma_cm_event *e = id->event;
    CHECK(e && e->event == RDMA_CM_EVENT_MULTICAST_JOIN && e->status == 0, 9);
    CHECK(e->param.ud.private_data == &context, 10);
    CHECK(e->param.ud.qp_num == 0xffffff && e->param.ud.qkey == 0x01234567, 11);
    struct ibv_ah_attr *ah = &e->param.ud.ah_attr;
    uint8_t mapped[16] = { [10] = 0xff, [11] = 0xff };
    memcpy(&mapped[12], &group.sin_addr, 4);
    CHECK(ah->is_global && memcmp(ah->grh.dgid.raw, mapped, 16) == 0, 12);
    struct ibv_ah *handle = ibv_create_ah(id->pd, ah);
    CHECK(handle, 13);
    CHECK(ibv_destroy_ah(handle) == 0, 14);
    /* Leaving detached the QP: detaching it again through verbs fails (it returns the errno). */
    CHECK(rdma_leave_multicast(id, (struct sockaddr *)&group) == 0, 15);
    CHECK(ibv_detach_mcast(id->qp, &ah->grh.dgid, 0) == EINVAL, __LINE__);
    FAILS_WITH(rdma_leave_multicast(id, (struct sockaddr *)&group), EADDRNOTAVAIL);

    rdma_destroy_qp(id);
    CHECK(rdma_destroy_id(id) == 0, 16);
    printf("ok\n");
    return 0;
}
