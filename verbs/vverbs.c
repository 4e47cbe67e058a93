// C helpers of package verbs: see vverbs.h.
#include "vverbs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- setup ---------------------------------------------------------------

int vv_query_port(struct ibv_context *ctx, int port, struct vv_port *out)
{
	struct ibv_port_attr a;
	memset(&a, 0, sizeof(a));
	int rc = ibv_query_port(ctx, (uint8_t)port, &a);
	if (rc)
		return rc;
	out->state = a.state;
	out->max_mtu = a.max_mtu;
	out->active_mtu = a.active_mtu;
	out->link_layer = a.link_layer;
	out->gid_tbl_len = a.gid_tbl_len;
	out->lid = a.lid;
	out->sm_lid = a.sm_lid;
	out->port_cap_flags = a.port_cap_flags;
	return 0;
}

int vv_query_gid(struct ibv_context *ctx, int port, int index, uint8_t out[16])
{
	union ibv_gid g;
	if (ibv_query_gid(ctx, (uint8_t)port, index, &g))
		return errno ? errno : EINVAL;
	memcpy(out, g.raw, 16);
	return 0;
}

int vv_query_gid_table(struct ibv_context *ctx, int port, struct vv_gid *out, int max)
{
	struct ibv_gid_entry *e = calloc((size_t)max, sizeof(*e));
	if (!e)
		return -ENOMEM;
	ssize_t n = ibv_query_gid_table(ctx, e, (size_t)max, 0);
	if (n < 0) {
		free(e);
		return n < -1 ? (int)n : -(errno ? errno : EIO);
	}
	int k = 0;
	for (ssize_t i = 0; i < n; i++) {
		if ((int)e[i].port_num != port)
			continue;
		out[k].index = e[i].gid_index;
		memcpy(out[k].raw, e[i].gid.raw, 16);
		k++;
	}
	free(e);
	return k;
}

int vv_query_device(struct ibv_context *ctx, struct vv_dev *out)
{
	struct ibv_device_attr a;
	int rc = ibv_query_device(ctx, &a);
	if (rc)
		return rc;
	out->phys_port_cnt = a.phys_port_cnt;
	out->max_qp_wr = a.max_qp_wr;
	out->max_sge = a.max_sge;
	out->max_cqe = a.max_cqe;
	out->max_mr = a.max_mr;
	out->max_qp = a.max_qp;
	out->max_cq = a.max_cq;
	out->max_pd = a.max_pd;
	out->max_mr_size = a.max_mr_size;
	out->mw_type2 = (a.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
	return 0;
}

struct ibv_qp *vv_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			    struct ibv_srq *srq, struct vv_qp_init *a, const char **op, int *err)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.srq = srq;
	ia.qp_type = (enum ibv_qp_type)a->type;
	ia.sq_sig_all = 0;
	ia.cap.max_send_wr = a->max_send_wr;
	ia.cap.max_recv_wr = a->max_recv_wr;
	ia.cap.max_send_sge = a->max_send_sge;
	ia.cap.max_recv_sge = a->max_recv_sge;
	ia.cap.max_inline_data = a->max_inline;
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp) {
		*op = "ibv_create_qp";
		*err = errno ? errno : EINVAL;
		return NULL;
	}
	a->got_send_wr = ia.cap.max_send_wr;
	a->got_recv_wr = ia.cap.max_recv_wr;
	a->got_inline = ia.cap.max_inline_data;
	a->qp_num = qp->qp_num;

	struct ibv_qp_attr at;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.pkey_index = 0;
	at.port_num = (uint8_t)a->port;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (a->type == IBV_QPT_UD) {
		at.qkey = a->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		at.qp_access_flags = a->access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	int rc = ibv_modify_qp(qp, &at, mask);
	if (rc) {
		*op = "ibv_modify_qp(INIT)";
		goto fail;
	}
	if (a->type != IBV_QPT_UD)
		return qp;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	rc = ibv_modify_qp(qp, &at, IBV_QP_STATE);
	if (rc) {
		*op = "ibv_modify_qp(RTR)";
		goto fail;
	}
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = a->psn & 0xffffff;
	rc = ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN);
	if (rc) {
		*op = "ibv_modify_qp(RTS)";
		goto fail;
	}
	return qp;
fail:
	*err = rc;
	ibv_destroy_qp(qp);
	return NULL;
}

int vv_connect_rc(struct ibv_qp *qp, struct vv_rc_conn *c, const char **op)
{
	struct ibv_qp_attr at;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = (enum ibv_mtu)c->path_mtu;
	at.dest_qp_num = c->dest_qpn;
	at.rq_psn = c->rq_psn & 0xffffff;
	at.max_dest_rd_atomic = (uint8_t)c->max_dest_rd_atomic;
	at.min_rnr_timer = (uint8_t)c->min_rnr_timer;
	at.ah_attr.dlid = c->dlid;
	at.ah_attr.sl = (uint8_t)c->sl;
	at.ah_attr.port_num = (uint8_t)c->port;
	if (c->is_global) {
		at.ah_attr.is_global = 1;
		memcpy(at.ah_attr.grh.dgid.raw, c->dgid, 16);
		at.ah_attr.grh.sgid_index = (uint8_t)c->sgid_index;
		at.ah_attr.grh.hop_limit = (uint8_t)c->hop_limit;
		at.ah_attr.grh.traffic_class = (uint8_t)c->traffic_class;
	}
	int rc = ibv_modify_qp(qp, &at,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER);
	if (rc) {
		*op = "ibv_modify_qp(RTR)";
		return rc;
	}
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = (uint8_t)c->timeout;
	at.retry_cnt = (uint8_t)c->retry_cnt;
	at.rnr_retry = (uint8_t)c->rnr_retry;
	at.sq_psn = c->sq_psn & 0xffffff;
	at.max_rd_atomic = (uint8_t)c->max_rd_atomic;
	rc = ibv_modify_qp(qp, &at,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc) {
		*op = "ibv_modify_qp(RTS)";
		return rc;
	}
	return 0;
}

int vv_qp_state(struct ibv_qp *qp, int *state)
{
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	int rc = ibv_query_qp(qp, &at, IBV_QP_STATE, &ia);
	if (rc)
		return rc;
	*state = at.qp_state;
	return 0;
}

int vv_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr at;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &at, IBV_QP_STATE);
}

struct ibv_ah *vv_create_ah(struct ibv_pd *pd, const uint8_t dgid[16], uint16_t dlid, int port,
			    int sgid_index, int is_global, int hop_limit, int *err)
{
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof(a));
	a.dlid = dlid;
	a.port_num = (uint8_t)port;
	if (is_global) {
		a.is_global = 1;
		memcpy(a.grh.dgid.raw, dgid, 16);
		a.grh.sgid_index = (uint8_t)sgid_index;
		a.grh.hop_limit = (uint8_t)hop_limit;
	}
	errno = 0;
	struct ibv_ah *ah = ibv_create_ah(pd, &a);
	if (!ah)
		*err = errno ? errno : EINVAL;
	return ah;
}

// ---- generic posting and polling -----------------------------------------

static void fill_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, const struct vv_send *s)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = s->wr_id;
	wr->opcode = (enum ibv_wr_opcode)s->opcode;
	wr->send_flags = s->flags;
	if (s->len) {
		sge->addr = s->laddr;
		sge->length = s->len;
		sge->lkey = s->lkey;
		wr->sg_list = sge;
		wr->num_sge = 1;
	}
	if (s->ah) {
		wr->wr.ud.ah = s->ah;
		wr->wr.ud.remote_qpn = s->remote_qpn;
		wr->wr.ud.remote_qkey = s->remote_qkey;
	} else {
		wr->wr.rdma.remote_addr = s->raddr;
		wr->wr.rdma.rkey = s->rkey;
	}
}

int vv_post_send(struct ibv_qp *qp, const struct vv_send *s)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	fill_wr(&wr, &sge, s);
	return ibv_post_send(qp, &wr, &bad);
}

int vv_post_send_inline(struct ibv_qp *qp, const struct vv_send *s, const void *data)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	fill_wr(&wr, &sge, s);
	wr.send_flags |= IBV_SEND_INLINE;
	if (s->len) {
		sge.addr = (uintptr_t)data;
		sge.lkey = 0;
	}
	return ibv_post_send(qp, &wr, &bad);
}

// fill_recv_wr makes wr a receive of one buffer, sge.
static void fill_recv_wr(struct ibv_recv_wr *wr, struct ibv_sge *sge, uint64_t wr_id)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = 1;
}

int vv_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr, *bad = NULL;
	fill_recv_wr(&wr, &sge, wr_id);
	return ibv_post_recv(qp, &wr, &bad);
}

struct ibv_srq *vv_create_srq(struct ibv_pd *pd, int max_wr, int *err)
{
	struct ibv_srq_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.attr.max_wr = max_wr;
	ia.attr.max_sge = 1;
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq(pd, &ia);
	if (!srq)
		*err = errno ? errno : EINVAL;
	return srq;
}

int vv_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr, *bad = NULL;
	fill_recv_wr(&wr, &sge, wr_id);
	return ibv_post_srq_recv(srq, &wr, &bad);
}

static void copy_wc(struct vv_wc *o, const struct ibv_wc *w)
{
	o->wr_id = w->wr_id;
	o->status = w->status;
	o->opcode = w->opcode;
	o->vendor_err = w->vendor_err;
	o->byte_len = w->byte_len;
	o->qp_num = w->qp_num;
	o->src_qp = w->src_qp;
	o->wc_flags = w->wc_flags;
	o->imm_data = w->imm_data;
	o->slid = w->slid;
	o->pkey_index = w->pkey_index;
}

int vv_poll(struct ibv_cq *cq, struct vv_wc *out, int max)
{
	struct ibv_wc wc[VV_BATCH];
	if (max > VV_BATCH)
		max = VV_BATCH;
	int n = ibv_poll_cq(cq, max, wc);
	for (int i = 0; i < n; i++)
		copy_wc(&out[i], &wc[i]);
	return n;
}

int vv_req_notify(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

int vv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq *expect)
{
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;
	if (ibv_get_cq_event(ch, &cq, &ctx))
		return errno ? errno : EIO;
	ibv_ack_cq_events(cq, 1);
	return cq == expect ? 0 : EBADMSG;
}

int vv_get_async_event(struct ibv_context *ctx, struct vv_async *out)
{
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev))
		return errno ? errno : EIO;
	memset(out, 0, sizeof(*out));
	out->type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->qp_num = ev.element.qp ? ev.element.qp->qp_num : 0;
		break;
	case IBV_EVENT_CQ_ERR:
		out->cq = (uintptr_t)ev.element.cq;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return 0;
}

int vv_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errno;
	return 0;
}

// ---- heartbeat writer -----------------------------------------------------

struct vv_hbw *vv_hbw_new(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t depth, uint32_t signal_every)
{
	if (depth == 0 || signal_every == 0 || signal_every > depth)
		return NULL;
	struct vv_hbw *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->sig = calloc(depth, sizeof(uint64_t));
	if (!w->sig) {
		free(w);
		return NULL;
	}
	w->qp = qp;
	w->cq = cq;
	w->depth = depth;
	w->signal_every = signal_every;
	return w;
}

void vv_hbw_free(struct vv_hbw *w)
{
	if (w) {
		free(w->sig);
		free(w);
	}
}

// hbw_reap polls one batch from the writer CQ and retires WRs of whichever
// writer each completion belongs to.
static int hbw_reap(struct vv_hbw *w)
{
	int n = ibv_poll_cq(w->cq, VV_BATCH, w->wc);
	w->polls++;
	if (n < 0) {
		w->poll_errno = errno;
		return VV_EPOLL;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_wc *c = &w->wc[i];
		struct vv_hbw *o = (struct vv_hbw *)(uintptr_t)c->wr_id;
		if (!o)
			return VV_EFOREIGN;
		if (c->status != IBV_WC_SUCCESS) {
			if (o->wc_status == 0) {
				o->wc_status = c->status;
				o->vendor_err = c->vendor_err;
			}
			o->errors++;
		}
		if (o->sig_head != o->sig_tail) {
			o->retired = o->sig[o->sig_head % o->depth];
			o->sig_head++;
		}
	}
	return n;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// hbw_room waits until the send queue has a free slot.
static int hbw_room(struct vv_hbw *w)
{
	uint64_t deadline = 0;
	w->full_waits++;
	for (uint32_t spin = 0; w->posted - w->retired >= w->depth; spin++) {
		int n = hbw_reap(w);
		if (n < 0)
			return n;
		if (w->wc_status)
			return VV_EWC;
		if (n == 0 && (spin & 255) == 255) {
			uint64_t t = now_ns();
			if (!deadline)
				deadline = t + (w->spin_ns ? w->spin_ns : 1000000000ull);
			else if (t > deadline)
				return VV_EFULL;
		}
	}
	return 0;
}

static int hbw_post(struct vv_hbw *w, uint64_t raddr, uint32_t rkey, const uint64_t *val, int force_sig)
{
	if (w->posted - w->retired >= w->depth) {
		int rc = hbw_room(w);
		if (rc)
			return rc;
	}
	int sig = force_sig || (w->since_sig + 1 >= w->signal_every);
	struct ibv_sge sge = {.addr = (uintptr_t)val, .length = 8, .lkey = 0};
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)w;
	wr.opcode = IBV_WR_RDMA_WRITE;
	if (val) {
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_INLINE;
	}
	if (sig)
		wr.send_flags |= IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int rc = ibv_post_send(w->qp, &wr, &bad);
	if (rc)
		return rc;
	w->posted++;
	if (sig) {
		w->sig[w->sig_tail % w->depth] = w->posted;
		w->sig_tail++;
		w->since_sig = 0;
	} else {
		w->since_sig++;
	}
	return 0;
}

int vv_hbw_write(struct vv_hbw *w, uint64_t raddr, uint32_t rkey, uint64_t val)
{
	if (w->wc_status)
		return VV_EWC;
	int rc = hbw_post(w, raddr, rkey, &val, 0);
	if (rc)
		return rc;
	w->last_raddr = raddr;
	w->last_rkey = rkey;
	// Amortised completion handling: poll only while a signalled WR is
	// outstanding (one in signal_every posts creates one).
	if (w->sig_head != w->sig_tail) {
		rc = hbw_reap(w);
		if (rc < 0)
			return rc;
	}
	return w->wc_status ? VV_EWC : 0;
}

int vv_hbw_sync(struct vv_hbw *w, int post_fence, uint64_t *outstanding)
{
	if (post_fence && w->since_sig != 0 && !w->wc_status) {
		// Zero-length signalled RDMA WRITE: its completion retires every
		// earlier unsignalled WR (RC completes in order).
		int rc = hbw_post(w, w->last_raddr, w->last_rkey, NULL, 1);
		if (rc) {
			*outstanding = w->posted - w->retired;
			return rc;
		}
	}
	int rc = 0;
	if (w->sig_head != w->sig_tail)
		rc = hbw_reap(w);
	*outstanding = w->posted - w->retired;
	if (rc < 0)
		return rc;
	return w->wc_status ? VV_EWC : 0;
}

// ---- receive ring ---------------------------------------------------------

struct vv_ring *vv_ring_new(struct ibv_qp *qp, struct ibv_cq *cq, uint64_t base, uint32_t n,
			    uint32_t size, uint32_t lkey, int *err)
{
	struct vv_ring *r = calloc(1, sizeof(*r));
	if (!r) {
		*err = ENOMEM;
		return NULL;
	}
	r->qp = qp;
	r->cq = cq;
	r->base = base;
	r->n = n;
	r->size = size;
	r->lkey = lkey;
	for (uint32_t i = 0; i < n; i++) {
		int rc = vv_post_recv(qp, i, base + (uint64_t)i * size, size, lkey);
		if (rc) {
			*err = rc;
			free(r);
			return NULL;
		}
	}
	return r;
}

void vv_ring_free(struct vv_ring *r)
{
	free(r);
}

int vv_ring_poll(struct vv_ring *r)
{
	if (r->npending) {
		struct ibv_recv_wr wr[VV_BATCH], *bad = NULL;
		struct ibv_sge sge[VV_BATCH];
		for (int i = 0; i < r->npending; i++) {
			uint32_t k = r->pending[i];
			sge[i].addr = r->base + (uint64_t)k * r->size;
			sge[i].length = r->size;
			sge[i].lkey = r->lkey;
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = k;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < r->npending ? &wr[i + 1] : NULL;
		}
		int rc = ibv_post_recv(r->qp, wr, &bad);
		if (rc) {
			// Keep the buffers that did not go in for the next try.
			int done = bad ? (int)(bad - wr) : 0;
			if (done > 0 && done <= r->npending) {
				memmove(r->pending, r->pending + done,
					(size_t)(r->npending - done) * sizeof(r->pending[0]));
				r->npending -= done;
				r->reposted += done;
			}
			return VV_EREPOST - rc;
		}
		r->reposted += r->npending;
		r->npending = 0;
	}
	struct ibv_wc wc[VV_BATCH];
	int n = ibv_poll_cq(r->cq, VV_BATCH, wc);
	if (n < 0)
		return VV_EPOLL;
	int errs = 0;
	for (int i = 0; i < n; i++) {
		copy_wc(&r->wc[i], &wc[i]);
		if (wc[i].wr_id >= r->n)
			continue;
		if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
			// The QP is in the error state: posting to it would only
			// flush the buffer again.
			r->flushed++;
			continue;
		}
		if (wc[i].status != IBV_WC_SUCCESS) {
			unsigned s = (unsigned)wc[i].status;
			r->errs[s < VV_WC_STATUSES ? s : VV_WC_STATUSES - 1]++;
			errs++;
		}
		r->pending[r->npending++] = (uint32_t)wc[i].wr_id;
	}
	if (errs && r->ud) {
		int st;
		if (vv_qp_state(r->qp, &st) == 0 && st == IBV_QPS_ERR && vv_ring_recover(r))
			return VV_ERECOVER;
	}
	return n;
}

// ring_modify moves the ring's QP to state (INIT takes the ring's port and
// qkey, RTS its psn), recording the failed step in the ring.
static int ring_modify(struct vv_ring *r, enum ibv_qp_state state, const char *op)
{
	struct ibv_qp_attr at;
	memset(&at, 0, sizeof(at));
	at.qp_state = state;
	int mask = IBV_QP_STATE;
	if (state == IBV_QPS_INIT) {
		at.pkey_index = 0;
		at.port_num = (uint8_t)r->port;
		at.qkey = r->qkey;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (state == IBV_QPS_RTS) {
		at.sq_psn = r->psn & 0xffffff;
		mask |= IBV_QP_SQ_PSN;
	}
	int rc = ibv_modify_qp(r->qp, &at, mask);
	if (rc) {
		r->recover_err = rc;
		r->recover_op = op;
	}
	return rc;
}

int vv_ring_recover(struct vv_ring *r)
{
	int rc;
	if ((rc = ring_modify(r, IBV_QPS_RESET, "ibv_modify_qp(RESET)")))
		return rc;
	// RESET discarded every posted buffer; the flushes it or the error
	// state produced are on the CQ (the ring's alone): drop them.
	struct ibv_wc wc[VV_BATCH];
	int k;
	while ((k = ibv_poll_cq(r->cq, VV_BATCH, wc)) > 0)
		r->flushed += (uint64_t)k;
	if (k < 0) {
		r->recover_err = EIO;
		r->recover_op = "ibv_poll_cq(recover)";
		return EIO;
	}
	if ((rc = ring_modify(r, IBV_QPS_INIT, "ibv_modify_qp(INIT)")) ||
	    (rc = ring_modify(r, IBV_QPS_RTR, "ibv_modify_qp(RTR)")) ||
	    (rc = ring_modify(r, IBV_QPS_RTS, "ibv_modify_qp(RTS)")))
		return rc;
	// Every buffer goes back except those awaiting their repost at the
	// next poll (the caller may still be reading them).
	for (uint32_t i = 0; i < r->n; i++) {
		int held = 0;
		for (int j = 0; j < r->npending; j++)
			held |= r->pending[j] == i;
		if (held)
			continue;
		if ((rc = vv_post_recv(r->qp, i, r->base + (uint64_t)i * r->size, r->size, r->lkey))) {
			r->recover_err = rc;
			r->recover_op = "ibv_post_recv(recover)";
			return rc;
		}
		r->reposted++;
	}
	r->recoveries++;
	return 0;
}

// ---- benchmark support ----------------------------------------------------

int vv_nop(int x)
{
	return x + 1;
}

int vv_hbw_write_n(struct vv_hbw *w, uint64_t raddr, uint32_t rkey, uint64_t first, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		int rc = vv_hbw_write(w, raddr, rkey, first + i);
		if (rc)
			return rc;
	}
	return 0;
}

// ---- memory windows -------------------------------------------------------

int vv_bind_mw(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
	       uint64_t len, int access, uint64_t wr_id, int timeout_ms, uint32_t *rkey, int *status,
	       const char **op)
{
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = (unsigned int)access;
	int rc = ibv_post_send(qp, &wr, &bad);
	if (rc) {
		*op = "ibv_post_send(BIND_MW)";
		return rc;
	}
	struct timespec t0, t, nap = {0, 20000};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0) {
			*op = "ibv_poll_cq(BIND_MW)";
			return EIO;
		}
		if (n == 1 && wc.wr_id == wr_id) {
			if (wc.status != IBV_WC_SUCCESS) {
				*status = wc.status;
				*op = "BIND_MW completion";
				return VV_EWC;
			}
			*rkey = wr.bind_mw.rkey;
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > timeout_ms) {
			*op = "BIND_MW completion (timed out)";
			return ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
	}
}

