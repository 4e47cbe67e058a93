/*
 * detect.c — the smallest Vigil client: start a detector from the
 * launcher's environment (mpirun / srun / prterun through PMIx, or
 * `vigil run`), print one JSON line per failure from the failure callback,
 * and leave cleanly on SIGTERM or SIGINT.
 *
 *   make libvigil
 *   gcc -Wall -Wextra -I csrc -o detect csrc/examples/detect.c -L out/lib -lvigil -Wl,-rpath,$PWD/out/lib
 *   vigil run -n 4 -- ./detect    (one machine; kill -9 a pid it prints)
 *   mpirun -n 4 ./detect          (settings: VIGIL_H, VIGIL_DELTA, ... see vigil.h)
 *
 * Lines (the `vigil agent` format, plus a few fields):
 *   {"ev":"ready","rank":R,"size":N,"mono":T}
 *   {"ev":"dead","rank":R,"dead":D,"left":false,"detector":X,"detected_unix":U,
 *    "delivered_mono":M,"mono":T,"cb_thread":"own"}
 *   {"ev":"bye","rank":R,"polled":K,"dead_set":[...],"mono":T}
 * cb_thread is "own" when the callback ran on a thread other than main's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "vigil.h"

static volatile sig_atomic_t stop;
static pthread_t main_thread;
static int self = -1;

static void on_signal(int sig) { (void)sig; stop = 1; }

static long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, int rc)
{
	char msg[512];
	vigil_last_error(msg, sizeof msg);
	fprintf(stderr, "detect: %s: %s (%d): %s\n", what, vigil_strerror(rc), rc, msg);
	exit(1);
}

/* Runs on libvigil's callback thread. */
static void on_failure(const vigil_event *ev, void *user)
{
	const char *thread = pthread_equal(pthread_self(), *(pthread_t *)user) ? "main" : "own";
	if (ev->kind == VIGIL_EVENT_EVICTED || ev->kind == VIGIL_EVENT_MINORITY) {
		printf("{\"ev\":\"evicted\",\"rank\":%d,\"mono\":%lld,\"reason\":\"%s\"}\n", self, mono_ns(),
		       ev->kind == VIGIL_EVENT_MINORITY ? "minority partition" : "declared dead");
	} else {
		printf("{\"ev\":\"dead\",\"rank\":%d,\"dead\":%u,\"left\":%s,\"detector\":%u,"
		       "\"detected_unix\":%lld,\"delivered_mono\":%lld,\"mono\":%lld,\"cb_thread\":\"%s\"}\n",
		       self, ev->rank, ev->kind == VIGIL_EVENT_LEFT ? "true" : "false", ev->detector,
		       (long long)ev->detected_unix_ns, (long long)ev->delivered_mono_ns, mono_ns(), thread);
	}
	fflush(stdout);
}

int main(void)
{
	struct sigaction sa = {0};
	int rc, size, polled = 0;
	vigil_event ev;

	sa.sa_handler = on_signal;
	sa.sa_flags = SA_ONSTACK; /* signals may land on the library's Go threads */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	main_thread = pthread_self();

	if ((rc = vigil_init_from_env()) != VIGIL_OK)
		die("vigil_init_from_env", rc);
	self = vigil_rank();
	size = vigil_size();
	if ((rc = vigil_set_failure_callback(on_failure, &main_thread)) != VIGIL_OK)
		die("vigil_set_failure_callback", rc);
	if ((rc = vigil_start()) != VIGIL_OK)
		die("vigil_start", rc);
	printf("{\"ev\":\"ready\",\"rank\":%d,\"size\":%d,\"mono\":%lld}\n", self, size, mono_ns());
	fflush(stdout);

	while (!stop) {
		/* Polling sees the same events as the callback, independently. */
		while ((rc = vigil_poll(&ev)) == 1)
			polled++;
		if (rc < 0)
			die("vigil_poll", rc);
		usleep(10000);
	}

	if ((rc = vigil_leave(2000)) != VIGIL_OK && rc != VIGIL_ERR_EVICTED)
		die("vigil_leave", rc);
	while (vigil_poll(&ev) == 1)
		polled++;
	uint32_t dead[64];
	long n = vigil_dead_set(dead, 64);
	if (n < 0)
		die("vigil_dead_set", (int)n);
	printf("{\"ev\":\"bye\",\"rank\":%d,\"polled\":%d,\"dead_set\":[", self, polled);
	for (long i = 0; i < n && i < 64; i++)
		printf("%s%u", i ? "," : "", dead[i]);
	printf("],\"mono\":%lld}\n", mono_ns());
	fflush(stdout);
	if ((rc = vigil_finalize()) != VIGIL_OK)
		die("vigil_finalize", rc);
	return 0;
}
