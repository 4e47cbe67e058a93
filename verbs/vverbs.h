// C helpers of package verbs. ibv_post_send, ibv_post_recv, ibv_poll_cq and
// ibv_req_notify_cq are static inline in <infiniband/verbs.h>, so cgo cannot
// call them: each helper here wraps one whole operation (a state transition,
// a post, a post plus the completion handling it owes, a poll batch) so that
// one cgo call does one piece of work.
#ifndef VIGIL_VVERBS_H
#define VIGIL_VVERBS_H

#include <stdint.h>
#include <infiniband/verbs.h>

// Return codes of the helpers besides 0 and positive errno values.
enum {
	VV_EWC = -1,       // a work completion carried an error status (see state)
	VV_EFULL = -2,     // send queue full and no completion came in time
	VV_EPOLL = -3,     // ibv_poll_cq failed
	VV_EFOREIGN = -4,  // a completion that is not ours on a writer CQ
	VV_ERECOVER = -5,  // vv_ring_poll: bringing the UD QP back to RTS failed (see recover_err)
	VV_EREPOST = -100, // vv_ring_poll: ibv_post_recv failed with errno VV_EREPOST-rc
};

// ---- setup ---------------------------------------------------------------

struct vv_port {
	int state, max_mtu, active_mtu, link_layer;
	int gid_tbl_len, lid, sm_lid;
	uint32_t port_cap_flags;
};
int vv_query_port(struct ibv_context *ctx, int port, struct vv_port *out);
int vv_query_gid(struct ibv_context *ctx, int port, int index, uint8_t out[16]);

struct vv_gid {
	uint32_t index;
	uint8_t raw[16];
};
// vv_query_gid_table stores the valid GID entries of port (at most max) via
// one ibv_query_gid_table call. Returns the count, or -errno.
int vv_query_gid_table(struct ibv_context *ctx, int port, struct vv_gid *out, int max);

struct vv_dev {
	int phys_port_cnt;
	int max_qp_wr, max_sge, max_cqe, max_mr, max_qp, max_cq, max_pd;
	uint64_t max_mr_size;
	int mw_type2; // IBV_DEVICE_MEM_WINDOW_TYPE_2A or _2B
};
int vv_query_device(struct ibv_context *ctx, struct vv_dev *out);

struct vv_qp_init {
	int type;                // IBV_QPT_RC or IBV_QPT_UD
	int max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	int port;
	int access;              // RC: qp_access_flags for INIT
	uint32_t qkey;           // UD
	uint32_t psn;            // UD: sq_psn for RTS
	// filled on return: what the device granted
	int got_send_wr, got_recv_wr, got_inline;
	uint32_t qp_num;
};
// vv_create_qp creates the QP and moves it to INIT (RC) or through INIT, RTR
// and RTS (UD). *op names the failing verbs call.
// srq, if not NULL, is the shared receive queue of an RC QP.
struct ibv_qp *vv_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			    struct ibv_srq *srq, struct vv_qp_init *a, const char **op, int *err);

// vv_create_srq creates a shared receive queue of max_wr receives (one SGE
// each); NULL with *err set on failure.
struct ibv_srq *vv_create_srq(struct ibv_pd *pd, int max_wr, int *err);
// vv_post_srq_recv posts one receive on a shared receive queue.
int vv_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey);

struct vv_rc_conn {
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint8_t dgid[16];
	uint16_t dlid;
	int port, sgid_index, is_global;
	int path_mtu, hop_limit, traffic_class, sl;
	int min_rnr_timer, max_dest_rd_atomic, max_rd_atomic;
	int timeout, retry_cnt, rnr_retry;
};
// vv_connect_rc moves an RC QP from INIT to RTR to RTS.
int vv_connect_rc(struct ibv_qp *qp, struct vv_rc_conn *c, const char **op);

int vv_qp_state(struct ibv_qp *qp, int *state);
int vv_qp_to_error(struct ibv_qp *qp);

struct ibv_ah *vv_create_ah(struct ibv_pd *pd, const uint8_t dgid[16], uint16_t dlid, int port,
			    int sgid_index, int is_global, int hop_limit, int *err);

// ---- generic posting and polling -----------------------------------------

struct vv_send {
	uint64_t wr_id;
	int opcode;              // IBV_WR_RDMA_WRITE, IBV_WR_SEND, ...
	int flags;               // IBV_SEND_SIGNALED | IBV_SEND_INLINE ...
	uint64_t laddr;          // local buffer (registered, or any for INLINE)
	uint32_t len, lkey;
	uint64_t raddr;          // RDMA
	uint32_t rkey;
	struct ibv_ah *ah;       // UD
	uint32_t remote_qpn, remote_qkey;
};
int vv_post_send(struct ibv_qp *qp, const struct vv_send *s);
// vv_post_send_inline posts one WR whose payload (len bytes at data, which
// may be Go memory: it is copied at post time) is sent inline.
int vv_post_send_inline(struct ibv_qp *qp, const struct vv_send *s, const void *data);
int vv_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey);

struct vv_wc {
	uint64_t wr_id;
	int32_t status, opcode;
	uint32_t vendor_err, byte_len, qp_num, src_qp, wc_flags, imm_data;
	uint16_t slid, pkey_index;
};
// vv_poll polls up to max completions into out; returns n, or -1 (errno in *err).
int vv_poll(struct ibv_cq *cq, struct vv_wc *out, int max);
int vv_req_notify(struct ibv_cq *cq, int solicited_only);
// vv_get_cq_event reads one event from a non-blocking channel and acks it.
// Returns 0, or errno (EAGAIN when none is pending).
int vv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq *expect);

struct vv_async {
	int type;
	uint32_t qp_num;         // QP events
	int port;                // port events
	uintptr_t cq;            // CQ events
};
// vv_get_async_event reads and acks one async event (non-blocking fd).
int vv_get_async_event(struct ibv_context *ctx, struct vv_async *out);

int vv_set_nonblock(int fd);

// ---- heartbeat writer: inline RDMA WRITE of one 64-bit word -------------

#define VV_BATCH 16

// vv_hbw is a writer's state, in C memory. Every WR it posts carries the
// state's address as wr_id, so writers may share one send CQ (used by
// writers only, from one thread).
struct vv_hbw {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t depth;          // send queue slots
	uint32_t signal_every;   // every Nth WR is signalled
	uint32_t since_sig;
	uint32_t sig_head, sig_tail;  // FIFO of outstanding signalled WRs
	uint64_t *sig;           // posted count at each signalled WR, depth entries
	uint64_t posted;         // WRs posted
	uint64_t retired;        // WRs known finished
	uint64_t last_raddr;
	uint32_t last_rkey;
	// first error completion
	int32_t wc_status;
	uint32_t vendor_err;
	uint64_t errors;         // error completions seen
	uint64_t polls, full_waits;
	int poll_errno;
	uint64_t spin_ns;        // how long a full queue may wait (0: 1 s)
	struct ibv_wc wc[VV_BATCH];
};
struct vv_hbw *vv_hbw_new(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t depth, uint32_t signal_every);
void vv_hbw_free(struct vv_hbw *w);
// vv_hbw_write posts an inline RDMA WRITE of val to raddr/rkey, signalled
// every signal_every posts, after making room in the send queue if needed,
// and reaps whatever completions are ready while signalled WRs are
// outstanding. Returns 0, a positive errno from ibv_post_send, or VV_E*.
int vv_hbw_write(struct vv_hbw *w, uint64_t raddr, uint32_t rkey, uint64_t val);
// vv_hbw_sync makes the last posted WR signalled (posting a zero-length
// signalled RDMA WRITE if it was not) and reaps completions once. Returns 0
// or VV_E*; *outstanding gets posted-retired.
int vv_hbw_sync(struct vv_hbw *w, int post_fence, uint64_t *outstanding);

// ---- receive ring ---------------------------------------------------------

// VV_WC_STATUSES bounds the error counters of a ring: ibv_wc_status values
// at or above it are counted in the last one.
#define VV_WC_STATUSES 32

// vv_ring is a ring of n receive buffers of size bytes each in one
// registered region; wr_id is the buffer index. Buffers handed out by a poll
// are reposted at the start of the next poll: those of successful
// completions and those of error completions other than flushes (a flushed
// buffer went back because the QP is in the error state). With ud set, an
// error completion that left the UD QP in the error state brings it back
// to RTS (RESET, INIT, RTR, RTS with port, qkey and psn) and reposts every
// buffer, so the ring keeps its n buffers.
struct vv_ring {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint64_t base;
	uint32_t n, size, lkey;
	int npending;
	uint32_t pending[VV_BATCH];
	struct vv_wc wc[VV_BATCH];
	uint64_t reposted;
	uint64_t errs[VV_WC_STATUSES]; // non-flush error completions by status
	uint64_t flushed;              // flushed completions (buffer not reposted)
	uint64_t recoveries;           // UD QP brought back from the error state
	int ud, port;                  // recovery parameters (ud = 0: none)
	uint32_t qkey, psn;
	int recover_err;               // errno of the failed recovery step
	const char *recover_op;        // that step
};
struct vv_ring *vv_ring_new(struct ibv_qp *qp, struct ibv_cq *cq, uint64_t base, uint32_t n,
			    uint32_t size, uint32_t lkey, int *err);
void vv_ring_free(struct vv_ring *r);
// vv_ring_poll reposts the previous batch, then polls up to VV_BATCH
// completions into r->wc, and recovers the UD QP (see struct vv_ring) when
// one of them is an error that left it in the error state. Returns n >= 0,
// VV_EPOLL, VV_ERECOVER, or VV_EREPOST-errno when reposting failed.
int vv_ring_poll(struct vv_ring *r);
// vv_ring_recover moves the ring's UD QP to RESET, drops the completions
// left on the ring's CQ, moves the QP back to RTS and posts every buffer
// not awaiting its repost. Returns 0 or an errno (r->recover_op names the
// step).
int vv_ring_recover(struct vv_ring *r);



// ---- benchmark support (cost of the cgo crossing itself) -----------------
int vv_nop(int x);

// vv_bind_mw binds the type 2 memory window mw to [addr, addr+len) of mr
// with access, by a signalled BIND_MW work request posted on the RC QP qp
// (in RTS), and polls qp's send CQ cq for its completion for at most
// timeout_ms. On success *rkey is the window's new rkey. *op names the
// failing call; a failed completion returns VV_EWC with *status set.
int vv_bind_mw(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
	       uint64_t len, int access, uint64_t wr_id, int timeout_ms, uint32_t *rkey, int *status,
	       const char **op);
// vv_hbw_write_n calls vv_hbw_write n times with values first, first+1, ...
int vv_hbw_write_n(struct vv_hbw *w, uint64_t raddr, uint32_t rkey, uint64_t first, uint64_t n);
#endif
