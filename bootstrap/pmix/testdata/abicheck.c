/*
 * abicheck.c — checks vgpmix_dl.c's declarations of the PMIx types and
 * constants against pmix.h (TestDlopenABI compiles it where libpmix-dev is
 * installed): the dlopen build reads and writes these layouts.
 */
#include "../vgpmix_dl.c"
#include <pmix.h>
#include <stddef.h>

#define SAME(a, b) _Static_assert((a) == (b), #a " != " #b)

SAME(sizeof(vgp_proc_t), sizeof(pmix_proc_t));
SAME(offsetof(vgp_proc_t, rank), offsetof(pmix_proc_t, rank));
SAME(sizeof(vgp_value_t), sizeof(pmix_value_t));
SAME(offsetof(vgp_value_t, data), offsetof(pmix_value_t, data));
SAME(sizeof(vgp_byte_object_t), sizeof(pmix_byte_object_t));
SAME(sizeof(vgp_info_t), sizeof(pmix_info_t));
SAME(offsetof(vgp_info_t, flags), offsetof(pmix_info_t, flags));
SAME(offsetof(vgp_info_t, value), offsetof(pmix_info_t, value));
SAME(VG_MAX_NSLEN, PMIX_MAX_NSLEN);
SAME(VGP_MAX_KEYLEN, PMIX_MAX_KEYLEN);
SAME(VG_RANK_WILDCARD, PMIX_RANK_WILDCARD);
SAME(VGP_UNDEF, PMIX_UNDEF);
SAME(VGP_BOOL, PMIX_BOOL);
SAME(VGP_STRING, PMIX_STRING);
SAME(VGP_INT, PMIX_INT);
SAME(VGP_UINT16, PMIX_UINT16);
SAME(VGP_UINT32, PMIX_UINT32);
SAME(VGP_UINT64, PMIX_UINT64);
SAME(VGP_BYTE_OBJECT, PMIX_BYTE_OBJECT);
SAME(VGP_GLOBAL, PMIX_GLOBAL);
SAME(VGP_ERR_TYPE_MISMATCH, PMIX_ERR_TYPE_MISMATCH);
SAME(VGP_ERR_NOMEM, PMIX_ERR_NOMEM);
SAME(VGP_ERR_NOT_LOADED, PMIX_ERR_INIT);

/* The attribute names vgpmix_dl.c spells out. */
static const char *const names[][2] = {
	{"pmix.optional", PMIX_OPTIONAL},
	{"pmix.timeout", PMIX_TIMEOUT},
	{"pmix.collect", PMIX_COLLECT_DATA},
};

int main(void)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(names[i][0], names[i][1]) != 0)
			return 1;
	return 0;
}
