// rcpost: the cost of one RC post at a time in plain C, the floor under a
// message sent on an idle link. Two RC QPs of one process on the device
// (as lab/rxe/hbwrite.c), 48 bytes inline; each post is timed alone and the
// next starts once the last one is delivered (the receive polled for a
// SEND, the send completion for a WRITE). Modes: SEND and RDMA WRITE, each
// signalled on every post and on one in 32.
//
// Usage: rcpost [device]   (default: first device)
// Prints one line per mode: RXE-BENCH name=c/rcpost_MODE iters=N
// ns_post_p50=X ns_delivered_p50=Y
#include "rcpair.h"

static int cmp_u64(const void *x, const void *y)
{
	uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
	return p < q ? -1 : p > q;
}

int main(int argc, char **argv)
{
	rcpair_prog = "rcpost";
	const char *want = argc > 1 ? argv[1] : NULL;
	struct rcpair p;
	rcpair_open(&p, want);
	struct ibv_pd *pd = p.pd;
	struct ibv_cq *scq = p.scq, *rcq = p.rcq;
	struct ibv_qp *a = p.a, *b = p.b;

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

	rcpair_close(&p, mr);
	return 0;
}
