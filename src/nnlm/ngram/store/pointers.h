/* The run pointers of nnlm's mapped trie, read in C by _trie.c (bulk lookups) and by
 * nnlm/_kenlm_query.c (nnlm.kenlm's per-call path). run_pointers.py writes them and says
 * why they are laid out so:
 *
 * - packed: bit-packed fields;
 * - linear: 64 pointers to a 64-byte line; word 0 holds base (bits 0-39), slope (bits
 *   40-55, in 1/256) and the corrections' width c (bits 56-58); words 1-7 hold 64
 *   corrections of c bits, and ptr[64 j + t] = base + (t * slope >> 8) + correction[t].
 *   With word 0's top bit set, the block is an exception: the rest of the word is its
 *   number among the exceptions, whose 64 pointers are bit-packed whole.
 *
 * A lookup needs ptr[i] and ptr[i + 1]: one line (two where i ends its block). Every
 * read is bounded by the lengths given, which the callers check against the file, so
 * damaged pointers give wrong runs (the callers clamp them to the order), never a read
 * outside the buffers.
 */
#ifndef NNLM_POINTERS_H
#define NNLM_POINTERS_H

#include <stdint.h>
#include "../../base/portable.h"

#define LINE_SHIFT 6          /* 64 pointers a line */
#define LINE_WORDS 8
#define EXCEPTION (1ULL << 63)

static inline uint64_t unpack(const uint64_t *data, uint64_t bits, uint64_t mask, uint64_t i) {
    uint64_t pos = i * bits, w = pos >> 6, off = pos & 63;
    return ((data[w] >> off) | ((data[w + 1] << 1) << (63 - off))) & mask;
}

static inline uint64_t mask_of(uint64_t bits) { return bits >= 64 ? ~0ULL : (1ULL << bits) - 1; }

/* whether `len` bytes hold n fields of `bits` bits bit-packed, with the spare word unpack
 * reads past the last field: the one size check of every packed array, guarded against
 * overflow (a damaged header's huge n or bits is "does not fit", never a wrapped size) */
static inline int packed_fits(uint64_t n, uint64_t bits, uint64_t len) {
    if (bits == 0 || bits > 64) return 0;
    if (n > (UINT64_MAX - 63) / bits) return 0;
    uint64_t words = (n * bits + 63) / 64 + 1;
    return words <= UINT64_MAX / 8 && len >= 8 * words;
}

typedef struct {
    int linear;                  /* 0: packed fields; 1: lines of 64 (see above) */
    const uint64_t *data;        /* the fields, or the lines (and one spare word) */
    const uint64_t *exceptions;  /* linear: the exceptional blocks' pointers, packed */
    uint64_t bits, mask;         /* a field's width (packed; linear: the exceptions') */
    uint64_t n_blocks, n_exceptions;
} Pointers;

/* whether the arrays' byte lengths fit `count` pointers */
static inline int pointers_sizes_ok(const Pointers *P, uint64_t count, uint64_t data_len,
                                    uint64_t exceptions_len) {
    if (P->bits < 1 || P->bits > 64 || count == 0) return 0;
    if (!P->linear) return packed_fits(count, P->bits, data_len);
    return P->n_blocks == ((count - 1) >> LINE_SHIFT) + 1 &&
           P->n_blocks <= (UINT64_MAX / 8 - 1) / LINE_WORDS &&
           data_len >= 8 * (LINE_WORDS * P->n_blocks + 1) && P->n_exceptions <= P->n_blocks &&
           packed_fits(P->n_exceptions << LINE_SHIFT, P->bits, exceptions_len);
}

/* ask for the line (or the field) a lookup of ptr[i] reads */
static inline void pointers_prefetch(const Pointers *P, uint64_t i) {
    if (P->linear) {
        uint64_t b = i >> LINE_SHIFT;
        NNLM_PREFETCH(P->data + (b < P->n_blocks ? b : 0) * LINE_WORDS);
    } else {
        NNLM_PREFETCH(P->data + ((i * P->bits) >> 6));
    }
}

/* the second step of a lookup of ptr[i], once its line has arrived: where the block is
 * an exception, ask for its fields */
static inline void pointers_prefetch_exception(const Pointers *P, uint64_t i) {
    uint64_t b = i >> LINE_SHIFT;
    if (!P->linear || b >= P->n_blocks) return;
    uint64_t head = P->data[b * LINE_WORDS];
    if (head & EXCEPTION) {
        uint64_t e = head & ~EXCEPTION;
        if (e < P->n_exceptions)
            NNLM_PREFETCH(P->exceptions + ((((e << LINE_SHIFT) + (i & 63)) * P->bits) >> 6));
    }
}

/* pointer t of block b (b < n_blocks, t < 64) */
static inline uint64_t block_pointer(const Pointers *P, uint64_t b, uint64_t t) {
    const uint64_t *line = P->data + b * LINE_WORDS;
    uint64_t head = line[0];
    if (head & EXCEPTION) {
        uint64_t e = head & ~EXCEPTION;
        return e < P->n_exceptions
                   ? unpack(P->exceptions, P->bits, P->mask, (e << LINE_SHIFT) + t) : ~0ULL;
    }
    uint64_t c = (head >> 56) & 7;
    return (head & ((1ULL << 40) - 1)) + ((t * ((head >> 40) & 0xFFFF)) >> 8) +
           unpack(line + 1, c, mask_of(c), t);
}

/* ptr[i] and ptr[i + 1] (the caller has i + 1 < count) */
static inline void pointers_pair(const Pointers *P, uint64_t i, uint64_t *a, uint64_t *b) {
    if (!P->linear) {
        *a = unpack(P->data, P->bits, P->mask, i);
        *b = unpack(P->data, P->bits, P->mask, i + 1);
        return;
    }
    uint64_t blk = i >> LINE_SHIFT, t = i & 63;
    *a = *b = ~0ULL;  /* damaged: runs past every order (the callers clamp) */
    if (blk >= P->n_blocks) return;
    *a = block_pointer(P, blk, t);
    if (t < 63)
        *b = block_pointer(P, blk, t + 1);
    else if (blk + 1 < P->n_blocks)
        *b = block_pointer(P, blk + 1, 0);
}

#endif
