/*
 * pmpi_ring.c — an ordinary MPI program that knows nothing of Vigil, to run
 * with the PMPI library (LD_PRELOAD=libvigil_pmpi.so, or linked with
 * -lvigil_pmpi -lvigil).
 *
 *   pmpi_ring [ITERATIONS [thread [barrier]]]
 *
 * Each iteration every rank posts a receive from every other rank, sends
 * its iteration number to every other rank, waits for all of them
 * (MPI_Waitall), checks what it got and sleeps 10 ms; every 50 iterations
 * the ranks agree on the iteration count with MPI_Allreduce. With "thread"
 * it starts with MPI_Init_thread(MPI_THREAD_FUNNELED). When a rank dies,
 * every survivor ends up waiting for it in MPI_Waitall. Rank 0 prints
 * {"ev":"done","iterations":N} after the final MPI_Barrier. With "barrier"
 * an iteration is one MPI_Barrier and the 10 ms sleep: when a rank dies,
 * every survivor ends up waiting for it in the collective.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rank, size, provided, iters = argc > 1 ? atoi(argv[1]) : 500;
	int *got;
	MPI_Request *reqs;

	if (argc > 2 && strcmp(argv[2], "thread") == 0)
		MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	else
		MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	got = calloc((size_t)size, sizeof *got);
	reqs = calloc(2 * (size_t)size, sizeof *reqs);

	int barrier = argc > 3 && strcmp(argv[3], "barrier") == 0;
	for (int it = 0; it < iters && barrier; it++) {
		MPI_Barrier(MPI_COMM_WORLD);
		usleep(10000);
	}
	for (int it = 0; it < iters && !barrier; it++) {
		int n = 0, tag = it % 1000;
		for (int j = 0; j < size; j++)
			if (j != rank)
				MPI_Irecv(&got[j], 1, MPI_INT, j, tag, MPI_COMM_WORLD, &reqs[n++]);
		for (int j = 0; j < size; j++)
			if (j != rank)
				MPI_Isend(&it, 1, MPI_INT, j, tag, MPI_COMM_WORLD, &reqs[n++]);
		MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
		for (int j = 0; j < size; j++)
			if (j != rank && got[j] != it) {
				fprintf(stderr, "pmpi_ring: rank %d got %d from %d in iteration %d\n", rank, got[j], j, it);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
		if (it % 50 == 49) {
			int sum = 0;
			MPI_Allreduce(&it, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
			if (sum != it * size) {
				fprintf(stderr, "pmpi_ring: rank %d: allreduce %d, want %d\n", rank, sum, it * size);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
		}
		usleep(10000);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		printf("{\"ev\":\"done\",\"rank\":0,\"iterations\":%d}\n", iters);
		fflush(stdout);
	}
	free(got);
	free(reqs);
	MPI_Finalize();
	return 0;
}
