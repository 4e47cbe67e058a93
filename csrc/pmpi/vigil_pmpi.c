/*
 * vigil_pmpi.c — Vigil as an MPI profiling-interface (PMPI) library, after
 * seed 004: an unmodified MPI application gets a failure detector by
 * preloading this library (LD_PRELOAD=libvigil_pmpi.so) or by linking it
 * before the MPI library (mpicc app.c -lvigil_pmpi -lvigil).
 *
 * MPI_Init / MPI_Init_thread call the real PMPI_Init*, duplicate
 * MPI_COMM_WORLD into the detector's own communicator (seed 004's
 * DUP_MPI_COMM_WORLD), where rank 0 broadcasts a fresh job ID and key and an
 * MPI_Allgather exchanges the detector's addresses; then libvigil runs in
 * its own background threads (vigil_start returns once it runs). Ranks are
 * MPI_COMM_WORLD ranks. MPI_Finalize leaves (others report a departure, not
 * a failure), stops the detector and frees the communicator, then calls
 * PMPI_Finalize.
 *
 * Modes (VIGIL_PMPI_MODE):
 *   ring      (default) seed 004's periodic detector, as Vigil's observation
 *             ring: heartbeats every VIGIL_H to the ring neighbour from a
 *             dedicated thread, detection after VIGIL_DELTA, broadcast to
 *             everyone. Communication calls are not wrapped (no overhead)
 *             unless VIGIL_PMPI_ON_FAILURE=abort.
 *   sporadic  seed 004's on-demand detector: no periodic traffic; blocking
 *             calls (MPI_Recv, MPI_Send, MPI_Wait, MPI_Waitall, MPI_Barrier,
 *             MPI_Bcast, MPI_Reduce, MPI_Allreduce) run as their
 *             non-blocking forms, and if one has not completed after
 *             VIGIL_PMPI_TIMEOUT the peers it waits for are probed (a
 *             ping-pong with a VIGIL_DELTA time-out), again every
 *             VIGIL_PMPI_TIMEOUT while it waits. For wildcard receives,
 *             collectives and requests whose peer is unknown, the ring
 *             neighbour (rank + 1 in the communicator) is probed first,
 *             then rank + 2 and so on round the communicator, one a
 *             time-out, so that every rank blocked in a collective on a
 *             dead member reaches it. Only the probing rank learns of a
 *             failure.
 *   daemon    seed 004's stand-alone detector: the process attaches to its
 *             node's `vigil daemon` (VIGIL_DAEMON_SOCK, see vigil_daemon.h)
 *             instead of running a detector; the daemon reports every
 *             failure in the job. Calls are wrapped as in ring mode.
 *   off       pass everything through.
 *
 * Other settings:
 *   VIGIL_H, VIGIL_DELTA   durations (10ms, 200ms, 1s, 500us; a bare number is ms)
 *   VIGIL_BROADCAST        ring mode's propagation of failure news
 *                          (vigil_config.broadcast): hba (default), bmg,
 *                          or a corrected gossip: ocg, ccg, fcg, ctree
 *   VIGIL_GOSSIP_STEP, VIGIL_GOSSIP_LATENCY
 *                          the corrected gossips' step o and latency L,
 *                          durations as above (default 100us, 500us)
 *   VIGIL_GOSSIP_T, VIGIL_GOSSIP_C, VIGIL_GOSSIP_F
 *                          integers: the step the gossip ends (0: planned),
 *                          ocg's correction messages (0: planned), the
 *                          failures fcg and ctree tolerate in the
 *                          correction (1 to 3); see vigil.h's gossip_*.
 *                          A bad value (an unknown broadcast, F = 4, ...)
 *                          makes vigil_init fail, naming the field: the
 *                          job then runs without failure detection
 *   VIGIL_PMPI_TIMEOUT     sporadic mode's wait before probing (default 1s)
 *   VIGIL_PMPI_ON_FAILURE  report (default): report and let the call go on
 *                          waiting; abort: MPI_Abort when a blocking call
 *                          waits on a failed rank (ring mode: any failed rank
 *                          when the peer is unknown)
 *   VIGIL_PMPI_OUTPUT      text (default): one line per failure on stderr;
 *                          json: JSON lines on stdout, {"v":1,"ev":"ready",...}
 *                          and per event {"v":1,"ev":"dead"|"evicted","rank":R,"dead":D,
 *                          "left":..,"detector":X,"mode":..,"detected_unix":U,
 *                          "delivered_mono":M} (vigil_event's fields; M is
 *                          this process's CLOCK_MONOTONIC, in ns), an
 *                          evicted line with "reason": "declared dead" or
 *                          "minority partition" (VIGIL_EVENT_MINORITY)
 *   VIGIL_PARTITION        failstop (default) | continue: what a rank
 *                          holding most of the job dead does
 *                          (vigil_config.partition)
 *   VIGIL_BIND, VIGIL_ADVERTISE, VIGIL_IF_INCLUDE, VIGIL_IF_EXCLUDE
 *                          the detector's listen and published addresses
 *                          (vigil.h); default: loopback when every rank
 *                          runs on this host, else the address of the
 *                          interface that routes to the other ranks' hosts
 *   VIGIL_LOG              libvigil's log level on stderr
 * An application may define
 *   void vigil_pmpi_failure_hook(const vigil_event *ev);
 * to be called (on libvigil's callback thread, never an MPI thread) for
 * every event.
 *
 * Trust: the key is drawn by rank 0 and broadcast over MPI; every process of
 * the MPI job can read it, as with the PMIx bootstrap.
 *
 * Limits: C bindings only; request-to-peer tracking is a direct-mapped
 * cache (a collision falls back to the ring neighbour); with Open MPI
 * without ULFM a call waiting on a dead rank never completes by itself, and
 * PMPI_Finalize may hang when a rank died: use VIGIL_PMPI_ON_FAILURE=abort
 * or the failure hook to act on the failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "vigil.h"
#include "vigil_daemon.h"

enum { MODE_OFF, MODE_RING, MODE_SPORADIC, MODE_DAEMON };
enum { ON_FAILURE_REPORT, ON_FAILURE_ABORT };
enum { RING_NEIGHBOUR = -1 };

#define ABORT_CODE 71

void vigil_pmpi_failure_hook(const vigil_event *ev) __attribute__((weak));

static int mode = MODE_OFF;      /* MODE_OFF until the detector runs */
static int on_failure = ON_FAILURE_REPORT;
static int json;
static int world_rank = -1;
static double probe_after = 1.0; /* s: VIGIL_PMPI_TIMEOUT */
static int64_t delta_ns = 200000000;
static MPI_Comm fd_comm = MPI_COMM_NULL;

/* ---- settings ---- */

/* parse_ns parses "200ms", "1s", "500us", "100ns" or a bare number of ms. */
static int64_t parse_ns(const char *name, const char *s, int64_t def)
{
	char *end;
	double v;
	if (s == NULL || *s == 0)
		return def;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0)
		goto bad;
	if (*end == 0 || strcmp(end, "ms") == 0)
		return (int64_t)(v * 1e6);
	if (strcmp(end, "s") == 0)
		return (int64_t)(v * 1e9);
	if (strcmp(end, "us") == 0)
		return (int64_t)(v * 1e3);
	if (strcmp(end, "ns") == 0)
		return (int64_t)v;
bad:
	fprintf(stderr, "vigil-pmpi: %s=%s is not a duration such as 200ms; using the default\n", name, s);
	return def;
}

/* parse_int parses a decimal integer, or warns and returns def. */
static int parse_int(const char *name, const char *s, int def)
{
	char *end;
	long v;
	if (s == NULL || *s == 0)
		return def;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != 0 || v < INT_MIN || v > INT_MAX) {
		fprintf(stderr, "vigil-pmpi: %s=%s is not an integer; using the default\n", name, s);
		return def;
	}
	return (int)v;
}

/* ---- reporting (libvigil's callback thread) ---- */

static const char *mode_name(void)
{
	return mode == MODE_SPORADIC ? "sporadic" : mode == MODE_DAEMON ? "daemon" : "ring";
}

static void on_event(const vigil_event *ev, void *user)
{
	(void)user;
	int stop = ev->kind == VIGIL_EVENT_EVICTED || ev->kind == VIGIL_EVENT_MINORITY;
	const char *what = ev->kind == VIGIL_EVENT_EVICTED    ? "evicted"
	                   : ev->kind == VIGIL_EVENT_MINORITY ? "stopped: minority partition"
	                   : ev->kind == VIGIL_EVENT_LEFT     ? "left"
	                                                      : "failed";
	if (json) {
		printf("{\"v\":1,\"ev\":\"%s\",\"rank\":%d,\"dead\":%u,\"left\":%s,\"detector\":%u,\"mode\":\"%s\","
		       "\"detected_unix\":%lld,\"delivered_mono\":%lld%s}\n",
		       stop ? "evicted" : "dead", world_rank, ev->rank,
		       ev->kind == VIGIL_EVENT_LEFT ? "true" : "false", ev->detector,
		       mode_name(), (long long)ev->detected_unix_ns, (long long)ev->delivered_mono_ns,
		       ev->kind == VIGIL_EVENT_MINORITY ? ",\"reason\":\"minority partition\""
		       : stop                           ? ",\"reason\":\"declared dead\""
		                                        : "");
		fflush(stdout);
	} else {
		fprintf(stderr, "vigil-pmpi: rank %d: rank %u %s (detected by rank %u)\n", world_rank, ev->rank, what,
			ev->detector);
	}
	if (vigil_pmpi_failure_hook)
		vigil_pmpi_failure_hook(ev);
}

/* ---- start and stop ---- */

static int fd_allgather(const void *send, void *recv, size_t len, void *user)
{
	MPI_Comm comm = *(MPI_Comm *)user;
	return PMPI_Allgather(send, (int)len, MPI_BYTE, recv, (int)len, MPI_BYTE, comm) != MPI_SUCCESS;
}

static void fd_fail(const char *what, int rc)
{
	char msg[512];
	vigil_last_error(msg, sizeof msg);
	fprintf(stderr, "vigil-pmpi: rank %d: %s: %s: %s%s; running without failure detection\n", world_rank, what,
		vigil_strerror(rc), msg,
		strstr(msg, "vigil_config.broadcast") != NULL || strstr(msg, "vigil_config.gossip_") != NULL
			? " (set from VIGIL_BROADCAST and VIGIL_GOSSIP_*)"
			: "");
}

/* fd_go starts an initialised detector in mode m: callback, vigil_start,
 * then the ready line. On failure the library is finalised and the
 * application runs without a detector (fd_fail says why). */
static void fd_go(int m)
{
	int rc;
	vigil_set_failure_callback(on_event, NULL);
	if ((rc = vigil_start()) != VIGIL_OK) {
		fd_fail("vigil_start", rc);
		vigil_finalize();
		return;
	}
	mode = m;
	if (json) {
		printf("{\"v\":1,\"ev\":\"ready\",\"rank\":%d,\"mode\":\"%s\"}\n", world_rank, mode_name());
		fflush(stdout);
	}
}

/* fd_start_daemon attaches to the node's stand-alone detector: no
 * collective, no detector thread in this process but the heartbeat word's. */
static void fd_start_daemon(void)
{
	int rc;
	if ((rc = vigil_init_daemon(NULL, (uint32_t)world_rank)) != VIGIL_OK) {
		fd_fail("vigil_init_daemon", rc);
		return;
	}
	fd_go(MODE_DAEMON);
}

/* fd_start runs after PMPI_Init*: collective over MPI_COMM_WORLD. */
static void fd_start(void)
{
	const char *m = getenv("VIGIL_PMPI_MODE");
	int want = MODE_RING, size, rc;
	uint8_t secret[41]; /* job ID (8), key (32) and 1 if rank 0 had the entropy for them */
	vigil_config cfg;

	if (m != NULL && strcmp(m, "off") == 0)
		return;
	if (m != NULL && strcmp(m, "sporadic") == 0)
		want = MODE_SPORADIC;
	else if (m != NULL && strcmp(m, "daemon") == 0)
		want = MODE_DAEMON;
	else if (m != NULL && *m && strcmp(m, "ring") != 0)
		fprintf(stderr, "vigil-pmpi: VIGIL_PMPI_MODE=%s: want ring, sporadic, daemon or off; using ring\n", m);
	m = getenv("VIGIL_PMPI_ON_FAILURE");
	on_failure = m != NULL && strcmp(m, "abort") == 0 ? ON_FAILURE_ABORT : ON_FAILURE_REPORT;
	m = getenv("VIGIL_PMPI_OUTPUT");
	json = m != NULL && strcmp(m, "json") == 0;
	probe_after = (double)parse_ns("VIGIL_PMPI_TIMEOUT", getenv("VIGIL_PMPI_TIMEOUT"), 1000000000) / 1e9;

	PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	if (want == MODE_DAEMON) {
		fd_start_daemon();
		return;
	}
	if (PMPI_Comm_dup(MPI_COMM_WORLD, &fd_comm) != MPI_SUCCESS) {
		fprintf(stderr, "vigil-pmpi: MPI_Comm_dup failed; running without failure detection\n");
		return;
	}
	PMPI_Comm_set_name(fd_comm, "vigil_fd_comm");
	if (world_rank == 0) {
		size_t got = 0;
		while (got < 40) {
			ssize_t n = getrandom(secret + got, 40 - got, 0);
			if (n < 0 && errno != EINTR)
				break;
			if (n > 0)
				got += (size_t)n;
		}
		secret[40] = got >= 40; /* no weak fallback key */
		if (secret[0] == 0)
			secret[0] = 1; /* a non-zero job ID */
	}
	PMPI_Bcast(secret, sizeof secret, MPI_BYTE, 0, fd_comm);
	if (!secret[40]) {
		if (world_rank == 0)
			fprintf(stderr, "vigil-pmpi: getrandom gave no entropy for the job key; running without failure detection\n");
		PMPI_Comm_free(&fd_comm);
		return;
	}

	vigil_config_init(&cfg);
	cfg.rank = (uint32_t)world_rank;
	cfg.size = (uint32_t)size;
	cfg.mode = want == MODE_SPORADIC ? VIGIL_MODE_SPORADIC : VIGIL_MODE_RING;
	cfg.heartbeat_ns = parse_ns("VIGIL_H", getenv("VIGIL_H"), 10000000);
	cfg.suspect_ns = delta_ns = parse_ns("VIGIL_DELTA", getenv("VIGIL_DELTA"), 200000000);
	/* 0 or NULL: libvigil's defaults; libvigil checks the values. */
	cfg.broadcast = getenv("VIGIL_BROADCAST");
	cfg.gossip_step_ns = parse_ns("VIGIL_GOSSIP_STEP", getenv("VIGIL_GOSSIP_STEP"), 0);
	cfg.gossip_latency_ns = parse_ns("VIGIL_GOSSIP_LATENCY", getenv("VIGIL_GOSSIP_LATENCY"), 0);
	cfg.gossip_t = parse_int("VIGIL_GOSSIP_T", getenv("VIGIL_GOSSIP_T"), 0);
	cfg.gossip_c = parse_int("VIGIL_GOSSIP_C", getenv("VIGIL_GOSSIP_C"), 0);
	cfg.gossip_f = parse_int("VIGIL_GOSSIP_F", getenv("VIGIL_GOSSIP_F"), 0);
	m = getenv("VIGIL_PARTITION");
	if (m != NULL && strcmp(m, "continue") == 0)
		cfg.partition = VIGIL_PARTITION_CONTINUE;
	else if (m != NULL && *m != 0 && strcmp(m, "failstop") != 0)
		cfg.partition = -1; /* libvigil refuses it, naming the field */
	memcpy(&cfg.job_id, secret, 8);
	cfg.key = secret + 8;
	cfg.key_len = 32;
	/* listen_addr stays NULL: libvigil reads the VIGIL_BIND family. */
	cfg.allgather = fd_allgather;
	cfg.allgather_user = &fd_comm;

	/* Every rank takes part in the allgather of vigil_start, so a rank
	 * whose vigil_init failed still joins it with an empty address to
	 * keep the others from hanging; they then fail too. */
	if ((rc = vigil_init(&cfg)) != VIGIL_OK) {
		char blank[VIGIL_ADDR_MAX] = {0}, *all = calloc((size_t)size, VIGIL_ADDR_MAX);
		fd_fail("vigil_init", rc);
		PMPI_Allgather(blank, VIGIL_ADDR_MAX, MPI_BYTE, all, VIGIL_ADDR_MAX, MPI_BYTE, fd_comm);
		free(all);
		return;
	}
	fd_go(want);
}

static void fd_stop(void)
{
	if (mode == MODE_OFF)
		return;
	mode = MODE_OFF;
	vigil_leave(1000);
	vigil_finalize();
}

int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);
	if (rc == MPI_SUCCESS)
		fd_start();
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);
	if (rc == MPI_SUCCESS)
		fd_start();
	return rc;
}

int MPI_Finalize(void)
{
	fd_stop();
	if (fd_comm != MPI_COMM_NULL)
		PMPI_Comm_free(&fd_comm);
	return PMPI_Finalize();
}

/* ---- peers of requests (sporadic mode) ---- */

#define RQ_SLOTS 4096
static struct {
	MPI_Request req;
	MPI_Comm comm;
	int peer; /* rank in comm, or RING_NEIGHBOUR */
} rq[RQ_SLOTS];
static pthread_mutex_t rq_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t rq_slot(MPI_Request r)
{
	uint64_t v = 0;
	memcpy(&v, &r, sizeof r < sizeof v ? sizeof r : sizeof v);
	return (size_t)((v * 0x9E3779B97F4A7C15ull) >> 52) % RQ_SLOTS;
}

static void rq_put(MPI_Request r, MPI_Comm comm, int peer)
{
	size_t i = rq_slot(r);
	pthread_mutex_lock(&rq_mu);
	rq[i].req = r;
	rq[i].comm = comm;
	rq[i].peer = peer < 0 ? RING_NEIGHBOUR : peer;
	pthread_mutex_unlock(&rq_mu);
}

static int rq_get(MPI_Request r, MPI_Comm *comm)
{
	size_t i = rq_slot(r);
	int peer = RING_NEIGHBOUR;
	pthread_mutex_lock(&rq_mu);
	if (memcmp(&rq[i].req, &r, sizeof r) == 0) {
		peer = rq[i].peer;
		*comm = rq[i].comm;
	}
	pthread_mutex_unlock(&rq_mu);
	return peer;
}

/* world_rank_of translates rank r of comm to MPI_COMM_WORLD; -1 if it has
 * none. RING_NEIGHBOUR is this rank's successor in comm at distance
 * 1 + hop % (size - 1): a watch that keeps waiting walks the ring, so that
 * every rank blocked in a collective reaches a dead member in turn. */
static int world_rank_of(MPI_Comm comm, int r, int hop)
{
	int inter = 0, me, size, out = MPI_UNDEFINED;
	MPI_Group g, wg;
	if (comm == MPI_COMM_NULL)
		comm = MPI_COMM_WORLD;
	PMPI_Comm_test_inter(comm, &inter);
	if (r == RING_NEIGHBOUR) {
		if (inter)
			return -1;
		PMPI_Comm_rank(comm, &me);
		PMPI_Comm_size(comm, &size);
		if (size < 2)
			return -1;
		r = (me + 1 + hop % (size - 1)) % size;
	}
	if (r < 0)
		return -1;
	if (comm == MPI_COMM_WORLD)
		return r;
	if (inter)
		PMPI_Comm_remote_group(comm, &g);
	else
		PMPI_Comm_group(comm, &g);
	PMPI_Comm_group(MPI_COMM_WORLD, &wg);
	PMPI_Group_translate_ranks(g, 1, &r, wg, &out);
	PMPI_Group_free(&g);
	PMPI_Group_free(&wg);
	return out == MPI_UNDEFINED ? -1 : out;
}

/* ---- waiting with a watch ---- */

/* failed_peer checks world rank w: sporadic mode probes it, ring mode asks
 * the detector. w < 0 in ring mode means "any rank". */
static int failed_peer(int w)
{
	if (mode == MODE_SPORADIC)
		return w >= 0 && w != world_rank && vigil_probe((uint32_t)w, delta_ns) == 1;
	if (w < 0)
		return vigil_dead_set(NULL, 0) > 0;
	return vigil_is_dead((uint32_t)w) == 1;
}

static void act(int w)
{
	if (on_failure == ON_FAILURE_ABORT) {
		fprintf(stderr, "vigil-pmpi: rank %d: waiting on failed rank %d: aborting the job\n", world_rank, w);
		PMPI_Abort(MPI_COMM_WORLD, ABORT_CODE);
	}
}

/* watching reports whether blocking calls must be watched at all. */
static int watching(void)
{
	return mode == MODE_SPORADIC || ((mode == MODE_RING || mode == MODE_DAEMON) && on_failure == ON_FAILURE_ABORT);
}

/* check_interval: sporadic mode probes after VIGIL_PMPI_TIMEOUT; ring mode
 * only reads the detector's state, so it looks every 10 ms. */
static double check_interval(void) { return mode == MODE_SPORADIC ? probe_after : 0.01; }

/* watch waits for n requests like PMPI_Waitall (n == 1: PMPI_Wait with
 * status st), checking the peers of the pending ones every interval. */
static int watch(int n, MPI_Request reqs[], MPI_Status *sts, int single, MPI_Comm comm, int peer)
{
	double next = PMPI_Wtime() + check_interval();
	int flag = 0, rc, spins = 0, hop = 0;
	for (;;) {
		rc = single ? PMPI_Test(&reqs[0], &flag, sts) : PMPI_Testall(n, reqs, &flag, sts);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		if (++spins > 64)
			sched_yield();
		if (PMPI_Wtime() < next)
			continue;
		for (int i = 0; i < n; i++) {
			int done = 0, p = peer;
			MPI_Comm c = comm;
			if (reqs[i] == MPI_REQUEST_NULL)
				continue;
			PMPI_Request_get_status(reqs[i], &done, MPI_STATUS_IGNORE);
			if (done)
				continue;
			if (p == RING_NEIGHBOUR && c == MPI_COMM_NULL)
				p = rq_get(reqs[i], &c);
			int w = (mode != MODE_SPORADIC && p == RING_NEIGHBOUR) ? -1 : world_rank_of(c, p, hop);
			if (failed_peer(w))
				act(w);
		}
		hop++;
		next = PMPI_Wtime() + check_interval();
	}
}

/* ---- wrapped calls ---- */

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
	int rc = PMPI_Isend(buf, count, type, dest, tag, comm, req);
	if (rc == MPI_SUCCESS && watching())
		rq_put(*req, comm, dest);
	return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
	int rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
	if (rc == MPI_SUCCESS && watching())
		rq_put(*req, comm, source);
	return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *st)
{
	MPI_Request r;
	int rc;
	if (!watching() || source == MPI_PROC_NULL)
		return PMPI_Recv(buf, count, type, source, tag, comm, st);
	if ((rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r)) != MPI_SUCCESS)
		return rc;
	return watch(1, &r, st, 1, comm, source == MPI_ANY_SOURCE ? RING_NEIGHBOUR : source);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
	MPI_Request r;
	int rc;
	if (!watching() || dest == MPI_PROC_NULL)
		return PMPI_Send(buf, count, type, dest, tag, comm);
	if ((rc = PMPI_Isend(buf, count, type, dest, tag, comm, &r)) != MPI_SUCCESS)
		return rc;
	return watch(1, &r, MPI_STATUS_IGNORE, 1, comm, dest);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	if (!watching() || *req == MPI_REQUEST_NULL)
		return PMPI_Wait(req, st);
	return watch(1, req, st, 1, MPI_COMM_NULL, RING_NEIGHBOUR);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	if (!watching() || n <= 0)
		return PMPI_Waitall(n, reqs, sts);
	return watch(n, reqs, sts, 0, MPI_COMM_NULL, RING_NEIGHBOUR);
}

/* Collectives: the non-blocking form, watched with the ring neighbour. */

int MPI_Barrier(MPI_Comm comm)
{
	MPI_Request r;
	int rc;
	if (!watching())
		return PMPI_Barrier(comm);
	if ((rc = PMPI_Ibarrier(comm, &r)) != MPI_SUCCESS)
		return rc;
	return watch(1, &r, MPI_STATUS_IGNORE, 1, comm, RING_NEIGHBOUR);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	MPI_Request r;
	int rc;
	if (!watching())
		return PMPI_Bcast(buf, count, type, root, comm);
	if ((rc = PMPI_Ibcast(buf, count, type, root, comm, &r)) != MPI_SUCCESS)
		return rc;
	return watch(1, &r, MPI_STATUS_IGNORE, 1, comm, RING_NEIGHBOUR);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
	MPI_Request r;
	int rc;
	if (!watching())
		return PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
	if ((rc = PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, &r)) != MPI_SUCCESS)
		return rc;
	return watch(1, &r, MPI_STATUS_IGNORE, 1, comm, RING_NEIGHBOUR);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
	MPI_Request r;
	int rc;
	if (!watching())
		return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
	if ((rc = PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &r)) != MPI_SUCCESS)
		return rc;
	return watch(1, &r, MPI_STATUS_IGNORE, 1, comm, RING_NEIGHBOUR);
}
