// tsc: prints the TSC rate in cycles per microsecond, measured against
// CLOCK_MONOTONIC over half a second. perftest reports latencies in TSC
// cycles (-C) and converts them with a CPU MHz it estimates itself, which
// fails under qemu TCG ("Correlation coefficient r^2 < 0.9", then "inf"):
// lab/rxe/smoke.sh converts with this rate instead.
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(void)
{
	double t0 = now_us();
	uint64_t c0 = __rdtsc();
	struct timespec half = {0, 500000000};
	nanosleep(&half, NULL);
	double t1 = now_us();
	uint64_t c1 = __rdtsc();
	if (t1 <= t0 || c1 <= c0) {
		fprintf(stderr, "tsc: clock did not advance\n");
		return 1;
	}
	printf("%.3f\n", (double)(c1 - c0) / (t1 - t0));
	return 0;
}
