/* The search inside a JSON string that the rewrite's first pass stands on (_eventpatch.c): the
 * first byte that needs attention (a quote, a backslash, a control byte, a byte past ASCII).
 * A header of its own, with no Python in it, so that its test
 * (tests/unit/output/timeline/strscan_check.c) builds the same source for each CPU it can run:
 * x86-64's SSE2, aarch64's NEON (the hosts of many Ascend servers), the table elsewhere
 * (STRSCAN_NO_SIMD picks the table anywhere: the test checks it too). */
#ifndef MINDSPEED_PROF_STRSCAN_H
#define MINDSPEED_PROF_STRSCAN_H

#include <stddef.h>
#include <stdint.h>

#if !defined(STRSCAN_NO_SIMD) && defined(__SSE2__)
#define STRSCAN_SSE2 1
#include <emmintrin.h>
#elif !defined(STRSCAN_NO_SIMD) && defined(__aarch64__) && defined(__ARM_NEON)
#define STRSCAN_NEON 1
#include <arm_neon.h>
#endif

static unsigned char STR_PLAIN[256]; /* 1: a byte that needs no attention inside a string */

static void str_plain_init(void) {
    for (int c = 0; c < 256; c++)
        STR_PLAIN[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The first byte at or after i that is not STR_PLAIN (or n); 16 bytes a compare with SSE2 or
 * NEON (the table byte by byte cost the rewrite 5 % more on x86-64). */
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
#elif defined(STRSCAN_NEON)
    const uint8x16_t quote = vdupq_n_u8('"'), backslash = vdupq_n_u8('\\');
    const int8x16_t space = vdupq_n_s8(0x20);
    while (i + 16 <= n) {
        uint8x16_t v = vld1q_u8(b + i);
        /* signed, as above */
        uint8x16_t stop = vorrq_u8(vorrq_u8(vceqq_u8(v, quote), vceqq_u8(v, backslash)),
                                   vcltq_s8(vreinterpretq_s8_u8(v), space));
        /* NEON has no movemask: narrowing each 16-bit lane shifted right by 4 leaves 4 bits per
         * byte, in order, so the first byte to stop at is the lowest set bit / 4 */
        uint64_t mask = vget_lane_u64(
            vreinterpret_u64_u8(vshrn_n_u16(vreinterpretq_u16_u8(stop), 4)), 0);
        if (mask) return i + (__builtin_ctzll(mask) >> 2);
        i += 16;
    }
#endif
    while (i < n && STR_PLAIN[b[i]]) i++;
    return i;
}

#endif
