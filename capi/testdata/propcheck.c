/*
 * propcheck.c — checks vigil_config's propagation settings in one process
 * (TestCPropagationConfig): every broadcast name is accepted and runs a
 * small job; bad broadcast names and gossip values are refused with
 * VIGIL_ERR_INVALID and a message naming the field; a caller built before
 * the gossip fields (a smaller struct_size) is not read beyond it and keeps
 * its address fields. Exit status 0 iff every check passed; the last line
 * is "propcheck: N checks, F failures".
 *
 * "propcheck env" calls vigil_init_from_env once and prints "rc=CODE
 * MESSAGE" (TestCPropagationEnv sets VIGIL_BROADCAST and VIGIL_GOSSIP_*).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vigil.h"

/* The layout (see capi.go): the gossip fields follow the address fields,
 * the partition field and its padding word end the struct, with no tail
 * padding. */
_Static_assert(offsetof(vigil_config, gossip_t) == offsetof(vigil_config, if_exclude) + sizeof(const char *),
	       "gossip fields right after if_exclude");
_Static_assert(sizeof(vigil_config) == offsetof(vigil_config, reserved0) + sizeof(int),
	       "no tail padding");

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

static void base_config(vigil_config *cfg, const char *const *peers, uint32_t size)
{
	vigil_config_init(cfg);
	cfg->size = size;
	cfg->job_id = 0x1234;
	cfg->key = key;
	cfg->key_len = sizeof key;
	cfg->heartbeat_ns = 10000000; /* 10 ms */
	cfg->suspect_ns = 100000000;  /* 100 ms */
	cfg->grace_ns = 300000000;    /* 300 ms */
	cfg->peers = peers;
}

/* refused checks that vigil_init(cfg) fails with VIGIL_ERR_INVALID and a
 * last error naming name. */
static void refused(const vigil_config *cfg, const char *name, int line)
{
	char msg[512] = "";
	int rc = vigil_init(cfg);
	vigil_last_error(msg, sizeof msg);
	checks++;
	if (rc != VIGIL_ERR_INVALID || strstr(msg, name) == NULL) {
		failures++;
		printf("FAIL line %d: vigil_init = %d (want %d) with last error \"%s\" (want %s named)\n", line, rc,
		       VIGIL_ERR_INVALID, msg, name);
	}
	if (rc == VIGIL_OK)
		vigil_finalize();
}

/* detects runs a job of two ranks, rank 1 at a closed port, with the given
 * broadcast, and checks that this rank reports rank 1 failed (and nothing
 * else) within 5 s. */
static void detects(const char *broadcast)
{
	const char *two[] = {"127.0.0.1:0", "127.0.0.1:1"};
	vigil_config cfg;
	vigil_event ev;
	int got = 0;

	base_config(&cfg, two, 2);
	cfg.broadcast = broadcast;
	cfg.gossip_f = 2;
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_start(), VIGIL_OK);
	for (int i = 0; i < 500 && !got; i++) {
		int rc = vigil_poll(&ev);
		if (rc == 1) {
			CHECK(ev.kind == VIGIL_EVENT_FAILED && ev.rank == 1, "%s: event kind %d rank %u", broadcast,
			      ev.kind, ev.rank);
			got = 1;
		} else {
			EQ(rc, 0);
			usleep(10000);
		}
	}
	CHECK(got, "%s: rank 1 not reported in 5 s", broadcast);
	usleep(100000);
	CHECK(vigil_poll(&ev) == 0, "%s: a second event: kind %d rank %u", broadcast, ev.kind, ev.rank);
	EQ(vigil_finalize(), VIGIL_OK);
}

int main(int argc, char **argv)
{
	static const char *names[] = {"hba", "bmg", "ocg", "ccg", "fcg", "ctree"};
	const char *one[] = {"127.0.0.1:0"};
	vigil_config cfg;

	if (argc > 1 && strcmp(argv[1], "env") == 0) {
		/* The environment is read by the library as the process started
		 * it (the Go runtime keeps its own copy): the test sets it. */
		char msg[512] = "";
		int rc = vigil_init_from_env();
		vigil_last_error(msg, sizeof msg);
		printf("rc=%d %s\n", rc, msg);
		return 0;
	}

	/* Every name, with and without tuning; a job of one starts. */
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		base_config(&cfg, one, 1);
		cfg.broadcast = names[i];
		EQ(vigil_init(&cfg), VIGIL_OK);
		EQ(vigil_start(), VIGIL_OK);
		EQ(vigil_finalize(), VIGIL_OK);
		cfg.gossip_step_ns = 50000;
		cfg.gossip_latency_ns = 200000;
		cfg.gossip_t = 12;
		cfg.gossip_c = 3;
		cfg.gossip_f = 3;
		EQ(vigil_init(&cfg), VIGIL_OK);
		EQ(vigil_finalize(), VIGIL_OK);
	}

	/* Bad values, named. */
	base_config(&cfg, one, 1);
	cfg.broadcast = "flood";
	refused(&cfg, "vigil_config.broadcast", __LINE__);
	cfg.broadcast = "CTREE";
	refused(&cfg, "vigil_config.broadcast", __LINE__);
	cfg.broadcast = "ctree";
	cfg.gossip_step_ns = -1;
	refused(&cfg, "vigil_config.gossip_step_ns", __LINE__);
	cfg.gossip_step_ns = 0;
	cfg.gossip_latency_ns = -1;
	refused(&cfg, "vigil_config.gossip_latency_ns", __LINE__);
	cfg.gossip_step_ns = 1;
	cfg.gossip_latency_ns = 1000000000; /* 10^9 steps of 1 ns */
	refused(&cfg, "vigil_config.gossip_latency_ns", __LINE__);
	cfg.gossip_step_ns = 0;
	cfg.gossip_latency_ns = 0;
	cfg.gossip_t = -1;
	refused(&cfg, "vigil_config.gossip_t", __LINE__);
	cfg.gossip_t = 1 << 30;
	refused(&cfg, "vigil_config.gossip_t", __LINE__);
	cfg.gossip_t = 0;
	cfg.gossip_c = -3;
	refused(&cfg, "vigil_config.gossip_c", __LINE__);
	cfg.gossip_c = 0;
	cfg.gossip_f = 4;
	refused(&cfg, "vigil_config.gossip_f", __LINE__);
	cfg.gossip_f = -1;
	refused(&cfg, "vigil_config.gossip_f", __LINE__);
	cfg.broadcast = NULL; /* the overlays refuse bad gossip values too */
	refused(&cfg, "vigil_config.gossip_f", __LINE__);
	cfg.gossip_f = 0;
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_OK);

	/* A caller built before the gossip fields: they are not read, the
	 * address fields still are. */
	base_config(&cfg, one, 1);
	cfg.struct_size = offsetof(vigil_config, gossip_t);
	cfg.gossip_f = 99;
	cfg.gossip_step_ns = -1;
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_OK);
	cfg.if_include = "10.0.0.0/33";
	refused(&cfg, "vigil_config.if_include", __LINE__);
	cfg.if_include = NULL;
	cfg.struct_size = offsetof(vigil_config, advertise_addr); /* before the address fields */
	EQ(vigil_init(&cfg), VIGIL_OK);
	EQ(vigil_finalize(), VIGIL_OK);

	/* Jobs whose other rank is dead from the start: detected and
	 * propagated (to this rank alone) by every propagation. */
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		detects(names[i]);

	printf("propcheck: %d checks, %d failures\n", checks, failures);
	return failures != 0;
}
