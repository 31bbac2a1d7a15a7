// ring_copy.c both ways at once: each of two threads copies 4 KiB blocks into its own ring
// (SLOTS slots of 4352 bytes, a lane's slot size) and out of the other's, up to 16 slots
// each way in turn; prints the GB/s moved out of both rings together each second. Beside
// `ring_copy SLOTS`, it shows whether copying in both directions shares one limit
// (docs/performance.md, "perftest through the drop-in").
//
//     cc -O2 -pthread tools/scripts/ring_copy_both.c -o /tmp/ring_copy_both
//     /tmp/ring_copy_both 1024 3
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOT 4352
static long slots;
struct ring {
    char *buf;
    _Atomic long head;
    char pad1[64];
    _Atomic long tail;
    char pad2[64];
};
static struct ring rings[2];
static _Atomic long moved[2];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *run(void *arg) {
    long me = (long)arg;
    struct ring *out = &rings[me], *in = &rings[1 - me];
    char *src = malloc(65536), *dst = malloc(65536);
    memset(src, 1, 65536);
    long h = 0, t = 0;
    for (;;) {
        for (int k = 0; k < 16; k++) {
            if (h - atomic_load_explicit(&out->tail, memory_order_acquire) >= slots)
                break;
            memcpy(out->buf + (h % slots) * SLOT, src + (h % 16) * 4096, 4096);
            atomic_store_explicit(&out->head, ++h, memory_order_release);
        }
        for (int k = 0; k < 16; k++) {
            if (atomic_load_explicit(&in->head, memory_order_acquire) == t)
                break;
            memcpy(dst + (t % 16) * 4096, in->buf + (t % slots) * SLOT, 4096);
            atomic_store_explicit(&in->tail, ++t, memory_order_release);
            atomic_store_explicit(&moved[me], t, memory_order_relaxed);
        }
    }
    return arg;
}

int main(int argc, char **argv) {
    if (argc != 3 || (slots = atol(argv[1])) <= 0) {
        fprintf(stderr, "usage: %s SLOTS SECONDS\n", argv[0]);
        return 2;
    }
    int secs = atoi(argv[2]);
    for (int i = 0; i < 2; i++) {
        rings[i].buf = aligned_alloc(4096, slots * SLOT);
        memset(rings[i].buf, 0, slots * SLOT);
    }
    pthread_t a, b;
    pthread_create(&a, 0, run, (void *)0);
    pthread_create(&b, 0, run, (void *)1);
    long last = 0;
    double t0 = now();
    for (int i = 0; i < secs; i++) {
        sleep(1);
        long m = atomic_load(&moved[0]) + atomic_load(&moved[1]);
        double t1 = now();
        printf("%.1f ", (m - last) * 4096 / (t1 - t0) / 1e9);
        fflush(stdout);
        last = m;
        t0 = t1;
    }
    printf("\n");
    return 0;
}
