/*
 * imb.c — IMB-MPI1-style loads against real MPI, for Vigil's noise sweep.
 *
 * PingPong, PingPing, Sendrecv, Exchange, Bcast, Allreduce and Barrier with
 * IMB's definitions: message sizes 0 and 1 B .. max in powers of two;
 * repetitions min(reps, 40 MiB / size), cut so that one size lasts about
 * -time seconds (estimated from the warm-up, as IMB's -time does); a barrier
 * before each size; PingPong reports half a round trip; Bcast's root changes
 * every repetition; t_min, t_max and t_avg are reduced over the ranks that
 * take part. Rank 0 prints CSV lines:
 *
 *   imb,<load>,<ranks>,<size>,<reps>,<t_min_us>,<t_max_us>,<t_avg_us>
 *
 * Built with -DWITH_VIGIL and linked with libvigil, the program also runs
 * Vigil's detector inside the application process (a library thread, the
 * "in-process" placement of seed 004): it starts it after MPI_Init with
 * the addresses exchanged by an MPI_Allgather, heartbeat period VIGIL_H,
 * time-out VIGIL_DELTA and start-up grace VIGIL_GRACE (nanoseconds, or with
 * a unit: 10ms; defaults 10 ms, 10 h and libvigil's), and at the end
 * prints the failures it reported (false suspicions: nobody dies here):
 *
 *   vigil,<h_ns>,<delta_ns>,<events summed over ranks>
 *
 * Usage: mpirun -n 2 imb [-b PingPong,Bcast,...] [-max BYTES] [-sizes a,b,c]
 *                        [-reps N] [-time SECONDS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef WITH_VIGIL
#include <vigil.h>
#endif

#define OVERALL (40L << 20)
#define WARMUP 4
#define MAXSIZES 64

static const char *all_loads[] = {"PingPong", "PingPing", "Sendrecv", "Exchange",
				  "Bcast", "Allreduce", "Barrier", NULL};

static int rank, np;

static void die(const char *msg)
{
	if (rank == 0)
		fprintf(stderr, "imb: %s\n", msg);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

/* one repetition of load; i is the repetition number */
static void rep(const char *load, int i, char *sbuf, char *rbuf, int size)
{
	int left = (rank - 1 + np) % np, right = (rank + 1) % np;
	MPI_Request rq[4];
	if (!strcmp(load, "PingPong")) {
		if (rank == 0) {
			MPI_Send(sbuf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(rbuf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(rbuf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(sbuf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
		}
	} else if (!strcmp(load, "PingPing")) {
		int other = 1 - rank;
		MPI_Isend(sbuf, size, MPI_BYTE, other, 1, MPI_COMM_WORLD, &rq[0]);
		MPI_Recv(rbuf, size, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
	} else if (!strcmp(load, "Sendrecv")) {
		MPI_Sendrecv(sbuf, size, MPI_BYTE, right, 1, rbuf, size, MPI_BYTE, left, 1,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else if (!strcmp(load, "Exchange")) {
		MPI_Irecv(rbuf, size, MPI_BYTE, left, 1, MPI_COMM_WORLD, &rq[0]);
		MPI_Irecv(rbuf + size, size, MPI_BYTE, right, 1, MPI_COMM_WORLD, &rq[1]);
		MPI_Isend(sbuf, size, MPI_BYTE, left, 1, MPI_COMM_WORLD, &rq[2]);
		MPI_Isend(sbuf, size, MPI_BYTE, right, 1, MPI_COMM_WORLD, &rq[3]);
		MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
	} else if (!strcmp(load, "Bcast")) {
		MPI_Bcast(sbuf, size, MPI_BYTE, i % np, MPI_COMM_WORLD);
	} else if (!strcmp(load, "Allreduce")) {
		MPI_Allreduce(sbuf, rbuf, size / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	} else {
		MPI_Barrier(MPI_COMM_WORLD);
	}
}

static void run(const char *load, const long *sizes, int nsizes, int maxreps, double tlimit)
{
	int pair = !strcmp(load, "PingPong") || !strcmp(load, "PingPing");
	int active = !pair || rank < 2;
	int sized = strcmp(load, "Barrier") != 0;
	long maxsize = 0;
	for (int s = 0; s < nsizes; s++)
		if (sizes[s] > maxsize)
			maxsize = sizes[s];
	char *sbuf = calloc(1, maxsize + 1), *rbuf = calloc(2, maxsize + 1);
	if (!sbuf || !rbuf)
		die("out of memory");
	for (int s = 0; s < (sized ? nsizes : 1); s++) {
		int size = sized ? (int)sizes[s] : 0;
		long reps = size ? OVERALL / size : maxreps;
		if (reps > maxreps)
			reps = maxreps;
		if (reps < 1)
			reps = 1;
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		if (active)
			for (int i = 0; i < WARMUP; i++)
				rep(load, i, sbuf, rbuf, size);
		double per = (MPI_Wtime() - t0) / WARMUP;
		MPI_Allreduce(MPI_IN_PLACE, &per, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (per > 0 && tlimit / per < reps)
			reps = tlimit / per > 1 ? (long)(tlimit / per) : 1;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		if (active)
			for (long i = 0; i < reps; i++)
				rep(load, (int)i, sbuf, rbuf, size);
		double t = (MPI_Wtime() - t0) / reps * 1e6;
		if (!strcmp(load, "PingPong"))
			t /= 2;
		double tmin = active ? t : 1e300, tmax = active ? t : -1, tsum = active ? t : 0;
		int nact = active;
		MPI_Reduce(rank ? &tmin : MPI_IN_PLACE, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
		MPI_Reduce(rank ? &tmax : MPI_IN_PLACE, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(rank ? &tsum : MPI_IN_PLACE, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(rank ? &nact : MPI_IN_PLACE, &nact, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			printf("imb,%s,%d,%d,%ld,%.3f,%.3f,%.3f\n", load, np, size, reps, tmin, tmax, tsum / nact);
			fflush(stdout);
		}
	}
	free(sbuf);
	free(rbuf);
}

static int parse_list(const char *s, long *out, int max)
{
	int n = 0;
	char *end;
	while (*s && n < max) {
		long v = strtol(s, &end, 10);
		if (end == s || v < 0)
			return -1;
		out[n++] = v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

#ifdef WITH_VIGIL
static MPI_Comm vcomm;

static int mpi_allgather(const void *send, void *recv, size_t len, void *user)
{
	(void)user;
	return MPI_Allgather(send, (int)len, MPI_BYTE, recv, (int)len, MPI_BYTE, vcomm) != MPI_SUCCESS;
}

static int64_t env_ns(const char *name, int64_t def)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	double x = strtod(v, &end);
	if (end == v || x <= 0)
		die("bad duration in VIGIL_H, VIGIL_DELTA or VIGIL_GRACE");
	if (!strcmp(end, "") || !strcmp(end, "ns"))
		return (int64_t)x;
	if (!strcmp(end, "us") || !strcmp(end, "µs"))
		return (int64_t)(x * 1e3);
	if (!strcmp(end, "ms"))
		return (int64_t)(x * 1e6);
	if (!strcmp(end, "s"))
		return (int64_t)(x * 1e9);
	die("bad unit in VIGIL_H, VIGIL_DELTA or VIGIL_GRACE (want ns, us, ms or s)");
	return 0;
}

static int64_t vh, vdelta;

static void vigil_up(void)
{
	MPI_Comm_dup(MPI_COMM_WORLD, &vcomm);
	struct {
		uint64_t job;
		uint8_t key[32];
	} secret;
	if (rank == 0) {
		FILE *f = fopen("/dev/urandom", "rb");
		if (!f || fread(&secret, sizeof secret, 1, f) != 1)
			die("cannot read /dev/urandom");
		fclose(f);
		secret.job |= 1;
	}
	MPI_Bcast(&secret, sizeof secret, MPI_BYTE, 0, vcomm);
	vigil_config cfg;
	vigil_config_init(&cfg);
	cfg.rank = rank;
	cfg.size = np;
	vh = cfg.heartbeat_ns = env_ns("VIGIL_H", 10000000);
	vdelta = cfg.suspect_ns = env_ns("VIGIL_DELTA", 10 * cfg.heartbeat_ns);
	cfg.grace_ns = env_ns("VIGIL_GRACE", 0);
	cfg.job_id = secret.job;
	cfg.key = secret.key;
	cfg.key_len = sizeof secret.key;
	cfg.allgather = mpi_allgather;
	cfg.realtime = getenv("VIGIL_REALTIME") && !strcmp(getenv("VIGIL_REALTIME"), "1");
	int rc = vigil_init(&cfg);
	if (rc == VIGIL_OK)
		rc = vigil_start();
	if (rc != VIGIL_OK) {
		char buf[512];
		vigil_last_error(buf, sizeof buf);
		fprintf(stderr, "imb: rank %d: vigil: %s: %s\n", rank, vigil_strerror(rc), buf);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
}

static void vigil_down(void)
{
	vigil_event ev;
	long events = 0;
	while (vigil_poll(&ev) == 1)
		events++;
	MPI_Reduce(rank ? &events : MPI_IN_PLACE, &events, 1, MPI_LONG, MPI_SUM, 0, vcomm);
	if (rank == 0)
		printf("vigil,%lld,%lld,%ld\n", (long long)vh, (long long)vdelta, events);
	MPI_Barrier(vcomm);
	vigil_leave(1000);
	vigil_finalize();
	MPI_Comm_free(&vcomm);
}
#endif

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	const char *loads = "PingPong,PingPing,Sendrecv,Exchange,Bcast,Allreduce,Barrier";
	long sizes[MAXSIZES];
	int nsizes = 0, maxreps = 1000;
	long maxsize = 4L << 20;
	double tlimit = 10;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			die("flag without a value");
		if (!strcmp(a, "-b"))
			loads = v;
		else if (!strcmp(a, "-max"))
			maxsize = atol(v);
		else if (!strcmp(a, "-sizes")) {
			if ((nsizes = parse_list(v, sizes, MAXSIZES)) <= 0)
				die("-sizes: want a comma-separated list of byte counts");
		} else if (!strcmp(a, "-reps"))
			maxreps = atoi(v);
		else if (!strcmp(a, "-time"))
			tlimit = atof(v);
		else
			die("unknown flag (want -b, -max, -sizes, -reps, -time)");
		i++;
	}
	if (maxreps < 1 || tlimit <= 0 || maxsize < 0 || maxsize > (1L << 30))
		die("bad -reps, -time or -max");
	if (nsizes == 0) {
		sizes[nsizes++] = 0;
		for (long b = 1; b <= maxsize && nsizes < MAXSIZES; b *= 2)
			sizes[nsizes++] = b;
	}
#ifdef WITH_VIGIL
	vigil_up();
#endif
	char *list = strdup(loads), *save = NULL;
	for (char *l = strtok_r(list, ",", &save); l; l = strtok_r(NULL, ",", &save)) {
		int known = 0;
		for (int k = 0; all_loads[k]; k++)
			known |= !strcmp(all_loads[k], l);
		if (!known)
			die("-b: unknown load (want PingPong, PingPing, Sendrecv, Exchange, Bcast, Allreduce, Barrier)");
		if ((!strcmp(l, "PingPong") || !strcmp(l, "PingPing")) && np < 2)
			die("PingPong and PingPing need 2 ranks");
		run(l, sizes, nsizes, maxreps, tlimit);
	}
	free(list);
#ifdef WITH_VIGIL
	vigil_down();
#endif
	MPI_Finalize();
	return 0;
}
