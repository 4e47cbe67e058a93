/*
 * vigil_pmix_bridge.c — a minimal PMIx server host that forwards Vigil's
 * failure events to the PMIx clients of its node with PMIx_Notify_event
 * (daemon/PMIX.md). It stands for the node daemon of a PMIx runtime.
 *
 *   vigil daemon ... | vigil_pmix_bridge -size S -ppn K -node D -- client [args]
 *
 * The bridge starts K clients, ranks D·K … D·K+K−1 of a PMIx namespace
 * ("vigil") of S ranks placed K per node (Vigil's block layout), then reads the JSON lines of `vigil daemon`
 * (cmd/vigil/daemon.go) on its standard input and, for each failure,
 * notifies its local clients (PMIX_RANGE_LOCAL: every node's daemon already
 * got the failure through Vigil's broadcast):
 *
 *   {"ev":"proc","cause":"crashed"}   PMIX_ERR_PROC_ABORTED_BY_SIG
 *   {"ev":"proc","cause":"exited"}    PMIX_ERR_EXIT_NONZERO_TERM
 *   {"ev":"proc","cause":"hung"}      PMIX_ERR_PROC_SENSOR_BOUND_EXCEEDED
 *   {"ev":"proc","cause":"left"}      PMIX_EVENT_PROC_TERMINATED
 *   {"ev":"node"}                     PMIX_EVENT_NODE_DOWN, with the node's
 *                                     K ranks in PMIX_EVENT_AFFECTED_PROCS
 *   {"ev":"proc","cause":"node_down"} nothing (the node event carries them)
 *
 * each with PMIX_EVENT_AFFECTED_PROC(S), PMIX_NODEID and PMIX_EVENT_TIMESTAMP.
 * It prints {"ev":"notified","status":S,"rank":R,"node":D} to stderr per
 * notification and exits when its input ends and its clients have exited.
 * The server's rendezvous files go to a fresh directory under $TMPDIR.
 *
 * Build: gcc vigil_pmix_bridge.c $(pkg-config --cflags --libs pmix)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <pmix.h>
#include <pmix_server.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSPACE "vigil"

extern char **environ;

/* ---- host module: the few upcalls a client of this bridge makes ---- */

static pmix_status_t client_connected(const pmix_proc_t *p, void *o, pmix_op_cbfunc_t cb, void *cbd)
{
	(void)p, (void)o, (void)cb, (void)cbd;
	return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t client_finalized(const pmix_proc_t *p, void *o, pmix_op_cbfunc_t cb, void *cbd)
{
	(void)p, (void)o, (void)cb, (void)cbd;
	return PMIX_OPERATION_SUCCEEDED;
}

/* register_events: without it the server library refuses a client's
 * PMIx_Register_event_handler (PMIX_ERR_SERVER_FAILED_REQUEST). */
static pmix_status_t register_events(pmix_status_t *codes, size_t ncodes, const pmix_info_t info[], size_t ninfo,
				     pmix_op_cbfunc_t cb, void *cbd)
{
	(void)codes, (void)ncodes, (void)info, (void)ninfo, (void)cb, (void)cbd;
	return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t fence_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
			      char *data, size_t ndata, pmix_modex_cbfunc_t cb, void *cbd)
{
	(void)procs, (void)nprocs, (void)info, (void)ninfo;
	if (cb)
		cb(PMIX_SUCCESS, data, ndata, cbd, NULL, NULL); /* one node: everyone's data is here */
	return PMIX_SUCCESS;
}

/* ---- waiting for the library's callbacks ---- */

static void op_done(pmix_status_t st, void *cbdata)
{
	(void)st;
	*(volatile int *)cbdata = 1;
}

static void wait_flag(volatile int *flag)
{
	struct timespec ts = {0, 1000000};
	while (!*flag)
		nanosleep(&ts, NULL);
}

/* ---- input: one JSON line of `vigil daemon` ---- */

/* field returns the text after "key": in line, or NULL. */
static const char *field(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(line, pat);
	return p ? p + strlen(pat) : NULL;
}

static long long num(const char *line, const char *key, long long def)
{
	const char *p = field(line, key);
	return p ? strtoll(p, NULL, 10) : def;
}

static int str_is(const char *line, const char *key, const char *want)
{
	const char *p = field(line, key);
	size_t n = strlen(want);
	return p && *p == '"' && strncmp(p + 1, want, n) == 0 && p[1 + n] == '"';
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void usage(void)
{
	fprintf(stderr, "usage: vigil_pmix_bridge -size S -ppn K -node D -- client [args]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int size = -1, node = -1, ppn = -1, a, rc;
	for (a = 1; a + 1 < argc && strcmp(argv[a], "--") != 0; a += 2) {
		int v = atoi(argv[a + 1]);
		if (strcmp(argv[a], "-size") == 0)
			size = v;
		else if (strcmp(argv[a], "-node") == 0)
			node = v;
		else if (strcmp(argv[a], "-ppn") == 0)
			ppn = v;
		else
			usage();
	}
	if (a >= argc || strcmp(argv[a], "--") != 0 || a + 1 >= argc || ppn < 1 || size < ppn || size % ppn != 0 ||
	    node < 0 || node >= size / ppn || size > 4096)
		usage();
	int n = ppn, first = node * ppn, nodes = size / ppn;
	char **client = &argv[a + 1];

	char tmpdir[4096];
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof tmpdir, "%s/vigil-pmix-XXXXXX", base && *base ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("vigil_pmix_bridge: mkdtemp");
		return 1;
	}
	pmix_server_module_t mod;
	memset(&mod, 0, sizeof mod);
	mod.client_connected = client_connected;
	mod.client_finalized = client_finalized;
	mod.register_events = register_events;
	mod.fence_nb = fence_nb;
	pmix_info_t sinfo[2];
	PMIX_INFO_LOAD(&sinfo[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
	PMIX_INFO_LOAD(&sinfo[1], PMIX_SYSTEM_TMPDIR, tmpdir, PMIX_STRING);
	if ((rc = PMIx_server_init(&mod, sinfo, 2)) != PMIX_SUCCESS) {
		fprintf(stderr, "vigil_pmix_bridge: PMIx_server_init: %s\n", PMIx_Error_string(rc));
		return 1;
	}

	/* The namespace: S ranks, K per node; this host is node D, the others
	 * get placeholder names (the library needs the whole map). */
	char host[256], peers[4096] = "", hosts[65536] = "", ppns[65536] = "", *node_map, *proc_map;
	gethostname(host, sizeof host);
	for (int d = 0; d < nodes; d++) {
		size_t l = strlen(hosts);
		if (d == node)
			snprintf(hosts + l, sizeof hosts - l, "%s%s", d ? "," : "", host);
		else
			snprintf(hosts + l, sizeof hosts - l, "%svigil-node%d", d ? "," : "", d);
		for (int r = d * ppn; r < (d + 1) * ppn; r++) {
			l = strlen(ppns);
			snprintf(ppns + l, sizeof ppns - l, "%s%d", r == d * ppn ? (d ? ";" : "") : ",", r);
		}
	}
	for (int r = first; r < first + n; r++) {
		size_t l = strlen(peers);
		snprintf(peers + l, sizeof peers - l, "%s%d", r == first ? "" : ",", r);
	}
	PMIx_generate_regex(hosts, &node_map);
	PMIx_generate_ppn(ppns, &proc_map);
	uint32_t usize = (uint32_t)size, local = (uint32_t)n;
	pmix_info_t ji[6];
	PMIX_INFO_LOAD(&ji[0], PMIX_UNIV_SIZE, &usize, PMIX_UINT32);
	PMIX_INFO_LOAD(&ji[1], PMIX_JOB_SIZE, &usize, PMIX_UINT32);
	PMIX_INFO_LOAD(&ji[2], PMIX_LOCAL_SIZE, &local, PMIX_UINT32);
	PMIX_INFO_LOAD(&ji[3], PMIX_LOCAL_PEERS, peers, PMIX_STRING);
	PMIX_INFO_LOAD(&ji[4], PMIX_NODE_MAP, node_map, PMIX_REGEX);
	PMIX_INFO_LOAD(&ji[5], PMIX_PROC_MAP, proc_map, PMIX_REGEX);
	pmix_nspace_t ns; /* the library reads a whole pmix_nspace_t */
	PMIX_LOAD_NSPACE(ns, NSPACE);
	volatile int done = 0;
	if ((rc = PMIx_server_register_nspace(ns, n, ji, 6, op_done, (void *)&done)) != PMIX_SUCCESS) {
		fprintf(stderr, "vigil_pmix_bridge: register_nspace: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	wait_flag(&done);
	done = 0;
	if ((rc = PMIx_server_setup_local_support(ns, NULL, 0, op_done, (void *)&done)) != PMIX_SUCCESS) {
		fprintf(stderr, "vigil_pmix_bridge: setup_local_support: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	wait_flag(&done);

	/* The clients. */
	for (int r = first; r < first + n; r++) {
		pmix_proc_t p;
		char **env = NULL;
		size_t k = 0;
		PMIX_LOAD_PROCID(&p, NSPACE, r);
		for (char **e = environ; *e; e++)
			k++;
		env = calloc(k + 1, sizeof *env);
		for (size_t i = 0; i < k; i++)
			env[i] = strdup(environ[i]);
		if ((rc = PMIx_server_setup_fork(&p, &env)) != PMIX_SUCCESS) {
			fprintf(stderr, "vigil_pmix_bridge: setup_fork: %s\n", PMIx_Error_string(rc));
			return 1;
		}
		done = 0;
		if ((rc = PMIx_server_register_client(&p, getuid(), getgid(), NULL, op_done, (void *)&done)) !=
		    PMIX_SUCCESS) {
			fprintf(stderr, "vigil_pmix_bridge: register_client: %s\n", PMIx_Error_string(rc));
			return 1;
		}
		wait_flag(&done);
		pid_t pid = fork();
		if (pid == 0) {
			execve(client[0], client, env);
			fprintf(stderr, "vigil_pmix_bridge: exec %s: %s\n", client[0], strerror(errno));
			_exit(127);
		}
		if (pid < 0) {
			perror("vigil_pmix_bridge: fork");
			return 1;
		}
	}

	/* Forward Vigil's events. */
	char line[4096];
	while (fgets(line, sizeof line, stdin) != NULL) {
		int is_node = str_is(line, "ev", "node"), is_proc = str_is(line, "ev", "proc");
		pmix_status_t code;
		if (is_node)
			code = PMIX_EVENT_NODE_DOWN;
		else if (!is_proc || str_is(line, "cause", "node_down"))
			continue;
		else if (str_is(line, "cause", "crashed"))
			code = PMIX_ERR_PROC_ABORTED_BY_SIG;
		else if (str_is(line, "cause", "exited"))
			code = PMIX_ERR_EXIT_NONZERO_TERM;
		else if (str_is(line, "cause", "hung"))
			code = PMIX_ERR_PROC_SENSOR_BOUND_EXCEEDED;
		else if (str_is(line, "cause", "left"))
			code = PMIX_EVENT_PROC_TERMINATED;
		else
			continue;
		uint32_t nodeid = (uint32_t)num(line, "node", 0);
		time_t when = (time_t)(num(line, "detected_unix", 0) / 1000000000LL);
		int rank = (int)num(line, "rank", 0);
		pmix_proc_t affected[64];
		size_t naff = 0;
		/* (PMIX_LOAD_PROCID evaluates its arguments more than once.) */
		if (is_node)
			for (int r = (int)nodeid * ppn; r < ((int)nodeid + 1) * ppn && naff < 64; r++, naff++)
				PMIX_LOAD_PROCID(&affected[naff], NSPACE, r);
		else {
			PMIX_LOAD_PROCID(&affected[0], NSPACE, rank);
			naff = 1;
		}
		pmix_data_array_t arr = {.type = PMIX_PROC, .size = naff, .array = affected};
		pmix_info_t ei[3];
		if (is_node)
			PMIX_INFO_LOAD(&ei[0], PMIX_EVENT_AFFECTED_PROCS, &arr, PMIX_DATA_ARRAY);
		else
			PMIX_INFO_LOAD(&ei[0], PMIX_EVENT_AFFECTED_PROC, &affected[0], PMIX_PROC);
		PMIX_INFO_LOAD(&ei[1], PMIX_NODEID, &nodeid, PMIX_UINT32);
		PMIX_INFO_LOAD(&ei[2], PMIX_EVENT_TIMESTAMP, &when, PMIX_TIME);
		done = 0;
		rc = PMIx_Notify_event(code, NULL, PMIX_RANGE_LOCAL, ei, 3, op_done, (void *)&done);
		if (rc == PMIX_SUCCESS)
			wait_flag(&done);
		fprintf(stderr, "{\"ev\":\"notified\",\"status\":%d,\"rank\":%d,\"node\":%u,\"rc\":%d}\n", code,
			is_node ? -1 : rank, nodeid, rc);
	}
	while (wait(NULL) > 0 || errno == EINTR)
		;
	PMIx_server_finalize();
	if (nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		fprintf(stderr, "vigil_pmix_bridge: could not remove %s\n", tmpdir);
	return 0;
}
