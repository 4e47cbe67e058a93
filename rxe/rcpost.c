// rcpost: the cost of one RC post at a time in plain C, the floor under a
// message sent on an idle link. Two RC QPs of one process on the device
// (as rxe/hbwrite.c), 48 bytes inline; each post is timed alone and the
// next starts once the last one is delivered (the receive polled for a
// SEND, the send completion for a WRITE). Modes: SEND and RDMA WRITE, each
// signalled on every post and on one in 32.
//
// Usage: rcpost [device]   (default: first device)
// Prints one line per mode: RXE-BENCH name=c/rcpost_MODE iters=N
// ns_post_p50=X ns_delivered_p50=Y
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <infiniband/verbs.h>

#define DEPTH 128

static void die(const char *what, int err)
{
	fprintf(stderr, "rcpost: %s: %s (errno %d)\n", what, strerror(err), err);
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

static int cmp_u64(const void *x, const void *y)
{
	uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
	return p < q ? -1 : p > q;
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

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : NULL;
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0)
		die("ibv_get_device_list: no device", ENODEV);
	struct ibv_device *dev = list[0];
	for (int i = 0; want && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device", errno);
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port", errno);
	int gidx = pick_gid(ctx, pa.gid_tbl_len);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("ibv_query_gid", errno);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", errno);
	struct ibv_cq *scq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!scq || !rcq)
		die("ibv_create_cq", errno);
	struct ibv_qp *a = make_qp(pd, scq);
	struct ibv_qp *b = make_qp(pd, rcq);
	connect_qp(a, b->qp_num, &gid, gidx, pa.active_mtu);
	connect_qp(b, a->qp_num, &gid, gidx, pa.active_mtu);

	uint64_t *slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED)
		die("mmap", errno);
	struct ibv_mr *mr = ibv_reg_mr(pd, slots, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr", errno);
	uint64_t raddr = (uintptr_t)&slots[64]; // WRITEs land past the receive buffer

	struct ibv_wc wc[16];
	for (int i = 0; i < 32; i++) {
		struct ibv_sge rs = {.addr = (uintptr_t)&slots[0], .length = 256, .lkey = mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 9, .sg_list = &rs, .num_sge = 1}, *rbad;
		if (ibv_post_recv(b, &rw, &rbad))
			die("ibv_post_recv", errno);
	}
	for (int mode = 0; mode < 4; mode++) {
		static uint64_t posts[4096], dels[4096];
		int N = 2000;
		for (int i = 0; i < N + 10; i++) {
			char msg[48] = {0};
			struct ibv_sge sge = {.addr = (uintptr_t)msg, .length = 48, .lkey = 0};
			struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
				.opcode = (mode & 1) ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
				.send_flags = IBV_SEND_INLINE | ((mode < 2 || i % 32 == 31) ? IBV_SEND_SIGNALED : 0),
				.wr.rdma = {.remote_addr = raddr, .rkey = mr->rkey}}, *bad;
			uint64_t t0 = now_ns();
			int rc = ibv_post_send(a, &wr, &bad);
			uint64_t t1 = now_ns();
			if (rc)
				die("ibv_post_send", rc);
			if (!(mode & 1)) {
				int m;
				while ((m = ibv_poll_cq(rcq, 1, wc)) == 0)
					;
				if (m < 0 || wc[0].status != IBV_WC_SUCCESS)
					die("recv", EIO);
				struct ibv_sge rs = {.addr = (uintptr_t)&slots[0], .length = 256, .lkey = mr->lkey};
				struct ibv_recv_wr rw = {.wr_id = 9, .sg_list = &rs, .num_sge = 1}, *rbad;
				if (ibv_post_recv(b, &rw, &rbad))
					die("ibv_post_recv", errno);
			}
			uint64_t t2 = now_ns();
			int m;
			if (mode < 2 || i % 32 == 31)
				while ((m = ibv_poll_cq(scq, 1, wc)) == 0)
					;
			else
				m = 1, wc[0].status = IBV_WC_SUCCESS;
			if (m < 0 || wc[0].status != IBV_WC_SUCCESS)
				die("send", EIO);
			if (i >= 10) {
				posts[i - 10] = t1 - t0;
				dels[i - 10] = t2 - t0;
			}
		}
		qsort(posts, N, 8, cmp_u64);
		qsort(dels, N, 8, cmp_u64);
		printf("RXE-BENCH name=c/rcpost_%s iters=%d ns_post_p50=%llu ns_delivered_p50=%llu\n", (const char *[]){"send", "write", "send_unsig", "write_unsig"}[mode], N,
		       (unsigned long long)posts[N / 2], (unsigned long long)dels[N / 2]);
		fflush(stdout);
	}

	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_dereg_mr(mr) || ibv_destroy_cq(scq) ||
	    ibv_destroy_cq(rcq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("cleanup", errno);
	ibv_free_device_list(list);
	return 0;
}
