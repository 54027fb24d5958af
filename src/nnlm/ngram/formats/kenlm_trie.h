/* One order k >= 2 of a KenLM trie binary (build_binary trie, with or without -q and -a;
 * Heafield 2011, section 3.2), read where it lies by nnlm.kenlm's compiled queries. The
 * file's layout is read in kenlm_header.py (TrieLayout) and handed over as the spec tuple
 * kenlm_query_spec.py gives:
 *
 *   ("kenlm-trie", bits, n, total, word_bits, quantized, prob_bits, bow_bits,
 *    prob_centers, bow_centers, inline_bits, offsets, unigram records)
 *
 * Per entry, `total` bits: the word, then the values (floats: 31 bits of p's magnitude,
 * then 32 of the back-off; quantized: the back-off's code, then p's), then (below the top
 * order) the low bits of the pointer into the next order, whose high bits, with
 * array-compressed pointers, come from a sorted table of offsets (ArrayBhiksha). Order
 * 2's parents are the unigram records (float p, float b, uint64 next), handed with it.
 * Include after Python.h. */
#ifndef NNLM_KENLM_TRIE_H
#define NNLM_KENLM_TRIE_H

#include <stdint.h>
#include <string.h>

#include "../store/take_bytes.h"

typedef struct {
    const uint8_t *bits, *unigrams;   /* unigrams: order 2's only */
    uint64_t n, total, word_bits, value_bits, prob_bits, bow_bits, inline_bits, n_offsets;
    int quantized;
    const float *prob_centers, *bow_centers;
    const uint64_t *offsets;
} KenlmTrieLevel;

/* for a vocabulary of V words; 0, or -1 with or without a Python exception set */
static int kenlm_trie_level_take(PyObject *t, int top, int64_t V, KenlmTrieLevel *L,
                                 TakeBytes take, void *ctx) {
    PyObject *tag, *bits, *pc, *bc, *offsets, *uni;
    unsigned long long n, total, word_bits, prob_bits, bow_bits, inline_bits;
    int quant;
    Py_ssize_t n_bits, n_pc = 0, n_bc = 0, n_off = 0, n_uni = 0;
    if (!PyArg_ParseTuple(t, "OOKKKiKKOOKOO", &tag, &bits, &n, &total, &word_bits, &quant,
                          &prob_bits, &bow_bits, &pc, &bc, &inline_bits, &offsets, &uni))
        return -1;
    memset(L, 0, sizeof *L);
    L->n = n; L->total = total; L->word_bits = word_bits; L->quantized = quant;
    L->prob_bits = prob_bits; L->bow_bits = bow_bits; L->inline_bits = inline_bits;
    L->value_bits = quant ? prob_bits + (top ? 0 : bow_bits) : (top ? 31 : 63);
    if (word_bits < 1 || word_bits > 32 || inline_bits > 57 || (top && inline_bits) ||
        total != word_bits + L->value_bits + inline_bits || prob_bits > 25 || bow_bits > 25)
        return -1;
    /* (n + 1) * total bits must not wrap: n comes from the file's header */
    if (n >= (UINT64_MAX - 7) / total - 1 ||
        !(L->bits = take_items(take, ctx, bits, 1, &n_bits)) ||
        (uint64_t)n_bits < ((n + 1) * total + 7) / 8 + 8)
        return -1;
    if (quant) {
        if (!(L->prob_centers = take_items(take, ctx, pc, 4, &n_pc)) ||
            (uint64_t)n_pc != (1ULL << prob_bits))
            return -1;
        if (!top && (!(L->bow_centers = take_items(take, ctx, bc, 4, &n_bc)) ||
                     (uint64_t)n_bc != (1ULL << bow_bits)))
            return -1;
    }
    if (PyObject_Length(offsets) > 0) {
        if (!(L->offsets = take_items(take, ctx, offsets, 8, &n_off))) return -1;
        L->n_offsets = (uint64_t)n_off;
    }
    if (PyObject_Length(uni) > 0 &&
        (!(L->unigrams = take_items(take, ctx, uni, 1, &n_uni)) || n_uni < 16 * (V + 2)))
        return -1;
    return 0;
}

/* len (<= 57) bits at bit offset ``bit`` of a little-endian bit stream (KenLM pads its
 * arrays with 8 bytes, so the 8-byte read stays inside) */
static inline uint64_t kenlm_read_bits(const uint8_t *base, uint64_t bit, uint64_t len) {
    uint64_t v;
    memcpy(&v, base + (bit >> 3), 8);
    return (v >> (bit & 7)) & (len >= 64 ? ~0ULL : ((1ULL << len) - 1));
}

/* where entry i of order L points into the next order */
static inline uint64_t kenlm_trie_child(const KenlmTrieLevel *L, uint64_t i) {
    uint64_t low = kenlm_read_bits(L->bits, i * L->total + L->word_bits + L->value_bits,
                                   L->inline_bits);
    if (!L->offsets) return low;
    uint64_t lo = 0, hi = L->n_offsets;  /* the last table entry <= i: the high bits */
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (L->offsets[mid] <= i) lo = mid + 1; else hi = mid;
    }
    return ((lo ? lo - 1 : 0) << L->inline_bits) | low;
}

/* the entry of order L holding ``word`` among the children of entry ``parent`` of the
 * order below (P; NULL at order 2, whose parents are L's unigram records), or -1 */
static inline int64_t kenlm_trie_level_find(const KenlmTrieLevel *L, const KenlmTrieLevel *P,
                                            uint64_t parent, uint64_t word) {
    uint64_t begin, end;
    if (!P) {
        memcpy(&begin, L->unigrams + 16 * parent + 8, 8);
        memcpy(&end, L->unigrams + 16 * (parent + 1) + 8, 8);
    } else {
        begin = kenlm_trie_child(P, parent);
        end = kenlm_trie_child(P, parent + 1);
    }
    if (end > L->n) end = L->n;
    while (begin < end) {  /* a run's words are sorted */
        uint64_t mid = begin + (end - begin) / 2;
        uint64_t w = kenlm_read_bits(L->bits, mid * L->total, L->word_bits);
        if (w == word) return (int64_t)mid;
        if (w < word) begin = mid + 1; else end = mid;
    }
    return -1;
}

/* entry e's log10 p and, below the top order, its log10 back-off */
static inline float kenlm_trie_level_values(const KenlmTrieLevel *L, uint64_t e, int top,
                                            float *backoff) {
    uint64_t at = e * L->total + L->word_bits;
    if (L->quantized) {
        if (top) return L->prob_centers[kenlm_read_bits(L->bits, at, L->prob_bits)];
        *backoff = L->bow_centers[kenlm_read_bits(L->bits, at, L->bow_bits)];
        return L->prob_centers[kenlm_read_bits(L->bits, at + L->bow_bits, L->prob_bits)];
    }
    uint32_t pbits = (uint32_t)kenlm_read_bits(L->bits, at, 31) | 0x80000000u;  /* < 0 */
    float p;
    memcpy(&p, &pbits, 4);
    if (!top) {
        uint32_t bbits = (uint32_t)kenlm_read_bits(L->bits, at + 31, 32);
        memcpy(backoff, &bbits, 4);
    }
    return p;
}

#endif
