// The heartbeat thread outside the Go runtime: task T1 of seed 000's
// Algorithm 1 and the observer's check, in one pthread that Go never
// schedules (see native.go).

#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "native.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)

int64_t vg_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); // the vDSO: no system call
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t vg_grid(int64_t now, int64_t h) {
	int64_t next = now - now % h + (int64_t)(getpid() % VG_GRID_SLOTS) * (h / VG_GRID_SLOTS);
	return next > now ? next : next + h;
}

int vg_watch_check(vg_watch *w, int64_t now) {
	int stalled = w->guard > 0 && w->last != 0 && now - w->last > w->guard;
	w->last = now;
	uint64_t want = LOAD(&w->want);
	if (want != w->applied) {
		w->applied = want;
		int64_t at = LOAD(&w->set_at);
		w->rec_emitter = (uint32_t)want;
		w->rec_seq = 0;
		w->rec_grew_at = w->rec_checked_at = at;
		stalled = 0;
	}
	if (w->rec_emitter == VG_NO_TARGET) {
		return 0;
	}
	uint64_t seq = w->rec_emitter < w->nwords ? LOAD(&w->words[w->rec_emitter]) : 0;
	if (seq > w->rec_seq) {
		w->rec_seq = seq;
		w->rec_grew_at = now;
	} else if (stalled) {
		w->rec_grew_at = now;
	}
	w->rec_checked_at = now;
	ADD(&w->ver, 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	STORE(&w->emitter, w->rec_emitter);
	STORE(&w->seq, w->rec_seq);
	STORE(&w->grew_at, w->rec_grew_at);
	STORE(&w->checked_at, w->rec_checked_at);
	__atomic_add_fetch(&w->ver, 1, __ATOMIC_RELEASE);
	if (w->silence > 0 && now - w->rec_grew_at >= w->silence && now - w->alarmed_at >= w->silence) {
		w->alarmed_at = now; // after the record: the alarmed loop reads this check
		return 1;
	}
	return 0;
}

// notify adds one to eventfd fd: it wakes its reader. EAGAIN (the counter
// saturated) leaves the reader signalled anyway.
static void notify(int fd) {
	uint64_t one = 1;
	if (write(fd, &one, sizeof one) < 0) {
		// EAGAIN: still signalled
	}
}

// store_max raises *word to seq (a late heartbeat never lowers it), as
// transport.Slots.Store does.
static void store_max(uint64_t *word, uint64_t seq) {
	uint64_t old = LOAD(word);
	while (seq > old &&
	       !__atomic_compare_exchange_n(word, &old, seq, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
	}
}

// ask_refill signals efd, once per refill, when fewer than VG_RING/2
// frames of a ring (the signed one or the verify one) are left after seq.
static void ask_refill(uint64_t *filled, uint64_t *requested, uint64_t seq, int efd) {
	uint64_t f = LOAD(filled);
	if (f < seq + VG_RING / 2 && LOAD(requested) != f) {
		STORE(requested, f);
		notify(efd);
	}
}

// frame returns the signed frame of sequence number seq, or NULL when Go
// has not signed it; it asks for a refill when the ring runs low.
static const unsigned char *frame(vg_emitter *e, uint64_t seq) {
	ask_refill(&e->filled, &e->requested, seq, e->refill_efd);
	if (LOAD(&e->ring_to) != e->cur_to) {
		return NULL; // signed for another receiver, or being signed anew
	}
	uint64_t i = (seq - 1) % VG_RING;
	return LOAD(&e->stamps[i]) == seq ? e->frames[i] : NULL;
}

// adopt takes the target and sink Go published last, unless Go is writing
// them now (then the next heartbeat does): the thread never waits for Go.
static void adopt(vg_emitter *e) {
	uint64_t v = LOAD(&e->pub_ver);
	if (v == e->seen_ver || (v & 1) != 0) {
		return;
	}
	uint32_t to = LOAD(&e->pub_to);
	vg_sink s;
	memcpy(&s, &e->pub_sink, sizeof s);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (LOAD(&e->pub_ver) != v) {
		return;
	}
	e->seen_ver = v;
	e->cur_to = to;
	e->sink = s;
}

// hand_to_go hands heartbeat seq for rank to to Go's sender goroutine
// (send_efd; native.go, sendHanded), which sends it and resolves the
// target's sink for the next ones. The thread never waits for Go: a
// process whose Go threads are starved (a burst handled by every rank of
// a host at once) would hold its heartbeats and its life word with them.
// Only the latest heartbeat counts: one waiting is replaced.
static void hand_to_go(vg_emitter *e, uint32_t to, uint64_t seq) {
	STORE(&e->go_to, to);
	STORE(&e->go_seq, seq);
	if (__atomic_exchange_n(&e->go_pending, 1, __ATOMIC_ACQ_REL) == 0) {
		notify(e->send_efd);
	}
}

// beat stores now (the clock as the thread woke) into the life word and
// sends the next sequence number to the current target: a store or a
// pre-signed datagram by the sink Go resolved, otherwise by Go's SendFunc
// (hand_to_go).
static void beat(vg_emitter *e, int64_t now) {
	if (e->life != NULL) { // with or without a target: this thread runs, or the rank left
		STORE(e->life, LOAD(&e->departed) ? VG_LIFE_DEPARTED : (uint64_t)now);
	}
	adopt(e);
	uint32_t to = e->cur_to;
	if (to == VG_NO_TARGET) {
		return;
	}
	uint64_t seq = e->seq + 1;
	STORE(&e->seq, seq);
	const unsigned char *f;
	switch (e->sink.kind) {
	case VG_SINK_WORD:
		store_max(e->sink.word, seq);
		ADD(&e->sent, 1);
		ADD(&e->native_sent, 1);
		return;
	case VG_SINK_DGRAM:
		if ((f = frame(e, seq)) == NULL) {
			break; // Go is behind with its signing: send through it
		}
		if (sendto(e->sink.fd, f, e->frame_len, MSG_DONTWAIT, (const struct sockaddr *)e->sink.addr,
		           e->sink.addrlen) < 0) {
			ADD(&e->dropped, 1); // a full socket buffer drops the heartbeat, as SendFunc does
		}
		ADD(&e->sent, 1);
		ADD(&e->native_sent, 1);
		return;
	}
	hand_to_go(e, to, seq);
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the frames' sequence numbers are little-endian: load_le64 assumes the host is"
#endif

// load_le64 reads a little-endian 64-bit number at b.
static uint64_t load_le64(const unsigned char *b) {
	uint64_t v;
	memcpy(&v, b, sizeof v);
	return v;
}

// same compares n bytes in a time that does not depend on where they
// differ. The expected frames are secret until sent: an early exit would
// tell a forger, by timing, how many leading bytes of a tag he guessed.
static int same(const unsigned char *a, const unsigned char *b, uint32_t n) {
	unsigned char d = 0;
	for (uint32_t i = 0; i < n; i++) {
		d |= a[i] ^ b[i];
	}
	return d == 0;
}

// expected returns the sequence number of datagram b of l bytes when it is
// the expected frame of that sequence number, else 0. The slot's stamp is
// read again after the comparison: a refill overwriting it meanwhile (for
// a sequence number VG_RING higher) fails it.
static uint64_t expected(const vg_verify *v, const unsigned char *b, uint32_t l, uint32_t len, uint32_t at) {
	if (l != len || at + 8 > len) {
		return 0;
	}
	uint64_t seq = load_le64(b + at);
	if (seq == 0) {
		return 0; // never stamped: 0 marks an empty slot
	}
	uint64_t i = (seq - 1) % VG_RING;
	if (LOAD(&v->stamps[i]) != seq) {
		return 0;
	}
	int eq = same(b, v->frames[i], len);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return eq && LOAD(&v->stamps[i]) == seq ? seq : 0;
}

uint64_t vg_verify_match(const vg_verify *v, const unsigned char *b, uint32_t l) {
	uint64_t ver = LOAD(&v->ver);
	if ((ver & 1) != 0 || LOAD(&v->word) == NULL) {
		return 0;
	}
	uint64_t seq = expected(v, b, l, LOAD(&v->frame_len), LOAD(&v->seq_at));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return LOAD(&v->ver) == ver ? seq : 0;
}

// receive drains drain_fd with recvmmsg, VG_BATCH datagrams at a time, and
// stores the sequence numbers of those equal to their expected frames. At
// the first batch with any other datagram it stops and returns 1: those
// wait in the verify buffers for Go, and so does the rest of the socket.
static int receive(vg_emitter *e) {
	vg_verify *v = e->verify;
	struct mmsghdr msgs[VG_BATCH];
	struct iovec iovs[VG_BATCH];
	uint64_t seqs[VG_BATCH];
	for (;;) {
		memset(msgs, 0, sizeof msgs);
		for (int i = 0; i < VG_BATCH; i++) {
			iovs[i].iov_base = v->bufs[i];
			iovs[i].iov_len = sizeof v->bufs[i];
			msgs[i].msg_hdr.msg_iov = &iovs[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(e->drain_fd, msgs, VG_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			return 0; // EAGAIN: empty
		}
		uint64_t ver = LOAD(&v->ver);
		uint32_t len = LOAD(&v->frame_len), at = LOAD(&v->seq_at);
		uint64_t *word = LOAD(&v->word);
		for (int i = 0; i < n; i++) {
			uint32_t l = msgs[i].msg_len < sizeof v->bufs[i] ? msgs[i].msg_len : sizeof v->bufs[i];
			v->lens[i] = l;
			seqs[i] = (ver & 1) == 0 && word != NULL ? expected(v, v->bufs[i], l, len, at) : 0;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		int stale = LOAD(&v->ver) != ver; // Go changed the sender meanwhile: Go checks them all
		int kept = 0;
		uint64_t top = 0;
		for (int i = 0; i < n; i++) {
			if (stale || seqs[i] == 0) {
				kept++;
				continue;
			}
			v->lens[i] = 0;
			top = seqs[i] > top ? seqs[i] : top;
			if (seqs[i] <= LOAD(word)) {
				ADD(&v->old, 1); // a replay, or overtaken: it moves nothing
				continue;
			}
			store_max(word, seqs[i]);
			ADD(&v->verified, 1);
		}
		if (top != 0) {
			ask_refill(&v->filled, &v->requested, top, e->refill_efd);
		}
		if (kept > 0) {
			STORE(&v->nhand, (uint32_t)n);
			return 1;
		}
		if (n < VG_BATCH) {
			return 0;
		}
	}
}

// watched returns the slot word of the emitter the checks watch, or NULL.
static const uint64_t *watched(const vg_watch *w) {
	return w->rec_emitter < w->nwords ? &w->words[w->rec_emitter] : NULL;
}

// heard reports whether the watched emitter's word grew since the last
// check left it, and Go asked for no other emitter meanwhile (the
// drainer's checks leave no mark): by shared memory, or by datagrams the
// thread stored.
static int heard(const vg_emitter *e) {
	const vg_watch *w = e->watch;
	const uint64_t *p = watched(w);
	return p != NULL && e->mark_emitter == w->rec_emitter && LOAD(&w->want) == w->applied && LOAD(p) > e->mark;
}

// waiting reports whether a datagram waits in socket fd.
static int waiting(int fd) {
	char b;
	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

// hand hands this check to Go's drainer, which collects the datagrams,
// checks, then clears drain_pending; the thread checks nothing meanwhile.
static void hand(vg_emitter *e) {
	e->mark_emitter = VG_NO_TARGET; // the drainer checks and may store: no mark
	STORE(&e->drain_pending, 1);
	notify(e->drain_efd);
}

// check is the observer's check: the watch's, here, when no heartbeat
// waits in drain_fd (or, with a verify ring, when every one that did was
// an expected frame); otherwise it hands the check to Go's drainer (hand).
// With VG_DRAIN_ALWAYS every check goes to the drainer. While the watched
// emitter is heard without drain_fd (shared memory), the check skips
// drain_fd but every VG_DRAIN_EVERY-th time: its system call is most of a
// check's cost, and the datagrams waiting there change nothing for the
// emitter, which is heard.
//
// sweep_fd (the port's other datagrams: anyone's) never holds a check up
// while the emitter is heard: the check asks the drainer to sweep it
// (within a bounded budget) and checks at once, looking at it only every
// VG_DRAIN_EVERY-th time. While the emitter is not heard, the check hands
// itself to the drainer when sweep_fd holds datagrams: they may be the
// emitter's own, from an address its lane was not connected to.
static void check(vg_emitter *e) {
	if (LOAD(&e->drain_pending)) {
		return; // the drainer has not run yet: it will check
	}
	if (e->drain_fd >= 0 && e->skipped + 1 < VG_DRAIN_EVERY && heard(e)) {
		e->skipped++;
	} else {
		e->skipped = 0;
		if (e->drain_fd >= 0 && e->verify != NULL ? receive(e) :
		    e->drain_fd == VG_DRAIN_ALWAYS || (e->drain_fd >= 0 && waiting(e->drain_fd))) {
			hand(e);
			return;
		}
	}
	if (e->sweep_fd >= 0) {
		int h = heard(e);
		if (h && e->sweep_skipped + 1 < VG_DRAIN_EVERY) {
			e->sweep_skipped++;
		} else {
			e->sweep_skipped = 0;
			if (waiting(e->sweep_fd)) {
				if (!h) {
					hand(e);
					return;
				}
				if (!LOAD(&e->sweep_pending)) {
					STORE(&e->sweep_pending, 1);
					notify(e->drain_efd);
				}
			}
		}
	}
	if (vg_watch_check(e->watch, vg_now())) {
		notify(e->alarm_efd);
	}
	const uint64_t *p = watched(e->watch);
	e->mark_emitter = p != NULL ? e->watch->rec_emitter : VG_NO_TARGET;
	e->mark = p != NULL ? LOAD(p) : 0;
	ADD(&e->checks, 1);
}

// sleep_for waits up to d nanoseconds for the eventfd: > 0 when it was
// signalled, 0 on time-out, < 0 on EINTR.
static int sleep_for(vg_emitter *e, int64_t d) {
	struct pollfd p = {.fd = e->efd, .events = POLLIN};
	struct timespec ts = {.tv_sec = d / 1000000000, .tv_nsec = d % 1000000000};
	return ppoll(&p, 1, &ts, NULL);
}

static void *run(void *arg) {
	vg_emitter *e = arg;
	pthread_setname_np(pthread_self(), "vigil-heartbeat");
	if (e->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(e->cpu, &set);
		STORE(&e->pinned, sched_setaffinity(0, sizeof set, &set) == 0);
	}
	if (e->priority > 0) {
		struct sched_param sp = {.sched_priority = e->priority};
		STORE(&e->rt, pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0);
	}
	int64_t h = e->period, start = vg_now(), next = vg_grid(start, h);
	uint64_t buf;
	int period = 0;
	beat(e, start); // the first heartbeat at once
	for (;;) {
		int64_t now = vg_now();
		if (now < next) {
			if (sleep_for(e, next - now) > 0) { // kicked: retarget or stop
				if (read(e->efd, &buf, sizeof buf) < 0) {
					// EAGAIN: another reader took it; nothing to do
				}
				if (LOAD(&e->stop)) {
					return NULL;
				}
				beat(e, vg_now());
			}
			continue; // EINTR, kick or time-out: look at the clock again
		}
		int64_t late = now - next;
		if (late > LOAD(&e->max_late)) {
			STORE(&e->max_late, late);
		}
		if (late > h) {
			ADD(&e->missed, 1);
			STORE(&e->late_ns, late);
			STORE(&e->late_at, now);
			next += (late / h) * h; // skip the periods slept through; stay on the grid
		}
		next += h;
		if (LOAD(&e->stop)) {
			return NULL;
		}
		beat(e, now);
		if (e->watch != NULL && ++period >= e->check_every) {
			period = 0;
			check(e);
		}
	}
}

int vg_emitter_start(vg_emitter *e) {
	e->cur_to = VG_NO_TARGET;
	e->mark_emitter = VG_NO_TARGET;
	// Process-directed signals (SIGTERM, SIGCHLD, SIGPROF...) are for Go's
	// threads: handled here they would cost a borrowed Go context each.
	pthread_attr_t attr;
	sigset_t all;
	sigfillset(&all);
	int rc = pthread_attr_init(&attr);
	if (rc == 0 && (rc = pthread_attr_setsigmask_np(&attr, &all)) == 0) {
		rc = pthread_create(&e->tid, &attr, run, e);
	}
	pthread_attr_destroy(&attr);
	return rc;
}

void vg_emitter_stop(vg_emitter *e) {
	STORE(&e->stop, 1);
	notify(e->efd);
	pthread_join(e->tid, NULL);
}
