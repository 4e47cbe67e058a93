/*
 * hbcost.c — the reference cost of heartbeat failure detection, for
 * Vigil's `vigil bench cost`.
 *
 * One process per rank of a ring, one thread each, doing the detector's
 * periodic work with no language runtime around it. Every h the thread
 * sleeps on an absolute CLOCK_MONOTONIC deadline (clock_nanosleep,
 * TIMER_ABSTIME) on the grid of Vigil's heartbeat thread (multiples of h
 * plus pid mod 8 eighths of h, so that the processes of a host share 8
 * timer interrupts a period; GRID=0 in the environment keeps a phase of
 * the process's own, its start plus multiples of h), and sends one
 * heartbeat, an increasing sequence number,
 * to its observer, rank + 1 mod N. Every k = max(1, round(CHECK/h)) periods
 * (at the first wake-up k or more periods after the last check) it checks
 * its own emitter, rank − 1 mod N: when the largest sequence seen
 * has not grown for DELTA or more, it prints a SUSPECT line on stderr and
 * counts a suspicion (once until the emitter is heard again). No suspicion
 * before the emitter's first heartbeat or a 2 s start-up grace.
 *
 * Transports:
 *   udp  each rank binds 127.0.0.1:PORT+rank; a heartbeat is one datagram
 *        of HB_FRAME_SIZE bytes (the size of Vigil's authenticated
 *        heartbeat frame, internal/wire.HeartbeatFrameSize) to the
 *        observer's port; the check drains the socket with
 *        recvmmsg(MSG_DONTWAIT) and keeps the largest sequence of the
 *        emitter.
 *   shm  the job shares one POSIX shared-memory segment NAME of N words,
 *        one per cache line; a heartbeat is a store into the observer's
 *        word, the check a load of one's own.
 *
 * Wake-ups more than one period late skip the periods slept through,
 * staying on the grid. The process stops after DURATION_MS or on SIGTERM
 * or SIGINT, and prints one line on stdout:
 *
 *   hbcost sent=<n> checks=<n> received=<n> suspicions=<n> missed=<n> max_late_ns=<n>
 *
 * Usage: hbcost udp|shm RANK N H_US CHECK_US DELTA_US PORT|NAME DURATION_MS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HB_FRAME_SIZE 64
#define WORD_STRIDE 8 /* uint64_t words: one per 64-byte cache line */
#define BATCH 64
#define GRACE_NS 2000000000LL

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
	(void)sig;
	stop = 1;
}

static int64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t arg_int(const char *s, const char *what) {
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *s == 0 || *end != 0 || v < 0) {
		fprintf(stderr, "hbcost: %s \"%s\": want a non-negative integer\n", what, s);
		exit(2);
	}
	return v;
}

/* grid_next is the first deadline after now on the heartbeat thread's
 * grid (heartbeat/native.c, vg_grid): the multiples of h plus this
 * process's slot, its pid mod 8 eighths of h. */
static int64_t grid_next(int64_t now, int64_t h) {
	int64_t next = now - now % h + (int64_t)(getpid() % 8) * (h / 8);
	return next > now ? next : next + h;
}

int main(int argc, char **argv) {
	if (argc != 9) {
		fprintf(stderr, "usage: hbcost udp|shm RANK N H_US CHECK_US DELTA_US PORT|NAME DURATION_MS\n");
		return 2;
	}
	int udp = strcmp(argv[1], "udp") == 0;
	if (!udp && strcmp(argv[1], "shm") != 0) {
		fprintf(stderr, "hbcost: transport %s: want udp or shm\n", argv[1]);
		return 2;
	}
	int64_t rank = arg_int(argv[2], "RANK"), n = arg_int(argv[3], "N");
	int64_t h = arg_int(argv[4], "H_US") * 1000, check = arg_int(argv[5], "CHECK_US") * 1000;
	int64_t delta = arg_int(argv[6], "DELTA_US") * 1000, dur = arg_int(argv[8], "DURATION_MS") * 1000000;
	if (n < 2 || rank >= n || h <= 0 || check <= 0 || delta <= 0 || dur <= 0) {
		fprintf(stderr, "hbcost: want N >= 2, 0 <= RANK < N, and H_US, CHECK_US, DELTA_US, DURATION_MS positive\n");
		return 2;
	}
	const char *g = getenv("GRID");
	int grid = g == NULL || strcmp(g, "0") != 0;
	int64_t k = (check + h / 2) / h;
	if (k < 1)
		k = 1;
	uint32_t self = (uint32_t)rank, emitter = (uint32_t)((rank + n - 1) % n), observer = (uint32_t)((rank + 1) % n);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal; /* no SA_RESTART: the sleep returns EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	int fd = -1;
	struct sockaddr_in to;
	volatile uint64_t *words = NULL;
	size_t shm_size = 0;
	const char *shm_name = argv[7];
	if (udp) {
		int64_t port = arg_int(argv[7], "PORT");
		if (port <= 0 || port + n > 65536) {
			fprintf(stderr, "hbcost: PORT %s: want ports PORT..PORT+N-1 in 1..65535\n", argv[7]);
			return 2;
		}
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			fprintf(stderr, "hbcost: socket: %s\n", strerror(errno));
			return 1;
		}
		int buf = 1 << 20; /* heartbeats wait here for up to k periods */
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
		struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(port + rank)),
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) {
			fprintf(stderr, "hbcost: bind 127.0.0.1:%lld: %s\n", (long long)(port + rank), strerror(errno));
			return 1;
		}
		to = me;
		to.sin_port = htons((uint16_t)(port + observer));
	} else {
		int sfd = shm_open(shm_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		shm_size = (size_t)n * WORD_STRIDE * sizeof(uint64_t);
		if (sfd < 0 || ftruncate(sfd, (off_t)shm_size) < 0) {
			fprintf(stderr, "hbcost: shared memory %s: %s\n", shm_name, strerror(errno));
			return 1;
		}
		void *p = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
		close(sfd);
		if (p == MAP_FAILED) {
			fprintf(stderr, "hbcost: mmap %s: %s\n", shm_name, strerror(errno));
			return 1;
		}
		words = p;
	}

	unsigned char frame[HB_FRAME_SIZE] = {0};
	unsigned char in[BATCH][HB_FRAME_SIZE];
	struct iovec iov[BATCH];
	struct mmsghdr msgs[BATCH];
	memset(msgs, 0, sizeof msgs);
	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = in[i];
		iov[i].iov_len = sizeof in[i];
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}

	uint64_t seq = 0, sent = 0, checks = 0, received = 0, suspicions = 0, missed = 0;
	uint64_t best = 0, last = 0; /* largest sequence seen from the emitter; at the last growth */
	int64_t start = now_ns(), end = start + dur, next = grid ? grid_next(start, h) : start + h, max_late = 0, last_growth = start;
	int heard = 0, suspected = 0;
	int64_t period = 0, next_check = k;
	while (!stop && next < end) {
		struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
			continue; /* EINTR: stop is set, or a stray signal */
		int64_t t = now_ns(), late = t - next;
		if (late > max_late)
			max_late = late;
		if (late > h) {
			missed++;
			next += (late / h) * h;
			period += late / h;
		}
		next += h;
		period++;

		seq++;
		if (udp) {
			memcpy(frame, &seq, sizeof seq);
			memcpy(frame + 8, &self, sizeof self);
			if (sendto(fd, frame, sizeof frame, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to) == (ssize_t)sizeof frame)
				sent++;
		} else {
			__atomic_store_n(&words[observer * WORD_STRIDE], seq, __ATOMIC_RELEASE);
			sent++;
		}

		if (period < next_check)
			continue;
		next_check = period + k;
		checks++;
		if (udp) {
			for (;;) {
				int got = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
				if (got <= 0)
					break;
				for (int i = 0; i < got; i++) {
					uint64_t s;
					uint32_t from;
					if (msgs[i].msg_len != HB_FRAME_SIZE)
						continue;
					memcpy(&s, in[i], sizeof s);
					memcpy(&from, in[i] + 8, sizeof from);
					if (from == emitter) {
						received++;
						if (s > best)
							best = s;
					}
				}
				if (got < BATCH)
					break;
			}
		} else {
			uint64_t s = __atomic_load_n(&words[self * WORD_STRIDE], __ATOMIC_ACQUIRE);
			if (s > best) {
				received += s - best;
				best = s;
			}
		}
		if (best > last) {
			last = best;
			last_growth = t;
			heard = 1;
			suspected = 0;
		} else if (!suspected && (heard || t - start >= GRACE_NS) && t - last_growth >= delta) {
			suspected = 1;
			suspicions++;
			fprintf(stderr, "hbcost rank %u: SUSPECT rank %u at +%lld ms: no heartbeat for %lld us\n", self, emitter,
			        (long long)((t - start) / 1000000), (long long)((t - last_growth) / 1000));
		}
	}
	printf("hbcost sent=%llu checks=%llu received=%llu suspicions=%llu missed=%llu max_late_ns=%lld\n",
	       (unsigned long long)sent, (unsigned long long)checks, (unsigned long long)received,
	       (unsigned long long)suspicions, (unsigned long long)missed, (long long)max_late);
	fflush(stdout);
	if (!udp) {
		munmap((void *)words, shm_size);
		shm_unlink(shm_name); /* the first to leave removes the name; the others keep their mapping */
	}
	return 0;
}
