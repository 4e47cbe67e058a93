//go:build pmix

/*
 * vgpmix_linked.c — vgpmix.h against libpmix at link time (build tag pmix;
 * link_pmix.go gives pkg-config's flags).
 */
#include "vgpmix.h"
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <pmix.h>

_Static_assert(VG_RANK_WILDCARD == PMIX_RANK_WILDCARD, "PMIX_RANK_WILDCARD");
_Static_assert(VG_MAX_NSLEN == PMIX_MAX_NSLEN, "PMIX_MAX_NSLEN");

int vg_open(const char *path, char *err, size_t len)
{
	(void)path, (void)err, (void)len;
	return 0; /* linked */
}

const char *vg_strerror(int rc) { return PMIx_Error_string(rc); }

static pmix_proc_t vg_me;

int vg_init(char *nspace, uint32_t *rank) {
	pmix_status_t rc = PMIx_Init(&vg_me, NULL, 0);
	if (rc != PMIX_SUCCESS) return rc;
	strncpy(nspace, vg_me.nspace, PMIX_MAX_NSLEN);
	nspace[PMIX_MAX_NSLEN] = 0;
	*rank = vg_me.rank;
	return PMIX_SUCCESS;
}

int vg_finalize(void) { return PMIx_Finalize(NULL, 0); }

// vg_get fetches key of rank (PMIX_RANK_WILDCARD for job-level data).
// optional: look only in the local store; timeout: seconds, 0 = none.
static int vg_get(uint32_t rank, const char *key, int optional, int timeout, pmix_value_t **val) {
	pmix_proc_t p;
	pmix_info_t *info;
	size_t n = 0;
	bool t = true;
	pmix_status_t rc;
	PMIX_PROC_LOAD(&p, vg_me.nspace, rank);
	PMIX_INFO_CREATE(info, 2);
	if (optional) PMIx_Info_load(&info[n++], PMIX_OPTIONAL, &t, PMIX_BOOL);
	if (timeout > 0) PMIx_Info_load(&info[n++], PMIX_TIMEOUT, &timeout, PMIX_INT);
	rc = PMIx_Get(&p, key, n ? info : NULL, n, val);
	PMIX_INFO_FREE(info, 2);
	return rc;
}

int vg_get_u32(uint32_t rank, const char *key, int optional, uint32_t *out) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = vg_get(rank, key, optional, 0, &v);
	if (rc != PMIX_SUCCESS) return rc;
	switch (v->type) {
	case PMIX_UINT32: *out = v->data.uint32; break;
	case PMIX_UINT16: *out = v->data.uint16; break;
	case PMIX_INT:    *out = (uint32_t)v->data.integer; break;
	case PMIX_UINT64: *out = (uint32_t)v->data.uint64; break;
	default: rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

// vg_get_bytes returns a malloc'd copy of a string or byte-object value.
int vg_get_bytes(uint32_t rank, const char *key, int optional, int timeout, char **out, size_t *len) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = vg_get(rank, key, optional, timeout, &v);
	if (rc != PMIX_SUCCESS) return rc;
	const char *src = NULL;
	size_t n = 0;
	if (v->type == PMIX_STRING && v->data.string != NULL) {
		src = v->data.string;
		n = strlen(src);
	} else if (v->type == PMIX_BYTE_OBJECT) {
		src = v->data.bo.bytes;
		n = v->data.bo.size;
	} else {
		PMIX_VALUE_RELEASE(v);
		return PMIX_ERR_TYPE_MISMATCH;
	}
	*out = malloc(n + 1);
	if (*out == NULL) {
		PMIX_VALUE_RELEASE(v);
		return PMIX_ERR_NOMEM;
	}
	if (n > 0) memcpy(*out, src, n);
	(*out)[n] = 0;
	*len = n;
	PMIX_VALUE_RELEASE(v);
	return PMIX_SUCCESS;
}

int vg_put_string(const char *key, const char *s) {
	pmix_value_t v;
	pmix_status_t rc;
	PMIX_VALUE_CONSTRUCT(&v);
	if ((rc = PMIx_Value_load(&v, s, PMIX_STRING)) != PMIX_SUCCESS) return rc;
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	PMIX_VALUE_DESTRUCT(&v);
	return rc;
}

int vg_put_bytes(const char *key, char *b, size_t n) {
	pmix_value_t v;
	pmix_byte_object_t bo;
	pmix_status_t rc;
	bo.bytes = b;
	bo.size = n;
	PMIX_VALUE_CONSTRUCT(&v);
	if ((rc = PMIx_Value_load(&v, &bo, PMIX_BYTE_OBJECT)) != PMIX_SUCCESS) return rc;
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	PMIX_VALUE_DESTRUCT(&v);
	return rc;
}

int vg_commit(void) { return PMIx_Commit(); }

// vg_fence fences the whole job, collecting the committed data.
int vg_fence(int timeout) {
	pmix_proc_t all;
	pmix_info_t *info;
	size_t n = 0;
	bool t = true;
	pmix_status_t rc;
	PMIX_PROC_LOAD(&all, vg_me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CREATE(info, 2);
	PMIx_Info_load(&info[n++], PMIX_COLLECT_DATA, &t, PMIX_BOOL);
	if (timeout > 0) PMIx_Info_load(&info[n++], PMIX_TIMEOUT, &timeout, PMIX_INT);
	rc = PMIx_Fence(&all, 1, info, n);
	PMIX_INFO_FREE(info, 2);
	return rc;
}
