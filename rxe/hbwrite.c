// hbwrite: the heartbeat write loop in plain C, as the baseline for Go's
// BenchmarkRDMAWriteHeartbeat (verbs/verbs_test.go). rxe/run.sh builds it
// statically and runs it in the rxe guest next to the Go benchmark.
//
// Same work per heartbeat as verbs.Writer.Write: one inline 8-byte
// RDMA WRITE (ibv_post_send) from QP A to a slot word registered on QP B of
// the same device, every 32nd WR signalled, the send CQ polled while a
// signalled WR is outstanding, the send queue (128) never overrun.
//
// Usage: hbwrite [device] [seconds] [runs]   (default: first device, 1 s, 1)
// Prints one line per run: RXE-BENCH name=c/hbwrite iters=N ns_op=X polls_op=Y
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <infiniband/verbs.h>

#define DEPTH 128
#define SIGNAL_EVERY 32 // divides 1024
#define SLOT 7

static void die(const char *what, int err)
{
	fprintf(stderr, "hbwrite: %s: %s (errno %d)\n", what, strerror(err), err);
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
		.cap = {.max_send_wr = DEPTH, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1,
			.max_inline_data = 64},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp", errno);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
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

// reap polls the send CQ once and retires WRs up to each signalled one.
static void reap(struct ibv_cq *cq, struct ibv_wc *wc, const uint64_t *sig_at, unsigned *sig_head,
		 uint64_t *retired, uint64_t *polls)
{
	int m = ibv_poll_cq(cq, 16, wc);
	(*polls)++;
	if (m < 0)
		die("ibv_poll_cq", errno);
	for (int i = 0; i < m; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "hbwrite: completion %s\n", ibv_wc_status_str(wc[i].status));
			exit(1);
		}
		*retired = sig_at[*sig_head % DEPTH];
		(*sig_head)++;
	}
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : NULL;
	double secs = argc > 2 ? atof(argv[2]) : 1.0;
	int runs = argc > 3 ? atoi(argv[3]) : 1;
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
	struct ibv_mr *mr = ibv_reg_mr(pd, slots, 64 * 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr", errno);
	uint64_t raddr = (uintptr_t)&slots[SLOT];

	uint64_t posted = 0, retired = 0, polls = 0, iters = 0;
	uint64_t sig_at[DEPTH];
	unsigned sig_head = 0, sig_tail = 0, since_sig = 0;
	struct ibv_wc wc[16];

	for (int run = 0; run < runs; run++) {
		uint64_t it0 = iters, polls0 = polls;
		uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(secs * 1e9);
		for (;;) {
			// 1024 heartbeats between clock reads
			for (int k = 0; k < 1024; k++) {
				uint64_t val = ++iters;
				while (posted - retired >= DEPTH) // queue full: spin for room
					reap(scq, wc, sig_at, &sig_head, &retired, &polls);
				int sig = ++since_sig >= SIGNAL_EVERY;
				struct ibv_sge sge = {.addr = (uintptr_t)&val, .length = 8, .lkey = 0};
				struct ibv_send_wr wr = {
					.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					.send_flags = IBV_SEND_INLINE | (sig ? IBV_SEND_SIGNALED : 0),
					.wr.rdma = {.remote_addr = raddr, .rkey = mr->rkey},
				};
				struct ibv_send_wr *bad;
				int rc = ibv_post_send(a, &wr, &bad);
				if (rc)
					die("ibv_post_send", rc);
				posted++;
				if (sig) {
					sig_at[sig_tail++ % DEPTH] = posted;
					since_sig = 0;
				}
				if (sig_head != sig_tail) // amortised: poll while a signalled WR is out
					reap(scq, wc, sig_at, &sig_head, &retired, &polls);
			}
			if (now_ns() >= deadline)
				break;
		}
		uint64_t el = now_ns() - t0, n = iters - it0, np = polls - polls0;
		// Drain (every SIGNAL_EVERY-th WR is signalled and 1024 is a
		// multiple of it, so the last WR is signalled) and check the slot.
		for (uint64_t t = now_ns(); sig_head != sig_tail && now_ns() - t < 5000000000ull;)
			reap(scq, wc, sig_at, &sig_head, &retired, &polls);
		if (sig_head != sig_tail || __atomic_load_n(&slots[SLOT], __ATOMIC_ACQUIRE) != iters) {
			fprintf(stderr, "hbwrite: slot = %llu, want %llu\n", (unsigned long long)slots[SLOT],
				(unsigned long long)iters);
			return 1;
		}
		printf("RXE-BENCH name=c/hbwrite iters=%llu ns_op=%.1f polls_op=%.4f\n", (unsigned long long)n,
		       (double)el / (double)n, (double)np / (double)n);
		fflush(stdout);
	}

	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_dereg_mr(mr) || ibv_destroy_cq(scq) ||
	    ibv_destroy_cq(rcq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("cleanup", errno);
	ibv_free_device_list(list);
	return 0;
}
