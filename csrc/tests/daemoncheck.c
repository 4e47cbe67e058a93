/*
 * daemoncheck.c — checks of vigil_init_daemon (vigil_daemon.h) against a
 * running `vigil daemon` of 2 nodes × 2 ranks whose node-0 socket is argv[1],
 * attaching as RANK (0 or 1, a rank of node 0 not used before):
 *
 *   VIGIL_DAEMON_SOCK=/nonexistent/n{node}.sock VIGIL_DAEMON_PPN=2 daemoncheck SOCKET RANK
 *
 * (libvigil reads the environment the process started with.)
 * Prints one line per failed check and "daemoncheck: N checks, M failures".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vigil_daemon.h"

static int checks, failures;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		checks++;                                                                                              \
		if (!(cond)) {                                                                                         \
			failures++;                                                                                    \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
			printf(__VA_ARGS__);                                                                           \
			printf("\n");                                                                                  \
		}                                                                                                      \
	} while (0)

static const char *last(void)
{
	static char buf[512];
	vigil_last_error(buf, sizeof buf);
	return buf;
}

int main(int argc, char **argv)
{
	int rc;
	vigil_event ev;
	uint32_t dead[4], me;

	if (argc != 3) {
		fprintf(stderr, "usage: daemoncheck SOCKET RANK\n");
		return 2;
	}
	me = (uint32_t)atoi(argv[2]);
	rc = vigil_init_daemon(NULL, 0);
	CHECK(rc == VIGIL_ERR_BOOTSTRAP, "no daemon there: rc %d (%s)", rc, last());
	CHECK(strstr(last(), "/nonexistent/n0.sock") != NULL, "no daemon: message %s", last());

	rc = vigil_init_daemon(argv[1], 2);
	CHECK(rc == VIGIL_ERR_BOOTSTRAP, "rank of node 1 at node 0: rc %d (%s)", rc, last());
	CHECK(strstr(last(), "hosted by node 1") != NULL, "wrong node: message %s", last());
	rc = vigil_init_daemon(argv[1], 9);
	CHECK(rc == VIGIL_ERR_BOOTSTRAP, "rank 9 of a 4-rank job: rc %d (%s)", rc, last());

	rc = vigil_init_daemon(argv[1], me);
	CHECK(rc == VIGIL_OK, "attach as rank %u: rc %d (%s)", me, rc, last());
	CHECK(vigil_rank() == (int)me && vigil_size() == 4, "rank %d size %d, want %u and 4", vigil_rank(), vigil_size(), me);
	rc = vigil_init_daemon(argv[1], 0);
	CHECK(rc == VIGIL_ERR_STATE, "second init: rc %d", rc);
	CHECK(vigil_poll(&ev) == 0, "poll before start: an event");
	rc = vigil_start();
	CHECK(rc == VIGIL_OK, "start: rc %d (%s)", rc, last());
	CHECK(vigil_poll(&ev) == 0, "an event without a failure");
	CHECK(vigil_dead_set(dead, 4) == 0, "a dead set without a failure");
	rc = vigil_probe(0, 1000000);
	CHECK(rc == VIGIL_ERR_STATE, "probe in daemon mode: rc %d", rc);
	rc = vigil_leave(1000);
	CHECK(rc == VIGIL_OK, "leave: rc %d (%s)", rc, last());
	rc = vigil_finalize();
	CHECK(rc == VIGIL_OK, "finalize: rc %d (%s)", rc, last());

	/* The rank said goodbye but lives on: it may attach again. */
	rc = vigil_init_daemon(argv[1], me);
	CHECK(rc == VIGIL_OK, "re-attach as rank %u: rc %d (%s)", me, rc, last());
	CHECK(vigil_finalize() == VIGIL_OK, "second finalize");

	printf("daemoncheck: %d checks, %d failures\n", checks, failures);
	return failures != 0;
}
