/*
 * vgpmix.h — the few PMIx client calls the pmix package makes, as plain C
 * functions: vgpmix_linked.c implements them against libpmix at link time
 * (build tag pmix, Debian's libpmix-dev), vgpmix_dl.c by loading libpmix
 * with dlopen at run time (no build tag; Debian's libpmix2 at run time).
 * Every function returns a PMIx status (0: success).
 */
#ifndef VGPMIX_H
#define VGPMIX_H

#include <stddef.h>
#include <stdint.h>

#define VG_SUCCESS 0
#define VG_MAX_NSLEN 255
#define VG_RANK_WILDCARD 4294967294u /* PMIX_RANK_WILDCARD */

/* vg_open makes libpmix's functions callable; path is the library to load
 * (NULL: the default names). On failure it returns -1 and writes why to
 * err (NUL-terminated, at most len bytes). */
int vg_open(const char *path, char *err, size_t len);

int vg_init(char *nspace, uint32_t *rank);
int vg_finalize(void);
/* vg_get_u32 and vg_get_bytes fetch key of rank (VG_RANK_WILDCARD for
 * job-level data); optional: look only in the local store; timeout:
 * seconds, 0 = none. vg_get_bytes returns a malloc'd, NUL-terminated copy
 * of a string or byte-object value. */
int vg_get_u32(uint32_t rank, const char *key, int optional, uint32_t *out);
int vg_get_bytes(uint32_t rank, const char *key, int optional, int timeout, char **out, size_t *len);
int vg_put_string(const char *key, const char *s);
int vg_put_bytes(const char *key, char *b, size_t n);
int vg_commit(void);
/* vg_fence fences the whole job, collecting the committed data. */
int vg_fence(int timeout);
const char *vg_strerror(int rc);

#endif
