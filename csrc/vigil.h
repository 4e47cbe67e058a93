/*
 * vigil.h — C interface of Vigil, an RDMA-native failure detector for HPC
 * runtimes (libvigil.so / libvigil.a, built from the Go package ./capi).
 *
 * One detector per process. A process initializes it (vigil_init_from_env
 * under a launcher, or vigil_init with an explicit configuration), starts it
 * (vigil_start, which exchanges addresses with every other rank and returns
 * once the detector runs), learns of failed or departed ranks through a
 * callback (vigil_set_failure_callback) or by polling (vigil_poll,
 * vigil_dead_set), and stops with vigil_leave (a clean departure, reported
 * to the others as "left" rather than "failed") and vigil_finalize.
 *
 * Modes. VIGIL_MODE_RING (the default) runs Vigil's observation ring:
 * every rank heartbeats its observer every h ns from a dedicated thread, an
 * observer that misses heartbeats for delta ns declares its emitter dead and
 * the news is broadcast, so every live rank reports every failure. In
 * VIGIL_MODE_SPORADIC no heartbeats are sent at all: a rank checks a peer
 * only when asked to (vigil_probe, a ping-pong with a time-out, seed 004's
 * "sporadic" detector) and only that rank learns the result.
 *
 * Threads.
 *   - Every function may be called from any thread; calls are serialized
 *     internally where needed. vigil_poll, vigil_dead_set, vigil_is_dead,
 *     vigil_rank, vigil_size and vigil_strerror never block on the network.
 *   - vigil_start, when the configuration has an allgather function, calls
 *     it exactly three times in the ring mode (every rank's host, so that
 *     a job spanning hosts never publishes loopback; every rank's address;
 *     then, once the heartbeat thread runs, the start fence, from which
 *     the start-up grace counts) and twice in the sporadic mode (hosts,
 *     addresses), on the thread
 *     that called vigil_start, before returning (so an MPI_Allgather is legal there even under
 *     MPI_THREAD_SINGLE or MPI_THREAD_FUNNELED if vigil_start runs on the
 *     main thread).
 *   - The library creates its own threads (it contains the Go runtime): the
 *     heartbeat thread, network threads, and one callback thread. The
 *     failure callback is always called on that dedicated callback thread,
 *     never on the heartbeat thread and never on a thread of the caller.
 *     Callbacks are serialized and come in delivery order; a slow callback
 *     delays later callbacks only, never heartbeats or detection.
 *   - Inside the callback, any function may be called except
 *     vigil_finalize (it returns VIGIL_ERR_CALLBACK: finalizing waits for
 *     the callback thread to finish).
 *   - No library thread ever calls back into MPI or into the application
 *     except through the failure callback.
 *
 * Memory. The library never keeps pointers passed to it after the call
 * returns, except `user` pointers and the allgather function, which are
 * kept until vigil_finalize.
 */
#ifndef VIGIL_H
#define VIGIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VIGIL_ABI_VERSION 1

/* Status codes: 0 is success, failures are negative. vigil_strerror names
 * them; vigil_last_error describes the latest failure in detail. */
enum {
	VIGIL_OK = 0,
	VIGIL_ERR_INVALID = -1,   /* a bad argument or configuration field */
	VIGIL_ERR_STATE = -2,     /* out of order: not initialized, not started,
	                             already started, wrong mode */
	VIGIL_ERR_BOOTSTRAP = -3, /* no launcher, or the rank/address exchange failed */
	VIGIL_ERR_NO_PMIX = -4,   /* started by PMIx, but the PMIx library
	                             cannot be loaded (Debian: libpmix2;
	                             or $VIGIL_LIBPMIX names it) */
	VIGIL_ERR_TRANSPORT = -5, /* listening or connecting failed */
	VIGIL_ERR_TIMEOUT = -6,   /* an operation did not finish in time */
	VIGIL_ERR_EVICTED = -7,   /* the job declared this process dead */
	VIGIL_ERR_CALLBACK = -8,  /* not allowed from the failure callback */
	VIGIL_ERR_INTERNAL = -9
};

/* Detector modes (vigil_config.mode, or VIGIL_MODE=ring|sporadic). */
enum {
	VIGIL_MODE_RING = 0,
	VIGIL_MODE_SPORADIC = 1
};

/* Event kinds. */
enum {
	VIGIL_EVENT_FAILED = 1,  /* rank crashed (or stopped heartbeating for > delta) */
	VIGIL_EVENT_LEFT = 2,    /* rank called vigil_leave */
	VIGIL_EVENT_EVICTED = 3, /* this process was declared dead by the others
	                            (paused or cut off longer than delta); rank is
	                            this process's own rank. The detector stops. */
	VIGIL_EVENT_MINORITY = 4 /* this process stopped on its own: it holds most
	                            of the job dead, on the minority side of a
	                            partition (or the job lost most of its ranks
	                            at once; see VIGIL_PARTITION). rank is this
	                            process's own rank. The detector stops; later
	                            calls return VIGIL_ERR_EVICTED, as after
	                            EVICTED. */
};

/* The version of vigil_event this header describes (vigil_event.version). */
#define VIGIL_EVENT_VERSION 1

/* One event: a rank is gone. Each rank is reported at most once. Every
 * field is set on every event, rank 0 included (0 is a rank, never "no
 * value"). The library fills the struct (the callback's, and vigil_poll's
 * from the caller), so its size never changes: version tells what the
 * library filled, and a field added later goes into a new struct and
 * function, not here (a program that builds events itself, to test its
 * callback say, should name the fields: version sits before
 * detected_unix_ns). The schema of vigil agent's JSON lines (docs/configuration.md,
 * "Agent output") carries the same fields. */
typedef struct vigil_event {
	int kind;                  /* VIGIL_EVENT_* */
	uint32_t rank;             /* the rank gone (FAILED, LEFT), or this
	                              process's own rank (EVICTED) */
	uint32_t detector;         /* the rank whose observer detected it (FAILED),
	                              the observer the departing rank told (LEFT), or
	                              this process's own rank (EVICTED) */
	uint32_t version;          /* VIGIL_EVENT_VERSION of the library that
	                              filled it; 0 from a library built before the
	                              field (the same other fields: it sits in
	                              what was padding, so the layout is
	                              unchanged) */
	int64_t detected_unix_ns;  /* the detector's wall clock at detection (ns
	                              since 1970; EVICTED: when this process
	                              learned it) */
	int64_t delivered_mono_ns; /* this process's CLOCK_MONOTONIC (ns) when it
	                              learned it */
} vigil_event;

/* The failure callback: ev is valid only during the call. */
typedef void (*vigil_failure_fn)(const vigil_event *ev, void *user);

/* A fixed-size allgather: every rank contributes len bytes from send, and
 * recv (size * len bytes) receives rank r's bytes at offset r * len.
 * Return 0 on success, anything else on failure. With MPI:
 *   MPI_Allgather(send, len, MPI_BYTE, recv, len, MPI_BYTE, comm). */
typedef int (*vigil_allgather_fn)(const void *send, void *recv, size_t len, void *user);

/* Bytes each rank contributes to an allgather exchange: its host or its
 * address, NUL-padded. */
#define VIGIL_ADDR_MAX 256

/* Explicit configuration. Initialize with vigil_config_init, then set the
 * fields; zero durations take the defaults. Durations out of their bounds
 * (docs/configuration-bounds.md; the same as the vigil command's flags and
 * VIGIL_* variables) make vigil_init fail with VIGIL_ERR_INVALID, naming
 * the field in vigil_last_error. */
typedef struct vigil_config {
	size_t struct_size;     /* sizeof(vigil_config): set by vigil_config_init
	                           (the size of an earlier version of this struct
	                           is accepted too; any other value is refused) */
	uint32_t rank, size;    /* this process's rank, and the number of ranks */
	int mode;               /* VIGIL_MODE_RING (default) or VIGIL_MODE_SPORADIC */
	int64_t heartbeat_ns;   /* h: heartbeat period (default 10 ms), 10 us to
	                           1 min; at least 50 us with realtime */
	int64_t suspect_ns;     /* delta: suspicion time-out (default 5*h, at
	                           least 100 us): at least 2*h and 100 us, at
	                           most 1 hour; must exceed h plus the worst
	                           delay of the platform */
	int64_t check_ns;       /* observer check period (default max(delta/8, h)),
	                           10 us to delta */
	int64_t grace_ns;       /* start-up grace (default 2 s + delta), up to 2 hours */
	uint64_t job_id;        /* non-zero, identical on every rank */
	const uint8_t *key;     /* the job's shared secret, >= 16 bytes, */
	size_t key_len;         /*   identical on every rank */
	const char *listen_addr;/* "ip:port" to listen on (default: as for
	                           vigil_init_from_env's VIGIL_BIND; with an
	                           allgather, VIGIL_ADVERTISE and VIGIL_IF_*
	                           apply too: set them across nodes) */
	/* Address exchange: exactly one of the two. */
	const char *const *peers;      /* every rank's "ip:port", indexed by rank
	                                  (listen_addr defaults to peers[rank]) */
	vigil_allgather_fn allgather;  /* or an allgather (see above) */
	void *allgather_user;
	const char *broadcast;  /* the propagation of failure news: an overlay,
	                           "hba" (default; the double hypercube, seed
	                           000) or "bmg" (the binomial graph, seed 003),
	                           or a corrected gossip of seed 002, "ocg",
	                           "ccg" or "fcg", or "ctree" (the greedy LogP
	                           tree with FCG's correction), tuned by the
	                           gossip_* fields below. Every rank must use
	                           the same. NULL: "hba" */
	int realtime;           /* 1: ask SCHED_FIFO for the heartbeat thread */
	int pin_cpu;            /* pin the heartbeat thread to this CPU; -1: no */
	int start_timeout_ms;   /* bound on vigil_start's exchange (default 60000),
	                           up to 3600000 */
	/* Address choice with an allgather (each NULL: as its environment
	 * variable, VIGIL_ADVERTISE, VIGIL_IF_INCLUDE, VIGIL_IF_EXCLUDE). A
	 * library built before these fields reads a shorter struct_size and
	 * ignores them. */
	const char *advertise_addr; /* "ip" or "ip:port" published to the others */
	const char *if_include;     /* interfaces and CIDR subnets to choose the
	                               published address from, e.g. "ib0,10.1.0.0/16" */
	const char *if_exclude;     /* interfaces and subnets never to publish */
	/* Tuning of the corrected gossips (broadcast "ocg", "ccg", "fcg" or
	 * "ctree"; the overlays ignore it, but a bad value is refused all the
	 * same). 0 takes the default; negative values are refused. Every rank
	 * must use the same. A library built before these fields reads a
	 * shorter struct_size and ignores them (it runs the overlays only). */
	int gossip_t;               /* the dissemination ends at step T (0: planned
	                               from the job's size by seed 002's equations
	                               (3)-(5), or the tree's span for "ctree") */
	int gossip_c;               /* "ocg": correction messages per rank the
	                               gossip reached (0: planned, equation (3)) */
	int gossip_f;               /* "fcg", "ctree": failures tolerated during
	                               the correction, 1 to 3 (0: 1) */
	int64_t gossip_step_ns;     /* o: one step; a rank sends at most one
	                               gossip and one correction message per step
	                               (default 1 ms) */
	int64_t gossip_latency_ns;  /* L: expected one-way message latency; a
	                               message counts as arriving ceil(L/o) + 1
	                               steps after it was sent (default 2 ms) */
	/* A library built before these fields reads a shorter struct_size and
	 * ignores them (it behaves as VIGIL_PARTITION_CONTINUE). */
	int partition;              /* what a rank holding most of the job dead
	                               does: VIGIL_PARTITION_FAILSTOP (0, default:
	                               it stops, VIGIL_EVENT_MINORITY) or
	                               VIGIL_PARTITION_CONTINUE (it goes on) */
	int reserved0;              /* 0; keeps the struct free of tail padding */
} vigil_config;

/* vigil_config.partition (VIGIL_PARTITION=failstop|continue). */
enum {
	VIGIL_PARTITION_FAILSTOP = 0,
	VIGIL_PARTITION_CONTINUE = 1
};

/* Agreement operations (vigil_agree). BAND and BOR combine byte strings
 * bitwise (VIGIL_OP_BAND is MPI_Comm_agree's operation); MIN and MAX
 * combine one uint64_t (len 8, host byte order). */
enum {
	VIGIL_OP_BAND = 0,
	VIGIL_OP_BOR = 1,
	VIGIL_OP_MIN = 2,
	VIGIL_OP_MAX = 3
};

/* What vigil_agree decided besides the value. */
typedef struct vigil_agreement {
	uint64_t seq;  /* the agreement's number: the same at every rank */
	int unacked;   /* 1 if some rank of the dead set had not been
	                  acknowledged by every contributor before the
	                  agreement (ULFM's MPI_ERR_PROC_FAILED of
	                  MPIX_Comm_agree); the dead sets of the agreements a
	                  rank returns, and vigil_failure_ack, acknowledge */
	size_t ndead;  /* size of the agreed dead set (may exceed dead_len) */
} vigil_agreement;

/* Protocol message kinds: the index of vigil_stats.kind_* (names:
 * vigil_msg_kind_name). */
enum {
	VIGIL_MSG_NEWOBSERVER = 0, /* the ring's repair: an observer takes a new emitter */
	VIGIL_MSG_LEAVE = 1,       /* a clean departure */
	VIGIL_MSG_BCAST = 2,       /* failure, departure and note broadcasts */
	VIGIL_MSG_EVICTED = 3,     /* to a rank held dead */
	VIGIL_MSG_AGREE = 4,       /* agreement (vigil_agree, vigil_shrink) */
	VIGIL_MSG_SYNC = 5,        /* dead-list repair */
	VIGIL_MSG_PROBE = 6,       /* block mending's and split probes */
	VIGIL_MSG_ALIVE = 7,       /* answers to probes */
	VIGIL_MSG_KIND_SLOTS = 16  /* the arrays' length: room for later kinds */
};

/* Reasons a frame is refused on receipt: the index of
 * vigil_stats.rejected_by (names: vigil_reject_name). */
enum {
	VIGIL_REJECT_OTHER = 0,         /* a reason this header does not name */
	VIGIL_REJECT_BAD_MAGIC = 1,     /* not a Vigil frame */
	VIGIL_REJECT_BAD_VERSION = 2,   /* an unsupported frame version */
	VIGIL_REJECT_BAD_TYPE = 3,      /* an unknown frame or message type */
	VIGIL_REJECT_FOREIGN_JOB = 4,   /* another job's frame */
	VIGIL_REJECT_BAD_TAG = 5,       /* authentication failed: a wrong key,
	                                   tampering or a replayed frame */
	VIGIL_REJECT_TRUNCATED = 6,     /* the input ended inside a frame */
	VIGIL_REJECT_TOO_LARGE = 7,     /* a declared length above the maximum */
	VIGIL_REJECT_UNKNOWN_RANK = 8,  /* a sender rank >= size */
	VIGIL_REJECT_STALE = 9,         /* an old incarnation, or a sender other
	                                   than the connection's */
	VIGIL_REJECT_NO_HELLO = 10,     /* a frame before the connection's hello */
	VIGIL_REJECT_MISDIRECTED = 11,  /* a hello meant for another rank */
	VIGIL_REJECT_BAD_PAYLOAD = 12,  /* an authenticated frame with a malformed payload */
	VIGIL_REJECT_HELLO_TIMEOUT = 13, /* no hello in time (TCP) */
	/* The verbs transport's own reasons. */
	VIGIL_REJECT_BAD_CONTROL = 14,
	VIGIL_REJECT_UD_SEND_ERROR = 15,
	VIGIL_REJECT_BAD_PACKET = 16,
	VIGIL_REJECT_RECV_ERROR = 17,
	VIGIL_REJECT_BAD_FRAME = 18,
	VIGIL_REJECT_TRAILING_BYTES = 19,
	VIGIL_REJECT_WRONG_SOURCE_QP = 20,
	VIGIL_REJECT_BAD_HEARTBEAT = 21,
	VIGIL_REJECT_UNEXPECTED_TYPE = 22,
	/* Heartbeats bound to their receiver (UDP; wrong_incarnation and
	 * old_heartbeat over verbs too): meant for another rank, for another
	 * incarnation of this one, for none yet, or not moving the emitter's
	 * word forwards (a replay). */
	VIGIL_REJECT_WRONG_RECEIVER = 23,
	VIGIL_REJECT_WRONG_INCARNATION = 24,
	VIGIL_REJECT_UNBOUND_HEARTBEAT = 25,
	VIGIL_REJECT_OLD_HEARTBEAT = 26,
	VIGIL_REJECT_SLOTS = 32         /* the array's length: room for later reasons */
};

/* Counters since vigil_start (vigil_stats_get). In sporadic and daemon mode
 * only dead is counted. */
typedef struct vigil_stats {
	size_t struct_size;          /* sizeof(vigil_stats): set by the caller */
	uint64_t heartbeats_sent;
	uint64_t heartbeats_missed;  /* periods the heartbeat thread woke late by more than h */
	int64_t max_late_ns;         /* its worst lateness */
	uint64_t msgs_sent, msgs_recv;
	uint64_t msgs_dropped;       /* given up by the transport (dead or unreachable peer) */
	uint64_t rejected;           /* frames refused on receipt (bad tag, wrong job, ...) */
	uint64_t bcasts_started, bcasts_forwarded;
	uint64_t bad_messages;       /* messages that made no sense */
	uint64_t loop_wakes;         /* the detector's event-loop wake-ups */
	uint32_t dead;               /* ranks known gone */
	int realtime;                /* 1: the heartbeat thread runs SCHED_FIFO */
	/* Version 2 of the struct. A library built before these fields
	 * refuses this struct_size (VIGIL_ERR_INVALID); this one fills only
	 * the fields above for the shorter struct_size of version 1. */
	uint64_t checks;             /* observer checks run on the heartbeat thread */
	uint64_t heartbeats_dropped; /* heartbeats the send side gave up on */
	uint64_t bytes_sent, bytes_recv; /* bytes of protocol messages */
	uint64_t reported;           /* crashes this rank's observer detected */
	uint64_t deaths_learned;     /* crashes learned, each rank once */
	uint64_t departures;         /* clean departures learned */
	uint64_t agreements_decided; /* agreement decisions reached */
	uint64_t agree_returned;     /* vigil_agree/vigil_shrink calls that returned a decision */
	uint64_t agree_latency_ns;   /* their total time */
	int64_t agree_max_latency_ns; /* the longest of them */
	/* Version 3: per message kind (index VIGIL_MSG_*) the messages sent
	 * (one per destination the transport accepted) and received, and
	 * their bytes (the message's encoding, without the transport's
	 * framing); per reason (index VIGIL_REJECT_*) the frames refused on
	 * receipt, which add up to rejected. Slots no name is given for stay
	 * 0; a later library may fill them, and vigil_msg_kind_name and
	 * vigil_reject_name give the names a header knows. A library built
	 * before these fields refuses this struct_size; this one fills the
	 * fields of version 1 or 2 for their shorter struct_size. */
	uint64_t kind_sent[VIGIL_MSG_KIND_SLOTS];
	uint64_t kind_recv[VIGIL_MSG_KIND_SLOTS];
	uint64_t kind_bytes_sent[VIGIL_MSG_KIND_SLOTS];
	uint64_t kind_bytes_recv[VIGIL_MSG_KIND_SLOTS];
	uint64_t rejected_by[VIGIL_REJECT_SLOTS];
} vigil_stats;

/* vigil_msg_kind_name returns the name of message kind k (VIGIL_MSG_*),
 * the kind label of vigil agent's metrics, or NULL for a slot this header
 * does not name. */
static inline const char *vigil_msg_kind_name(int k)
{
	static const char *const names[] = {"newobserver", "leave", "bcast", "evicted",
	                                    "agree", "sync", "probe", "alive"};
	return k >= 0 && k < (int)(sizeof names / sizeof *names) ? names[k] : NULL;
}

/* vigil_reject_name returns the name of rejection reason r
 * (VIGIL_REJECT_*), the reason label of vigil agent's metrics, or NULL for
 * a slot this header does not name. */
static inline const char *vigil_reject_name(int r)
{
	static const char *const names[] = {
		"other", "bad_magic", "bad_version", "bad_type", "foreign_job", "bad_tag",
		"truncated", "too_large", "unknown_rank", "stale", "no_hello", "misdirected",
		"bad_payload", "hello_timeout", "bad_control", "ud_send_error", "bad_packet",
		"recv_error", "bad_frame", "trailing_bytes", "wrong_source_qp", "bad_heartbeat",
		"unexpected_type", "wrong_receiver", "wrong_incarnation", "unbound_heartbeat", "old_heartbeat"};
	return r >= 0 && r < (int)(sizeof names / sizeof *names) ? names[r] : NULL;
}

/* vigil_config_init zeroes cfg and sets struct_size and pin_cpu = -1. */
static inline void vigil_config_init(vigil_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->struct_size = sizeof *cfg;
	cfg->pin_cpu = -1;
}

#ifndef VIGIL_NO_PROTOTYPES

/* vigil_init_from_env initializes from the launcher's environment: the
 * local launcher (`vigil run`, VIGIL_BOOTSTRAP set) or PMIx (PMIX_RANK or
 * PMIX_NAMESPACE set: mpirun, srun, prterun). Under PMIx every rank of the
 * job must call it (it fences once). Detector settings come from:
 *   VIGIL_MODE      ring | sporadic          (default ring)
 *   VIGIL_H         heartbeat period, e.g. 10ms
 *   VIGIL_DELTA     suspicion time-out, e.g. 50ms
 *   VIGIL_CHECK, VIGIL_GRACE                 (Go durations: 500us, 2s, ...)
 *                   (bounds: as vigil_config's fields above)
 *   VIGIL_START_TIMEOUT  bound on vigil_start's exchange (default 60s,
 *                   up to 1h; vigil_config.start_timeout_ms)
 *   VIGIL_BROADCAST hba | bmg | ocg | ccg | fcg | ctree  (vigil_config.broadcast)
 *   VIGIL_GOSSIP_STEP, VIGIL_GOSSIP_LATENCY  durations, e.g. 100us, 500us
 *   VIGIL_GOSSIP_T, VIGIL_GOSSIP_C, VIGIL_GOSSIP_F  integers
 *                   the corrected gossips' tuning (vigil_config.gossip_*)
 *   VIGIL_BIND      ip, ip:port or :port to listen on (VIGIL_LISTEN: the
 *                   same; default: the published address)
 *   VIGIL_ADVERTISE ip or ip:port published to the other ranks
 *   VIGIL_IF_INCLUDE, VIGIL_IF_EXCLUDE  interfaces and CIDR subnets to
 *                   choose the published address from / never to publish,
 *                   e.g. ib0,10.1.0.0/16. Default: loopback when the job
 *                   runs on one host, else the first up non-loopback
 *                   interface's address (PMIx gives the hosts); a job
 *                   spanning hosts never publishes loopback or a wildcard.
 *   VIGIL_HEARTBEAT shm (default: a store into the observer's shared
 *                   memory for ranks of this host, UDP to the others) | udp
 *   VIGIL_REALTIME  1 to ask for SCHED_FIFO; VIGIL_PIN_CPU n
 *   VIGIL_LOG       error | warn (default) | info | debug | off  (stderr)
 *   VIGIL_LIBPMIX   the PMIx library to load under PMIx (default
 *                   libpmix.so.2; a libvigil built with -tags pmix links it)
 *   VIGIL_PARTITION failstop (default: a rank holding most of the job dead
 *                   stops, VIGIL_EVENT_MINORITY) | continue (it goes on)
 * Returns VIGIL_OK, VIGIL_ERR_BOOTSTRAP (no launcher; see
 * vigil_last_error), VIGIL_ERR_NO_PMIX, VIGIL_ERR_INVALID or VIGIL_ERR_STATE
 * (already initialized). */
int vigil_init_from_env(void);

/* vigil_init initializes with an explicit configuration (copied). */
int vigil_init(const vigil_config *cfg);

/* vigil_rank and vigil_size return this process's rank and the job size
 * once initialized, or VIGIL_ERR_STATE. */
int vigil_rank(void);
int vigil_size(void);

/* vigil_start opens the transport, exchanges addresses with every rank (a
 * collective: every rank must call it) and starts the detector. */
int vigil_start(void);

/* vigil_set_failure_callback sets (fn != NULL) or clears (fn == NULL) the
 * failure callback. Every event is given to the callback exactly once, past
 * ones first: events that happen while no callback is set wait for the next
 * one. May be called before or after vigil_start. */
int vigil_set_failure_callback(vigil_failure_fn fn, void *user);

/* vigil_poll stores the next event not yet polled in *ev and returns 1, or
 * returns 0 when there is none; it never blocks. Polling and the callback
 * are independent: each sees every event. An eviction is reported once,
 * after the failures learned before it. */
int vigil_poll(vigil_event *ev);

/* vigil_dead_set writes up to len dead or departed ranks, in increasing
 * order, to buf and returns how many there are in all (which may exceed
 * len), or a negative status. */
long vigil_dead_set(uint32_t *buf, size_t len);

/* vigil_is_dead returns 1 if rank is known dead or departed, 0 if not, or a
 * negative status. */
int vigil_is_dead(uint32_t rank);

/* vigil_probe checks rank now with a ping-pong (sporadic mode only): it
 * returns 0 if rank answered within timeout_ns, 1 if it did not (it is then
 * reported dead, locally: to this process's callback and vigil_poll), or a
 * negative status (VIGIL_ERR_STATE in ring mode). A rank already known dead
 * returns 1 at once. Blocks the calling thread up to timeout_ns. With a
 * static address table (vigil_config.peers) there is no start-up fence:
 * during the start-up grace (grace_ns, default 2 s + delta) a rank that
 * cannot be reached is not declared dead, and vigil_probe returns 0. */
int vigil_probe(uint32_t rank, int64_t timeout_ns);

/* Agreement (seed 001, the Early Returning Agreement), ring mode only.
 * vigil_agree and vigil_shrink are collectives: every live rank calls them
 * in the same order, as MPI collectives (concurrent calls from several
 * threads of one rank get numbers in the order they start). They tolerate
 * any number of failures before and during the call; a rank returns as
 * soon as it knows the decision, and its library keeps answering the
 * others for it in the background. All survivors return the same result.
 * timeout_ns <= 0 waits without limit; on VIGIL_ERR_TIMEOUT the agreement
 * goes on without the caller, and the next call is the next agreement.
 * Both return VIGIL_ERR_STATE in sporadic mode, before vigil_start or after
 * vigil_finalize, and VIGIL_ERR_EVICTED once this rank was declared dead. */

/* vigil_agree contributes len bytes at value and replaces them with the
 * decided value: op (VIGIL_OP_*) over the contributions of every rank
 * alive at the decision. Every rank must pass the same op and len. The
 * agreed dead set (ranks whose contribution may be missing, increasing)
 * is written to dead (up to dead_len ranks; dead may be NULL if dead_len
 * is 0), and *res (if not NULL) receives the agreement's number, the
 * unacknowledged-failure flag and the dead set's size. */
int vigil_agree(int op, void *value, size_t len, vigil_agreement *res,
                uint32_t *dead, size_t dead_len, int64_t timeout_ns);

/* vigil_shrink agrees on the group of survivors, as MPI_Comm_shrink: it
 * writes up to len of them (increasing) to buf and returns how many there
 * are in all (which may exceed len), or a negative status. */
long vigil_shrink(uint32_t *buf, size_t len, int64_t timeout_ns);

/* vigil_failure_ack acknowledges every failure this rank knows of, as
 * MPI_Comm_failure_ack: later agreements do not raise unacked for them on
 * this rank's account. */
int vigil_failure_ack(void);

/* vigil_leave departs cleanly: heartbeats stop and the others report this
 * rank as VIGIL_EVENT_LEFT. The detector's event loop sends the departure
 * as soon as it gets to it (later than timeout_ms only if the loop is that
 * busy, as when a whole job stops at once on a loaded host); then
 * vigil_leave waits up to timeout_ms for it to go out. Call vigil_finalize
 * afterwards. */
int vigil_leave(int timeout_ms);

/* vigil_finalize stops the detector and all its threads (after the callback
 * in progress, if any, returns) and releases the bootstrap (PMIx_Finalize).
 * Returns VIGIL_ERR_CALLBACK from within the failure callback. After it, the
 * library may be initialized again (under PMIx, every rank must then
 * re-initialize, and whether PMIx itself supports PMIx_Init after
 * PMIx_Finalize depends on the PMIx library). */
int vigil_finalize(void);

/* vigil_strerror returns a static description of a status code. */
const char *vigil_strerror(int code);

/* vigil_stats_get fills st (st->struct_size = sizeof *st) with the counters
 * since vigil_start; callable from any thread, at any time after
 * vigil_init. VIGIL_ERR_INVALID for NULL or a struct_size this library
 * does not know (it knows sizeof of this header's vigil_stats and of its
 * versions 1, which ended at realtime, and 2, which ended at
 * agree_max_latency_ns). */
int vigil_stats_get(vigil_stats *st);

/* vigil_last_error copies the detailed message of the latest failure in
 * this process (any thread) into buf (NUL-terminated, truncated to len) and
 * returns its full length. */
size_t vigil_last_error(char *buf, size_t len);

#endif /* VIGIL_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif

#endif /* VIGIL_H */
