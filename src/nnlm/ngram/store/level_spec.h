/* One order of nnlm's mapped trie as nnlm.ngram.store.trie.TrieLevel.c_spec() hands it to
 * both C files (_trie.c's bulk scorer and decoding/_kenlm_query.c's per-call queries):
 *
 *   ("trie", words, word_bits, (linear, data, exceptions, bits, n_exceptions),
 *    n_parents, n, slots, slot_bits, n_slots,
 *    logp, logp_centers, logp_bits, bow, bow_centers, bow_bits)
 *
 * words: the order's bit-packed word ids; the 5-tuple: order k-1's run pointers
 * (pointers.h); slots: the order's hash table, or empty; logp, bow: float32 values or
 * codes of *_bits bits into *_centers (values.h); bow is empty at the top order. The
 * tuple's shape lives here once; each file takes the buffers its own way and checks
 * their sizes with pointers.h's and values.h's functions. Include after Python.h. */
#ifndef NNLM_LEVEL_SPEC_H
#define NNLM_LEVEL_SPEC_H

typedef struct {
    PyObject *words, *data, *exceptions, *slots, *logp, *logp_centers, *bow, *bow_centers;
    unsigned long long word_bits, pointer_bits, n_exceptions, n_parents, n, slot_bits,
        n_slots;
    long long logp_bits, bow_bits;
    int linear;
} LevelSpec;

/* 0, or -1 with Python's exception set where t is not such a tuple */
static int parse_level_spec(PyObject *t, LevelSpec *s) {
    PyObject *tag;
    if (!PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "a level: the tuple TrieLevel.c_spec() gives");
        return -1;
    }
    return PyArg_ParseTuple(t, "OOK(iOOKK)KKOKKOOLOOL", &tag, &s->words, &s->word_bits,
                            &s->linear, &s->data, &s->exceptions, &s->pointer_bits,
                            &s->n_exceptions, &s->n_parents, &s->n, &s->slots,
                            &s->slot_bits, &s->n_slots, &s->logp, &s->logp_centers,
                            &s->logp_bits, &s->bow, &s->bow_centers, &s->bow_bits) ? 0 : -1;
}

#endif
