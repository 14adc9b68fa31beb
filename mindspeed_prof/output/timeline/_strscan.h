/* The search inside a JSON string that the rewrite's first pass stands on (_eventpatch.c): the
 * first byte that needs attention (a quote, a backslash, a control byte, a byte past ASCII).
 * A header of its own, with no Python in it. */
#ifndef MINDSPEED_PROF_STRSCAN_H
#define MINDSPEED_PROF_STRSCAN_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SSE2__)
#define STRSCAN_SSE2 1
#include <emmintrin.h>
#endif

static unsigned char STR_PLAIN[256]; /* 1: a byte that needs no attention inside a string */

static void str_plain_init(void) {
    for (int c = 0; c < 256; c++)
        STR_PLAIN[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The first byte at or after i that is not STR_PLAIN (or n). SSE2 (every x86-64) looks at 16
 * bytes a compare; elsewhere, the table. */
static inline ptrdiff_t skip_plain(const unsigned char *b, ptrdiff_t i, ptrdiff_t n) {
#if defined(STRSCAN_SSE2)
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(b + i));
        /* signed: below 0x20 is a control byte or, negative, one of 0x80-0xFF (UTF-8) */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                 _mm_cmpeq_epi8(v, backslash)),
                                    _mm_cmpgt_epi8(space, v));
        int mask = _mm_movemask_epi8(stop);
        if (mask) return i + __builtin_ctz((unsigned)mask);
        i += 16;
    }
#endif
    while (i < n && STR_PLAIN[b[i]]) i++;
    return i;
}

#endif
