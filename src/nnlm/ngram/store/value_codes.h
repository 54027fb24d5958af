/* A Kneser-Ney model's values coded as the counts they come from (value_codes.py says
 * why and how), decoded on a lookup's path by both C readers (_trie.c's bulk scorer and
 * decoding/_kenlm_query.c's per-call queries):
 *
 *   p(w | h) = (a - D(a)) / S(h) + gamma(h) p(w | h')
 *
 * with a - D(a) from the entry's code and S, gamma from its context's; p(w | h') is the
 * reader's p one order down, carried in float64. The sums are the estimator's numpy
 * operations one by one, so this file must be compiled without contraction into fused
 * multiply-adds (setup.py: -ffp-contract=off); exact_log is value_codes.exact_log, from
 * IEEE operations alone, so every reader gives the same float32 on every machine.
 * A code past its table reads as its last symbol, and an escape not in its table as
 * symbol 0: a damaged file gives wrong numbers, never a read outside the buffers. */
#ifndef NNLM_VALUE_CODES_H
#define NNLM_VALUE_CODES_H

#include <math.h>
#include <stdint.h>
#include "../../base/portable.h"

#include "pointers.h"

#define ESCAPE_BLOCK_SHIFT 9   /* trie_layout.ESCAPE_BLOCK_SHIFT */
#define VC_BOS_ID 1            /* nnlm.text.specials.BOS_ID: <s>, whose p is 0 */

static const double VC_LN2_HI = 0x1.62e42fee00000p-1, VC_LN2_LO = 0x1.a39ef35793c76p-33,
                    VC_SQRT_HALF = 0x1.6a09e667f3bcdp-1;
static const double VC_SERIES[10] = {
    0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3, 0x1.c71c71c71c71cp-4,
    0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4, 0x1.e1e1e1e1e1e1ep-5,
    0x1.af286bca1af28p-5, 0x1.8618618618618p-5};

/* value_codes.exact_log, operation for operation */
static inline double exact_log(double x) {
    if (!(x > 0)) return x == 0 ? -INFINITY : NAN;
    if (isinf(x)) return x;
    int e;
    double m = frexp(x, &e);
    if (m < VC_SQRT_HALF) {
        m = m * 2.0;
        e -= 1;
    }
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double poly = VC_SERIES[9];
    for (int i = 8; i >= 0; i--) poly = poly * z + VC_SERIES[i];
    double t = s + s * (z * poly);
    double dk = (double)e;
    return dk * VC_LN2_HI + (2.0 * t + dk * VC_LN2_LO);
}

/* value_codes.chain for one entry */
static inline double chain_p(double num, double S, double gamma, double p_lower) {
    double first = S > 0 ? num / S : 0.0;
    double second = gamma * p_lower;
    return first + second;
}

typedef struct {           /* one order's codes of one kind (value_codes.Field) */
    const uint64_t *codes;
    uint64_t bits, mask, n, n_symbols, n_escapes;
    const uint64_t *flags;             /* a bit an entry: 1 where it escapes */
    const uint64_t *block;             /* escapes before entry b << ESCAPE_BLOCK_SHIFT */
    const uint32_t *escape;            /* each escape's symbol (| OVERRIDE: its float32 ... */
    const float *escape_logp;          /* ... is here: numerators only) */
    const double *num;                 /* numerators: a - D(a) of each symbol */
    const double *S, *gamma;           /* contexts: each symbol's S(h), gamma(h) ... */
    const float *bow;                  /* ... and float32 log back-off */
} CodeField;

#define OVERRIDE 0x80000000u

/* bits set in x, without the popcnt instruction (not in x86-64's baseline: the
 * compiler would call a library function instead) */
static inline uint64_t ones(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (x * 0x0101010101010101ULL) >> 56;
}

/* entry i's place among the escapes: the escapes before its block of 512 plus the
 * flags before it in the block's one line of flags */
static inline uint64_t escape_place(const CodeField *f, uint64_t i) {
    const uint64_t *line = f->flags + ((i >> ESCAPE_BLOCK_SHIFT) << 3);
    uint64_t place = f->block[i >> ESCAPE_BLOCK_SHIFT];
    uint64_t w = (i >> 6) & 7;
    for (uint64_t j = 0; j < w; j++) place += ones(line[j]);
    return place + ones(line[w] & ((1ULL << (i & 63)) - 1));
}

/* entry i's symbol; *escape: where its float32 lies among the escapes, or -1 */
static NNLM_ALWAYS_INLINE uint64_t field_symbol(const CodeField *f,
                                                                   uint64_t i,
                                                                   int64_t *escape) {
    if (i >= f->n) i = f->n - 1;
    uint64_t code = unpack(f->codes, f->bits, f->mask, i);
    *escape = -1;
    if (code == f->mask) {
        uint64_t place = escape_place(f, i);
        code = 0;
        if (place < f->n_escapes) {
            uint32_t sym = f->escape[place];
            if (sym & OVERRIDE && f->escape_logp) *escape = (int64_t)place;
            code = sym & (OVERRIDE - 1);
        }
    }
    return code < f->n_symbols ? code : f->n_symbols - 1;
}

/* ask for the lines field_symbol(f, i) reads (the code's, and the flags' should it be
 * an escape) */
static inline void field_prefetch(const CodeField *f, uint64_t i) {
    NNLM_PREFETCH(f->codes + ((i * f->bits) >> 6));
    NNLM_PREFETCH(f->flags + (i >> 6));
}

/* where entry i is an escape (its code, which field_prefetch asked for, says), ask
 * for its symbol: the second stage of a lookup's prefetching */
static inline void field_prefetch_escape(const CodeField *f, uint64_t i) {
    if (i < f->n && unpack(f->codes, f->bits, f->mask, i) == f->mask) {
        uint64_t place = escape_place(f, i);
        if (place < f->n_escapes) NNLM_PREFETCH(f->escape + place);
    }
}

/* the float32 log p an entry gives once its p is known: its escape's own float32 where
 * it has one (NaN: none), else exact_log's */
static inline float entry_ln(double p, float escaped) {
    return isnan(escaped) ? (float)exact_log(p) : escaped;
}

/* every entry's symbol (the unigrams' as contexts, decoded once by both readers) */
static inline void field_symbols_all(const CodeField *f, uint32_t *out) {
    for (uint64_t i = 0; i < f->n; i++) {
        int64_t unused;
        out[i] = (uint32_t)field_symbol(f, i, &unused);
    }
}

/* Whether a field's tables hold only values an estimate can give (trie_layout's
 * coded_tables_problem says the same for numpy): numerators a - D(a) finite and >= 0;
 * S finite and 0 or normal (a denormal S made p infinite), gamma finite and >= 0,
 * back-offs finite. They are a few thousand symbols: checked whole at opening. */
static int tables_in_range(const CodeField *f, int numerators) {
    for (uint64_t i = 0; i < f->n_symbols; i++) {
        if (numerators) {
            if (!(f->num[i] >= 0 && isfinite(f->num[i]))) return 0;
        } else if (!(isfinite(f->S[i]) && (f->S[i] == 0 || f->S[i] >= 0x1p-1022) &&
                     f->gamma[i] >= 0 && isfinite(f->gamma[i]) && isfinite(f->bow[i]))) {
            return 0;
        }
    }
    return 1;
}

/* Whether every unigram p is a probability: in (0, 1], but <s>'s (never scored): 0. */
static int probabilities_in_range(const double *p, uint64_t n, uint64_t bos) {
    for (uint64_t i = 0; i < n; i++)
        if (i == bos ? p[i] != 0 : !(p[i] > 0 && p[i] <= 1)) return 0;
    return 1;
}

#ifdef Py_PYTHON_H
#include "take_bytes.h"

/* One field as value_codes.Coding.field_spec gives it: numerators (codes, bits,
 * n_symbols, flags, block, escapes, escapes' float32, num) or contexts (codes, bits,
 * n_symbols, flags, block, escapes, S, gamma, bow), for n entries. 0, or -1 with no
 * exception set where it does not fit. */
static int parse_code_field(PyObject *t, int numerators, uint64_t n, CodeField *f,
                            TakeBytes take, void *ctx) {
    PyObject *o[7] = {NULL};
    unsigned long long bits, n_symbols;
    const void *b[7] = {NULL};
    Py_ssize_t len[7] = {0};
    memset(f, 0, sizeof *f);
    if (n == 0 || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) != (numerators ? 8 : 9)) return -1;
    if (!(numerators ? PyArg_ParseTuple(t, "OKKOOOOO", &o[0], &bits, &n_symbols, &o[1], &o[2],
                                        &o[3], &o[4], &o[5])
                     : PyArg_ParseTuple(t, "OKKOOOOOO", &o[0], &bits, &n_symbols, &o[1], &o[2],
                                        &o[3], &o[4], &o[5], &o[6]))) {
        PyErr_Clear();
        return -1;
    }
    for (int i = 0; i < (numerators ? 6 : 7); i++)
        if (take(ctx, o[i], &b[i], &len[i]) < 0) {
            PyErr_Clear();
            return -1;
        }
    f->codes = b[0];
    f->flags = b[1];
    f->block = b[2];
    f->escape = b[3];
    f->bits = bits;
    f->mask = mask_of(bits);
    f->n = n;
    f->n_symbols = n_symbols;
    f->n_escapes = (uint64_t)len[3] / 4;
    if (bits < 1 || bits > 31 || n_symbols < 1 || !packed_fits(n, bits, (uint64_t)len[0]) ||
        (uint64_t)len[1] != 8 * (n / 64 + 1) ||
        (uint64_t)len[2] != 8 * ((n >> ESCAPE_BLOCK_SHIFT) + 2))
        return -1;
    /* field_symbol reads flag words up to i >> 6 < n / 64 + 1: inside */
    if (numerators) {
        f->escape_logp = b[4];
        f->num = b[5];
        return (uint64_t)len[4] == 4 * f->n_escapes && (uint64_t)len[5] >= 8 * n_symbols &&
            tables_in_range(f, 1) ? 0 : -1;
    }
    f->S = b[4];
    f->gamma = b[5];
    f->bow = b[6];
    return (uint64_t)len[4] >= 8 * n_symbols && (uint64_t)len[5] >= 8 * n_symbols &&
           (uint64_t)len[6] >= 4 * n_symbols && tables_in_range(f, 0) ? 0 : -1;
}
#endif

#endif
