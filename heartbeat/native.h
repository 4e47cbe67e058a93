// The heartbeat thread outside the Go runtime (native.go) and the
// observer's check it shares with the Go thread (watch.go).
#ifndef VIGIL_HEARTBEAT_NATIVE_H
#define VIGIL_HEARTBEAT_NATIVE_H

#include <pthread.h>
#include <stdint.h>

#define VG_NO_TARGET UINT32_MAX
// VG_LIFE_DEPARTED is the life word of a rank that left the job cleanly
// (hb.LifeDeparted): no time of a period is ever that large.
#define VG_LIFE_DEPARTED UINT64_MAX
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

// vg_sink is how the thread sends a heartbeat to its current target
// without Go: a store into word (VG_SINK_WORD), or a pre-signed frame from
// the ring sent on fd to addr (VG_SINK_DGRAM). Go resolves it when it
// publishes a target, and again while it is not a word.
enum { VG_SINK_NONE, VG_SINK_WORD, VG_SINK_DGRAM };
typedef struct vg_sink {
	int kind;
	uint64_t *word;
	int fd;
	uint32_t addrlen;
	unsigned char addr[128]; // a struct sockaddr_storage
} vg_sink;

// VG_RING frames of at most VG_FRAME_MAX bytes: the datagrams of the next
// heartbeats, signed in advance by Go. The frame of sequence number s is
// in slot (s-1) % VG_RING when stamps[(s-1) % VG_RING] == s.
#define VG_RING 1024
#define VG_FRAME_MAX 64

// VG_BATCH datagrams per recvmmsg call of the thread's check.
#define VG_BATCH 64

// VG_DRAIN_EVERY: while the watched emitter stores into its slot word
// (shared memory), the thread's checks look at drain_fd only every
// VG_DRAIN_EVERY-th time: the datagrams there are another sender's.
#define VG_DRAIN_EVERY 8

// vg_verify lets the thread authenticate received heartbeat datagrams
// without Go: the exact datagrams one emitter (sender) will send for the
// sequence numbers of a window, computed in advance by Go (a heartbeat
// datagram is fully determined by its sender, incarnation and sequence
// number under the job key). The expected frame of s is in slot
// (s-1) % VG_RING when stamps[(s-1) % VG_RING] == s; Go overwrites a slot
// only for a sequence number VG_RING higher (stamp, frame, stamp). Go
// changes the sender with ver odd (the thread verifies nothing meanwhile)
// and all stamps cleared. A datagram equal to its expected frame raises
// *word; the thread keeps the others in bufs (lens[i] > 0, nhand of them
// received) for Go, which checks them as any datagram.
typedef struct vg_verify {
	uint64_t ver;
	uint32_t sender; // VG_NO_TARGET: none yet
	uint32_t frame_len, seq_at; // the frames' length, and where their sequence number is
	uint64_t *word;
	uint64_t filled, requested; // as for the sending ring
	unsigned char (*frames)[VG_FRAME_MAX];
	uint64_t *stamps;
	uint64_t verified; // datagrams the thread accepted and stored
	uint64_t old;      // expected frames that did not move the word (old_heartbeat)
	uint32_t nhand;
	uint32_t lens[VG_BATCH];
	unsigned char bufs[VG_BATCH][VG_FRAME_MAX + 1]; // +1: longer datagrams show as such
} vg_verify;

// vg_verify_match returns the sequence number of datagram b of l bytes
// when it is the expected frame of that sequence number, else 0.
uint64_t vg_verify_match(const vg_verify *v, const unsigned char *b, uint32_t l);

// vg_emitter is the native heartbeat thread. Go sets the configuration
// before vg_emitter_start. Fields shared with Go are read and written with
// atomic operations, except the published sink (a sequence lock).
typedef struct vg_emitter {
	int64_t period;
	int efd;          // eventfd: retarget or stop
	int cpu;          // pinned when >= 0
	int priority;     // SCHED_FIFO priority when > 0
	int check_every;  // periods between checks (>= 1)
	vg_watch *watch;  // the checks' watch, or NULL for no checks
	int drain_fd;     // a socket whose heartbeats Go's drainer collects, -1 (none) or VG_DRAIN_ALWAYS
	vg_verify *verify; // with drain_fd >= 0: the thread receives and authenticates them itself
	int sweep_fd;     // the port's other datagrams, which Go drains (sweep_pending), or -1
	int drain_efd;    // wakes the drainer
	int alarm_efd;    // wakes the goroutine that rings the watch's alarm (-1: none)
	int send_efd;     // wakes the goroutine that sends the heartbeats handed to Go
	uint32_t go_pending; // set by the thread with go_to and go_seq, cleared by that goroutine
	uint32_t go_to;
	uint64_t go_seq;
	uint32_t drain_pending; // set by the thread, cleared by the drainer once it checked
	uint32_t sweep_pending; // set by the thread, cleared by the drainer once it swept sweep_fd
	uint64_t *life;   // the thread's life word (EmitterConfig.Life), or NULL
	uint32_t departed; // set by Go (Emitter.Depart): the life word says VG_LIFE_DEPARTED from now on

	// The target and its sink, published by Go: pub_ver is odd while Go
	// writes them; the thread adopts a new version at its next heartbeat.
	uint64_t pub_ver;
	uint32_t pub_to;
	vg_sink pub_sink;

	// The ring of signed frames (frame_len > 0 when used): Go writes a
	// frame, then its stamp, then filled; the thread writes seq and, when
	// fewer than VG_RING/2 frames are left, signals refill_efd once per
	// refill (requested); so it does for the verify ring.
	// ring_to is the target the frames are signed for (VG_NO_TARGET while
	// Go signs them anew): a frame is bound to its receiver.
	uint32_t frame_len;
	uint32_t ring_to;
	int refill_efd;
	uint64_t filled, requested;
	unsigned char (*frames)[VG_FRAME_MAX];
	uint64_t *stamps;

	uint32_t stop;
	uint64_t sent, native_sent, dropped, errs, missed, checks; // native_sent: without Go; dropped: a full socket buffer
	int64_t max_late;
	int64_t late_at, late_ns; // the last wake-up more than a period late: when, and how late
	uint32_t pinned, rt;

	// The thread's own (seq is read by Go's refills too).
	uint64_t seq, seen_ver;
	uint32_t cur_to;
	vg_sink sink;
	// The watched word as the last check left it (mark_emitter's; none:
	// VG_NO_TARGET), and the drains skipped since the last one.
	uint64_t mark;
	uint32_t mark_emitter;
	int skipped, sweep_skipped;
	pthread_t tid;
} vg_emitter;

// vg_emitter_start starts the thread; it returns 0 or an errno.
int vg_emitter_start(vg_emitter *e);
// vg_emitter_stop asks the thread to stop and waits for it.
void vg_emitter_stop(vg_emitter *e);
// vg_now is CLOCK_MONOTONIC in nanoseconds.
int64_t vg_now(void);

// VG_GRID_SLOTS is the number of phases a period is cut into (vg_grid).
#define VG_GRID_SLOTS 8

// vg_grid is the first heartbeat deadline after now (ns, CLOCK_MONOTONIC)
// on this process's grid: the multiples of the period h plus its slot,
// pid mod VG_GRID_SLOTS eighths of h. The heartbeat threads of a host with
// the same period then share VG_GRID_SLOTS timer interrupts a period
// instead of one each, and their checks, so the observers' detections of
// a burst, still fall on VG_GRID_SLOTS instants of the period rather than
// one.
int64_t vg_grid(int64_t now, int64_t h);

#endif
