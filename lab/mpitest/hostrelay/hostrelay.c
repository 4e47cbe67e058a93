/* hostrelay: a simulated host's link as a wire with a settable one-way
 * delay, for mpitest.Hosts. It stands in for `tc qdisc ... netem delay`,
 * which kernels built without CONFIG_NET_SCH_NETEM lack.
 *
 *   hostrelay HOSTLINK BRIDGELINK
 *
 * Frames arriving on HOSTLINK (from the host) are written to BRIDGELINK
 * after the delay, in order; frames arriving on BRIDGELINK pass to
 * HOSTLINK at once. Each frame, in either direction, is lost with the
 * loss rate's probability. Standard input sets both, one line each:
 * "DELAY_NS [LOSS_PERMILLE]" (a line without the rate sets it to 0),
 * answered "ok" once in force; the relay exits at end of input. It prints
 * "ready" once both links are open. Frames carry their virtio-net header
 * (PACKET_VNET_HDR), so GSO packets and partial checksums cross the relay
 * as they would cross a veth. It runs SCHED_FIFO when permitted, as a
 * single thread outside any language runtime, so that a loaded machine
 * delays frames no more than it delays a network card. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (1 << 17) /* a GSO frame and its virtio-net header */
#define MAX_PENDING 4096    /* delayed frames held; more are dropped */

struct frame {
	int64_t due; /* CLOCK_MONOTONIC ns */
	size_t len;
	unsigned char *b;
};

static struct frame pending[MAX_PENDING];
static size_t head, count;
static unsigned char buf[MAX_FRAME];

static uint64_t rng_state;

/* lost reports whether a frame is lost at permille in 1000 (xorshift64*). */
static int lost(int permille)
{
	if (permille <= 0)
		return 0;
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (int)(((rng_state * 0x2545F4914F6CDD1DULL) >> 32) % 1000) < permille;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int open_link(const char *name)
{
	int one = 1;
	unsigned idx = if_nametoindex(name);
	struct sockaddr_ll sll = {0};
	int fd;

	if (idx == 0) {
		fprintf(stderr, "hostrelay: no interface %s\n", name);
		exit(1);
	}
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) {
		fprintf(stderr, "hostrelay: packet socket on %s: %s\n", name, strerror(errno));
		exit(1);
	}
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = (int)idx;
	if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
		fprintf(stderr, "hostrelay: bind %s: %s\n", name, strerror(errno));
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct sched_param sp = {.sched_priority = 1};
	int64_t delay = 0;
	int loss = 0; /* permille */
	char line[64];
	size_t linelen = 0;
	int host, bridge;

	if (argc != 3) {
		fprintf(stderr, "usage: hostrelay HOSTLINK BRIDGELINK (\"delay_ns [loss_permille]\" lines on stdin)\n");
		return 2;
	}
	rng_state = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ULL;
	host = open_link(argv[1]);
	bridge = open_link(argv[2]);
	sched_setscheduler(0, SCHED_FIFO, &sp); /* best effort */
	printf("ready\n");
	fflush(stdout);

	for (;;) {
		struct pollfd fds[3] = {{.fd = host, .events = POLLIN},
		                        {.fd = bridge, .events = POLLIN},
		                        {.fd = 0, .events = POLLIN}};
		int64_t now = now_ns(), wait = -1;
		struct timespec ts, *tsp = NULL;
		ssize_t n;

		while (count > 0 && pending[head].due <= now) {
			struct frame *f = &pending[head];
			if (write(bridge, f->b, f->len) < 0) {
				/* a frame the bridge cannot take is lost, as on a wire */
			}
			free(f->b);
			head = (head + 1) % MAX_PENDING;
			count--;
		}
		if (count > 0) {
			wait = pending[head].due - now;
			ts.tv_sec = wait / 1000000000;
			ts.tv_nsec = wait % 1000000000;
			tsp = &ts;
		}
		if (ppoll(fds, 3, tsp, NULL) < 0) {
			if (errno == EINTR)
				continue;
			perror("hostrelay: ppoll");
			return 1;
		}
		if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL) || fds[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			/* a link went down: its error is read below; never spin */
			struct timespec ms = {0, 1000000};
			nanosleep(&ms, NULL);
		}
		while ((n = recv(bridge, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
			if (lost(loss))
				continue;
			if (write(host, buf, (size_t)n) < 0) {
				/* lost, as on a wire */
			}
		}
		while ((n = recv(host, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
			struct frame *f;
			if (lost(loss))
				continue;
			if (count == MAX_PENDING)
				continue; /* dropped, as by a full queue */
			f = &pending[(head + count) % MAX_PENDING];
			f->b = malloc((size_t)n);
			if (f->b == NULL)
				continue;
			memcpy(f->b, buf, (size_t)n);
			f->len = (size_t)n;
			f->due = now_ns() + delay;
			count++;
		}
		if (fds[2].revents) {
			n = read(0, line + linelen, sizeof line - 1 - linelen);
			if (n <= 0)
				return 0; /* end of input: the harness is done */
			linelen += (size_t)n;
			line[linelen] = 0;
			for (char *nl; (nl = strchr(line, '\n')) != NULL;) {
				char *end;
				*nl = 0;
				delay = strtoll(line, &end, 10);
				loss = (int)strtol(end, NULL, 10);
				printf("ok\n"); /* in force for every frame read from now on */
				fflush(stdout);
				linelen -= (size_t)(nl + 1 - line);
				memmove(line, nl + 1, linelen + 1);
			}
			if (linelen == sizeof line - 1)
				linelen = 0; /* no number is that long */
		}
	}
}
