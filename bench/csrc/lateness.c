/*
 * lateness.c — the operating system's share of heartbeat lateness, for
 * Vigil's `vigil bench lateness`.
 *
 * The same loop as Vigil's emitter thread (heartbeat.Emitter) with no
 * language runtime around it: a thread, SCHED_FIFO priority 1 when asked and
 * permitted, sleeps on a timerfd armed with absolute deadlines of
 * CLOCK_MONOTONIC every h, reads the clock when it wakes, and counts how
 * late it woke. A wake-up more than one period late is a missed deadline;
 * the periods slept through are skipped, staying on the grid, as the
 * emitter does. Run beside the Go emitter under the same load, it tells
 * how much of the emitter's lateness is the kernel's and the machine's and
 * how much is the Go runtime's. It prints one line:
 *
 *   lateness wakeups=<n> missed=<n> max_ns=<n> fifo=<0|1>
 *
 * Usage: lateness H_US DURATION_MS FIFO(0|1)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: lateness H_US DURATION_MS FIFO(0|1)\n");
		return 2;
	}
	int64_t h = atoll(argv[1]) * 1000, dur = atoll(argv[2]) * 1000000;
	int want_fifo = atoi(argv[3]), fifo = 0;
	if (h <= 0 || dur <= 0) {
		fprintf(stderr, "lateness: H_US and DURATION_MS must be positive\n");
		return 2;
	}
	if (want_fifo) {
		struct sched_param p = {.sched_priority = 1};
		fifo = sched_setscheduler(0, SCHED_FIFO, &p) == 0;
	}
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "lateness: timerfd_create: %s\n", strerror(errno));
		return 1;
	}
	int64_t n = 0, start = now_ns(), end = start + dur, next = start + h, missed = 0, max = 0;
	while (next < end) {
		struct itimerspec s = {.it_value = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000}};
		timerfd_settime(fd, TFD_TIMER_ABSTIME, &s, NULL);
		uint64_t ticks;
		if (read(fd, &ticks, sizeof ticks) < 0 && errno == EINTR)
			continue;
		int64_t l = now_ns() - next;
		n++;
		if (l > max)
			max = l;
		if (l > h) {
			missed++;
			next += (l / h) * h;
		}
		next += h;
	}
	printf("lateness wakeups=%lld missed=%lld max_ns=%lld fifo=%d\n", (long long)n, (long long)missed,
	       (long long)max, fifo);
	return 0;
}
