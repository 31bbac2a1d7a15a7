// The machine's latency tail, without softrnic: two threads pass one shared word back and
// forth, each doing WORK_NS of busy work per turn; prints the median, p99 and p99.9 of half
// each round trip (as perftest reports one way) and p99 over the median.
// docs/performance.md sets `ib_write_lat`'s tail beside it.
//
//     cc -O2 -pthread tools/scripts/shared_pingpong.c -o /tmp/shared_pingpong
//     /tmp/shared_pingpong 20000 1200     # 20000 iterations, 1.2 us of work a side
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long turn;
static long iters, work_ns;

static long ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void work(void) {
    long end = ns() + work_ns;
    while (ns() < end)
        ;
}

static void *peer(void *arg) {
    for (long i = 0; i < iters; i++) {
        while (atomic_load(&turn) != 2 * i + 1)
            ;
        work();
        atomic_store(&turn, 2 * i + 2);
    }
    return arg;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3 || (iters = atol(argv[1])) < 1000) {
        fprintf(stderr, "usage: %s ITERATIONS(>=1000) WORK_NS\n", argv[0]);
        return 2;
    }
    work_ns = atol(argv[2]);
    double *one_way = malloc(iters * sizeof(double));
    pthread_t t;
    pthread_create(&t, 0, peer, 0);
    for (long i = 0; i < iters; i++) {
        long t0 = ns();
        work();
        atomic_store(&turn, 2 * i + 1);
        while (atomic_load(&turn) != 2 * i + 2)
            ;
        one_way[i] = (ns() - t0) / 2000.0;
    }
    qsort(one_way, iters, sizeof(double), by_value);
    double p50 = one_way[iters / 2], p99 = one_way[iters * 99 / 100];
    printf("median %.2f us, p99 %.2f us, p99.9 %.2f us, p99/median %.2fx\n", p50, p99,
           one_way[iters * 999 / 1000], p99 / p50);
    return 0;
}
