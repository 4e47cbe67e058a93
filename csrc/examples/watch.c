/*
 * watch.c — the README's C quick start: a rank that prints the ranks of its
 * job that die, until SIGTERM or Ctrl-C. It starts its detector from the
 * launcher's environment (mpirun or srun through PMIx, or vigil run) and
 * reads events with vigil_poll; the application's work would go in the
 * loop. Build and run (from the root of the clone):
 *
 *   make libvigil
 *   gcc -Wall -o watch csrc/examples/watch.c -I out/include -L out/lib -lvigil -Wl,-rpath,$PWD/out/lib
 *   mpirun --mca orte_abort_on_non_zero_status 0 -x VIGIL_H=100ms -x VIGIL_DELTA=1s -n 4 ./watch
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <vigil.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

int main(void)
{
	struct sigaction sa = {.sa_handler = on_term, .sa_flags = SA_ONSTACK}; /* Go threads */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (vigil_init_from_env() != VIGIL_OK || vigil_start() != VIGIL_OK) {
		char msg[256];
		vigil_last_error(msg, sizeof msg);
		fprintf(stderr, "vigil: %s\n", msg);
		return 1;
	}
	printf("rank %d of %d: pid %d ready\n", vigil_rank(), vigil_size(), (int)getpid());
	fflush(stdout);
	while (!stop) {
		vigil_event ev;
		while (vigil_poll(&ev) == 1) {
			printf("rank %d: rank %u %s (found by rank %u)\n", vigil_rank(), ev.rank,
			       ev.kind == VIGIL_EVENT_LEFT ? "left" : "died", ev.detector);
			fflush(stdout);
		}
		usleep(10000); /* the application's work */
	}
	vigil_leave(2000); /* a clean departure: the others see "left" */
	vigil_finalize();
	return 0;
}
