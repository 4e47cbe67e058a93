// The heartbeat thread outside the Go runtime (native.go) and the
// observer's check it shares with the Go thread (watch.go).
#ifndef VIGIL_HEARTBEAT_NATIVE_H
#define VIGIL_HEARTBEAT_NATIVE_H

#include <pthread.h>
#include <stdint.h>

#define VG_NO_TARGET UINT32_MAX
#define VG_DRAIN_ALWAYS (-2)

// vg_watch is heartbeat.Watch's state. Fields shared between the checking
// thread and Go are read and written with atomic operations only.
typedef struct vg_watch {
	// Set's request (Go writes, the checks read): generation<<32 | emitter,
	// and when it was made.
	uint64_t want;
	int64_t set_at;
	// The record, written by the checks only: ver is odd while they write.
	uint64_t ver;
	uint64_t seq;
	int64_t grew_at, checked_at;
	uint32_t emitter;
	// The checking thread's own copies.
	uint32_t rec_emitter;
	uint64_t applied, rec_seq;
	int64_t last, rec_grew_at, rec_checked_at, alarmed_at;
	// Set before the checks start: the slot words, the stall guard and the
	// silence alarm (0: none), nanoseconds.
	const uint64_t *words;
	uint32_t nwords;
	int64_t guard, silence;
} vg_watch;

// vg_watch_check is one check at now; it returns 1 when the silence alarm
// is due.
int vg_watch_check(vg_watch *w, int64_t now);

// vg_emitter is the native heartbeat thread. Go sets the configuration
// before vg_emitter_start; target and stop are written by Go, the counters
// by the thread, all with atomic operations.
typedef struct vg_emitter {
	int64_t period;
	int efd;          // eventfd: retarget or stop
	int cpu;          // pinned when >= 0
	int priority;     // SCHED_FIFO priority when > 0
	int check_every;  // periods between checks (>= 1)
	vg_watch *watch;  // the checks' watch, or NULL for no checks
	int drain_fd;     // a socket the checks drain through Go when readable, -1 (none) or VG_DRAIN_ALWAYS
	uintptr_t handle; // the Go Emitter (cgo.Handle)

	uint32_t target, stop;
	uint64_t sent, errs, missed, checks;
	int64_t max_late;
	uint32_t pinned, rt;

	// The thread's own.
	uint64_t seq;
	uint32_t cur_to;
	uint64_t *cur_word;
	pthread_t tid;
} vg_emitter;

// vg_emitter_start starts the thread; it returns 0 or an errno.
int vg_emitter_start(vg_emitter *e);
// vg_emitter_stop asks the thread to stop and waits for it.
void vg_emitter_stop(vg_emitter *e);
// vg_now is CLOCK_MONOTONIC in nanoseconds.
int64_t vg_now(void);

#endif
