/* The vocabulary's hash table, shared by nnlm/ngram/store/_trie.c (the mapped
 * vocabulary of a trie file, nnlm.ngram.store.vocab_table) and nnlm/_kenlm_query.c (the
 * per-call path of nnlm.kenlm).
 *
 * Words are UTF-8 bytes end to end in one blob; word i is blob[offsets[i]:offsets[i+1]].
 * The table has a power of two slots, at least twice the words (load <= 0.5), each the id
 * of a word or -1; a word's home slot is the low bits of FNV-1a (Fowler, Noll and Vo) of
 * its bytes times the golden ratio, and a lookup walks on from there (linear probing)
 * until it meets the word or an empty slot. vocab_table.py writes the same table with
 * numpy; any placement that linear probing can reach reads the same.
 */
#ifndef NNLM_VOCAB_HASH_H
#define NNLM_VOCAB_HASH_H

#include <stdint.h>
#include <string.h>

static inline uint64_t vocab_hash(const char *p, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    return h * 0x9E3779B97F4A7C15ULL;
}

typedef struct {
    const int32_t *slots;
    uint64_t mask;          /* slots - 1 */
    const char *blob;
    const int64_t *offsets;
    int64_t n_words;
} VocabTable;

/* the id of the word p[0:n], or -1. A damaged table (an id out of range, no empty slot)
 * reads no further than its buffers: ids are checked, and the walk stops after a lap. */
static inline int64_t vocab_find(const VocabTable *t, const char *p, int64_t n) {
    uint64_t pos = vocab_hash(p, n) & t->mask;
    for (uint64_t step = 0; step <= t->mask; step++) {
        int32_t id = t->slots[pos];
        if (id < 0 || id >= t->n_words) return -1;
        int64_t a = t->offsets[id], b = t->offsets[id + 1];
        if (b - a == n && memcmp(t->blob + a, p, (size_t)n) == 0) return id;
        pos = (pos + 1) & t->mask;
    }
    return -1;
}

#endif
