/*
 * explicit.c — a Vigil client configured explicitly with vigil_init (no
 * launcher): every rank is given the whole address table on its command
 * line, as a static job description would.
 *
 *   explicit [OPTIONS] MODE RANK H_MS DELTA_MS JOBID_HEX KEY_HEX ADDR0 ADDR1 ...
 *
 * OPTIONS set the propagation of failure news in ring mode (vigil_config's
 * broadcast and gossip_* fields; every rank must be given the same):
 *   -b NAME   hba (default), bmg, ocg, ccg, fcg or ctree
 *   -o NS     gossip_step_ns       -L NS  gossip_latency_ns
 *   -T STEPS  gossip_t             -C N   gossip_c          -F N  gossip_f
 *
 * MODE is "ring" (Vigil's periodic detector) or "sporadic" (no heartbeats;
 * this program probes every other rank every 50 ms with a DELTA_MS
 * time-out, as seed 004's sporadic detector does when a blocking call
 * waits too long). Failures are printed from the failure callback in the
 * same JSON lines as detect.c; SIGTERM leaves and prints a "bye" line.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vigil.h"

static volatile sig_atomic_t stop;
static int self;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void die(const char *what, int rc)
{
	char msg[512];
	vigil_last_error(msg, sizeof msg);
	fprintf(stderr, "explicit: %s: %s (%d): %s\n", what, vigil_strerror(rc), rc, msg);
	exit(1);
}

static int64_t now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* det_ns: from the detection (the detector's wall clock) to this callback,
 * lat_ns: from when this rank learned it (delivered_mono_ns) to this
 * callback; scripts/callback-latency.sh reads them. */
static void on_failure(const vigil_event *ev, void *user)
{
	int64_t mono = now_ns(CLOCK_MONOTONIC), wall = now_ns(CLOCK_REALTIME);
	(void)user;
	printf("{\"ev\":\"%s\",\"rank\":%d,\"dead\":%u,\"left\":%s,\"detector\":%u,"
	       "\"det_ns\":%lld,\"lat_ns\":%lld}\n",
	       ev->kind == VIGIL_EVENT_EVICTED ? "evicted" : "dead", self, ev->rank,
	       ev->kind == VIGIL_EVENT_LEFT ? "true" : "false", ev->detector,
	       (long long)(wall - ev->detected_unix_ns), (long long)(mono - ev->delivered_mono_ns));
	fflush(stdout);
}

static int unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = strlen(s) / 2;
	if (n > max || strlen(s) % 2)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)n;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {0};
	vigil_config cfg;
	uint8_t key[64];
	const char *prog = argv[0];
	int rc, sporadic, klen, opt, bad = 0;

	vigil_config_init(&cfg);
	while ((opt = getopt(argc, argv, "+b:o:L:T:C:F:")) != -1) {
		switch (opt) {
		case 'b': cfg.broadcast = optarg; break;
		case 'o': cfg.gossip_step_ns = strtoll(optarg, NULL, 10); break;
		case 'L': cfg.gossip_latency_ns = strtoll(optarg, NULL, 10); break;
		case 'T': cfg.gossip_t = atoi(optarg); break;
		case 'C': cfg.gossip_c = atoi(optarg); break;
		case 'F': cfg.gossip_f = atoi(optarg); break;
		default: bad = 1;
		}
	}
	argc -= optind - 1; /* argv[1] is MODE */
	argv += optind - 1;
	if (bad || argc < 8) {
		fprintf(stderr, "usage: %s [-b broadcast] [-o step_ns] [-L latency_ns] [-T t] [-C c] [-F f] "
		                "ring|sporadic RANK H_MS DELTA_MS JOBID_HEX KEY_HEX ADDR...\n", prog);
		return 2;
	}
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);

	sporadic = strcmp(argv[1], "sporadic") == 0;
	cfg.mode = sporadic ? VIGIL_MODE_SPORADIC : VIGIL_MODE_RING;
	cfg.rank = (uint32_t)atoi(argv[2]);
	cfg.heartbeat_ns = atoll(argv[3]) * 1000000LL;
	cfg.suspect_ns = atoll(argv[4]) * 1000000LL;
	cfg.job_id = strtoull(argv[5], NULL, 16);
	if ((klen = unhex(argv[6], key, sizeof key)) < 0) {
		fprintf(stderr, "explicit: bad key\n");
		return 2;
	}
	cfg.key = key;
	cfg.key_len = (size_t)klen;
	cfg.size = (uint32_t)(argc - 7);
	cfg.peers = (const char *const *)&argv[7];
	self = (int)cfg.rank;

	if ((rc = vigil_init(&cfg)) != VIGIL_OK)
		die("vigil_init", rc);
	if ((rc = vigil_set_failure_callback(on_failure, NULL)) != VIGIL_OK)
		die("vigil_set_failure_callback", rc);
	if ((rc = vigil_start()) != VIGIL_OK)
		die("vigil_start", rc);
	printf("{\"ev\":\"ready\",\"rank\":%d}\n", self);
	fflush(stdout);

	while (!stop) {
		if (sporadic) {
			for (uint32_t r = 0; r < cfg.size && !stop; r++) {
				if ((int)r == self || vigil_is_dead(r) == 1)
					continue;
				if ((rc = vigil_probe(r, cfg.suspect_ns)) < 0)
					die("vigil_probe", rc);
			}
		}
		usleep(50000);
	}
	if ((rc = vigil_leave(1000)) != VIGIL_OK)
		die("vigil_leave", rc);
	uint32_t dead[64];
	long n = vigil_dead_set(dead, 64);
	printf("{\"ev\":\"bye\",\"rank\":%d,\"dead_set\":[", self);
	for (long i = 0; i < n && i < 64; i++)
		printf("%s%u", i ? "," : "", dead[i]);
	printf("]}\n");
	fflush(stdout);
	if ((rc = vigil_finalize()) != VIGIL_OK)
		die("vigil_finalize", rc);
	return 0;
}
