/*
 * hbhost.c — a host process that does nothing but run libvigil's
 * detector, for `vigil bench cost`: whatever CPU it uses is the cost of
 * Vigil inside an application process.
 *
 * It starts the detector from the launcher's environment (VIGIL_H,
 * VIGIL_DELTA, VIGIL_CHECK, VIGIL_REALTIME; see vigil.h), prints the
 * `vigil agent` lines the local launcher reads, and sleeps on a semaphore
 * until SIGTERM or SIGINT, then leaves and prints "bye":
 *
 *   {"ev":"ready","rank":R,"mono":T}
 *   {"ev":"dead","rank":R,"dead":D,"left":false,"mono":T}   (one per failure)
 *   {"ev":"bye","rank":R,"mono":T}
 *
 * T is CLOCK_MONOTONIC in nanoseconds when the line was printed.
 *
 * Build: cc -O2 -I csrc -o hbhost bench/csrc/hbhost.c -L DIR -lvigil -Wl,-rpath,DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vigil.h"

static int self = -1;

static long long mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, int rc) {
	char msg[512];
	vigil_last_error(msg, sizeof msg);
	fprintf(stderr, "hbhost: %s: %s (%d): %s\n", what, vigil_strerror(rc), rc, msg);
	exit(1);
}

/* Runs on libvigil's callback thread; stdio locks the stream. */
static void on_failure(const vigil_event *ev, void *user) {
	(void)user;
	if (ev->kind == VIGIL_EVENT_EVICTED)
		printf("{\"ev\":\"evicted\",\"rank\":%d,\"mono\":%lld}\n", self, mono_ns());
	else
		printf("{\"ev\":\"dead\",\"rank\":%d,\"dead\":%u,\"left\":%s,\"mono\":%lld}\n", self, ev->rank,
		       ev->kind == VIGIL_EVENT_LEFT ? "true" : "false", mono_ns());
	fflush(stdout);
}

static sem_t stop;

static void on_signal(int sig) {
	(void)sig;
	sem_post(&stop); /* async-signal-safe */
}

int main(void) {
	sem_init(&stop, 0, 0);
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_ONSTACK; /* the signal may land on one of libvigil's Go threads */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	int rc;
	if ((rc = vigil_init_from_env()) != VIGIL_OK)
		die("vigil_init_from_env", rc);
	self = vigil_rank();
	if ((rc = vigil_set_failure_callback(on_failure, NULL)) != VIGIL_OK)
		die("vigil_set_failure_callback", rc);
	if ((rc = vigil_start()) != VIGIL_OK)
		die("vigil_start", rc);
	printf("{\"ev\":\"ready\",\"rank\":%d,\"mono\":%lld}\n", self, mono_ns());
	fflush(stdout);

	while (sem_wait(&stop) != 0 && errno == EINTR)
		;

	if ((rc = vigil_leave(2000)) != VIGIL_OK && rc != VIGIL_ERR_EVICTED)
		die("vigil_leave", rc);
	printf("{\"ev\":\"bye\",\"rank\":%d,\"mono\":%lld}\n", self, mono_ns());
	fflush(stdout);
	if ((rc = vigil_finalize()) != VIGIL_OK)
		die("vigil_finalize", rc);
	return 0;
}
