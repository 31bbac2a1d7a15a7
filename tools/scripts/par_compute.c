// Whether the machine's two CPUs compute in parallel: eight independent multiply-add chains
// on one thread for 100 ms, then on two threads at once for 100 ms; prints two threads'
// iterations over one thread's, N times (2.0: two full cores). docs/performance.md uses it
// beside ring_copy.c to tell a slow copy between the cores from a shared core.
//
//     cc -O2 -pthread tools/scripts/par_compute.c -o /tmp/par_compute
//     /tmp/par_compute 5
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *spin(void *arg) {
    double end = *(double *)arg;
    double x[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    long n = 0;
    while (now() < end) {
        for (int i = 0; i < 10000; i++)
            for (int k = 0; k < 8; k++)
                x[k] = x[k] * (1.0000001 + k * 1e-7) + 1e-7;
        n++;
    }
    sink = x[0] + x[7];
    long *r = malloc(sizeof *r);
    *r = n;
    return r;
}

static long run(int threads, double secs) {
    pthread_t t[2];
    double end = now() + secs;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], 0, spin, &end);
    long total = 0;
    for (int i = 0; i < threads; i++) {
        long *r;
        pthread_join(t[i], (void **)&r);
        total += *r;
        free(r);
    }
    return total;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s TIMES\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < atoi(argv[1]); i++) {
        long one = run(1, 0.1), two = run(2, 0.1);
        printf("%.2f ", (double)two / one);
        fflush(stdout);
    }
    printf("\n");
    return 0;
}
