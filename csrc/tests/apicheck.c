/*
 * apicheck.c — checks libvigil's C contract in one process: status codes
 * of out-of-order and invalid calls, vigil_strerror / vigil_last_error,
 * explicit initialization with a static table and with an allgather
 * function, the callback thread, polling, the dead set, sporadic probes,
 * re-initialization after vigil_finalize, the counters (every version of
 * vigil_stats), every field of an event (the death of rank 0), and the
 * life cycle in a loop (nothing accumulates: descriptors, threads).
 *
 * Jobs of one real rank: the other ranks' addresses point at a closed port
 * (127.0.0.1:1), so they are detected dead. Exit status 0 iff every check
 * passed; the last line is "apicheck: N checks, F failures".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vigil.h"

static int checks, failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		checks++;                                                      \
		if (!(cond)) {                                                 \
			failures++;                                            \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

#define EQ(got, want) CHECK((got) == (want), "got %ld, want %ld", (long)(got), (long)(want))

static const uint8_t key[32] = "0123456789abcdef0123456789abcdef";
/* This process's job ID: the shared-memory heartbeats' socket is named
 * after it, host-wide, so two apicheck runs at once must differ. */
static uint64_t job_id;
static pthread_t main_thread;

/* State shared with the callback. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cb_count, cb_on_main, cb_finalize_rc;
static vigil_event cb_last;

static void on_failure(const vigil_event *ev, void *user)
{
	pthread_mutex_lock(&mu);
	cb_count++;
	cb_last = *ev;
	cb_on_main |= pthread_equal(pthread_self(), main_thread);
	cb_finalize_rc = vigil_finalize(); /* must be refused here */
	*(int *)user += 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* wait_callbacks waits up to ms for cb_count >= n. */
static int wait_callbacks(int n, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&mu);
	while (cb_count < n && pthread_cond_timedwait(&cv, &mu, &ts) == 0)
		;
	int got = cb_count;
	pthread_mutex_unlock(&mu);
	return got;
}

/* A fake allgather for a 2-rank job of which only rank 0 exists: rank 1's
 * address is a closed port. */
static int ag_calls, ag_on_main;
static int fake_allgather(const void *send, void *recv, size_t len, void *user)
{
	(void)user;
	ag_calls++;
	ag_on_main = pthread_equal(pthread_self(), main_thread);
	memcpy(recv, send, len);
	memset((char *)recv + len, 0, len);
	if (strchr(send, '/') != NULL) /* the hosts' round: rank 1 on this host */
		memcpy((char *)recv + len, send, len);
	else
		strcpy((char *)recv + len, "127.0.0.1:1");
	return 0;
}

/* count_dir returns the number of entries of a /proc directory, such as
 * /proc/self/fd, or -1. */
static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void base_config(vigil_config *cfg, uint32_t size)
{
	vigil_config_init(cfg);
	cfg->rank = 0;
	cfg->size = size;
	cfg->job_id = job_id;
	cfg->key = key;
	cfg->key_len = sizeof key;
	cfg->heartbeat_ns = 10000000;  /* 10 ms */
	cfg->suspect_ns = 100000000;   /* 100 ms */
	cfg->grace_ns = 300000000;     /* 300 ms */
}

int main(void)
{
	vigil_config cfg;
	vigil_event ev;
	char msg[512];
	uint32_t dead[8];
	int user_count = 0;
	const char *one[] = {"127.0.0.1:0"};
	const char *two[] = {"127.0.0.1:0", "127.0.0.1:1"};

	main_thread = pthread_self();
	job_id = 0x12340000ULL ^ (uint64_t)getpid();
	unsetenv("PMIX_RANK");
	unsetenv("PMIX_NAMESPACE");
	unsetenv("VIGIL_BOOTSTRAP");

	/* Out of order: nothing initialized. */
	EQ(vigil_rank(), VIGIL_ERR_STATE);
	EQ(vigil_size(), VIGIL_ERR_STATE);
	EQ(vigil_start(), VIGIL_ERR_STATE);
	EQ(vigil_poll(&ev), VIGIL_ERR_STATE);
	EQ(vigil_dead_set(dead, 8), VIGIL_ERR_STATE);
	EQ(vigil_is_dead(0), VIGIL_ERR_STATE);
	{
		vigil_stats st0 = {.struct_size = sizeof st0};
		EQ(vigil_stats_get(&st0), VIGIL_ERR_STATE); /* not initialized */
	}
	EQ(vigil_probe(0, 1000000), VIGIL_ERR_STATE);
	EQ(vigil_leave(0), VIGIL_ERR_STATE);
	EQ(vigil_set_failure_callback(on_failure, NULL), VIGIL_ERR_STATE);
	EQ(vigil_finalize(), VIGIL_ERR_STATE);
	size_t n = vigil_last_error(msg, sizeof msg);
	CHECK(n > 0 && strstr(msg, "not initialized") != NULL, "last error %s", msg);
	CHECK(vigil_last_error(msg, 4) == n && strlen(msg) == 3, "truncation: %s", msg);

	/* strerror. */
	const char *unknown = vigil_strerror(12345);
	CHECK(unknown != NULL && strstr(unknown, "unknown") != NULL, "strerror(12345) = %s", unknown);
	for (int c = VIGIL_OK; c >= VIGIL_ERR_INTERNAL; c--) {
		const char *s = vigil_strerror(c);
		CHECK(s != NULL && s != unknown && strcmp(s, unknown) != 0, "strerror(%d)", c);
	}

	/* No launcher in the environment. */
	EQ(vigil_init_from_env(), VIGIL_ERR_BOOTSTRAP);
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "no launcher") != NULL, "last error %s", msg);

	/* Invalid configurations. */
	EQ(vigil_init(NULL), VIGIL_ERR_INVALID);
	memset(&cfg, 0, sizeof cfg);
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* struct_size not set */
	base_config(&cfg, 1);
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* neither peers nor allgather */
	cfg.peers = one;
	cfg.allgather = fake_allgather;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* both */
	cfg.allgather = NULL;
	cfg.key_len = 8;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* short key */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.key_len = 8") != NULL, "last error %s", msg);
	cfg.key = NULL;
	cfg.key_len = sizeof key;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* no key */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.key is NULL") != NULL, "last error %s", msg);
	cfg.key = key;
	cfg.job_id = 0;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* job 0 */
	cfg.job_id = job_id;
	cfg.rank = 1;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* rank >= size */
	cfg.rank = 0;
	cfg.suspect_ns = cfg.heartbeat_ns;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* delta <= h */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.suspect_ns = 10000000 (10ms): want ≥ 2 × vigil_config.heartbeat_ns") != NULL,
	      "last error %s", msg);
	cfg.suspect_ns = 100000000;
	/* The bounds of docs/configuration-bounds.md, as the CLI's and Go's. */
	cfg.heartbeat_ns = 1;
	cfg.suspect_ns = 2;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* h = 1 ns */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.heartbeat_ns = 1 (1ns): want 10µs to 1m0s") != NULL, "last error %s", msg);
	cfg.heartbeat_ns = 20000;   /* 20 us: accepted, but not real-time */
	cfg.suspect_ns = 100000000;
	cfg.realtime = 1;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID);
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.realtime off") != NULL, "last error %s", msg);
	cfg.realtime = 0;
	cfg.heartbeat_ns = 10000000;
	cfg.start_timeout_ms = -1;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID);
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.start_timeout_ms = -1") != NULL, "last error %s", msg);
	cfg.start_timeout_ms = 0;
	cfg.broadcast = "flood";
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* unknown overlay */
	cfg.broadcast = NULL;
	cfg.mode = 7;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* unknown mode */
	cfg.mode = VIGIL_MODE_RING;
	cfg.advertise_addr = "not-an-address";
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* advertise_addr */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.advertise_addr") != NULL, "last error %s", msg);
	cfg.advertise_addr = NULL;
	cfg.if_include = "10.0.0.0/33";
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* if_include */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "vigil_config.if_include") != NULL, "last error %s", msg);
	cfg.if_include = NULL;
	cfg.struct_size = offsetof(vigil_config, advertise_addr); /* a caller built before the address fields */
	cfg.if_exclude = "10.0.0.0/33";                           /* beyond its struct_size: not read */
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_OK);
	cfg.struct_size = sizeof cfg;
	cfg.if_exclude = NULL;
	cfg.struct_size = offsetof(vigil_config, advertise_addr) - 1;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* struct_size too small */
	cfg.struct_size = sizeof cfg - 1;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* not a known version */
	vigil_last_error(msg, sizeof msg);
	CHECK(strstr(msg, "struct_size") != NULL, "last error %s", msg);
	cfg.struct_size = (size_t)1 << 40;
	EQ(vigil_init(&cfg), VIGIL_ERR_INVALID); /* nor is a huge one */
	cfg.struct_size = sizeof cfg;

	/* A job of one: static table. */
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_init(&cfg), VIGIL_ERR_STATE);
	EQ(vigil_rank(), 0);
	EQ(vigil_size(), 1);
	EQ(vigil_leave(0), VIGIL_ERR_STATE); /* not started */
	EQ(vigil_start(), VIGIL_OK);
	EQ(vigil_start(), VIGIL_ERR_STATE);
	EQ(vigil_poll(&ev), 0);
	EQ(vigil_poll(NULL), VIGIL_ERR_INVALID);
	EQ(vigil_dead_set(dead, 8), 0);
	EQ(vigil_dead_set(NULL, 0), 0);
	EQ(vigil_is_dead(0), 0);
	EQ(vigil_is_dead(5), VIGIL_ERR_INVALID);
	EQ(vigil_probe(0, 1000000), VIGIL_ERR_STATE); /* ring mode */
	EQ(vigil_leave(500), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_ERR_STATE);

	/* Ring, two ranks through an allgather; rank 1 never exists and is
	 * detected after the grace period. */
	base_config(&cfg, 2);
	cfg.allgather = fake_allgather;
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_set_failure_callback(on_failure, &user_count), VIGIL_OK);
	EQ(vigil_start(), VIGIL_OK);
	EQ(ag_calls, 3); /* the hosts, the addresses, then the start fence */
	CHECK(ag_on_main, "the allgather ran on another thread than vigil_start's");
	EQ(wait_callbacks(1, 10000), 1);
	pthread_mutex_lock(&mu);
	EQ(cb_last.kind, VIGIL_EVENT_FAILED);
	EQ(cb_last.rank, 1);
	EQ(cb_last.detector, 0);
	CHECK(cb_last.delivered_mono_ns > 0 && cb_last.detected_unix_ns > 0, "event times %lld %lld",
	      (long long)cb_last.delivered_mono_ns, (long long)cb_last.detected_unix_ns);
	CHECK(!cb_on_main, "the callback ran on the main thread");
	EQ(cb_finalize_rc, VIGIL_ERR_CALLBACK);
	EQ(user_count, 1);
	pthread_mutex_unlock(&mu);
	EQ(vigil_poll(&ev), 1);
	EQ(ev.rank, 1);
	EQ(ev.kind, VIGIL_EVENT_FAILED);
	EQ(vigil_poll(&ev), 0);
	EQ(vigil_dead_set(dead, 8), 1);
	EQ(dead[0], 1);
	EQ(vigil_is_dead(1), 1);
	{
		vigil_stats st;
		memset(&st, 0, sizeof st);
		EQ(vigil_stats_get(NULL), VIGIL_ERR_INVALID);
		EQ(vigil_stats_get(&st), VIGIL_ERR_INVALID); /* struct_size unset */
		st.struct_size = sizeof st;
		EQ(vigil_stats_get(&st), VIGIL_OK);
		EQ(st.struct_size, sizeof st);
		EQ(st.dead, 1);
		EQ(st.bcasts_started, 1);
		CHECK(st.loop_wakes > 0 && st.heartbeats_sent > 0, "counters %llu wakes, %llu heartbeats",
		      (unsigned long long)st.loop_wakes, (unsigned long long)st.heartbeats_sent);
		EQ(st.deaths_learned, 1); /* rank 1, found by this rank's observer */
		EQ(st.reported, 1);
		EQ(st.departures, 0);
		CHECK(st.checks > 0, "%llu observer checks", (unsigned long long)st.checks);
		/* Version 3: the messages by kind add up to at most the
		 * transport's (messages the node decoded or handed over), the
		 * rejections by reason to rejected. */
		uint64_t kinds = 0, reasons = 0;
		for (int k = 0; k < VIGIL_MSG_KIND_SLOTS; k++) {
			kinds += st.kind_sent[k];
			CHECK(st.kind_bytes_sent[k] >= st.kind_sent[k] && st.kind_bytes_recv[k] >= st.kind_recv[k],
			      "kind %d: %llu bytes for %llu messages", k, (unsigned long long)st.kind_bytes_sent[k],
			      (unsigned long long)st.kind_sent[k]);
			CHECK(k >= VIGIL_MSG_ALIVE + 1 || vigil_msg_kind_name(k) != NULL, "kind %d unnamed", k);
		}
		for (int r = 0; r < VIGIL_REJECT_SLOTS; r++)
			reasons += st.rejected_by[r];
		CHECK(kinds <= st.msgs_sent, "%llu messages by kind, %llu sent", (unsigned long long)kinds,
		      (unsigned long long)st.msgs_sent);
		EQ(reasons, st.rejected);
		CHECK(strcmp(vigil_msg_kind_name(VIGIL_MSG_BCAST), "bcast") == 0, "%s", vigil_msg_kind_name(VIGIL_MSG_BCAST));
		CHECK(strcmp(vigil_reject_name(VIGIL_REJECT_BAD_TAG), "bad_tag") == 0, "%s", vigil_reject_name(VIGIL_REJECT_BAD_TAG));
		CHECK(vigil_msg_kind_name(-1) == NULL && vigil_msg_kind_name(VIGIL_MSG_KIND_SLOTS) == NULL, "kind names out of range");
		CHECK(vigil_reject_name(VIGIL_REJECT_SLOTS) == NULL, "reason name out of range");
		/* A caller built with version 2 (up to agree_max_latency_ns):
		 * the version 3 fields are left alone. */
		memset(&st, 0xab, sizeof st);
		st.struct_size = offsetof(vigil_stats, kind_sent);
		EQ(vigil_stats_get(&st), VIGIL_OK);
		EQ(st.struct_size, offsetof(vigil_stats, kind_sent));
		EQ(st.deaths_learned, 1);
		CHECK(st.kind_sent[0] == 0xababababababababULL, "version 2 caller's kind_sent overwritten: %llx",
		      (unsigned long long)st.kind_sent[0]);
		/* A caller built with version 1 of the struct (up to realtime):
		 * the later fields are left alone. */
		memset(&st, 0xab, sizeof st);
		st.struct_size = offsetof(vigil_stats, checks);
		EQ(vigil_stats_get(&st), VIGIL_OK);
		EQ(st.struct_size, offsetof(vigil_stats, checks));
		EQ(st.dead, 1);
		CHECK(st.checks == 0xababababababababULL, "version 1 caller's checks overwritten: %llx",
		      (unsigned long long)st.checks);
		st.struct_size = offsetof(vigil_stats, checks) + 8;
		EQ(vigil_stats_get(&st), VIGIL_ERR_INVALID);
	}
	EQ(vigil_leave(200), VIGIL_OK); /* alone now: departs at once */
	EQ(vigil_finalize(), VIGIL_OK);

	/* Sporadic, two ranks: no detection until probed. */
	base_config(&cfg, 2);
	cfg.mode = VIGIL_MODE_SPORADIC;
	cfg.peers = two;
	ag_calls = 0;
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_probe(1, 1000000), VIGIL_ERR_STATE); /* not started */
	EQ(vigil_set_failure_callback(on_failure, &user_count), VIGIL_OK);
	EQ(vigil_start(), VIGIL_OK);
	/* Static table: no fence, so during the 300 ms start-up grace an
	 * unreachable rank is not declared dead. */
	EQ(vigil_probe(1, 50000000), 0);
	usleep(400000);
	EQ(vigil_is_dead(1), 0);
	EQ(vigil_poll(&ev), 0);
	EQ(vigil_probe(0, 100000000), 0);  /* self */
	EQ(vigil_probe(1, 0), VIGIL_ERR_INVALID);
	EQ(vigil_probe(9, 100000000), VIGIL_ERR_INVALID);
	EQ(vigil_probe(1, 200000000), 1);  /* closed port */
	EQ(vigil_probe(1, 200000000), 1);  /* known dead: at once */
	EQ(wait_callbacks(2, 5000), 2);
	pthread_mutex_lock(&mu);
	EQ(cb_last.rank, 1);
	EQ(cb_last.detector, 0);
	EQ(cb_last.kind, VIGIL_EVENT_FAILED);
	pthread_mutex_unlock(&mu);
	EQ(vigil_poll(&ev), 1);
	EQ(ev.rank, 1);
	EQ(vigil_dead_set(dead, 8), 1);
	EQ(vigil_set_failure_callback(NULL, NULL), VIGIL_OK);
	EQ(vigil_leave(0), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_OK);
	EQ(wait_callbacks(3, 100), 2); /* exactly one callback per event */

	/* The death of rank 0 through the callback and vigil_poll, every
	 * field set: this process is rank 1 of a ring of two, rank 0's
	 * address a closed port. */
	{
		const char *zero_dead[] = {"127.0.0.1:1", "127.0.0.1:0"};
		struct timespec now;
		base_config(&cfg, 2);
		cfg.rank = 1;
		cfg.peers = zero_dead;
		/* Half of a job of two: rank 1 would stop as the tie's loser. */
		cfg.partition = VIGIL_PARTITION_CONTINUE;
		EQ(vigil_init(&cfg), VIGIL_OK);
		pthread_mutex_lock(&mu);
		memset(&cb_last, 0xff, sizeof cb_last);
		pthread_mutex_unlock(&mu);
		EQ(vigil_set_failure_callback(on_failure, &user_count), VIGIL_OK);
		EQ(vigil_start(), VIGIL_OK);
		EQ(wait_callbacks(3, 10000), 3);
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t mono = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		pthread_mutex_lock(&mu);
		EQ(cb_last.version, VIGIL_EVENT_VERSION);
		EQ(cb_last.kind, VIGIL_EVENT_FAILED);
		EQ(cb_last.rank, 0);
		EQ(cb_last.detector, 1);
		CHECK(cb_last.detected_unix_ns > 1600000000LL * 1000000000LL, "detected_unix_ns %lld",
		      (long long)cb_last.detected_unix_ns);
		CHECK(cb_last.delivered_mono_ns > 0 && cb_last.delivered_mono_ns <= mono, "delivered_mono_ns %lld (now %lld)",
		      (long long)cb_last.delivered_mono_ns, (long long)mono);
		vigil_event from_cb = cb_last;
		pthread_mutex_unlock(&mu);
		memset(&ev, 0xff, sizeof ev);
		EQ(vigil_poll(&ev), 1);
		EQ(ev.version, VIGIL_EVENT_VERSION);
		CHECK(ev.kind == from_cb.kind && ev.rank == 0 && ev.detector == 1 &&
		          ev.detected_unix_ns == from_cb.detected_unix_ns && ev.delivered_mono_ns == from_cb.delivered_mono_ns,
		      "polled {%d %u %u %lld %lld}, callback's {%d %u %u %lld %lld}", ev.kind, ev.rank, ev.detector,
		      (long long)ev.detected_unix_ns, (long long)ev.delivered_mono_ns, from_cb.kind, from_cb.rank,
		      from_cb.detector, (long long)from_cb.detected_unix_ns, (long long)from_cb.delivered_mono_ns);
		EQ(vigil_is_dead(0), 1);
		EQ(vigil_set_failure_callback(NULL, NULL), VIGIL_OK);
		EQ(vigil_leave(200), VIGIL_OK); /* alone now: departs at once */
		EQ(vigil_finalize(), VIGIL_OK);
	}

	/* The life cycle in a loop, as a long-running program or a test
	 * harness would: init, start, the non-blocking queries many times,
	 * leave, finalize. Nothing accumulates: after the first round, the
	 * open descriptors stay the same and the threads do not grow with
	 * the rounds (the Go runtime may keep a few idle ones). */
	{
		int fd0 = -1, th0 = -1, loop_failures = failures;
		vigil_stats st;
		for (int i = 0; i < 31; i++) {
			base_config(&cfg, 1);
			cfg.peers = one;
			EQ(vigil_init(&cfg), VIGIL_OK);
			EQ(vigil_set_failure_callback(on_failure, &user_count), VIGIL_OK);
			EQ(vigil_start(), VIGIL_OK);
			for (int k = 0; k < 1000; k++) {
				EQ(vigil_poll(&ev), 0);
				EQ(vigil_dead_set(dead, 8), 0);
				EQ(vigil_is_dead(0), 0);
				st.struct_size = sizeof st;
				EQ(vigil_stats_get(&st), VIGIL_OK);
				if (failures != loop_failures)
					break;
			}
			EQ(vigil_leave(100), VIGIL_OK);
			EQ(vigil_finalize(), VIGIL_OK);
			if (failures != loop_failures)
				break;
			if (i == 0) {
				fd0 = count_dir("/proc/self/fd");
				th0 = count_dir("/proc/self/task");
			}
		}
		int fd1 = count_dir("/proc/self/fd"), th1 = count_dir("/proc/self/task");
		EQ(fd1, fd0);
		CHECK(th1 <= th0 + 4, "threads %d after 30 more rounds, %d after the first", th1, th0);
		printf("apicheck: loop: %d descriptors, %d threads after the first round; %d, %d after 30 more\n",
		       fd0, th0, fd1, th1);
	}

	printf("apicheck: %d checks, %d failures\n", checks, failures);
	return failures != 0;
}
