// The machine's copy speed between its two cores, without softrnic: one thread copies 4 KiB
// blocks from a 64 KiB source into a ring of SLOTS slots (4352 bytes each, a lane's slot
// size), another copies them out into a 64 KiB destination; GB/s moved each second (or each SAMPLE_MS).
// docs/performance.md uses it to tell the machine's slow phases from softrnic's.
//
//     cc -O2 -pthread tools/scripts/ring_copy.c -o /tmp/ring_copy
//     /tmp/ring_copy 256 2        # 256 slots, 2 seconds
//     /tmp/ring_copy 256 40 100   # a figure every 100 ms for 40 s
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT 4352
static long slots;
static char *ring;
static _Atomic long head, tail;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *writer(void *arg) {
    char *src = malloc(65536);
    memset(src, 1, 65536);
    for (long h = 0;; h++) {
        while (h - atomic_load_explicit(&tail, memory_order_acquire) >= slots)
            ;
        memcpy(ring + (h % slots) * SLOT, src + (h % 16) * 4096, 4096);
        atomic_store_explicit(&head, h + 1, memory_order_release);
    }
    return arg;
}

static void *reader(void *arg) {
    char *dst = malloc(65536);
    for (long t = 0;; t++) {
        while (atomic_load_explicit(&head, memory_order_acquire) == t)
            ;
        memcpy(dst + (t % 16) * 4096, ring + (t % slots) * SLOT, 4096);
        atomic_store_explicit(&tail, t + 1, memory_order_release);
    }
    return arg;
}

int main(int argc, char **argv) {
    if ((argc != 3 && argc != 4) || (slots = atol(argv[1])) <= 0) {
        fprintf(stderr, "usage: %s SLOTS SECONDS [SAMPLE_MS]\n", argv[0]);
        return 2;
    }
    int secs = atoi(argv[2]);
    long ms = argc == 4 ? atol(argv[3]) : 1000;
    if (ms <= 0) {
        fprintf(stderr, "SAMPLE_MS must be positive\n");
        return 2;
    }
    ring = aligned_alloc(4096, slots * SLOT);
    memset(ring, 0, slots * SLOT);
    pthread_t a, b;
    pthread_create(&a, 0, writer, 0);
    pthread_create(&b, 0, reader, 0);
    long last = 0;
    double t0 = now();
    for (long i = 0; i < secs * 1000 / ms; i++) {
        struct timespec s = {ms / 1000, ms % 1000 * 1000000};
        nanosleep(&s, 0);
        long t = atomic_load(&tail);
        double t1 = now();
        printf("%.1f ", (t - last) * 4096 / (t1 - t0) / 1e9);
        fflush(stdout);
        last = t;
        t0 = t1;
    }
    printf("\n");
    return 0;
}
