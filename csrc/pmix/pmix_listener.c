/*
 * pmix_listener.c — a PMIx client that prints the failure events its PMIx
 * server notifies, as JSON lines on stdout:
 *
 *   {"ev":"ready","rank":R}
 *   {"ev":"pmix","rank":R,"status":S,"affected":[r,...],"node":D,"ts":T}
 *
 * It registers for the codes vigil_pmix_bridge raises and exits after
 * argv[1] events (or on SIGTERM).
 */
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;
static volatile sig_atomic_t seen, stop;

static void handler(size_t id, pmix_status_t st, const pmix_proc_t *src, pmix_info_t info[], size_t ninfo,
		    pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	char aff[1024] = "";
	long node = -1, ts = 0;
	(void)id, (void)src, (void)results, (void)nresults;
	for (size_t i = 0; i < ninfo; i++) {
		size_t l = strlen(aff);
		if (strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROC) == 0 && info[i].value.type == PMIX_PROC)
			snprintf(aff + l, sizeof aff - l, "%s%u", l ? "," : "", info[i].value.data.proc->rank);
		else if (strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROCS) == 0 && info[i].value.type == PMIX_DATA_ARRAY) {
			pmix_data_array_t *a = info[i].value.data.darray;
			pmix_proc_t *ps = a->array;
			for (size_t k = 0; a->type == PMIX_PROC && k < a->size; k++) {
				l = strlen(aff);
				snprintf(aff + l, sizeof aff - l, "%s%u", l ? "," : "", ps[k].rank);
			}
		} else if (strcmp(info[i].key, PMIX_NODEID) == 0 && info[i].value.type == PMIX_UINT32)
			node = info[i].value.data.uint32;
		else if (strcmp(info[i].key, PMIX_EVENT_TIMESTAMP) == 0 && info[i].value.type == PMIX_TIME)
			ts = (long)info[i].value.data.time;
	}
	printf("{\"ev\":\"pmix\",\"rank\":%u,\"status\":%d,\"affected\":[%s],\"node\":%ld,\"ts\":%ld}\n", me.rank, st,
	       aff, node, ts);
	fflush(stdout);
	seen++;
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	int want = argc > 1 ? atoi(argv[1]) : 1, rc;
	pmix_status_t codes[] = {PMIX_EVENT_NODE_DOWN, PMIX_ERR_PROC_ABORTED_BY_SIG, PMIX_ERR_EXIT_NONZERO_TERM,
				 PMIX_ERR_PROC_SENSOR_BOUND_EXCEEDED, PMIX_EVENT_PROC_TERMINATED};
	signal(SIGTERM, on_term);
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "pmix_listener: PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	rc = PMIx_Register_event_handler(codes, sizeof codes / sizeof codes[0], NULL, 0, handler, NULL, NULL);
	if (rc < 0) {
		fprintf(stderr, "pmix_listener: PMIx_Register_event_handler: %s\n", PMIx_Error_string(rc));
		PMIx_Finalize(NULL, 0);
		return 1;
	}
	printf("{\"ev\":\"ready\",\"rank\":%u}\n", me.rank);
	fflush(stdout);
	while (seen < want && !stop)
		usleep(10000);
	PMIx_Finalize(NULL, 0);
	return 0;
}
