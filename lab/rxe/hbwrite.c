// hbwrite: the heartbeat write loop in plain C, as the baseline for Go's
// BenchmarkRDMAWriteHeartbeat (verbs/verbs_test.go). lab/rxe/run.sh builds it
// statically and runs it in the rxe guest next to the Go benchmark.
//
// Same work per heartbeat as verbs.Writer.Write: one inline 8-byte
// RDMA WRITE (ibv_post_send) from QP A to a slot word registered on QP B of
// the same device, every 32nd WR signalled, the send CQ polled while a
// signalled WR is outstanding, the send queue (128) never overrun.
//
// Usage: hbwrite [device] [seconds] [runs]   (default: first device, 1 s, 1)
// Prints one line per run: RXE-BENCH name=c/hbwrite iters=N ns_op=X polls_op=Y
#include "rcpair.h"

#define SIGNAL_EVERY 32 // divides 1024
#define SLOT 7

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
	rcpair_prog = "hbwrite";
	const char *want = argc > 1 ? argv[1] : NULL;
	double secs = argc > 2 ? atof(argv[2]) : 1.0;
	int runs = argc > 3 ? atoi(argv[3]) : 1;
	struct rcpair p;
	rcpair_open(&p, want);
	struct ibv_pd *pd = p.pd;
	struct ibv_cq *scq = p.scq;
	struct ibv_qp *a = p.a;

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

	rcpair_close(&p, mr);
	return 0;
}
