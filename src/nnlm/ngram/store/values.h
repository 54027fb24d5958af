/* The numbers of nnlm's mapped trie (values.py), read in C by _trie.c (bulk scoring) and
 * by nnlm/_kenlm_query.c (nnlm.kenlm's per-call path): an order's probabilities or
 * back-offs are float32 natural logs where they lie, or bit-packed codes into a float32
 * table of centers (quantized, or a lossless table of the order's few distinct values).
 * A code past the table reads as its last center, as values.Quantized reads it: a
 * damaged file gives wrong numbers, never a read outside the buffers. */
#ifndef NNLM_VALUES_H
#define NNLM_VALUES_H

#include <stdint.h>
#include "../../base/portable.h"

#include "pointers.h"

typedef struct {            /* float32 natural logs, or codes of `bits` into centers */
    const float *values, *centers;
    const uint64_t *codes;
    uint64_t bits, mask, n_centers;
} Values;

/* entry i's natural log, exactly as stored (float32) */
static inline float value_ln(const Values *v, uint64_t i) {
    if (v->values) return v->values[i];
    uint64_t code = unpack(v->codes, v->bits, v->mask, i);
    return v->centers[code < v->n_centers ? code : v->n_centers - 1];
}

/* ask for the line that value_ln(v, i) reads */
static inline void values_prefetch(const Values *v, uint64_t i) {
    if (v->values) NNLM_PREFETCH(v->values + i);
    else NNLM_PREFETCH(v->codes + ((i * v->bits) >> 6));
}

/* whether buffers of these byte lengths hold n values of this coding (bits 0: float32;
 * else codes of 1-25 bits, as values.MAX_CODE_BITS, and at least one center) */
static inline int values_sizes_ok(uint64_t bits, uint64_t n, uint64_t values_len,
                                  uint64_t centers_len) {
    if (bits == 0) return n <= UINT64_MAX / 4 && values_len >= 4 * n;
    return bits <= 25 && packed_fits(n, bits, values_len) && centers_len >= 4;
}

#endif
