/* One order k >= 2 of a back-off model held in memory (nnlm.ngram.store.levels.NgramLevel)
 * as nnlm.kenlm's compiled queries read it: the order's hash index (hashindex.py: open
 * addressing over int64 keys, Fibonacci hashing, linear probing, EMPTY = -1) and one
 * float32 entry per n-gram, its log10 p and, below the top order, its log10 back-off
 * whose -0.0 says the n-gram cannot extend (KenLM's kNoExtensionBackoff): one cache line
 * holds both. An n-gram's key is (id of its (k-1)-word suffix) * |V| + (its first word),
 * as in nnlm.ngram.backoff. The spec tuple, as NgramLevel.query_spec() gives it:
 *
 *   ("hash", slot_keys int64, slot_values int64, bits, entries, pb float32)
 *
 * Include after Python.h. */
#ifndef NNLM_HASH_LEVEL_H
#define NNLM_HASH_LEVEL_H

#include <stdint.h>

#include "take_bytes.h"

#define HASH_GOLDEN 0x9E3779B97F4A7C15ULL  /* hashindex.GOLDEN */

typedef struct {
    const int64_t *slot_keys, *slot_values;
    uint64_t mask, n;
    int bits;
    const float *pb;             /* (p) or (p, b) per entry */
    int stride;                  /* 2 below the top order, 1 at it */
} HashLevel;

/* 0, or -1 with or without a Python exception set */
static int hash_level_take(PyObject *t, int top, HashLevel *L, TakeBytes take, void *ctx) {
    PyObject *tag, *keys, *values, *pb;
    int bits;
    Py_ssize_t entries, slots, n, m;
    if (!PyArg_ParseTuple(t, "OOOinO", &tag, &keys, &values, &bits, &entries, &pb)) return -1;
    if (entries < 0 || bits < 1 || bits > 62) return -1;
    L->n = (uint64_t)entries;
    L->bits = bits;
    L->mask = ((uint64_t)1 << bits) - 1;
    L->stride = top ? 1 : 2;
    if (!(L->slot_keys = take_items(take, ctx, keys, 8, &slots)) ||
        ((Py_ssize_t)1 << bits) != slots ||
        !(L->slot_values = take_items(take, ctx, values, 8, &n)) || n != slots ||
        !(L->pb = take_items(take, ctx, pb, 4, &m)) || m != L->stride * entries)
        return -1;
    for (Py_ssize_t j = 0; j < slots; j++)  /* every value must index an entry */
        if (L->slot_keys[j] != -1 && (L->slot_values[j] < 0 || L->slot_values[j] >= entries))
            return -1;
    return 0;
}

/* the entry of key, or -1 */
static inline int64_t hash_level_find(const HashLevel *L, int64_t key) {
    uint64_t pos = ((uint64_t)key * HASH_GOLDEN) >> (64 - L->bits);
    for (;;) {
        int64_t k = L->slot_keys[pos];
        if (k == key) return L->slot_values[pos];
        if (k == -1) return -1;
        pos = (pos + 1) & L->mask;
    }
}

/* entry e's log10 p and, below the top order, its log10 back-off */
static inline float hash_level_values(const HashLevel *L, uint64_t e, float *backoff) {
    const float *pb = L->pb + (uint64_t)L->stride * e;
    if (L->stride == 2) *backoff = pb[1];
    return pb[0];
}

#endif
