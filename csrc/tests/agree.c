/*
 * agree.c — checks vigil_agree, vigil_shrink and vigil_failure_ack across
 * processes configured explicitly (as examples/explicit.c):
 *
 *   agree RANK H_MS DELTA_MS JOBID_HEX KEY_HEX VICTIM ADDR0 ADDR1 ...
 *
 * Every rank checks the argument errors, then runs phase 1 (five BOR
 * agreements of 1 << rank, a MAX and a 3-byte BAND); rank VICTIM then
 * kills itself (SIGKILL) and the survivors run phase 2 (three BOR
 * agreements, vigil_failure_ack, vigil_shrink). Each result is printed as
 * a JSON line; capi/agree_test.go checks them across ranks. Local errors
 * print {"ev":"fail",...} and exit 1.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vigil.h"

static int self;

static void fail(const char *what, int rc)
{
	char msg[512];
	vigil_last_error(msg, sizeof msg);
	printf("{\"ev\":\"fail\",\"rank\":%d,\"what\":\"%s\",\"rc\":%d}\n", self, what, rc);
	fflush(stdout);
	fprintf(stderr, "agree: rank %d: %s: %s (%d): %s\n", self, what, vigil_strerror(rc), rc, msg);
	exit(1);
}

static void expect(const char *what, int rc, int want)
{
	if (rc != want)
		fail(what, rc);
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

/* print one agreement's result */
static void report(const char *ev, uint64_t value, const vigil_agreement *a, const uint32_t *dead)
{
	printf("{\"ev\":\"%s\",\"rank\":%d,\"seq\":%llu,\"value\":%llu,\"unacked\":%d,\"dead_set\":[",
	       ev, self, (unsigned long long)a->seq, (unsigned long long)value, a->unacked);
	for (size_t i = 0; i < a->ndead && i < 64; i++)
		printf("%s%u", i ? "," : "", dead[i]);
	printf("]}\n");
	fflush(stdout);
}

static void bor(const char *ev)
{
	uint64_t v = 1ULL << self;
	uint32_t dead[64];
	vigil_agreement a;
	expect("vigil_agree BOR", vigil_agree(VIGIL_OP_BOR, &v, sizeof v, &a, dead, 64, 30000000000LL), VIGIL_OK);
	report(ev, v, &a, dead);
}

int main(int argc, char **argv)
{
	vigil_config cfg;
	uint8_t key[64];
	int klen, victim, rc;
	uint64_t v;
	uint32_t dead[64];
	vigil_agreement a;

	if (argc < 9) {
		fprintf(stderr, "usage: %s RANK H_MS DELTA_MS JOBID_HEX KEY_HEX VICTIM ADDR...\n", argv[0]);
		return 2;
	}
	vigil_config_init(&cfg);
	cfg.rank = (uint32_t)atoi(argv[1]);
	cfg.heartbeat_ns = atoll(argv[2]) * 1000000LL;
	cfg.suspect_ns = atoll(argv[3]) * 1000000LL;
	cfg.job_id = strtoull(argv[4], NULL, 16);
	if ((klen = unhex(argv[5], key, sizeof key)) < 0) {
		fprintf(stderr, "agree: bad key\n");
		return 2;
	}
	cfg.key = key;
	cfg.key_len = (size_t)klen;
	victim = atoi(argv[6]);
	cfg.size = (uint32_t)(argc - 7);
	cfg.peers = (const char *const *)&argv[7];
	self = (int)cfg.rank;

	v = 1;
	expect("vigil_agree before init", vigil_agree(VIGIL_OP_BOR, &v, 8, NULL, NULL, 0, 0), VIGIL_ERR_STATE);
	expect("vigil_init", vigil_init(&cfg), VIGIL_OK);
	expect("vigil_shrink before start", (int)vigil_shrink(NULL, 0, 0), VIGIL_ERR_STATE);
	expect("vigil_start", vigil_start(), VIGIL_OK);
	printf("{\"ev\":\"ready\",\"rank\":%d}\n", self);
	fflush(stdout);

	/* Argument errors: no agreement is started, numbering is unchanged. */
	expect("bad op", vigil_agree(42, &v, 8, NULL, NULL, 0, 0), VIGIL_ERR_INVALID);
	expect("MIN with len 4", vigil_agree(VIGIL_OP_MIN, &v, 4, NULL, NULL, 0, 0), VIGIL_ERR_INVALID);
	expect("NULL value", vigil_agree(VIGIL_OP_BAND, NULL, 8, NULL, NULL, 0, 0), VIGIL_ERR_INVALID);
	expect("NULL dead", vigil_agree(VIGIL_OP_BAND, &v, 8, NULL, NULL, 4, 0), VIGIL_ERR_INVALID);
	expect("NULL shrink buffer", (int)vigil_shrink(NULL, 3, 0), VIGIL_ERR_INVALID);

	/* Phase 1: no failure. */
	for (int i = 0; i < 5; i++)
		bor("agree1");
	v = (uint64_t)self * 1000;
	expect("vigil_agree MAX", vigil_agree(VIGIL_OP_MAX, &v, sizeof v, &a, dead, 64, 30000000000LL), VIGIL_OK);
	report("max", v, &a, dead);
	{
		uint8_t b[3] = {0xff, (uint8_t)(0xff ^ (1u << self)), 0x0f};
		expect("vigil_agree BAND", vigil_agree(VIGIL_OP_BAND, b, 3, &a, dead, 64, 30000000000LL), VIGIL_OK);
		report("band", (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16, &a, dead);
	}

	if (self == victim)
		raise(SIGKILL);

	/* Phase 2: the victim is gone. */
	for (int i = 0; i < 3; i++)
		bor("agree2");
	expect("vigil_failure_ack", vigil_failure_ack(), VIGIL_OK);
	{
		uint32_t alive[64];
		long n = vigil_shrink(alive, 64, 30000000000LL);
		if (n < 0)
			fail("vigil_shrink", (int)n);
		printf("{\"ev\":\"shrink\",\"rank\":%d,\"survivors\":[", self);
		for (long i = 0; i < n && i < 64; i++)
			printf("%s%u", i ? "," : "", alive[i]);
		printf("]}\n");
		fflush(stdout);
	}
	/* Let every survivor return from the shrink before leaving: a rank
	 * that leaves counts as failed in the others' agreements. */
	sleep(1);
	if ((rc = vigil_leave(1000)) != VIGIL_OK)
		fail("vigil_leave", rc);
	if ((rc = vigil_finalize()) != VIGIL_OK)
		fail("vigil_finalize", rc);
	expect("vigil_agree after finalize", vigil_agree(VIGIL_OP_BOR, &v, 8, NULL, NULL, 0, 0), VIGIL_ERR_STATE);
	printf("{\"ev\":\"bye\",\"rank\":%d}\n", self);
	fflush(stdout);
	return 0;
}
