/* One order k >= 2 of nnlm's mapped trie (trie.py, trie_layout.py), read the same way by
 * both C readers: _trie.c's bulk scorer and decoding/_kenlm_query.c's per-call queries.
 * A change to the trie's layout is made here and in trie_layout.py, nowhere else.
 *
 * The spec tuples are those TrieLevel.c_spec() and trie_layout.coded_spec() give:
 *
 *   ("trie", words, word_bits, (linear, data, exceptions, bits, n_exceptions),
 *    n_parents, n, slots, slot_bits, n_slots,
 *    logp, logp_centers, logp_bits, bow, bow_centers, bow_bits)
 *   ("coded", that tuple, numerators, contexts (None at the top),
 *    the unigrams' p, their codes as contexts)
 *
 * words: the order's bit-packed word ids; the 5-tuple: order k-1's run pointers
 * (pointers.h); slots: the order's hash table, or empty; logp, bow: float32 values or
 * codes of *_bits bits into *_centers (values.h), bow empty at the top order; a coded
 * order's values are counts' codes (value_codes.h). Every buffer's size is checked
 * against the counts before anything is read. Include after Python.h. */
#ifndef NNLM_TRIE_LEVEL_H
#define NNLM_TRIE_LEVEL_H

#include <stdint.h>
#include <string.h>

#include "pointers.h"
#include "value_codes.h"
#include "values.h"

#define TRIE_GOLDEN 0x9E3779B97F4A7C15ULL  /* the order's table: Fibonacci hashing */

typedef struct {
    const uint64_t *words;       /* the order's word ids, bit-packed */
    Pointers parents;            /* order k-1's run pointers into this order */
    uint64_t word_bits, wmask, n, n_parents;
    const uint64_t *slots;       /* the order's table (entry + 1 per slot), or NULL */
    uint64_t slot_bits, smask, n_slots;
    Values logp, bow;            /* float32 natural logs, or their codes */
    int coded;                   /* or the values coded as counts (value_codes.h): */
    CodeField a, c;              /* the entries' numerators; their codes as contexts */
} TrieLevel;

typedef struct {                 /* a coded model's unigrams: p in float64, codes as contexts */
    const double *p;
    CodeField c;
    uint32_t *sym;               /* each word's symbol as a context (PyMem: the caller frees) */
} CodedUnigrams;

/* the slot where the pair (parent, word) starts probing */
static inline uint64_t trie_home_slot(const TrieLevel *L, uint64_t parent, uint64_t word,
                                      uint64_t V) {
    uint64_t key = parent * V + word;
    return (((key * TRIE_GOLDEN) >> 32) * L->n_slots) >> 32;
}

/* whether buffers of these byte lengths hold the order its fields describe */
static int trie_level_sizes_ok(const TrieLevel *L, uint64_t words_len, uint64_t data_len,
                               uint64_t exceptions_len, uint64_t slots_len) {
    return L->word_bits >= 1 && L->word_bits <= 64 &&
           packed_fits(L->n, L->word_bits, words_len) &&
           pointers_sizes_ok(&L->parents, L->n_parents + 1, data_len, exceptions_len) &&
           (!slots_len || (L->slot_bits >= 1 && L->slot_bits <= 64 && L->n_slots > 0 &&
                           packed_fits(L->n_slots, L->slot_bits, slots_len)));
}

/* n values coded in `bits` (0: float32) from their buffers, sizes checked */
static int trie_values_take(PyObject *values, PyObject *centers, long long bits, uint64_t n,
                            Values *v, TakeBytes take, void *ctx) {
    const void *data, *table = NULL;
    Py_ssize_t len, table_len = 0;
    if (bits < 0 || take(ctx, values, &data, &len) < 0) return -1;
    if (bits && take(ctx, centers, &table, &table_len) < 0) return -1;
    if (!values_sizes_ok((uint64_t)bits, n, (uint64_t)len, (uint64_t)table_len)) return -1;
    v->bits = (uint64_t)bits;
    v->mask = mask_of(v->bits);
    v->values = bits ? NULL : data;
    v->codes = bits ? data : NULL;
    v->centers = table;
    v->n_centers = (uint64_t)table_len / 4;
    return 0;
}

static int trie_runs_take(PyObject *t, int top, uint64_t n_lower, int coded, TrieLevel *L,
                          TakeBytes take, void *ctx) {
    PyObject *tag, *words, *data, *exceptions, *slots, *logp, *logp_c, *bow, *bow_c;
    unsigned long long word_bits, pointer_bits, n_exceptions, n_parents, n, slot_bits,
        n_slots;
    long long logp_bits, bow_bits;
    int linear;
    if (!PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "a level: the tuple TrieLevel.c_spec() gives");
        return -1;
    }
    if (!PyArg_ParseTuple(t, "OOK(iOOKK)KKOKKOOLOOL", &tag, &words, &word_bits, &linear,
                          &data, &exceptions, &pointer_bits, &n_exceptions, &n_parents, &n,
                          &slots, &slot_bits, &n_slots, &logp, &logp_c, &logp_bits, &bow,
                          &bow_c, &bow_bits))
        return -1;
    const void *buf;
    Py_ssize_t words_len, data_len, exceptions_len, slots_len;
    if (n_parents != n_lower || take(ctx, words, &buf, &words_len) < 0) return -1;
    L->words = buf;
    L->word_bits = word_bits; L->wmask = mask_of(word_bits);
    L->n = n; L->n_parents = n_parents;
    L->parents.linear = linear != 0;
    L->parents.bits = pointer_bits; L->parents.mask = mask_of(pointer_bits);
    L->parents.n_blocks = linear ? (n_parents >> LINE_SHIFT) + 1 : 0;
    L->parents.n_exceptions = n_exceptions;
    if (take(ctx, data, &buf, &data_len) < 0) return -1;
    L->parents.data = buf;
    if (take(ctx, exceptions, &buf, &exceptions_len) < 0) return -1;
    L->parents.exceptions = buf;
    if (take(ctx, slots, &buf, &slots_len) < 0) return -1;
    L->slots = slots_len ? buf : NULL;
    L->slot_bits = slot_bits; L->smask = mask_of(slot_bits); L->n_slots = n_slots;
    if (!trie_level_sizes_ok(L, (uint64_t)words_len, (uint64_t)data_len,
                             (uint64_t)exceptions_len, (uint64_t)slots_len))
        return -1;
    if (coded) return 0;
    if (trie_values_take(logp, logp_c, logp_bits, n, &L->logp, take, ctx) < 0) return -1;
    if (!top && trie_values_take(bow, bow_c, bow_bits, n, &L->bow, take, ctx) < 0) return -1;
    return 0;
}

/* order k from its spec tuple (either form), whose parents number n_lower (V at order 2);
 * 0, or -1, with or without a Python exception set */
static int trie_level_take(PyObject *t, int top, uint64_t n_lower, TrieLevel *L,
                           TakeBytes take, void *ctx) {
    memset(L, 0, sizeof *L);
    if (!(PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 6))
        return trie_runs_take(t, top, n_lower, 0, L, take, ctx);
    L->coded = 1;
    if (trie_runs_take(PyTuple_GET_ITEM(t, 1), top, n_lower, 1, L, take, ctx) < 0 ||
        parse_code_field(PyTuple_GET_ITEM(t, 2), 1, L->n, &L->a, take, ctx) < 0)
        return -1;
    return top ? 0 : parse_code_field(PyTuple_GET_ITEM(t, 3), 0, L->n, &L->c, take, ctx);
}

/* a coded order 2's unigrams (the spec's last two items) for a vocabulary of V words,
 * each word's symbol decoded once; U->sym is the caller's to free */
static int coded_unigrams_take(PyObject *t, uint64_t V, uint64_t bos, CodedUnigrams *U,
                               TakeBytes take, void *ctx) {
    const void *p;
    Py_ssize_t len;
    if (!(PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 6) ||
        take(ctx, PyTuple_GET_ITEM(t, 4), &p, &len) < 0 || (uint64_t)len != 8 * V ||
        !probabilities_in_range(p, V, bos) ||
        parse_code_field(PyTuple_GET_ITEM(t, 5), 0, V, &U->c, take, ctx) < 0)
        return -1;
    if (!(U->sym = PyMem_Malloc((size_t)V * sizeof(uint32_t)))) {
        PyErr_NoMemory();
        return -1;
    }
    field_symbols_all(&U->c, U->sym);
    U->p = p;
    return 0;
}

/* the entry of (word, after the (k-1)-gram entry parent), or -1: the order's table where
 * it has one, else a binary search of the parent's run (clamped to the order: a damaged
 * file gives wrong numbers, never a read outside the buffers) */
static inline int64_t trie_level_find(const TrieLevel *L, uint64_t parent, uint64_t word,
                                      uint64_t V) {
    if (parent >= L->n_parents) return -1;
    uint64_t a, b;
    pointers_pair(&L->parents, parent, &a, &b);
    if (b > L->n) b = L->n;
    if (a >= b) return -1;
    if (L->slots) {
        uint64_t pos = trie_home_slot(L, parent, word, V);
        for (uint64_t tries = 0; tries < L->n_slots; tries++) {
            uint64_t v = unpack(L->slots, L->slot_bits, L->smask, pos);
            if (!v) return -1;
            if (v - 1 >= a && v - 1 < b &&
                unpack(L->words, L->word_bits, L->wmask, v - 1) == word)
                return (int64_t)(v - 1);
            if (++pos == L->n_slots) pos = 0;
        }
        return -1;
    }
    uint64_t base = a, len = b - a;
    while (len > 1) {
        uint64_t half = len >> 1;
        base = unpack(L->words, L->word_bits, L->wmask, base + half) < word ? base + half : base;
        len -= half;
    }
    uint64_t found = unpack(L->words, L->word_bits, L->wmask, base);
    if (found < word && ++base < b) found = unpack(L->words, L->word_bits, L->wmask, base);
    return base < b && found == word ? (int64_t)base : -1;
}

#endif
