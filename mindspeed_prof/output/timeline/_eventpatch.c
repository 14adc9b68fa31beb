/* The timeline's event rewrite at byte level (write.py's _RankWriter._rewrite, in C).
 *
 * rewrite(array, params, tids, ids, state, fallback) takes the bytes of one JSON array of
 * events (a piece of a trace, read/jsonstream.py) and returns the kept events, rewritten and
 * separated by commas, with the counts: (bytes, kept, dropped_short, dropped_outside,
 * unreadable). Each event's top-level keys are tokenised; the values of the fields a viewer
 * reads are copied byte for byte, pid/tid/ts/id written anew, every other key left out.
 *
 * Two passes. The first checks that the piece is strict JSON that msgspec decodes to the same
 * values (an array of objects, valid UTF-8, no lone surrogate escape, no number out of a
 * double's range) and records where each event's fields lie; anything else returns None
 * before any state changed, and write.py decodes that piece as it always did. The second
 * decides and writes. An event it does not decide itself (an "M" event, a value with an
 * escape where the value is read, a float pid, a 19-digit integer...) goes to `fallback`
 * (write.py decodes it and runs _rewrite on it), in its place, so the thread and id maps are
 * filled in the same order as the Python path fills them. `ids` is an IdMap (below): the
 * flow and async id map in C, which the Python path reads and fills through it too.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h> /* madvise: the id table on huge pages */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_strscan.h" /* skip_plain: the search inside a string (SSE2, NEON, a table) */

/* The Struct's fields, in its order (write.py _types: the order msgspec writes them). */
enum {
    F_PH, F_NAME, F_CAT, F_PID, F_TID, F_TS, F_DUR, F_TTS, F_TDUR, F_ID, F_ID2, F_BP, F_S,
    F_SCOPE, F_CNAME, F_BIND_ID, F_FLOW_IN, F_FLOW_OUT, F_ARGS, N_FIELDS
};
static const char *FIELD_NAMES[N_FIELDS] = {
    "ph", "name", "cat", "pid", "tid", "ts", "dur", "tts", "tdur", "id", "id2", "bp", "s",
    "scope", "cname", "bind_id", "flow_in", "flow_out", "args"};
static char KEY_TEXT[N_FIELDS][16]; /* ,"name": */
static size_t KEY_LENS[N_FIELDS];

#define MAX_DEPTH 64
#define TIME_BOUND 1e18
#define INT_BOUND 1000000000000000000LL /* 1e18 */
#define EXACT_INT (1LL << 53)
#define STEP_PREFIX "ProfilerStep#"
#define STEP_PREFIX_LEN 13

typedef struct {
    uint32_t start, end;       /* the object's bytes, braces included */
    uint32_t off[N_FIELDS];    /* each field's value */
    uint32_t len[N_FIELDS];
    uint32_t present;          /* bit per field */
    uint32_t escaped;          /* bit per field: a string value with a backslash */
    int odd;                   /* a duplicate field or a key with an escape */
} Rec;

typedef struct {
    const unsigned char *b;
    Py_ssize_t n, i;
    int bad;
} Scan;

/* ---------- pass 1: strict JSON ---------- */

static inline void skip_ws(Scan *s) {
    while (s->i < s->n) {
        unsigned char c = s->b[s->i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            s->i++;
        else
            break;
    }
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string at s->i (its quote); sets *escaped. 0, or -1 where msgspec might not read it as
 * json does (invalid JSON, bad UTF-8, a surrogate escape). */
static int scan_string(Scan *s, int *escaped) {
    const unsigned char *b = s->b;
    Py_ssize_t i = s->i + 1, n = s->n;
    for (;;) {
        i = skip_plain(b, i, n);
        if (i >= n) return -1;
        unsigned char c = b[i];
        if (c == '"') { s->i = i + 1; return 0; }
        if (c == '\\') {
            *escaped = 1;
            if (i + 1 >= n) return -1;
            unsigned char e = b[i + 1];
            if (e == 'u') {
                if (i + 5 >= n) return -1;
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int h = hexval(b[i + k]);
                    if (h < 0) return -1;
                    v = v * 16 + h;
                }
                i += 6;
                if (v >= 0xDC00 && v <= 0xDFFF) return -1; /* a lone low surrogate */
                if (v >= 0xD800 && v <= 0xDBFF) { /* a high one: its low one must follow */
                    if (i + 5 >= n || b[i] != '\\' || b[i + 1] != 'u') return -1;
                    int w = 0;
                    for (int k = 2; k < 6; k++) {
                        int h = hexval(b[i + k]);
                        if (h < 0) return -1;
                        w = w * 16 + h;
                    }
                    if (w < 0xDC00 || w > 0xDFFF) return -1;
                    i += 6;
                }
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't') {
                i += 2;
            } else {
                return -1;
            }
            continue;
        }
        if (c < 0x20) return -1;
        /* UTF-8, strictly (no overlong forms, no surrogates, nothing past U+10FFFF) */
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (b[i + 1] & 0xC0) != 0x80) return -1;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return -1;
            unsigned char c1 = b[i + 1], c2 = b[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return -1;
            if (c == 0xE0 && c1 < 0xA0) return -1;
            if (c == 0xED && c1 >= 0xA0) return -1;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return -1;
            unsigned char c1 = b[i + 1], c2 = b[i + 2], c3 = b[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return -1;
            if (c == 0xF0 && c1 < 0x90) return -1;
            if (c == 0xF4 && c1 >= 0x90) return -1;
            i += 4;
        } else {
            return -1;
        }
    }
}

/* scan_string, its common case inline: no escape, no byte past ASCII. */
static inline int scan_str(Scan *s, int *escaped) {
    Py_ssize_t q = skip_plain(s->b, s->i + 1, s->n);
    if (q < s->n && s->b[q] == '"') {
        s->i = q + 1;
        return 0;
    }
    return scan_string(s, escaped);
}

static int scan_number(Scan *s) {
    const unsigned char *b = s->b;
    Py_ssize_t i = s->i, n = s->n, start = s->i;
    int exp = 0;
    if (i < n && b[i] == '-') i++;
    if (i >= n) return -1;
    if (b[i] == '0') {
        i++;
    } else if (b[i] >= '1' && b[i] <= '9') {
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
    } else {
        return -1;
    }
    if (i < n && b[i] == '.') {
        i++;
        if (i >= n || b[i] < '0' || b[i] > '9') return -1;
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
    }
    if (i < n && (b[i] == 'e' || b[i] == 'E')) {
        exp = 1;
        i++;
        if (i < n && (b[i] == '+' || b[i] == '-')) i++;
        if (i >= n || b[i] < '0' || b[i] > '9') return -1;
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
    }
    if (i - start > 300) return -1; /* past what every decoder reads alike */
    if (exp) { /* out of a double's range: msgspec refuses it */
        char tmp[320];
        memcpy(tmp, b + start, i - start);
        tmp[i - start] = 0;
        double v = strtod(tmp, NULL);
        if (isinf(v)) return -1;
    }
    s->i = i;
    return 0;
}

static int scan_value(Scan *s, int depth, int *escaped);

static int scan_literal(Scan *s, const char *word, size_t len) {
    if (s->i + (Py_ssize_t)len > s->n || memcmp(s->b + s->i, word, len) != 0) return -1;
    s->i += len;
    return 0;
}

static int scan_container(Scan *s, int depth) {
    unsigned char open = s->b[s->i];
    unsigned char close = open == '{' ? '}' : ']';
    int esc = 0;
    if (depth > MAX_DEPTH) return -1;
    s->i++;
    skip_ws(s);
    if (s->i < s->n && s->b[s->i] == close) { s->i++; return 0; }
    for (;;) {
        skip_ws(s);
        if (open == '{') {
            if (s->i >= s->n || s->b[s->i] != '"') return -1;
            if (scan_str(s, &esc) < 0) return -1;
            skip_ws(s);
            if (s->i >= s->n || s->b[s->i] != ':') return -1;
            s->i++;
            skip_ws(s);
        }
        if (scan_value(s, depth + 1, &esc) < 0) return -1;
        skip_ws(s);
        if (s->i >= s->n) return -1;
        if (s->b[s->i] == ',') { s->i++; continue; }
        if (s->b[s->i] == close) { s->i++; return 0; }
        return -1;
    }
}

static int scan_value(Scan *s, int depth, int *escaped) {
    if (s->i >= s->n) return -1;
    switch (s->b[s->i]) {
    case '"': return scan_str(s, escaped);
    case '{': case '[': return scan_container(s, depth);
    case 't': return scan_literal(s, "true", 4);
    case 'f': return scan_literal(s, "false", 5);
    case 'n': return scan_literal(s, "null", 4);
    default: return scan_number(s);
    }
}

static inline int field_of(const unsigned char *k, size_t len) {
    switch (len) {
    case 1: return k[0] == 's' ? F_S : -1;
    case 2:
        if (k[0] == 'p' && k[1] == 'h') return F_PH;
        if (k[0] == 't' && k[1] == 's') return F_TS;
        if (k[0] == 'i' && k[1] == 'd') return F_ID;
        if (k[0] == 'b' && k[1] == 'p') return F_BP;
        return -1;
    case 3:
        if (k[0] == 'c' && k[1] == 'a' && k[2] == 't') return F_CAT;
        if (k[0] == 'p' && k[1] == 'i' && k[2] == 'd') return F_PID;
        if (k[0] == 't' && k[1] == 'i' && k[2] == 'd') return F_TID;
        if (k[0] == 'd' && k[1] == 'u' && k[2] == 'r') return F_DUR;
        if (k[0] == 't' && k[1] == 't' && k[2] == 's') return F_TTS;
        if (k[0] == 'i' && k[1] == 'd' && k[2] == '2') return F_ID2;
        return -1;
    case 4:
        if (memcmp(k, "name", 4) == 0) return F_NAME;
        if (memcmp(k, "args", 4) == 0) return F_ARGS;
        if (memcmp(k, "tdur", 4) == 0) return F_TDUR;
        return -1;
    case 5:
        if (memcmp(k, "scope", 5) == 0) return F_SCOPE;
        if (memcmp(k, "cname", 5) == 0) return F_CNAME;
        return -1;
    case 7:
        if (memcmp(k, "bind_id", 7) == 0) return F_BIND_ID;
        if (memcmp(k, "flow_in", 7) == 0) return F_FLOW_IN;
        return -1;
    case 8:
        return memcmp(k, "flow_out", 8) == 0 ? F_FLOW_OUT : -1;
    default:
        return -1;
    }
}

/* One event object at s->i, recorded in *r. */
static int scan_event(Scan *s, Rec *r) {
    r->present = r->escaped = 0; /* off/len are read only where present */
    r->odd = 0;
    r->start = (uint32_t)s->i;
    s->i++;
    skip_ws(s);
    if (s->i < s->n && s->b[s->i] == '}') { s->i++; r->end = (uint32_t)s->i; return 0; }
    for (;;) {
        int kesc = 0, vesc = 0;
        skip_ws(s);
        if (s->i >= s->n || s->b[s->i] != '"') return -1;
        Py_ssize_t kstart = s->i + 1;
        if (scan_str(s, &kesc) < 0) return -1;
        Py_ssize_t kend = s->i - 1;
        skip_ws(s);
        if (s->i >= s->n || s->b[s->i] != ':') return -1;
        s->i++;
        skip_ws(s);
        Py_ssize_t vstart = s->i;
        if (vstart >= s->n) return -1;
        unsigned char first = s->b[vstart];
        if (first == '"') {
            if (scan_str(s, &vesc) < 0) return -1;
        } else if (first == '-' || (first >= '0' && first <= '9')) {
            if (scan_number(s) < 0) return -1;
        } else if (scan_value(s, 2, &vesc) < 0) {
            return -1;
        }
        if (kesc) {
            r->odd = 1; /* the key is read only by msgspec */
        } else {
            int f = field_of(s->b + kstart, (size_t)(kend - kstart));
            if (f >= 0) {
                if (r->present & (1u << f)) r->odd = 1; /* duplicates: msgspec keeps the last */
                r->present |= 1u << f;
                r->off[f] = (uint32_t)vstart;
                r->len[f] = (uint32_t)(s->i - vstart);
                if (vesc) r->escaped |= 1u << f;
            }
        }
        skip_ws(s);
        if (s->i >= s->n) return -1;
        if (s->b[s->i] == ',') { s->i++; continue; }
        if (s->b[s->i] == '}') { s->i++; r->end = (uint32_t)s->i; return 0; }
        return -1;
    }
}

/* ---------- pass 2: decide and write ---------- */

typedef struct {
    char *p;
    size_t n, cap;
} Out;

static int out_grow(Out *o, size_t more) {
    if (o->n + more <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->n + more) cap *= 2;
    char *p = realloc(o->p, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    o->p = p;
    o->cap = cap;
    return 0;
}

/* Most fields are a few bytes: copied by two overlapping loads and stores of a fixed size
 * (never past either end) instead of a call to memcpy, which cost 5 % of the rank's write. */
static inline void put(Out *o, const void *data, size_t len) {
    char *d = o->p + o->n;
    const char *c = data;
    if (len >= 8 && len <= 16) {
        uint64_t a, z;
        memcpy(&a, c, 8);
        memcpy(&z, c + len - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + len - 8, &z, 8);
    } else if (len > 16 && len <= 32) {
        uint64_t a[2], z[2];
        memcpy(a, c, 16);
        memcpy(z, c + len - 16, 16);
        memcpy(d, a, 16);
        memcpy(d + len - 16, z, 16);
    } else if (len >= 4 && len < 8) {
        uint32_t a, z;
        memcpy(&a, c, 4);
        memcpy(&z, c + len - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + len - 4, &z, 4);
    } else if (len < 4) {
        for (size_t k = 0; k < len; k++) d[k] = c[k];
    } else {
        memcpy(d, c, len);
    }
    o->n += len;
}

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Two digits a division: the renumbered ids have 11 (the rank's pid in the high bits). */
static inline void put_int(Out *o, long long v) {
    char tmp[24];
    int k = 24;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    if (v < 0) o->p[o->n++] = '-';
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        k -= 2;
        memcpy(tmp + k, DIGIT_PAIRS + 2 * r, 2);
    }
    if (u >= 10) {
        k -= 2;
        memcpy(tmp + k, DIGIT_PAIRS + 2 * u, 2);
    } else {
        tmp[--k] = (char)('0' + u);
    }
    memcpy(o->p + o->n, tmp + k, (size_t)(24 - k));
    o->n += (size_t)(24 - k);
}

/* round(x, 3) as Python rounds (the exact binary value to the nearest thousandth, ties to
 * even), written as text that reads back as that same double. */
static void put_round3(Out *o, double x) {
    double a = fabs(x);
    if (a < 1e12) {
        /* x * 1000 exactly = p + err (fma); p < 2**50, so floor(p), p - n and the tie test
         * below are exact */
        double p = a * 1000.0;
        double err = fma(a, 1000.0, -p);
        double n = floor(p);
        double d = (p - n) - 0.5;
        int up;
        if (d > -err) up = 1;
        else if (d < -err) up = 0;
        else up = fmod(n, 2.0) != 0.0;
        long long N = (long long)n + up;
        if (signbit(x)) o->p[o->n++] = '-';
        put_int(o, N / 1000);
        int frac = (int)(N % 1000);
        o->p[o->n++] = '.';
        o->p[o->n++] = (char)('0' + frac / 100);
        /* no trailing zeros (the same number, fewer bytes to compress): 12.5, 12.0 */
        if (frac % 100) {
            o->p[o->n++] = (char)('0' + frac / 10 % 10);
            if (frac % 10) o->p[o->n++] = (char)('0' + frac % 10);
        }
    } else {
        /* glibc prints the exact binary value rounded half to even, as Python's dtoa does */
        o->n += (size_t)snprintf(o->p + o->n, 64, "%.3f", x);
    }
}

/* A double as text that reads back as it (the shortest of 15, 16, 17 digits that does). */
static void put_double(Out *o, double v) {
    char tmp[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(tmp, sizeof tmp, "%.*g", digits, v);
        if (strtod(tmp, NULL) == v || digits == 17) break;
    }
    size_t len = strlen(tmp);
    put(o, tmp, len);
    if (!strpbrk(tmp, ".eEn")) put(o, ".0", 2); /* a float stays a float */
}

/* A JSON integer of at most 18 digits (no fraction, no exponent) -> 1 and *v; else 0. */
static inline int small_int(const unsigned char *t, size_t len, long long *v) {
    size_t i = 0;
    int neg = 0;
    if (len && t[0] == '-') { neg = 1; i = 1; }
    if (i >= len || len - i > 18) return 0;
    long long acc = 0;
    for (; i < len; i++) {
        if (t[i] < '0' || t[i] > '9') return 0;
        acc = acc * 10 + (t[i] - '0');
    }
    *v = neg ? -acc : acc;
    return 1;
}

static double parse_digits_double(const unsigned char *t, size_t len);

/* A JSON number's text (a float or an integer) -> its double; 0 when it is neither. */
static inline int number_text(const unsigned char *t, size_t len, double *v) {
    if (!len || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))) return 0;
    int exponent = 0;
    for (size_t i = 0; i < len; i++)
        if (t[i] == 'e' || t[i] == 'E') exponent = 1;
    if (!exponent) { *v = parse_digits_double(t, len); return 1; }
    char tmp[320];
    if (len >= sizeof tmp) return 0;
    memcpy(tmp, t, len);
    tmp[len] = 0;
    *v = strtod(tmp, NULL);
    return 1;
}

static inline int is_float_text(const unsigned char *t, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (t[i] == '.' || t[i] == 'e' || t[i] == 'E') return 1;
    return 0;
}

/* A JSON number (ts or dur) as the double Python reads it -> 1 and *v; 0 for an integer past
 * a double's exact reach, which the Python path decides. */
static inline int number_value(const unsigned char *t, size_t len, double *v) {
    if (is_float_text(t, len)) return number_text(t, len, v);
    long long i;
    if (!small_int(t, len, &i) || i > EXACT_INT || i < -EXACT_INT) return 0;
    *v = (double)i;
    return 1;
}

/* A non-negative JSON number (pass 1 checked its form) without exponent and with at most 18
 * digits before its dot: below 1e18 whatever it is. */
static inline int small_plain(const unsigned char *t, size_t len) {
    size_t i = 0;
    while (i < len && t[i] >= '0' && t[i] <= '9') i++;
    if (!i || i > 18) return 0;
    if (i < len && t[i] != '.') return 0;
    for (i++; i < len; i++)
        if (t[i] < '0' || t[i] > '9') return 0;
    return 1;
}

/* Plain decimal digits with at most one dot between digits: "1704161511420289.011". */
static inline int plain_decimal(const unsigned char *t, size_t len, Py_ssize_t *dot) {
    *dot = -1;
    if (!len) return 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] >= '0' && t[i] <= '9') continue;
        if (t[i] == '.' && *dot < 0 && i > 0 && i + 1 < len) { *dot = (Py_ssize_t)i; continue; }
        return 0;
    }
    return 1;
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                  1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
                                  1e21, 1e22};

/* Digits with an optional dot (and sign) -> the correctly rounded double: an integer below
 * 2**53 over an exact power of ten is one correctly rounded division (Clinger's fast path);
 * anything else goes to strtod. */
static double parse_digits_double(const unsigned char *t, size_t len) {
    size_t i = 0;
    int neg = 0, frac = -1;
    unsigned long long m = 0;
    if (len && t[0] == '-') { neg = 1; i = 1; }
    if (len - i <= 17) {
        size_t k;
        for (k = i; k < len; k++) {
            unsigned char c = t[k];
            if (c >= '0' && c <= '9') {
                m = m * 10 + (c - '0');
                if (frac >= 0) frac++;
            } else if (c == '.' && frac < 0) {
                frac = 0;
            } else {
                break;
            }
        }
        if (k == len && m < (1ULL << 53)) {
            double v = (double)m;
            if (frac > 0) v /= POW10[frac];
            return neg ? -v : v;
        }
    }
    char tmp[320];
    if (len >= sizeof tmp) len = sizeof tmp - 1;
    memcpy(tmp, t, len);
    tmp[len] = 0;
    return strtod(tmp, NULL);
}

typedef struct {
    long long pid;        /* the rank's process id */
    double shift;         /* numeric ts: + shift */
    double exact_shift;   /* text ts (origin already taken off): + exact_shift */
    long long origin;
    int has_span;
    double lo, hi, lo_text, hi_text;
    int has_steps;
    long long step_lo, step_hi;
    double min_us;
} Params;

/* A pid, tid, cat or id value as the Python object msgspec gives; NULL and no error: not a
 * kind decided here. (A new reference.) */
static PyObject *simple_object(const unsigned char *t, size_t len, int present, int escaped) {
    if (!present || (len == 4 && memcmp(t, "null", 4) == 0)) Py_RETURN_NONE;
    if (t[0] == '"') {
        if (escaped) return NULL;
        return PyUnicode_DecodeUTF8((const char *)t + 1, (Py_ssize_t)len - 2, "strict");
    }
    if (len == 4 && memcmp(t, "true", 4) == 0) Py_RETURN_TRUE;
    if (len == 5 && memcmp(t, "false", 5) == 0) Py_RETURN_FALSE;
    long long v;
    if (small_int(t, len, &v)) return PyLong_FromLongLong(v);
    if (is_float_text(t, len) || t[0] == '[' || t[0] == '{' || len > 300) return NULL;
    char tmp[320]; /* a longer integer (torch_npu's flow ids have 19 digits) */
    memcpy(tmp, t, len);
    tmp[len] = 0;
    return PyLong_FromString(tmp, NULL, 10);
}

#define TID_CACHE 64
typedef struct {
    char key[64];
    size_t len;
    int used;
    long long tid;
} TidSlot;

static PyObject *fallback_event(PyObject *fallback, PyObject *state, long long *next_id,
                                const unsigned char *b, Rec *r, Out *o, int *first,
                                Py_ssize_t *kept) {
    PyObject *nid = PyLong_FromLongLong(*next_id);
    if (!nid || PyObject_SetAttrString(state, "next_id", nid) < 0) { Py_XDECREF(nid); return NULL; }
    Py_DECREF(nid);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)b + r->start, r->end - r->start);
    if (!raw) return NULL;
    PyObject *res = PyObject_CallOneArg(fallback, raw);
    Py_DECREF(raw);
    if (!res) return NULL;
    nid = PyObject_GetAttrString(state, "next_id");
    if (!nid) { Py_DECREF(res); return NULL; }
    *next_id = PyLong_AsLongLong(nid);
    Py_DECREF(nid);
    if (*next_id == -1 && PyErr_Occurred()) { Py_DECREF(res); return NULL; }
    if (res != Py_None) {
        char *data;
        Py_ssize_t size;
        if (PyBytes_AsStringAndSize(res, &data, &size) < 0) { Py_DECREF(res); return NULL; }
        if (out_grow(o, (size_t)size + 2) < 0) { Py_DECREF(res); return NULL; }
        if (!*first) o->p[o->n++] = ',';
        *first = 0;
        put(o, data, (size_t)size);
        (*kept)++;
    }
    return res;
}

/* ---------- the flow and async id map ----------
 *
 * write.py numbers each (cat, id) of a capture in the order it first appears. The C path met
 * one per flow event (two per flow: 236 K per 95 MB torch_npu rank), and built a tuple, an
 * int and a dict entry for each: 0.04-0.07 s of the rank's ~0.37 s, and the tuples made the
 * garbage collector walk them. IdMap holds the map in C, keyed by bytes: the cat's UTF-8, its
 * length in front, a tag ('i' an integer id in its decimal text, 's' a string id's UTF-8).
 * Both paths use it (the Python path through get() and item assignment, with (cat, id) tuples
 * made into the same bytes), so an id first met in either is one number in both. */

/* The entries lie in the order their keys were first met, a cache line each, the key in it
 * where it fits; the table that finds them holds 8 bytes a slot (the hash's high half and the
 * entry's number), 2 MB for a 95 MB torch_npu rank's 118 K ids: it stays in the cache, and the
 * entries a rank looks up again are met in about the order they were made (a host's launch,
 * then its kernel on the device), which the CPU's prefetcher follows. With the entries in the
 * table itself (16 MB, hashed), each lookup was a line from memory: 13 % of the rewrite. */
#define INLINE_KEY 44
typedef struct {
    uint64_t hash;
    long long value;
    uint32_t len;
    char key[INLINE_KEY]; /* longer: its offset in the arena (a size_t) */
} IdSlot;

static inline const char *slot_key(const char *arena, const IdSlot *s) {
    if (s->len <= INLINE_KEY) return s->key;
    size_t off;
    memcpy(&off, s->key, sizeof off);
    return arena + off;
}

typedef struct {
    PyObject_HEAD
    uint64_t *table;  /* hash >> 32 in the high half, entry number + 1 in the low; 0: empty */
    size_t cap;       /* a power of two, or 0 */
    IdSlot *entries;  /* in the order met */
    size_t used, room;
    Out arena;        /* the keys longer than a slot holds */
} IdMap;

static PyTypeObject IdMapType;

/* Python's own hash of bytes (SipHash, keyed per process): a trace's ids must not be able to
 * pile onto one slot (linear probing would go quadratic, a reader hung by its input). */
static inline uint64_t key_hash(const char *k, size_t n) {
#if PY_VERSION_HEX >= 0x030E0000
    return (uint64_t)Py_HashBuffer(k, (Py_ssize_t)n);
#else
    return (uint64_t)_Py_HashBytes(k, (Py_ssize_t)n);
#endif
}

/* The table slot of key k: the one that holds it, or the empty one where it would go. */
static inline uint64_t *idmap_slot(IdMap *m, const char *k, size_t n, uint64_t h) {
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    uint64_t tag = h >> 32;
    for (;;) {
        uint64_t *t = &m->table[i];
        if (!*t) return t;
        if ((*t >> 32) == tag) {
            const IdSlot *e = &m->entries[(uint32_t)*t - 1];
            if (e->hash == h && e->len == n && memcmp(slot_key(m->arena.p, e), k, n) == 0)
                return t;
        }
        i = (i + 1) & mask;
    }
}

static int idmap_grow(IdMap *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    size_t bytes = cap * sizeof(uint64_t);
    size_t align = bytes >= (2u << 20) ? (2u << 20) : 64;
    uint64_t *table = aligned_alloc(align, bytes);
    if (!table) { PyErr_NoMemory(); return -1; }
#ifdef MADV_HUGEPAGE
    if (align > 64) madvise(table, bytes, MADV_HUGEPAGE);
#endif
    memset(table, 0, bytes);
    for (size_t e = 0; e < m->used; e++) {
        uint64_t h = m->entries[e].hash;
        size_t j = (size_t)h & (cap - 1);
        while (table[j]) j = (j + 1) & (cap - 1);
        table[j] = (h >> 32) << 32 | (uint64_t)(e + 1);
    }
    free(m->table);
    m->table = table;
    m->cap = cap;
    return 0;
}

/* The value of key k, or -1 with *found 0. */
static inline long long idmap_get(IdMap *m, const char *k, size_t n, uint64_t h, int *found) {
    *found = 0;
    if (!m->cap) return -1;
    uint64_t *t = idmap_slot(m, k, n, h);
    if (!*t) return -1;
    *found = 1;
    return m->entries[(uint32_t)*t - 1].value;
}

static int idmap_set(IdMap *m, const char *k, size_t n, uint64_t h, long long value) {
    if (m->used >= 0xFFFFFFFEu) { PyErr_NoMemory(); return -1; } /* numbered in 32 bits */
    if ((m->used + 1) * 4 > m->cap * 3 && idmap_grow(m) < 0) return -1;
    uint64_t *t = idmap_slot(m, k, n, h);
    if (*t) { m->entries[(uint32_t)*t - 1].value = value; return 0; }
    if (m->used == m->room) {
        size_t room = m->room ? m->room * 2 : 1024;
        IdSlot *grown = realloc(m->entries, room * sizeof(IdSlot));
        if (!grown) { PyErr_NoMemory(); return -1; }
        m->entries = grown;
        m->room = room;
    }
    IdSlot *s = &m->entries[m->used];
    if (n <= INLINE_KEY) {
        memcpy(s->key, k, n);
    } else {
        if (out_grow(&m->arena, n) < 0) return -1;
        memcpy(s->key, &m->arena.n, sizeof m->arena.n);
        put(&m->arena, k, n);
    }
    s->hash = h;
    s->len = (uint32_t)n;
    s->value = value;
    m->used++;
    *t = (h >> 32) << 32 | (uint64_t)m->used;
    return 0;
}

/* The key's bytes into buf (cap bytes): cat length (4 bytes), cat, tag, id; its length, or 0
 * where it does not fit. */
static inline size_t make_key(char *buf, size_t cap, const char *cat, size_t cat_len, char tag,
                              const char *id, size_t id_len) {
    size_t n = 4 + cat_len + 1 + id_len;
    if (n > cap || cat_len > 0xFFFFFFFFu || n > 0xFFFFFFFFu) return 0;
    uint32_t cl = (uint32_t)cat_len;
    memcpy(buf, &cl, 4);
    memcpy(buf + 4, cat, cat_len);
    buf[4 + cat_len] = tag;
    memcpy(buf + 5 + cat_len, id, id_len);
    return n;
}

/* A Python (cat, id) key as bytes (a new bytes object); NULL with no error set where it is
 * no key the C path could meet (the map then holds no such key: get() answers None). */
static PyObject *python_key(PyObject *key) {
    if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 2) return NULL;
    PyObject *cat = PyTuple_GET_ITEM(key, 0), *id = PyTuple_GET_ITEM(key, 1);
    if (!PyUnicode_CheckExact(cat)) return NULL;
    PyObject *cat_bytes = PyUnicode_AsEncodedString(cat, "utf-8", "surrogatepass");
    if (!cat_bytes) return NULL;
    PyObject *id_bytes = NULL;
    char tag;
    if (PyLong_CheckExact(id)) {
        PyObject *text = PyObject_Str(id);
        if (text) {
            id_bytes = PyUnicode_AsUTF8String(text);
            Py_DECREF(text);
        }
        tag = 'i';
    } else if (PyUnicode_CheckExact(id)) {
        id_bytes = PyUnicode_AsEncodedString(id, "utf-8", "surrogatepass");
        tag = 's';
    } else {
        Py_DECREF(cat_bytes);
        return NULL;
    }
    if (!id_bytes) { Py_DECREF(cat_bytes); return NULL; }
    Py_ssize_t cl = PyBytes_GET_SIZE(cat_bytes), il = PyBytes_GET_SIZE(id_bytes);
    PyObject *out = PyBytes_FromStringAndSize(NULL, 4 + cl + 1 + il);
    if (out)
        make_key(PyBytes_AS_STRING(out), (size_t)(4 + cl + 1 + il), PyBytes_AS_STRING(cat_bytes),
                 (size_t)cl, tag, PyBytes_AS_STRING(id_bytes), (size_t)il);
    Py_DECREF(cat_bytes);
    Py_DECREF(id_bytes);
    return out;
}

static PyObject *idmap_lookup(IdMap *m, PyObject *key, int strict) {
    PyObject *k = python_key(key);
    if (!k) {
        if (PyErr_Occurred()) return NULL;
        if (strict) { PyErr_SetObject(PyExc_KeyError, key); return NULL; }
        Py_RETURN_NONE;
    }
    int found;
    const char *kb = PyBytes_AS_STRING(k);
    size_t kn = (size_t)PyBytes_GET_SIZE(k);
    long long v = idmap_get(m, kb, kn, key_hash(kb, kn), &found);
    Py_DECREF(k);
    if (!found) {
        if (strict) { PyErr_SetObject(PyExc_KeyError, key); return NULL; }
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong(v);
}

static PyObject *idmap_getitem(PyObject *self, PyObject *key) {
    return idmap_lookup((IdMap *)self, key, 1);
}

static PyObject *idmap_get_method(PyObject *self, PyObject *key) {
    return idmap_lookup((IdMap *)self, key, 0);
}

static int idmap_setitem(PyObject *self, PyObject *key, PyObject *value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "IdMap entries are never deleted (clear() empties it)");
        return -1;
    }
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    PyObject *k = python_key(key);
    if (!k) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "an IdMap key is (str, int or str)");
        return -1;
    }
    const char *kb = PyBytes_AS_STRING(k);
    size_t kn = (size_t)PyBytes_GET_SIZE(k);
    int rc = idmap_set((IdMap *)self, kb, kn, key_hash(kb, kn), v);
    Py_DECREF(k);
    return rc;
}

static Py_ssize_t idmap_len(PyObject *self) { return (Py_ssize_t)((IdMap *)self)->used; }

static PyObject *idmap_clear(PyObject *self, PyObject *unused) {
    IdMap *m = (IdMap *)self;
    free(m->table);
    free(m->entries);
    free(m->arena.p);
    m->table = NULL;
    m->entries = NULL;
    m->arena.p = NULL;
    m->cap = m->used = m->room = m->arena.n = m->arena.cap = 0;
    Py_RETURN_NONE;
}

static void idmap_dealloc(PyObject *self) {
    idmap_clear(self, NULL);
    Py_TYPE(self)->tp_free(self);
}

static PyMappingMethods IDMAP_MAPPING = {idmap_len, idmap_getitem, idmap_setitem};
static PyMethodDef IDMAP_METHODS[] = {
    {"get", idmap_get_method, METH_O, "get((cat, id)) -> its number, or None"},
    {"clear", idmap_clear, METH_NOARGS, "forget every id (a capture's ids are its own)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject IdMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mindspeed_prof.output.timeline._eventpatch.IdMap",
    .tp_basicsize = sizeof(IdMap),
    .tp_dealloc = idmap_dealloc,
    .tp_as_mapping = &IDMAP_MAPPING,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The (cat, id) -> number map of a rank's flow and async ids (write.py).",
    .tp_methods = IDMAP_METHODS,
    .tp_new = PyType_GenericNew,
};

static inline int is_null(const unsigned char *b, const Rec *r, int f) {
    return r->len[f] == 4 && memcmp(b + r->off[f], "null", 4) == 0;
}

#define ID_KEY_BYTES 512

/* The id map's key of event r (write.py's (cat, id) as IdMap's bytes) into buf: its length;
 * 0 where the event has no id to renumber, -1 where the Python path decides (an escape, a
 * cat of another kind, a long key). ph_char: the event's one-letter ph. */
static Py_ssize_t id_key_of(const unsigned char *b, const Rec *r, int ph_char, char *buf) {
    switch (ph_char) {
    case 's': case 't': case 'f': case 'b': case 'e': case 'n': case 'S': case 'T':
    case 'F': case 'p': break;
    default: return 0;
    }
    if (!(r->present & (1u << F_ID)) || is_null(b, r, F_ID)) return 0;
    const unsigned char *it = b + r->off[F_ID];
    size_t il = r->len[F_ID];
    if (!(it[0] == '"' || !(is_float_text(it, il) || it[0] == 't' || it[0] == 'f' ||
                            it[0] == '[' || it[0] == '{')))
        return 0; /* a float, a bool, a list: not renumbered */
    if (it[0] == '"' && (r->escaped & (1u << F_ID))) return -1;
    const unsigned char *ct = b + r->off[F_CAT];
    size_t cl = (r->present & (1u << F_CAT)) ? r->len[F_CAT] : 0;
    const char *cat = "None";
    size_t cat_n = 4;
    if (cl && !(cl == 4 && memcmp(ct, "null", 4) == 0)) {
        if (ct[0] != '"' || (r->escaped & (1u << F_CAT))) return -1; /* str() of another kind */
        cat = (const char *)ct + 1;
        cat_n = cl - 2;
    }
    const char *idt = (const char *)it;
    size_t idn = il;
    char tag = 'i';
    if (it[0] == '"') { idt++; idn -= 2; tag = 's'; }
    else if (il == 2 && it[0] == '-' && it[1] == '0') { idt = "0"; idn = 1; } /* int("-0") */
    size_t n = make_key(buf, ID_KEY_BYTES, cat, cat_n, tag, idt, idn);
    return n ? (Py_ssize_t)n : -1;
}

/* The events' records and the output, kept from one call to the next (a rank's pieces are
 * alike in size): a fresh megabyte per piece cost its pages' faults each time, 5-7% of the
 * rewrite. Past KEEP_BYTES they are given back. Held by one call at a time (the GIL is not
 * released; `busy` guards a call made from inside the fallback). */
#define KEEP_BYTES (64u << 20)
static Rec *kept_recs;
static size_t kept_caprec;
static Out kept_out;
static int busy;

/* Where the CPU has AVX, the upper halves of its vector registers cleared on entry: ISA-L's
 * deflate (isal, compressing the previous piece) returns with them in use, and every SSE
 * instruction after that (this file's doubles, the string scan) then waits on them: the
 * rewrite ran at 0.37 s per 95 MB rank after isal, 0.23 s after zlib or with this. */
#if defined(__x86_64__) && defined(__GNUC__)
static int has_avx;

static inline void zero_upper(void) {
    if (has_avx) __asm__ volatile("vzeroupper");
}
#else
static inline void zero_upper(void) {}
#endif

static PyObject *rewrite(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *params_obj, *tids, *ids, *state, *fallback;
    zero_upper();
    if (!PyArg_ParseTuple(args, "y*OO!O!OO", &view, &params_obj, &PyDict_Type, &tids,
                          &IdMapType, &ids, &state, &fallback))
        return NULL;
    IdMap *idmap = (IdMap *)ids;
    Params P;
    if (!PyArg_ParseTuple(params_obj, "LddLpddddpLLd", &P.pid, &P.shift, &P.exact_shift,
                          &P.origin, &P.has_span, &P.lo, &P.hi, &P.lo_text, &P.hi_text,
                          &P.has_steps, &P.step_lo, &P.step_hi, &P.min_us)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *b = view.buf;
    Scan s = {b, view.len, 0, 0};
    Rec *recs = NULL;
    size_t nrec = 0, caprec = 0;
    Out o = {NULL, 0, 0};
    int owner = !busy;
    if (owner) {
        busy = 1;
        recs = kept_recs;
        caprec = kept_caprec;
        o = kept_out;
        o.n = 0;
    }
    PyObject *result = NULL;
    TidSlot cache[TID_CACHE];
    char last_key[64];
    size_t last_len = 0;
    long long last_tid = 0;
    memset(cache, 0, sizeof cache);

    if (view.len > 0xFFFFFFF0) goto decline;
    /* pass 1 */
    skip_ws(&s);
    if (s.i >= s.n || b[s.i] != '[') goto decline;
    s.i++;
    skip_ws(&s);
    if (s.i < s.n && b[s.i] == ']') {
        s.i++;
    } else {
        for (;;) {
            skip_ws(&s);
            if (s.i >= s.n || b[s.i] != '{') goto decline; /* not an object: msgspec refuses */
            if (nrec == caprec) {
                caprec = caprec ? caprec * 2 : 1024;
                Rec *grown = realloc(recs, caprec * sizeof(Rec));
                if (!grown) { PyErr_NoMemory(); goto done; }
                recs = grown;
            }
            if (scan_event(&s, &recs[nrec]) < 0) goto decline;
            nrec++;
            skip_ws(&s);
            if (s.i >= s.n) goto decline;
            if (b[s.i] == ',') { s.i++; continue; }
            if (b[s.i] == ']') { s.i++; break; }
            goto decline;
        }
    }
    skip_ws(&s);
    if (s.i != s.n) goto decline;

    /* pass 2 */
    PyObject *nid_obj = PyObject_GetAttrString(state, "next_id");
    if (!nid_obj) goto done;
    long long next_id = PyLong_AsLongLong(nid_obj);
    Py_DECREF(nid_obj);
    if (next_id == -1 && PyErr_Occurred()) goto done;
    Py_ssize_t kept = 0, short_ = 0, outside = 0, unreadable = 0;
    int first = 1;
    if (out_grow(&o, view.len + 1024) < 0) goto done;

    for (size_t e = 0; e < nrec; e++) {
        Rec *r = &recs[e];
        const unsigned char *ph = b + r->off[F_PH];
        size_t phlen = (r->present & (1u << F_PH)) ? r->len[F_PH] : 0;
        int ph_char = 0; /* the one-letter ph, 0 where absent, null or not a string */
        if (r->odd) goto python;
        if (phlen) {
            if (ph[0] == '"') {
                if (r->escaped & (1u << F_PH)) goto python;
                if (phlen == 3) ph_char = ph[1];
                else ph_char = -1; /* a string of another length */
            } else if (ph[0] == '[' || ph[0] == '{') {
                goto python; /* `in WITH_IDS` of a list: whatever Python does */
            }
        }
        if (ph_char == 'M') goto python;

        /* ts */
        double out_ts;
        if (!(r->present & (1u << F_TS))) { unreadable++; continue; }
        {
            const unsigned char *t = b + r->off[F_TS];
            size_t len = r->len[F_TS];
            if (t[0] == '"') {
                if (r->escaped & (1u << F_TS)) goto python;
                Py_ssize_t dot;
                if (!plain_decimal(t + 1, len - 2, &dot)) goto python;
                const unsigned char *d = t + 1;
                size_t dlen = len - 2;
                Py_ssize_t cut = (dot >= 0 ? dot : (Py_ssize_t)dlen) - 9;
                double ts = 0;
                if (cut > 0) {
                    if (cut > 9) goto python; /* a head past int64's reach */
                    long long head = 0;
                    for (Py_ssize_t k = 0; k < cut; k++) head = head * 10 + (d[k] - '0');
                    long long head_us = head * 1000000000LL - P.origin;
                    ts = (double)head_us + parse_digits_double(d + cut, dlen - (size_t)cut);
                } else {
                    if (dlen > 300) goto python;
                    ts = parse_digits_double(d, dlen) - (double)P.origin;
                }
                if (!(ts >= -TIME_BOUND && ts <= TIME_BOUND)) { unreadable++; continue; }
                if (P.has_span && !(P.lo_text <= ts && ts < P.hi_text)) { outside++; continue; }
                out_ts = ts + P.exact_shift;
            } else if (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
                double ts = 0;
                if (!number_value(t, len, &ts)) goto python;
                if (!(ts >= -TIME_BOUND && ts <= TIME_BOUND)) { unreadable++; continue; }
                if (P.has_span && !(P.lo <= ts && ts < P.hi)) { outside++; continue; }
                out_ts = ts + P.shift;
            } else if (t[0] == '[' || t[0] == '{') {
                goto python;
            } else {
                unreadable++; /* null, true, false */
                continue;
            }
        }
        if (!isfinite(out_ts)) goto python;
        /* dur, name (complete events) */
        int dur_text = 0;  /* dur given as text: written as the float read from it */
        double dur_value = 0;
        if (ph_char == 'X') {
            if (!(r->present & (1u << F_DUR))) { unreadable++; continue; }
            const unsigned char *t = b + r->off[F_DUR];
            size_t len = r->len[F_DUR];
            double dur = 0;
            if (t[0] == '"') {
                Py_ssize_t dot;
                if ((r->escaped & (1u << F_DUR)) || !plain_decimal(t + 1, len - 2, &dot))
                    goto python;
                if (len - 2 > 300) goto python;
                dur = parse_digits_double(t + 1, len - 2);
                if (!(dur >= -TIME_BOUND && dur <= TIME_BOUND)) { unreadable++; continue; }
                dur_text = 1;
                dur_value = dur;
            } else if (P.min_us == 0.0 && small_plain(t, len)) {
                dur = 0.0; /* not read: >= 0, within bounds, and no minimum to compare with */
            } else if (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
                if (!number_value(t, len, &dur)) goto python;
                if (!(dur >= -TIME_BOUND && dur <= TIME_BOUND)) { unreadable++; continue; }
            } else if (t[0] == '[' || t[0] == '{') {
                goto python;
            } else {
                unreadable++; /* null, true, false */
                continue;
            }
            const unsigned char *nm = b + r->off[F_NAME];
            size_t nlen = r->len[F_NAME];
            int step = 0;
            if ((r->present & (1u << F_NAME)) && nm[0] == '"') {
                if (r->escaped & (1u << F_NAME)) goto python;
                step = nlen - 2 >= STEP_PREFIX_LEN && memcmp(nm + 1, STEP_PREFIX,
                                                             STEP_PREFIX_LEN) == 0;
            }
            if (step) {
                const unsigned char *tail = nm + 1 + STEP_PREFIX_LEN;
                size_t tlen = nlen - 2 - STEP_PREFIX_LEN;
                int digits = tlen > 0;
                for (size_t k = 0; k < tlen && digits; k++)
                    digits = tail[k] >= '0' && tail[k] <= '9';
                if (digits && P.has_steps) {
                    if (tlen > 18) goto python;
                    long long number = 0;
                    for (size_t k = 0; k < tlen; k++) number = number * 10 + (tail[k] - '0');
                    if (!(P.step_lo <= number && number <= P.step_hi)) { outside++; continue; }
                }
            } else if (dur < P.min_us) {
                short_++;
                continue;
            }
        }
        /* tid, per (pid, tid) of the file */
        long long tid = 0;
        {
            int found = 0;
            int pp = (r->present >> F_PID) & 1, tp = (r->present >> F_TID) & 1;
            const unsigned char *pt = b + r->off[F_PID], *tt = b + r->off[F_TID];
            size_t pl = pp ? r->len[F_PID] : 0, tl = tp ? r->len[F_TID] : 0;
            char key[64];
            size_t klen = pl + tl + 2;
            unsigned slot = 0;
            if (klen == last_len && klen <= sizeof key && last_key[0] == (char)pp &&
                memcmp(last_key + 1, pt, pl) == 0 && last_key[1 + pl] == (char)(tp | 2) &&
                memcmp(last_key + 2 + pl, tt, tl) == 0) {
                tid = last_tid; /* the previous event's thread: most often */
                found = 2;
            } else if (klen <= sizeof key) {
                key[0] = (char)pp;
                memcpy(key + 1, pt, pl);
                key[1 + pl] = (char)(tp | 2);
                memcpy(key + 2 + pl, tt, tl);
                /* a few bytes of the key mixed: a slot of a 64-entry cache, checked whole */
                uint64_t w = 0, z = 0;
                memcpy(&w, key, klen < 8 ? klen : 8);
                memcpy(&z, key + (klen > 8 ? klen - 8 : 0), klen < 8 ? klen : 8);
                uint64_t h = (w * 0x9E3779B97F4A7C15ULL) ^ (z + klen) * 0xC2B2AE3D27D4EB4FULL;
                slot = (unsigned)(h >> 58);
                if (cache[slot].used && cache[slot].len == klen &&
                    memcmp(cache[slot].key, key, klen) == 0) {
                    tid = cache[slot].tid;
                    found = 1;
                }
            }
            if (!found) {
                PyObject *p = simple_object(pt, pl, pp, r->escaped & (1u << F_PID));
                if (!p) { if (PyErr_Occurred()) goto done; goto python; }
                PyObject *t = simple_object(tt, tl, tp, r->escaped & (1u << F_TID));
                if (!t) { Py_DECREF(p); if (PyErr_Occurred()) goto done; goto python; }
                PyObject *k = PyTuple_Pack(2, p, t);
                Py_DECREF(p);
                Py_DECREF(t);
                if (!k) goto done;
                PyObject *tid_obj = PyDict_GetItemWithError(tids, k);
                if (!tid_obj) {
                    if (PyErr_Occurred()) { Py_DECREF(k); goto done; }
                    PyObject *fresh = PyLong_FromSsize_t(PyDict_GET_SIZE(tids) + 1);
                    if (!fresh || PyDict_SetItem(tids, k, fresh) < 0) {
                        Py_XDECREF(fresh); Py_DECREF(k); goto done;
                    }
                    tid = PyLong_AsLongLong(fresh);
                    Py_DECREF(fresh);
                } else {
                    tid = PyLong_AsLongLong(tid_obj);
                }
                Py_DECREF(k);
                if (tid == -1 && PyErr_Occurred()) goto done;
                if (klen <= sizeof key) {
                    memcpy(cache[slot].key, key, klen);
                    cache[slot].len = klen;
                    cache[slot].tid = tid;
                    cache[slot].used = 1;
                }
            }
            if (found != 2 && klen <= sizeof key) { /* key[] holds this event's key */
                memcpy(last_key, key, klen);
                last_len = klen;
                last_tid = tid;
            }
        }
        /* id, renumbered per capture, the rank's pid in the high bits */
        long long new_id = 0;
        int renumber = 0;
        {
            char keybuf[ID_KEY_BYTES];
            Py_ssize_t kn = id_key_of(b, r, ph_char, keybuf);
            if (kn < 0) goto python;
            if (kn > 0) {
                uint64_t h = key_hash(keybuf, (size_t)kn);
                int found;
                new_id = idmap_get(idmap, keybuf, (size_t)kn, h, &found);
                if (!found) {
                    next_id++;
                    new_id = (P.pid << 32) + next_id;
                    if (idmap_set(idmap, keybuf, (size_t)kn, h, new_id) < 0) goto done;
                }
                renumber = 1;
            }
        }
        /* write the event */
        if (out_grow(&o, (r->end - r->start) + 256) < 0) goto done;
        if (!first) o.p[o.n++] = ',';
        first = 0;
        o.p[o.n++] = '{';
        int comma = 0;
        /* the fields present, and pid, tid and ts always, in the Struct's order */
        uint32_t todo = r->present | (1u << F_PID) | (1u << F_TID) | (1u << F_TS);
        while (todo) {
            int f = __builtin_ctz(todo);
            todo &= todo - 1;
            if (f != F_ARGS && f != F_PID && f != F_TID && f != F_TS && is_null(b, r, f))
                continue; /* None is the default: msgspec leaves it out */
            /* ,"name": (the comma only after the first) */
            memcpy(o.p + o.n, KEY_TEXT[f] + !comma, KEY_LENS[f] - !comma);
            o.n += KEY_LENS[f] - !comma;
            comma = 1;
            if (f == F_PID) put_int(&o, P.pid);
            else if (f == F_TID) put_int(&o, tid);
            else if (f == F_TS) put_round3(&o, out_ts);
            else if (f == F_DUR && dur_text) put_double(&o, dur_value);
            else if (f == F_ID && renumber) put_int(&o, new_id);
            else put(&o, b + r->off[f], r->len[f]);
        }
        o.p[o.n++] = '}';
        kept++;
        continue;
    python: {
            PyObject *res = fallback_event(fallback, state, &next_id, b, r, &o, &first, &kept);
            if (!res) goto done;
            Py_DECREF(res);
        }
    }
    {
        PyObject *nid = PyLong_FromLongLong(next_id);
        if (!nid || PyObject_SetAttrString(state, "next_id", nid) < 0) { Py_XDECREF(nid); goto done; }
        Py_DECREF(nid);
    }
    PyObject *data = PyBytes_FromStringAndSize(o.p, (Py_ssize_t)o.n);
    if (!data) goto done;
    result = Py_BuildValue("(Nnnnn)", data, kept, short_, outside, unreadable);
    goto done;
decline:
    result = Py_None;
    Py_INCREF(result);
done:
    if (owner && caprec * sizeof(Rec) + o.cap <= KEEP_BYTES) {
        kept_recs = recs;
        kept_caprec = caprec;
        kept_out = o;
    } else {
        if (owner) {
            kept_recs = NULL;
            kept_caprec = 0;
            kept_out.p = NULL;
            kept_out.cap = 0;
        }
        free(recs);
        free(o.p);
    }
    if (owner) busy = 0;
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef METHODS[] = {
    {"rewrite", rewrite, METH_VARARGS,
     "rewrite(array, params, tids, ids, state, fallback) -> (bytes, kept, dropped_short, "
     "dropped_outside, unreadable), or None where the piece is left to the Python path"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_eventpatch",
                                    "The timeline's event rewrite, at byte level.", -1,
                                    METHODS};

PyMODINIT_FUNC PyInit__eventpatch(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    has_avx = __builtin_cpu_supports("avx"); /* the OS saves the registers too (XGETBV) */
#endif
    str_plain_init();
    for (int f = 0; f < N_FIELDS; f++)
        KEY_LENS[f] = (size_t)snprintf(KEY_TEXT[f], sizeof KEY_TEXT[f], ",\"%s\":",
                                       FIELD_NAMES[f]);
    if (PyType_Ready(&IdMapType) < 0) return NULL;
    PyObject *module = PyModule_Create(&MODULE);
    if (!module) return NULL;
    Py_INCREF(&IdMapType);
    if (PyModule_AddObject(module, "IdMap", (PyObject *)&IdMapType) < 0) {
        Py_DECREF(&IdMapType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
