// udlat: the transport's message pattern in plain C, as the physical floor
// under tverbs/BenchmarkMessageLatencyProcs (warm) and
// BenchmarkMessageLatencyCold (transport/verbs/latency_test.go). lab/rxe/run.sh
// builds it statically and runs it in the rxe guest next to ib_send_lat.
//
// Two processes (fork; each opens the device itself afterwards): each has
// a PD, a send CQ, a receive CQ with a completion channel, a UD QP (fixed
// Q_Key) with receives posted (40-byte GRH + payload), and an address
// handle to the other's QPN and GID (exchanged through pipes; the GID is
// the first RoCE v2 IPv4-mapped one of port 1, as lab/rxe/smoke.sh picks for
// perftest). The parent pings, the child pongs: one UD SEND of 32 bytes
// each way (BenchmarkMessageLatencyProcs's payload; the cold benchmark's
// is 11 bytes; the transport adds its 78 bytes of headers and tag), inline
// when the QP's max_inline_data allows, as the transport posts small
// frames, one send in 16 signalled.
//
//   warm  both ends busy-poll their receive CQ (as ib_send_lat without -e).
//         20 warm-up pings, then WARM_N; one-way = RTT/2 of each ping.
//   cold  before each ping the parent sleeps 120 ms (gap_us); the child
//         sleeps on its completion channel as the idle engine does (arm the CQ, poll
//         it once for what arrived before the arming, poll(2) on the
//         channel's fd, ibv_get_cq_event, ibv_ack_cq_events, ibv_poll_cq),
//         reads CLOCK_MONOTONIC (shared by the two processes) once it
//         holds the completion and returns that reading in the pong. The
//         arming for the next sleep happens at the start of the next wait,
//         not between the event and the poll: the engine (engine.go,
//         sleep) also arms only when it goes to sleep, so the wake path
//         has one syscall fewer than ibv_get_cq_event(3)'s example.
//         One-way = the child's reading - the parent's CLOCK_MONOTONIC
//         just before ibv_post_send; RTT measured too. The parent
//         busy-polls for the pong: in the Go benchmark the sender's engine
//         is awake by then (Send wakes it). 3 warm-up pings, then COLD_N.
//   cold_spin  as cold, but the child busy-polls through the 120 ms: what
//         the gap costs without the channel's wake-up (for the analysis;
//         no Go counterpart).
//
// Every wait is bounded: a receive not there within 5 s is an error. The
// clock is read only where the Go benchmarks read it (the guest's
// clocksource is the HPET, ≈ 2 µs a read under TCG): around each ping in
// the parent, on arrival in the child only when cold, and in a busy-poll
// loop only after 4096 empty polls (for the 5 s bound).
//
// Usage: udlat [device] [runs] [gap_us]
//   (default: first device, 1 run, the cold gap 120000 µs)
// Prints one line per run and mode:
//   RXE-BENCH name=c/udlat_warm iters=N ns_oneway_p50=X ns_rtt_p50=Y
//   RXE-BENCH name=c/udlat_cold iters=N ns_oneway_p50=X ns_rtt_p50=Y slept=K
//   RXE-BENCH name=c/udlat_cold_spin iters=N ns_oneway_p50=X ns_rtt_p50=Y
// (slept: pings the child received after sleeping on the channel; the
// others were in its CQ before it slept.)
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define PAYLOAD 32
#define GRH 40
#define SLOT 128 // receive slot stride (GRH + PAYLOAD fits)
#define RECV_DEPTH 16
#define SEND_DEPTH 64
#define SIGNAL_EVERY 16
#define QKEY 0x11111111u
#define WARM_WARMUP 20
#define WARM_N 1000
#define COLD_WARMUP 3
#define COLD_N 30
#define WAIT_NS 5000000000ll
#define WAIT_MS 5000

static const char *who = "udlat";
static int64_t gap_ns = 120000000; // the cold modes' idle time before each ping

static void die(const char *what, int err)
{
	fprintf(stderr, "udlat (%s): %s: %s (errno %d)\n", who, what, strerror(err), err);
	exit(1);
}

static void fail(const char *msg)
{
	fprintf(stderr, "udlat (%s): %s\n", who, msg);
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// pipe_read reads exactly n bytes from fd within WAIT_MS.
static void pipe_read(int fd, void *p, size_t n)
{
	char *b = p;
	while (n > 0) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int r = poll(&pf, 1, WAIT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("poll(pipe)", errno);
		if (r == 0)
			fail("the other process did not answer within 5 s");
		ssize_t m = read(fd, b, n);
		if (m < 0 && errno == EINTR)
			continue;
		if (m < 0)
			die("read(pipe)", errno);
		if (m == 0)
			fail("the other process is gone (pipe closed)");
		b += m;
		n -= (size_t)m;
	}
}

static void pipe_write(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("write(pipe)", errno);
}

struct addr {
	uint32_t qpn;
	uint8_t gid[16];
};

struct cmd {
	char mode; // 'w' warm, 'c' cold, 's' cold_spin, 'q' quit
	int32_t count;
};

struct end {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t *buf; // RECV_DEPTH receive slots, then the send buffer
	uint8_t *sbuf;
	int gidx;
	union ibv_gid gid;
	uint32_t peer_qpn;
	int inline_ok;
	uint64_t posted, retired, sig_at[SEND_DEPTH];
	unsigned sig_head, sig_tail, since_sig;
};

// pick_gid returns the first RoCE v2 IPv4-mapped GID index of port 1.
static int pick_gid(struct ibv_context *ctx, int len)
{
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	for (int i = 0; i < len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, v4, 12))
			return i;
	}
	fail("no RoCE v2 IPv4-mapped GID on port 1");
	return -1;
}

static void post_recv(struct end *e, int slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(e->buf + slot * SLOT), .length = GRH + PAYLOAD, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(e->qp, &wr, &bad);
	if (rc)
		die("ibv_post_recv", rc);
}

static void open_end(struct end *e, const char *want)
{
	int n;
	memset(e, 0, sizeof(*e));
	e->list = ibv_get_device_list(&n);
	if (!e->list || n == 0)
		die("ibv_get_device_list: no device", ENODEV);
	struct ibv_device *dev = NULL;
	for (int i = 0; i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(e->list[i]), want)) {
			dev = e->list[i];
			break;
		}
	if (!dev)
		fail("no such device");
	if (!(e->ctx = ibv_open_device(dev)))
		die("ibv_open_device", errno);
	struct ibv_port_attr pa;
	if (ibv_query_port(e->ctx, 1, &pa))
		die("ibv_query_port", errno);
	if (pa.state != IBV_PORT_ACTIVE)
		fail("port 1 is not active");
	e->gidx = pick_gid(e->ctx, pa.gid_tbl_len);
	if (ibv_query_gid(e->ctx, 1, e->gidx, &e->gid))
		die("ibv_query_gid", errno);
	if (!(e->pd = ibv_alloc_pd(e->ctx)))
		die("ibv_alloc_pd", errno);
	if (!(e->ch = ibv_create_comp_channel(e->ctx)))
		die("ibv_create_comp_channel", errno);
	e->scq = ibv_create_cq(e->ctx, SEND_DEPTH, NULL, NULL, 0);
	e->rcq = ibv_create_cq(e->ctx, RECV_DEPTH, NULL, e->ch, 0);
	if (!e->scq || !e->rcq)
		die("ibv_create_cq", errno);
	struct ibv_qp_init_attr ia = {
		.send_cq = e->scq,
		.recv_cq = e->rcq,
		.qp_type = IBV_QPT_UD,
		.cap = {.max_send_wr = SEND_DEPTH, .max_recv_wr = RECV_DEPTH, .max_send_sge = 1,
			.max_recv_sge = 1, .max_inline_data = PAYLOAD},
	};
	if (!(e->qp = ibv_create_qp(e->pd, &ia))) {
		ia.cap.max_inline_data = 0; // a device without inline data
		if (!(e->qp = ibv_create_qp(e->pd, &ia)))
			die("ibv_create_qp", errno);
	}
	e->inline_ok = ia.cap.max_inline_data >= PAYLOAD;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY};
	int rc = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (rc)
		die("ibv_modify_qp(INIT)", rc);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
	if ((rc = ibv_modify_qp(e->qp, &a, IBV_QP_STATE)))
		die("ibv_modify_qp(RTR)", rc);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 1};
	if ((rc = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)))
		die("ibv_modify_qp(RTS)", rc);
	size_t len = RECV_DEPTH * SLOT + SLOT;
	if (posix_memalign((void **)&e->buf, 4096, len))
		die("posix_memalign", ENOMEM);
	memset(e->buf, 0, len);
	e->sbuf = e->buf + RECV_DEPTH * SLOT;
	if (!(e->mr = ibv_reg_mr(e->pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr", errno);
	for (int i = 0; i < RECV_DEPTH; i++)
		post_recv(e, i);
}

// exchange sends this end's address on wfd, reads the peer's on rfd and
// creates the address handle.
static void exchange(struct end *e, int rfd, int wfd)
{
	struct addr me = {.qpn = e->qp->qp_num}, peer;
	memcpy(me.gid, e->gid.raw, 16);
	pipe_write(wfd, &me, sizeof(me));
	pipe_read(rfd, &peer, sizeof(peer));
	e->peer_qpn = peer.qpn;
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
				 .grh = {.sgid_index = (uint8_t)e->gidx, .hop_limit = 64}};
	memcpy(aa.grh.dgid.raw, peer.gid, 16);
	if (!(e->ah = ibv_create_ah(e->pd, &aa)))
		die("ibv_create_ah", errno);
}

static void close_end(struct end *e)
{
	if (ibv_destroy_qp(e->qp) || ibv_destroy_ah(e->ah) || ibv_dereg_mr(e->mr) ||
	    ibv_destroy_cq(e->scq) || ibv_destroy_cq(e->rcq) || ibv_destroy_comp_channel(e->ch) ||
	    ibv_dealloc_pd(e->pd) || ibv_close_device(e->ctx))
		die("cleanup", errno);
	ibv_free_device_list(e->list);
	free(e->buf);
}

// reap polls the send CQ once and retires WRs up to each signalled one.
static void reap(struct end *e)
{
	struct ibv_wc wc[8];
	int m = ibv_poll_cq(e->scq, 8, wc);
	if (m < 0)
		die("ibv_poll_cq(send)", errno);
	for (int i = 0; i < m; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "udlat (%s): send completion %s\n", who, ibv_wc_status_str(wc[i].status));
			exit(1);
		}
		e->retired = e->sig_at[e->sig_head++ % SEND_DEPTH];
	}
}

// send posts PAYLOAD bytes (the first 24 given: a sequence number, a
// clock reading, a flag) to the peer.
static void send_msg(struct end *e, uint64_t seq, int64_t clk, uint64_t flag)
{
	for (int64_t t0 = 0; e->posted - e->retired >= SEND_DEPTH - 1;) { // queue full: spin for room
		reap(e);
		if (!t0)
			t0 = now_ns();
		else if (now_ns() - t0 > WAIT_NS)
			fail("send queue stuck for 5 s");
	}
	uint64_t msg[PAYLOAD / 8] = {seq, (uint64_t)clk, flag};
	int sig = ++e->since_sig >= SIGNAL_EVERY;
	struct ibv_sge sge = {.addr = (uintptr_t)msg, .length = PAYLOAD, .lkey = e->mr->lkey};
	if (!e->inline_ok) {
		memcpy(e->sbuf, msg, PAYLOAD);
		sge.addr = (uintptr_t)e->sbuf;
		sig = 1; // the buffer is reused: wait for each send
	}
	struct ibv_send_wr wr = {
		.wr_id = seq, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = (e->inline_ok ? IBV_SEND_INLINE : 0) | (sig ? IBV_SEND_SIGNALED : 0),
		.wr.ud = {.ah = e->ah, .remote_qpn = e->peer_qpn, .remote_qkey = QKEY},
	}, *bad;
	int rc = ibv_post_send(e->qp, &wr, &bad);
	if (rc)
		die("ibv_post_send", rc);
	e->posted++;
	if (sig) {
		e->sig_at[e->sig_tail++ % SEND_DEPTH] = e->posted;
		e->since_sig = 0;
	}
	if (!e->inline_ok)
		for (int64_t t0 = now_ns(); e->sig_head != e->sig_tail;) {
			reap(e);
			if (now_ns() - t0 > WAIT_NS)
				fail("send not completed within 5 s");
		}
}

// take checks a receive completion, copies its payload to msg and posts
// the slot again.
static void take(struct end *e, struct ibv_wc *wc, uint64_t *msg)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "udlat (%s): receive completion %s\n", who, ibv_wc_status_str(wc->status));
		exit(1);
	}
	if (wc->byte_len != GRH + PAYLOAD)
		fail("receive of the wrong length");
	memcpy(msg, e->buf + wc->wr_id * SLOT + GRH, PAYLOAD);
	post_recv(e, (int)wc->wr_id);
}

// spin busy-polls the receive CQ for one completion (5 s at most).
static void spin(struct end *e, struct ibv_wc *wc)
{
	int64_t t0 = 0;
	for (long k = 1;; k++) {
		int m = ibv_poll_cq(e->rcq, 1, wc);
		if (m < 0)
			die("ibv_poll_cq(recv)", errno);
		if (m == 1)
			return;
		if (!(k & 4095)) { // no clock read on a short wait
			if (!t0)
				t0 = now_ns();
			else if (now_ns() - t0 > WAIT_NS)
				fail("no message within 5 s (busy polling)");
		}
	}
}

// sleep_for_one waits for one receive completion as the idle engine does:
// arm, poll once, sleep in poll(2) on the channel, read and acknowledge
// the event, poll. It returns 1 if it slept, 0 if the completion was there
// before. A wake-up without a completion (an event left from an earlier
// arming) arms again and sleeps again.
static int sleep_for_one(struct end *e, struct ibv_wc *wc)
{
	int64_t t0 = now_ns();
	for (;;) {
		int rc = ibv_req_notify_cq(e->rcq, 0);
		if (rc)
			die("ibv_req_notify_cq", rc);
		int m = ibv_poll_cq(e->rcq, 1, wc);
		if (m < 0)
			die("ibv_poll_cq(recv)", errno);
		if (m == 1)
			return 0;
		int left = WAIT_MS - (int)((now_ns() - t0) / 1000000);
		struct pollfd pf = {.fd = e->ch->fd, .events = POLLIN};
		int r = left > 0 ? poll(&pf, 1, left) : 0;
		if (r < 0 && errno != EINTR)
			die("poll(channel)", errno);
		if (r == 0)
			fail("no message within 5 s (sleeping on the channel)");
		if (r < 0)
			continue;
		struct ibv_cq *cq;
		void *cqctx;
		if (ibv_get_cq_event(e->ch, &cq, &cqctx))
			die("ibv_get_cq_event", errno);
		ibv_ack_cq_events(cq, 1);
		if ((m = ibv_poll_cq(e->rcq, 1, wc)) < 0)
			die("ibv_poll_cq(recv)", errno);
		if (m == 1)
			return 1;
	}
}

// child pongs: for each command from the parent, count messages in its mode.
static void child(const char *dev, int rfd, int wfd)
{
	struct end e;
	who = "child";
	open_end(&e, dev);
	exchange(&e, rfd, wfd);
	for (;;) {
		struct cmd c;
		pipe_read(rfd, &c, sizeof(c));
		if (c.mode == 'q')
			break;
		pipe_write(wfd, "k", 1); // ready: the parent starts pinging
		for (int i = 0; i < c.count; i++) {
			struct ibv_wc wc;
			uint64_t msg[PAYLOAD / 8];
			int slept = 0;
			if (c.mode == 'c')
				slept = sleep_for_one(&e, &wc);
			else
				spin(&e, &wc);
			int64_t at = c.mode == 'w' ? 0 : now_ns(); // the Go echo reads no clock warm
			take(&e, &wc, msg);
			send_msg(&e, msg[0], at, (uint64_t)slept);
			reap(&e);
		}
	}
	close_end(&e);
	exit(0);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t p50(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp64);
	return v[n / 2];
}

// phase runs warmup+n pings in mode and prints its line.
static void phase(struct end *e, int rfd, int wfd, char mode, int warmup, int n, uint64_t *seq)
{
	struct cmd c = {.mode = mode, .count = warmup + n};
	char k;
	pipe_write(wfd, &c, sizeof(c));
	pipe_read(rfd, &k, 1);
	int64_t *ow = calloc((size_t)n, sizeof(*ow)), *rtt = calloc((size_t)n, sizeof(*rtt));
	if (!ow || !rtt)
		die("calloc", ENOMEM);
	int slept = 0;
	for (int i = 0; i < warmup + n; i++) {
		if (mode != 'w' && gap_ns > 0) {
			struct timespec gap = {.tv_sec = gap_ns / 1000000000, .tv_nsec = gap_ns % 1000000000};
			while (nanosleep(&gap, &gap) && errno == EINTR)
				;
		}
		struct ibv_wc wc;
		uint64_t msg[PAYLOAD / 8];
		int64_t t0 = now_ns();
		send_msg(e, ++*seq, 0, 0);
		spin(e, &wc); // awake for the pong in every mode (see the top)
		int64_t t1 = now_ns();
		take(e, &wc, msg);
		reap(e);
		if (msg[0] != *seq)
			fail("pong of another ping");
		if (i < warmup)
			continue;
		int j = i - warmup;
		rtt[j] = t1 - t0;
		ow[j] = mode == 'w' ? rtt[j] / 2 : (int64_t)msg[1] - t0;
		slept += (int)msg[2];
	}
	int64_t r = p50(rtt, n), o = p50(ow, n);
	if (mode == 'w')
		printf("RXE-BENCH name=c/udlat_warm iters=%d ns_oneway_p50=%lld ns_rtt_p50=%lld\n", n, (long long)o,
		       (long long)r);
	else if (mode == 'c')
		printf("RXE-BENCH name=c/udlat_cold iters=%d ns_oneway_p50=%lld ns_rtt_p50=%lld slept=%d\n", n,
		       (long long)o, (long long)r, slept);
	else
		printf("RXE-BENCH name=c/udlat_cold_spin iters=%d ns_oneway_p50=%lld ns_rtt_p50=%lld\n", n,
		       (long long)o, (long long)r);
	fflush(stdout);
	free(ow);
	free(rtt);
}

int main(int argc, char **argv)
{
	const char *dev = argc > 1 ? argv[1] : NULL;
	int runs = argc > 2 ? atoi(argv[2]) : 1;
	if (argc > 3)
		gap_ns = atoll(argv[3]) * 1000;
	if (runs < 1 || gap_ns < 0 || argc > 4)
		fail("usage: udlat [device] [runs] [gap_us]");
	int down[2], up[2]; // parent -> child, child -> parent
	if (pipe(down) || pipe(up))
		die("pipe", errno);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		child(dev, down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	who = "parent";
	struct end e;
	open_end(&e, dev);
	exchange(&e, up[0], down[1]);
	uint64_t seq = 0;
	for (int run = 0; run < runs; run++) {
		phase(&e, up[0], down[1], 'w', WARM_WARMUP, WARM_N, &seq);
		phase(&e, up[0], down[1], 'c', COLD_WARMUP, COLD_N, &seq);
		phase(&e, up[0], down[1], 's', COLD_WARMUP, COLD_N, &seq);
	}
	struct cmd q = {.mode = 'q'};
	pipe_write(down[1], &q, sizeof(q));
	close_end(&e);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid", errno);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("the child failed");
	return 0;
}
