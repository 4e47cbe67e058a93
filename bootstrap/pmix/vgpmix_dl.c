//go:build !pmix

/*
 * vgpmix_dl.c — vgpmix.h by loading libpmix with dlopen at run time, so
 * that a build without the pmix tag (and without libpmix-dev) works under
 * mpirun or srun wherever the PMIx library is installed (Debian: libpmix2,
 * which Open MPI depends on). The PMIx types it uses are declared here as
 * the PMIx standard's ABI (libpmix.so.2) lays them out; testdata/abicheck.c
 * checks them against pmix.h where it is installed.
 */
#define _GNU_SOURCE
#include "vgpmix.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VGP_MAX_KEYLEN 511
#define VGP_UNDEF 0
#define VGP_BOOL 1
#define VGP_STRING 3
#define VGP_INT 6
#define VGP_UINT16 13
#define VGP_UINT32 14
#define VGP_UINT64 15
#define VGP_BYTE_OBJECT 27
#define VGP_GLOBAL 3 /* pmix_scope_t */
#define VGP_ERR_TYPE_MISMATCH (-18)
#define VGP_ERR_NOMEM (-32)
#define VGP_ERR_NOT_LOADED (-31) /* PMIX_ERR_INIT */

typedef struct {
	char nspace[VG_MAX_NSLEN + 1];
	uint32_t rank;
} vgp_proc_t;

typedef struct {
	char *bytes;
	size_t size;
} vgp_byte_object_t;

/* pmix_value_t: the type, then a union whose largest members are three
 * words (pmix_envar_t); only these members are read or written here. */
typedef struct {
	uint16_t type;
	union {
		bool flag;
		int integer;
		uint16_t uint16;
		uint32_t uint32;
		uint64_t uint64;
		char *string;
		vgp_byte_object_t bo;
		void *words[3];
	} data;
} vgp_value_t;

typedef struct {
	char key[VGP_MAX_KEYLEN + 1];
	uint32_t flags;
	vgp_value_t value;
} vgp_info_t;

static struct {
	int (*init)(vgp_proc_t *, vgp_info_t *, size_t);
	int (*finalize)(const vgp_info_t *, size_t);
	int (*get)(const vgp_proc_t *, const char *, const vgp_info_t *, size_t, vgp_value_t **);
	int (*put)(uint8_t, const char *, vgp_value_t *);
	int (*commit)(void);
	int (*fence)(const vgp_proc_t *, size_t, const vgp_info_t *, size_t);
	const char *(*error_string)(int);
	void (*value_destruct)(vgp_value_t *);     /* may be absent */
	void (*value_free)(vgp_value_t *, size_t); /* may be absent (before PMIx 5) */
} pm;

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static void *lib; /* once loaded, never unloaded */
static vgp_proc_t vg_me;

static int load(const char *path, char *err, size_t len)
{
	static const char *names[] = {"libpmix.so.2", "libpmix.so"};
	void *h = NULL;
	if (path != NULL && path[0] != 0) {
		h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	} else {
		for (size_t i = 0; h == NULL && i < sizeof names / sizeof names[0]; i++)
			h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
	}
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, len, "%s", e != NULL ? e : "dlopen failed");
		return -1;
	}
	struct {
		void **fn;
		const char *name;
	} need[] = {
		{(void **)&pm.init, "PMIx_Init"},         {(void **)&pm.finalize, "PMIx_Finalize"},
		{(void **)&pm.get, "PMIx_Get"},           {(void **)&pm.put, "PMIx_Put"},
		{(void **)&pm.commit, "PMIx_Commit"},     {(void **)&pm.fence, "PMIx_Fence"},
		{(void **)&pm.error_string, "PMIx_Error_string"},
	};
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
		if ((*need[i].fn = dlsym(h, need[i].name)) == NULL) {
			snprintf(err, len, "%s has no %s: not a PMIx client library", path != NULL && path[0] ? path : "libpmix.so.2", need[i].name);
			dlclose(h);
			memset(&pm, 0, sizeof pm);
			return -1;
		}
	}
	*(void **)&pm.value_free = dlsym(h, "PMIx_Value_free");
	*(void **)&pm.value_destruct = dlsym(h, "PMIx_Value_destruct");
	lib = h;
	return 0;
}

int vg_open(const char *path, char *err, size_t len)
{
	int rc = 0;
	pthread_mutex_lock(&open_mu);
	if (lib == NULL)
		rc = load(path, err, len);
	pthread_mutex_unlock(&open_mu);
	return rc;
}

const char *vg_strerror(int rc)
{
	if (lib == NULL)
		return "libpmix not loaded";
	return pm.error_string(rc);
}

/* release frees a value PMIx_Get returned. */
static void release(vgp_value_t *v)
{
	if (pm.value_destruct != NULL) { /* as PMIX_VALUE_RELEASE */
		pm.value_destruct(v);
		free(v);
	} else if (pm.value_free != NULL) {
		pm.value_free(v, 1);
	} else {
		free(v); /* leaks what the value points to, if anything */
	}
}

int vg_init(char *nspace, uint32_t *rank)
{
	if (lib == NULL)
		return VGP_ERR_NOT_LOADED;
	int rc = pm.init(&vg_me, NULL, 0);
	if (rc != VG_SUCCESS)
		return rc;
	memcpy(nspace, vg_me.nspace, VG_MAX_NSLEN);
	nspace[VG_MAX_NSLEN] = 0;
	*rank = vg_me.rank;
	return VG_SUCCESS;
}

int vg_finalize(void) { return lib == NULL ? VGP_ERR_NOT_LOADED : pm.finalize(NULL, 0); }

static void proc_load(vgp_proc_t *p, uint32_t rank)
{
	memset(p, 0, sizeof *p);
	memcpy(p->nspace, vg_me.nspace, VG_MAX_NSLEN);
	p->rank = rank;
}

/* The info arrays are built in place, as PMIX_INFO_CREATE and
 * PMIx_Info_load would: zeroed, key, type and value; nothing to free. */
static void info_bool(vgp_info_t *i, const char *key)
{
	strncpy(i->key, key, VGP_MAX_KEYLEN);
	i->value.type = VGP_BOOL;
	i->value.data.flag = true;
}

static void info_int(vgp_info_t *i, const char *key, int v)
{
	strncpy(i->key, key, VGP_MAX_KEYLEN);
	i->value.type = VGP_INT;
	i->value.data.integer = v;
}

static int get(uint32_t rank, const char *key, int optional, int timeout, vgp_value_t **val)
{
	vgp_proc_t p;
	vgp_info_t info[2];
	size_t n = 0;
	if (lib == NULL)
		return VGP_ERR_NOT_LOADED;
	memset(info, 0, sizeof info);
	proc_load(&p, rank);
	if (optional)
		info_bool(&info[n++], "pmix.optional"); /* PMIX_OPTIONAL */
	if (timeout > 0)
		info_int(&info[n++], "pmix.timeout", timeout); /* PMIX_TIMEOUT */
	return pm.get(&p, key, n ? info : NULL, n, val);
}

int vg_get_u32(uint32_t rank, const char *key, int optional, uint32_t *out)
{
	vgp_value_t *v = NULL;
	int rc = get(rank, key, optional, 0, &v);
	if (rc != VG_SUCCESS)
		return rc;
	switch (v->type) {
	case VGP_UINT32: *out = v->data.uint32; break;
	case VGP_UINT16: *out = v->data.uint16; break;
	case VGP_INT:    *out = (uint32_t)v->data.integer; break;
	case VGP_UINT64: *out = (uint32_t)v->data.uint64; break;
	default: rc = VGP_ERR_TYPE_MISMATCH;
	}
	release(v);
	return rc;
}

int vg_get_bytes(uint32_t rank, const char *key, int optional, int timeout, char **out, size_t *len)
{
	vgp_value_t *v = NULL;
	int rc = get(rank, key, optional, timeout, &v);
	if (rc != VG_SUCCESS)
		return rc;
	const char *src = NULL;
	size_t n = 0;
	if (v->type == VGP_STRING && v->data.string != NULL) {
		src = v->data.string;
		n = strlen(src);
	} else if (v->type == VGP_BYTE_OBJECT) {
		src = v->data.bo.bytes;
		n = v->data.bo.size;
	} else {
		release(v);
		return VGP_ERR_TYPE_MISMATCH;
	}
	*out = malloc(n + 1);
	if (*out == NULL) {
		release(v);
		return VGP_ERR_NOMEM;
	}
	if (n > 0)
		memcpy(*out, src, n);
	(*out)[n] = 0;
	*len = n;
	release(v);
	return VG_SUCCESS;
}

/* PMIx_Put copies the value: the caller's memory stays the caller's. */
int vg_put_string(const char *key, const char *s)
{
	vgp_value_t v;
	if (lib == NULL)
		return VGP_ERR_NOT_LOADED;
	memset(&v, 0, sizeof v);
	v.type = VGP_STRING;
	v.data.string = (char *)s;
	return pm.put(VGP_GLOBAL, key, &v);
}

int vg_put_bytes(const char *key, char *b, size_t n)
{
	vgp_value_t v;
	if (lib == NULL)
		return VGP_ERR_NOT_LOADED;
	memset(&v, 0, sizeof v);
	v.type = VGP_BYTE_OBJECT;
	v.data.bo.bytes = b;
	v.data.bo.size = n;
	return pm.put(VGP_GLOBAL, key, &v);
}

int vg_commit(void) { return lib == NULL ? VGP_ERR_NOT_LOADED : pm.commit(); }

int vg_fence(int timeout)
{
	vgp_proc_t all;
	vgp_info_t info[2];
	size_t n = 0;
	if (lib == NULL)
		return VGP_ERR_NOT_LOADED;
	memset(info, 0, sizeof info);
	proc_load(&all, VG_RANK_WILDCARD);
	info_bool(&info[n++], "pmix.collect"); /* PMIX_COLLECT_DATA */
	if (timeout > 0)
		info_int(&info[n++], "pmix.timeout", timeout);
	return pm.fence(&all, 1, info, n);
}
