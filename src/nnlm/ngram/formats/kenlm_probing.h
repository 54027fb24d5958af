/* One order k >= 2 of a KenLM probing binary (build_binary's default; Heafield 2011,
 * section 3.1), read where it lies by nnlm.kenlm's compiled queries. The file's layout
 * is read in kenlm_header.py and handed over as the spec tuple kenlm_query_spec.py gives:
 *
 *   ("probing", table bytes, itemsize, buckets, kid int64)
 *
 * The table is `buckets` buckets of `itemsize` bytes, each the uint64 hash of an n-gram
 * (0: an empty bucket), its float32 log10 p whose sign bit is KenLM's "independent left"
 * flag, then below the top order its float32 log10 back-off; kid is each word's id in
 * KenLM's vocabulary, which the hashes combine. Include after Python.h. */
#ifndef NNLM_KENLM_PROBING_H
#define NNLM_KENLM_PROBING_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../store/take_bytes.h"

typedef struct {
    const char *table;
    uint64_t buckets;
    Py_ssize_t itemsize;
    const int64_t *kid;
} ProbingLevel;

/* for a vocabulary of V words; 0, or -1 with or without a Python exception set */
static int probing_level_take(PyObject *t, int top, int64_t V, ProbingLevel *L,
                              TakeBytes take, void *ctx) {
    PyObject *tag, *table, *kid;
    Py_ssize_t itemsize, n_table, n_kid;
    unsigned long long buckets;
    if (!PyArg_ParseTuple(t, "OOnKO", &tag, &table, &itemsize, &buckets, &kid)) return -1;
    if (itemsize < (top ? 12 : 16) || buckets < 1 ||
        !(L->table = take_items(take, ctx, table, 1, &n_table)) ||
        (uint64_t)n_table / (uint64_t)itemsize != buckets ||
        (uint64_t)n_table % (uint64_t)itemsize ||
        !(L->kid = take_items(take, ctx, kid, 8, &n_kid)) || n_kid != V)
        return -1;
    for (int64_t i = 0; i < V; i++)
        if (L->kid[i] < 0) return -1;
    L->buckets = buckets;
    L->itemsize = itemsize;
    return 0;
}

/* KenLM's CombineWordHash: the hash of an n-gram extended one word to the left */
static inline uint64_t probing_combine(uint64_t node, uint64_t word) {
    return (node * 8978948897894561157ULL) ^ ((word + 1) * 17894857484156487943ULL);
}

/* KenLM's probing lookup: the bucket holding ``hash`` (linear probing from hash mod the
 * table's size), or -1 */
static inline int64_t probing_level_find(const ProbingLevel *L, uint64_t hash) {
    uint64_t pos = hash % L->buckets;
    for (uint64_t tries = 0; tries < L->buckets; tries++) {
        uint64_t key;
        memcpy(&key, L->table + pos * L->itemsize, 8);
        if (key == hash) return (int64_t)pos;
        if (key == 0) return -1;
        if (++pos == L->buckets) pos = 0;
    }
    return -1;
}

/* bucket e's log10 p (the flag cleared: always the negative value) and, below the top
 * order, its log10 back-off */
static inline float probing_level_values(const ProbingLevel *L, uint64_t e, int top,
                                         float *backoff) {
    const char *at = L->table + e * (uint64_t)L->itemsize;
    float p;
    memcpy(&p, at + 8, 4);
    if (!top) memcpy(backoff, at + 12, 4);
    return -fabsf(p);
}

#endif
