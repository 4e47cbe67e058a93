// rcpair.h: what lab/rxe/hbwrite.c and lab/rxe/rcpost.c share: two RC QPs of one
// process on one device, connected to each other (A sends on scq, B
// receives on rcq), and the helpers to make them. Static functions: each
// program includes it once.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <infiniband/verbs.h>

#define DEPTH 128 // send queue

// rcpair_prog names the program in die's messages.
static const char *rcpair_prog = "rxe";

static void die(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s (errno %d)\n", rcpair_prog, what, strerror(err), err);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// pick_gid returns the first IPv4-mapped GID index of port 1, else 0.
static int pick_gid(struct ibv_context *ctx, int len)
{
	for (int i = 0; i < len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(ctx, 1, i, &g))
			continue;
		static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (!memcmp(g.raw, v4, 12))
			return i;
	}
	return 0;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = DEPTH, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1,
			.max_inline_data = 64},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp", errno);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		die("ibv_modify_qp(INIT)", rc);
	return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid, int gidx, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = dest, .rq_psn = 1,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {.is_global = 1, .port_num = 1,
			    .grh = {.dgid = *gid, .sgid_index = (uint8_t)gidx, .hop_limit = 64}},
	};
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		die("ibv_modify_qp(RTR)", rc);
	struct ibv_qp_attr b = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				.sq_psn = 1, .max_rd_atomic = 1};
	rc = ibv_modify_qp(qp, &b, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		die("ibv_modify_qp(RTS)", rc);
}

// rcpair is the device, its protection domain, the CQs and the two QPs.
struct rcpair {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *a, *b;
};

// rcpair_open opens device want (NULL: the first) and connects A and B.
static void rcpair_open(struct rcpair *p, const char *want)
{
	int n;
	p->list = ibv_get_device_list(&n);
	if (!p->list || n == 0)
		die("ibv_get_device_list: no device", ENODEV);
	struct ibv_device *dev = p->list[0];
	for (int i = 0; want && i < n; i++)
		if (!strcmp(ibv_get_device_name(p->list[i]), want))
			dev = p->list[i];
	struct ibv_context *ctx = p->ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device", errno);
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port", errno);
	int gidx = pick_gid(ctx, pa.gid_tbl_len);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("ibv_query_gid", errno);

	struct ibv_pd *pd = p->pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", errno);
	struct ibv_cq *scq = p->scq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_cq *rcq = p->rcq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!scq || !rcq)
		die("ibv_create_cq", errno);
	p->a = make_qp(pd, scq);
	p->b = make_qp(pd, rcq);
	connect_qp(p->a, p->b->qp_num, &gid, gidx, pa.active_mtu);
	connect_qp(p->b, p->a->qp_num, &gid, gidx, pa.active_mtu);
}

// rcpair_close frees what rcpair_open made (mr: registered on its PD, or
// NULL).
static void rcpair_close(struct rcpair *p, struct ibv_mr *mr)
{
	if (ibv_destroy_qp(p->a) || ibv_destroy_qp(p->b) || (mr && ibv_dereg_mr(mr)) || ibv_destroy_cq(p->scq) ||
	    ibv_destroy_cq(p->rcq) || ibv_dealloc_pd(p->pd) || ibv_close_device(p->ctx))
		die("cleanup", errno);
	ibv_free_device_list(p->list);
}
