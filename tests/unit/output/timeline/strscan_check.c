/* skip_plain (mindspeed_prof/output/timeline/_strscan.h) against its definition, byte by byte:
 * buffers of every length up to 100 (each in memory of exactly its size, so a read past the end
 * is the harness's crash, not a silent pass), special bytes at every density, every start.
 * Prints "ok <checks> <path>" and exits 0, or the first difference and exits 1. Built and run by
 * test_strscan.py for each instruction set this machine can run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_strscan.h"

static uint64_t state = 0x9E3779B97F4A7C15ULL;

static uint64_t next(void) { /* xorshift64*: the same buffers on every machine */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1DULL;
}

/* JSON's rule, written apart from the table the header builds */
static int needs_no_attention(unsigned char c) {
    return c >= 0x20 && c <= 0x7F && c != '"' && c != '\\';
}

int main(void) {
    static const unsigned char SPECIAL[] = {'"', '\\', 0x00, 0x01, 0x1F, 0x80, 0xC3, 0xE2, 0xFF,
                                            0x20, 0x7F, 0x7E, '/', 'u'};
    long checks = 0;
    str_plain_init();
    for (int round = 0; round < 40000; round++) {
        ptrdiff_t n = (ptrdiff_t)(next() % 101);
        unsigned density = (unsigned)(next() % 5); /* in 16ths: none to a quarter */
        unsigned char *b = malloc(n ? (size_t)n : 1);
        if (!b) return 2;
        for (ptrdiff_t k = 0; k < n; k++)
            b[k] = next() % 16 < density ? SPECIAL[next() % sizeof SPECIAL]
                                         : (unsigned char)(0x20 + next() % 0x60);
        for (ptrdiff_t i = 0; i <= n; i++) {
            ptrdiff_t want = i;
            while (want < n && needs_no_attention(b[want])) want++;
            ptrdiff_t got = skip_plain(b, i, n);
            checks++;
            if (got != want) {
                printf("differs: length %td, start %td: %td, not %td\n", n, i, got, want);
                free(b);
                return 1;
            }
        }
        free(b);
    }
#if defined(STRSCAN_SSE2)
    const char *path = "sse2";
#elif defined(STRSCAN_NEON)
    const char *path = "neon";
#else
    const char *path = "table";
#endif
    printf("ok %ld %s\n", checks, path);
    return 0;
}
