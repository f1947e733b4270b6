/*
 * Memory latency of this machine by working-set size: a chase through one
 * random cycle over every 64-byte line of a buffer, each load's address
 * the value of the one before, so no two loads overlap. Explains why the
 * packet model's cost per hop grows with the fabric (docs/PERFORMANCE.md).
 *
 *   cc -O2 tools/memlat.c -o /tmp/memlat && /tmp/memlat 1 4 16 64 256
 *
 * Each argument is a buffer size in MiB; MEMLAT_HUGE=1 asks the kernel for
 * 2 MiB pages (transparent huge pages, where enabled as `madvise`), which
 * takes the TLB's misses out of the figure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define LINE_WORDS 8 /* size_t words per 64-byte line */
#define STEPS 20000000

/* The chase's end, stored so that the compiler keeps the chase. */
static volatile size_t chased;

static uint64_t next_random(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static double chase(size_t mib, int huge) {
    size_t lines = mib * 1024 * 1024 / 64, bytes = lines * 64, page = 2u << 20;
    size_t *buffer = aligned_alloc(page, (bytes + page - 1) / page * page);
    size_t *order = malloc(lines * sizeof *order);
    if (!buffer || !order) {
        fprintf(stderr, "memlat: %zu MiB: out of memory\n", mib);
        exit(2);
    }
    if (huge)
        madvise(buffer, bytes, MADV_HUGEPAGE);
    uint64_t state = 88172645463325252u;
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_random(&state) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        buffer[order[i] * LINE_WORDS] = order[(i + 1) % lines] * LINE_WORDS;
    struct timespec start, end;
    size_t at = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < STEPS; i++)
        at = buffer[at];
    clock_gettime(CLOCK_MONOTONIC, &end);
    free(order);
    free(buffer);
    double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    chased = at;
    return ns / STEPS;
}

int main(int argc, char **argv) {
    const char *huge = getenv("MEMLAT_HUGE");
    for (int i = 1; i < argc; i++) {
        long mib = strtol(argv[i], NULL, 10);
        if (mib <= 0) {
            fprintf(stderr, "memlat: %s: a size in MiB, at least 1\n", argv[i]);
            return 2;
        }
        printf("%ld MiB: %.1f ns per load\n", mib, chase((size_t)mib, huge && *huge == '1'));
    }
    return 0;
}
