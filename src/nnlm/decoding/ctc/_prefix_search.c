/* nnlm.decoding.ctc._prefix_search: the CTC prefix beam search of prefix_search.py in C.
 *
 * The search is pyctcdecode's, step for step, as prefix_search.py (its reference, which
 * the tests compare this module with beam for beam and score for score) writes it out:
 * per frame every beam meets every label worth reading, beams with the same words,
 * partial word and last label merge (the log-sum of their acoustic scores, in the order
 * they were made), each is scored with the language model a word at a time, the best
 * are kept; at the end the partial word is finished and the last word scored with </s>.
 * What Python does with strings this module does with ids:
 *
 * - a partial word is a string interned by its contents (Partial), so two spellings of
 *   one string are one id, as Python's string keys are one key; it carries its node in
 *   the trie of the word list (a prefix of some word, or none) and in the trie of the
 *   hotwords (Trie), and its length in characters;
 * - a text is a node (Text) of its last word and the text before it: the texts of one
 *   search form a tree, each node holding what pyctcdecode caches per text (the fused
 *   score with and without hotwords, and the language model's state after it). Words
 *   hold no whitespace (the Python side sends no alphabet where one could), so two texts
 *   are the same string exactly when they are the same node;
 * - a beam's word frames are a list shared with the beams it came from (Frames).
 *
 * The labels of a frame are visited in the order Python's set of their indices has
 * (set_order below reproduces CPython's set table for small ints; the Python side checks
 * it against the running interpreter before trusting it, and otherwise sends the
 * orders). Floating-point operations are Python's, in its order, compiled without
 * contractions, so the scores are the reference's to the bit.
 *
 * The language model is one of: none; nnlm's compiled back-off queries through
 * kenlm_api.h (no Python between words); or any Python object with pyctcdecode's
 * ``score(state, word, is_last_word=...)``, called once per new text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../kenlm_api.h"

/* -- growable arrays and an int map ---------------------------------------------------- */
static int grow(void **p, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > ((size_t)PY_SSIZE_T_MAX / item) / 2) {
            PyErr_NoMemory();
            return -1;
        }
        n *= 2;
    }
    void *q = PyMem_Realloc(*p, n * item);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

static inline uint64_t mix64(uint64_t x) {  /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* uint64 -> int32, open addressing; keys are stored plus one (0: empty) */
typedef struct {
    uint64_t *keys;
    int32_t *vals;
    size_t mask, used;
} Map;

static void map_free(Map *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
    memset(m, 0, sizeof(*m));
}

static int map_init(Map *m, size_t size) {  /* size: a power of two */
    m->keys = PyMem_Calloc(size, sizeof(uint64_t));
    m->vals = PyMem_Malloc(size * sizeof(int32_t));
    m->mask = size - 1;
    m->used = 0;
    if (!m->keys || !m->vals) {
        map_free(m);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline int32_t map_get(const Map *m, uint64_t key) {
    uint64_t k = key + 1;
    for (size_t i = mix64(k) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == k) return m->vals[i];
        if (m->keys[i] == 0) return -1;
    }
}

static int map_put(Map *m, uint64_t key, int32_t val) {
    if ((m->used + 1) * 2 > m->mask + 1) {
        Map bigger;
        if (map_init(&bigger, (m->mask + 1) * 2)) return -1;
        for (size_t i = 0; i <= m->mask; i++)
            if (m->keys[i]) map_put(&bigger, m->keys[i] - 1, m->vals[i]);
        map_free(m);
        *m = bigger;
    }
    uint64_t k = key + 1;
    size_t i = mix64(k) & m->mask;
    while (m->keys[i] != 0 && m->keys[i] != k) i = (i + 1) & m->mask;
    if (m->keys[i] == 0) m->used++;
    m->keys[i] = k;
    m->vals[i] = val;
    return 0;
}

static inline uint64_t pair(int32_t a, uint32_t b) { return ((uint64_t)(uint32_t)a << 32) | b; }

/* -- Trie: words as characters, children in insertion order ---------------------------- */
typedef struct {
    PyObject_HEAD
    size_t n, cap;
    int32_t *first_child;  /* the node's first child in insertion order; -1: none */
    int32_t *depth;        /* characters from the root */
    uint8_t *end;          /* a word ends here */
    int32_t *first_len;    /* the length of the first word below, depth first in order */
    double *best;          /* the highest value of the words below (Trie(words, values)) */
    Map edges;             /* (node, code point) -> child */
    Py_ssize_t words;
} TrieObject;

static PyTypeObject TrieType;

static void Trie_dealloc(TrieObject *self) {
    PyMem_Free(self->first_child);
    PyMem_Free(self->depth);
    PyMem_Free(self->end);
    PyMem_Free(self->first_len);
    PyMem_Free(self->best);
    map_free(&self->edges);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int32_t trie_node(TrieObject *t, int32_t depth) {
    size_t c1 = t->cap, c2 = t->cap, c3 = t->cap, c4 = t->cap;
    if (GROW(t->first_child, c1, t->n + 1) || GROW(t->depth, c2, t->n + 1) ||
        GROW(t->end, c3, t->n + 1) || GROW(t->first_len, c4, t->n + 1))
        return -1;
    t->cap = c1;
    t->first_child[t->n] = -1;
    t->depth[t->n] = depth;
    t->end[t->n] = 0;
    return (int32_t)t->n++;
}

/* best[node]: the highest of values[i] over the words i that start with the node's
 * string (flashlight's smearing, MAX); -inf where none */
static int trie_best(TrieObject *self, PyObject *words, PyObject *values) {
    if (!(self->best = PyMem_Malloc(sizeof(double) * (self->n ? self->n : 1)))) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < self->n; i++) self->best[i] = -INFINITY;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(words); i++) {
        double v = PyFloat_AsDouble(PyList_GET_ITEM(values, i));
        if (v == -1.0 && PyErr_Occurred()) return -1;
        PyObject *w = PyList_GET_ITEM(words, i);
        int kind = PyUnicode_KIND(w);
        const void *data = PyUnicode_DATA(w);
        int32_t node = 0;
        for (Py_ssize_t j = 0; node >= 0; j++) {
            if (v > self->best[node]) self->best[node] = v;
            if (j == PyUnicode_GET_LENGTH(w)) break;
            node = map_get(&self->edges, pair(node, PyUnicode_READ(kind, data, j)));
        }
    }
    return 0;
}

static int Trie_init(TrieObject *self, PyObject *args, PyObject *kwds) {
    PyObject *words, *values = Py_None;
    if (self->cap || !PyArg_ParseTuple(args, "O!|O:Trie", &PyList_Type, &words, &values)) {
        if (self->cap) PyErr_SetString(PyExc_TypeError, "Trie is built once");
        return -1;
    }
    if (values != Py_None && (!PyList_Check(values) ||
                              PyList_GET_SIZE(values) != PyList_GET_SIZE(words))) {
        PyErr_SetString(PyExc_TypeError, "Trie's values are a list of floats, one a word");
        return -1;
    }
    if (map_init(&self->edges, 64) || trie_node(self, 0) < 0) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(words); i++) {
        PyObject *w = PyList_GET_ITEM(words, i);
        if (!PyUnicode_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "Trie takes a list of str");
            return -1;
        }
        int kind = PyUnicode_KIND(w);
        const void *data = PyUnicode_DATA(w);
        int32_t node = 0;
        for (Py_ssize_t j = 0; j < PyUnicode_GET_LENGTH(w); j++) {
            uint64_t key = pair(node, PyUnicode_READ(kind, data, j));
            int32_t child = map_get(&self->edges, key);
            if (child < 0) {
                child = trie_node(self, (int32_t)j + 1);
                if (child < 0 || map_put(&self->edges, key, child)) return -1;
                if (self->first_child[node] < 0) self->first_child[node] = child;
            }
            node = child;
        }
        self->end[node] = 1;
    }
    self->words = PyList_GET_SIZE(words);
    if (values != Py_None && trie_best(self, words, values) < 0) return -1;
    for (size_t i = 0; i < self->n; i++) {  /* follow first children to the first word */
        int32_t node = (int32_t)i;
        while (!self->end[node] && self->first_child[node] >= 0) node = self->first_child[node];
        self->first_len[i] = self->end[node] ? self->depth[node] : 0;
    }
    return 0;
}

static Py_ssize_t Trie_len(TrieObject *self) { return self->words; }

static PySequenceMethods Trie_as_sequence = {.sq_length = (lenfunc)Trie_len};

static PyTypeObject TrieType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnlm.decoding.ctc._prefix_search.Trie",
    .tp_doc = "Trie(words, values=None): the words' characters as a trie, children in "
              "insertion order; with values, each node's best value below",
    .tp_basicsize = sizeof(TrieObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Trie_init,
    .tp_dealloc = (destructor)Trie_dealloc,
    .tp_as_sequence = &Trie_as_sequence,
};

/* the child of node by a string's code points; -1 where it leaves the trie */
static int32_t trie_walk(const TrieObject *t, int32_t node, const uint32_t *cp, int32_t n) {
    for (int32_t i = 0; i < n && node >= 0; i++) node = map_get(&t->edges, pair(node, cp[i]));
    return node;
}

/* whether a word starts with the node's string (pyctcdecode's CharTrie.has_node) */
static inline int trie_has(const TrieObject *t, int32_t node) {
    return node >= 0 && (t->end[node] || t->first_child[node] >= 0);
}

/* -- CPython's set of small ints, to visit labels in its order -------------------------- */
#define SET_MINSIZE 8
#define LINEAR_PROBES 9
#define PERTURB_SHIFT 5

typedef struct {
    int32_t *table;  /* -1: empty (a set of indices never has a deleted entry) */
    size_t mask, fill, used;
} SimSet;

static void sim_insert_clean(int32_t *table, size_t mask, int32_t key) {
    size_t perturb = (size_t)key, i = (size_t)key & mask;
    for (;;) {
        if (table[i] < 0) { table[i] = key; return; }
        if (i + LINEAR_PROBES <= mask)
            for (size_t j = 1; j <= LINEAR_PROBES; j++)
                if (table[i + j] < 0) { table[i + j] = key; return; }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

/* set_table_resize: a new table of the smallest size above minused, entries re-placed in
 * the order of the old table (``spare`` holds the old entries meanwhile) */
static void sim_resize(SimSet *s, size_t minused, int32_t *spare) {
    size_t size = SET_MINSIZE;
    while (size <= minused) size <<= 1;
    memcpy(spare, s->table, (s->mask + 1) * sizeof(int32_t));
    size_t old_mask = s->mask;
    for (size_t i = 0; i < size; i++) s->table[i] = -1;
    s->mask = size - 1;
    for (size_t i = 0; i <= old_mask; i++)
        if (spare[i] >= 0) sim_insert_clean(s->table, s->mask, spare[i]);
    s->fill = s->used;
}

static void sim_add(SimSet *s, int32_t key, int32_t *spare) {
    size_t mask = s->mask, i = (size_t)key & mask, perturb = (size_t)key;
    for (;;) {
        size_t probes = (i + LINEAR_PROBES <= mask) ? LINEAR_PROBES : 0;
        for (size_t j = 0; j <= probes; j++) {
            int32_t *e = &s->table[i + j];
            if (*e == key) return;
            if (*e < 0) {
                *e = key;
                s->fill++;
                s->used++;
                if (s->fill * 5 >= mask * 3)
                    sim_resize(s, s->used > 50000 ? s->used * 2 : s->used * 4, spare);
                return;
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

static void sim_clear(SimSet *s) {
    s->mask = SET_MINSIZE - 1;
    s->fill = s->used = 0;
    for (size_t i = 0; i < SET_MINSIZE; i++) s->table[i] = -1;
}

/* set_merge of ``from`` into the empty ``to`` (set_copy), then of {best} */
static size_t sim_order(SimSet *a, SimSet *b, int32_t *spare, const int32_t *cand, size_t n,
                        int32_t best, int32_t *out) {
    sim_clear(a);
    for (size_t i = 0; i < n; i++) sim_add(a, cand[i], spare);
    sim_clear(b);
    if (a->used) {
        if ((b->fill + a->used) * 5 >= b->mask * 3) sim_resize(b, (b->used + a->used) * 2, spare);
        if (b->mask == a->mask && a->fill == a->used) {
            memcpy(b->table, a->table, (a->mask + 1) * sizeof(int32_t));
        } else {
            for (size_t i = 0; i <= a->mask; i++)
                if (a->table[i] >= 0) sim_insert_clean(b->table, b->mask, a->table[i]);
        }
        b->fill = b->used = a->used;
    }
    if ((b->fill + 1) * 5 >= b->mask * 3) sim_resize(b, (b->used + 1) * 2, spare);
    sim_add(b, best, spare);
    size_t k = 0;
    for (size_t i = 0; i <= b->mask; i++)
        if (b->table[i] >= 0) out[k++] = b->table[i];
    return k;
}

/* the table size a set of n labels can reach: room for every resize on the way */
static size_t sim_capacity(size_t n) {
    size_t size = SET_MINSIZE;
    while (size <= 8 * (n + 2)) size <<= 1;
    return size;
}

/* set_order(candidates, best) -> list: the order of set(candidates) | {best} */
static PyObject *set_order(PyObject *module, PyObject *args) {
    PyObject *seq;
    int best;
    if (!PyArg_ParseTuple(args, "Oi:set_order", &seq, &best)) return NULL;
    if (best < 0) {
        PyErr_SetString(PyExc_ValueError, "best is an index (>= 0)");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(seq, "set_order takes a sequence of ints");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    size_t cap = sim_capacity((size_t)n + 1);
    int32_t *mem = PyMem_Malloc((4 * cap + (size_t)n + 1) * sizeof(int32_t));
    PyObject *out = NULL;
    if (!mem) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *cand = mem + 4 * cap, *spare = mem + 2 * cap, *order = mem + 3 * cap;
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if ((v == -1 && PyErr_Occurred()) || v < 0 || v > INT32_MAX) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "indices are >= 0");
            goto done;
        }
        cand[i] = (int32_t)v;
    }
    SimSet a = {mem, 0, 0, 0}, b = {mem + cap, 0, 0, 0};
    size_t k = sim_order(&a, &b, spare, cand, (size_t)n, best, order);
    out = PyList_New((Py_ssize_t)k);
    for (size_t j = 0; out && j < k; j++) {
        PyObject *v = PyLong_FromLong(order[j]);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)j, v);
    }
done:
    PyMem_Free(mem);
    Py_DECREF(fast);
    return out;
}

/* -- the search's tables ----------------------------------------------------------------- */
typedef struct {
    uint32_t off, len;  /* code points at cps[off:off + len] (not kept where simple) */
    int32_t parent;     /* where simple: the string less its last code point, and that */
    uint32_t last;
    int32_t kids;       /* where dense: its extension by each label at kids[this:this + V]
                           (-1: none made yet) */
    int32_t uni, hot;   /* the string's node in the word list's and the hotwords' tries */
    uint64_t hash;
    int32_t lm_id;      /* the LM's id of the string as a word; -3: not looked up yet */
    uint8_t has_score;
    double score;       /* its partial-word score */
    PyObject *str;      /* the string, made when Python or the LM needs it */
} Partial;

typedef struct {
    int32_t parent, word;  /* the text before the last word; the last word (a Partial) */
    int32_t hot;           /* hotword words among its words */
    uint8_t scored, eos_scored;
    double with_hot, raw, eos_with_hot;
    int32_t state, eos_state;  /* the LM state after it */
} Text;

typedef struct { int32_t start, end, prev; } Frames;

typedef struct {
    int32_t text, part, last, frames, pf0, pf1;
    int32_t before, word;  /* at the end: the last word, and the text it follows */
    double logit;
} Beam;

typedef enum { LM_NONE, LM_QUERY, LM_PYTHON } LMKind;

typedef struct {
    /* labels */
    Py_ssize_t V;
    int is_bpe;
    int8_t *kind;         /* 0 blank, 1 the word separator (" "), 2 anything else */
    int32_t *cls;         /* the first label of the same string: Python's == on labels */
    uint8_t *bpe_start, *bpe_end;
    uint32_t **cp;
    int32_t *cp_len;
    int32_t *clean;       /* subwords: the partial word a word-starting label leaves */
    /* every label one code point or none, no subwords: a partial word is then its
       parent and one code point, and (parent, code point) names it */
    int simple;
    /* few labels: each partial word that is extended holds its extensions by label in
       ``kids`` (a row of V ids, -1 where not made yet), a read in a row the beam's own
       instead of a probe in a table of every partial word */
    int dense;
    int32_t *kids;
    size_t n_kids, cap_kids;
    /* partial words */
    Partial *parts;
    size_t n_parts, cap_parts;
    uint32_t *cps;
    size_t n_cps, cap_cps;
    int32_t *part_slots;  /* content-hash table of partial ids (-1: empty) */
    size_t part_mask;
    Map extend_memo;      /* (partial, label) -> partial */
    /* texts and frames */
    Text *texts;
    size_t n_texts, cap_texts;
    Map text_index;       /* (text, word) -> text */
    Frames *frames;
    size_t n_frames, cap_frames;
    /* the language model */
    LMKind lm_kind;
    PyObject *lm;         /* the Query, or the Python LM */
    const NnlmKenlmAPI *api;
    char *states;         /* LM_QUERY: state_size bytes each */
    size_t n_states, cap_states;
    PyObject **pstates;   /* LM_PYTHON: state objects (owned) */
    size_t cap_pstates;
    int32_t unk_id, eos_id;
    double alpha, beta, factor, unk_offset;
    int boundary, uni_nonempty;
    TrieObject *uni;      /* the word list's prefixes; NULL: none (every partial OOV) */
    PyObject *partial_fn; /* the LM's own score_partial_token, where it is not built in */
    PyObject *live_fn;    /* told the states of each frame's kept beams (a Python LM's) */
    PyObject *last_fn;    /* score_last_words: every text's last word at once (a Python LM's) */
    int exact_end;        /* an empty last word scored as pyctcdecode does (fusion.py) */
    int viterbi;          /* merged beams keep the better score (log_add=False), not the sum */
    PyObject *is_last_word;  /* ("is_last_word",) */
    PyObject *score_name;    /* "score" */
    int32_t start_state;
    /* hotwords */
    TrieObject *hot;
    double hot_weight;
    int hot_any;
    /* beams */
    Beam *cur, *next;
    size_t n_cur, cap_cur, n_next, cap_next;
    double *score;
    size_t cap_score;
    int32_t *merge_slots;
    uint32_t *merge_stamp;
    size_t merge_mask;
    uint32_t stamp;
    int32_t *heap;
    size_t cap_heap;
    int32_t *order;       /* a frame's labels in set order */
    int32_t *cand;
    SimSet sa, sb;
    int32_t *spare;
} Search;

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static inline uint32_t *part_cps(const Search *S, int32_t id) { return S->cps + S->parts[id].off; }

static int part_slots_grow(Search *S) {
    size_t size = (S->part_mask + 1) * 2;
    int32_t *slots = PyMem_Malloc(size * sizeof(int32_t));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < size; i++) slots[i] = -1;
    for (size_t id = 0; id < S->n_parts; id++) {
        size_t i = mix64(S->parts[id].hash) & (size - 1);
        while (slots[i] >= 0) i = (i + 1) & (size - 1);
        slots[i] = (int32_t)id;
    }
    PyMem_Free(S->part_slots);
    S->part_slots = slots;
    S->part_mask = size - 1;
    return 0;
}

/* the id of the string base + cp[:n] (made where new); -1 on error */
static int32_t intern_partial(Search *S, int32_t base, const uint32_t *cp, int32_t n) {
    uint64_t h = base >= 0 ? S->parts[base].hash : FNV_OFFSET;
    for (int32_t i = 0; i < n; i++) h = (h ^ cp[i]) * FNV_PRIME;
    uint32_t blen = base >= 0 ? S->parts[base].len : 0, len = blen + (uint32_t)n;
    size_t i = mix64(h) & S->part_mask;
    for (; S->part_slots[i] >= 0; i = (i + 1) & S->part_mask) {
        const Partial *p = &S->parts[S->part_slots[i]];
        if (p->hash == h && p->len == len &&
            (!blen || !memcmp(S->cps + p->off, part_cps(S, base), blen * 4)) &&
            (!n || !memcmp(S->cps + p->off + blen, cp, (size_t)n * 4)))
            return S->part_slots[i];
    }
    if (S->n_parts >= INT32_MAX || S->n_cps + len > UINT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "too many partial words for one search");
        return -1;
    }
    if (GROW(S->parts, S->cap_parts, S->n_parts + 1) ||
        GROW(S->cps, S->cap_cps, S->n_cps + len))
        return -1;
    Partial *p = &S->parts[S->n_parts];
    p->off = (uint32_t)S->n_cps;
    p->len = len;
    if (blen) memcpy(S->cps + S->n_cps, part_cps(S, base), blen * 4);
    if (n) memcpy(S->cps + S->n_cps + blen, cp, (size_t)n * 4);
    S->n_cps += len;
    p->hash = h;
    p->uni = !S->uni ? -1 : base < 0 ? trie_walk(S->uni, 0, cp, n)
                                     : trie_walk(S->uni, S->parts[base].uni, cp, n);
    p->hot = !S->hot ? -1 : base < 0 ? trie_walk(S->hot, 0, cp, n)
                                     : trie_walk(S->hot, S->parts[base].hot, cp, n);
    p->parent = -1;
    p->last = 0;
    p->kids = -1;
    p->lm_id = -3;
    p->has_score = 0;
    p->str = NULL;
    int32_t id = (int32_t)S->n_parts++;
    S->part_slots[i] = id;
    if (S->n_parts * 2 > S->part_mask + 1 && part_slots_grow(S)) return -1;
    return id;
}

/* where simple: the new string ``part`` + code point ``c`` */
static int32_t make_simple(Search *S, int32_t part, uint32_t c) {
    if (S->n_parts >= INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "too many partial words for one search");
        return -1;
    }
    if (GROW(S->parts, S->cap_parts, S->n_parts + 1)) return -1;
    const Partial *b = &S->parts[part];
    Partial *p = &S->parts[S->n_parts];
    p->off = 0;
    p->len = b->len + 1;
    p->parent = part;
    p->last = c;
    p->hash = 0;
    p->uni = S->uni && b->uni >= 0 ? map_get(&S->uni->edges, pair(b->uni, c)) : -1;
    p->hot = S->hot && b->hot >= 0 ? map_get(&S->hot->edges, pair(b->hot, c)) : -1;
    p->lm_id = -3;
    p->has_score = 0;
    p->str = NULL;
    p->kids = -1;
    return (int32_t)S->n_parts++;
}

/* the partial word ``part`` extended by label ``k`` (made where new) */
static inline int32_t extend_partial(Search *S, int32_t part, Py_ssize_t k) {
    if (S->dense) {
        if (S->parts[part].kids < 0) {
            if (S->n_kids + (size_t)S->V > INT32_MAX) {
                PyErr_SetString(PyExc_MemoryError, "too many partial words for one search");
                return -1;
            }
            if (GROW(S->kids, S->cap_kids, S->n_kids + (size_t)S->V)) return -1;
            for (Py_ssize_t j = 0; j < S->V; j++) S->kids[S->n_kids + (size_t)j] = -1;
            S->parts[part].kids = (int32_t)S->n_kids;
            S->n_kids += (size_t)S->V;
        }
        size_t at = (size_t)S->parts[part].kids + (size_t)S->cls[k];
        if (S->kids[at] >= 0) return S->kids[at];
        int32_t id = S->simple ? make_simple(S, part, S->cp[k][0])
                               : intern_partial(S, part, S->cp[k], S->cp_len[k]);
        if (id >= 0) S->kids[at] = id;
        return id;
    }
    uint64_t key = pair(part, S->simple ? S->cp[k][0] : (uint32_t)k);
    int32_t id = map_get(&S->extend_memo, key);
    if (id >= 0) return id;
    id = S->simple ? make_simple(S, part, S->cp[k][0])
                   : intern_partial(S, part, S->cp[k], S->cp_len[k]);
    if (id < 0 || map_put(&S->extend_memo, key, id)) return -1;
    return id;
}

static PyObject *part_str(Search *S, int32_t id) {
    Partial *p = &S->parts[id];
    if (p->str) return p->str;
    if (!S->simple) {
        p->str = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, S->cps + p->off, p->len);
        return p->str;
    }
    uint32_t *text = PyMem_Malloc((size_t)p->len * 4 + 4);
    if (!text) return PyErr_NoMemory();
    uint32_t n = p->len;
    for (int32_t q = id; n > 0; q = S->parts[q].parent) text[--n] = S->parts[q].last;
    p->str = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, text, p->len);
    PyMem_Free(text);
    return p->str;
}

static inline int is_hot_word(const Search *S, int32_t word) {
    const Partial *p = &S->parts[word];
    return S->hot && p->len > 0 && p->hot >= 0 && S->hot->end[p->hot];
}

/* the text of ``parent`` followed by ``word`` (the same text where the word is empty) */
static int32_t text_child(Search *S, int32_t parent, int32_t word) {
    if (word == 0) return parent;  /* partial 0 is "" */
    uint64_t key = pair(parent, (uint32_t)word);
    int32_t id = map_get(&S->text_index, key);
    if (id >= 0) return id;
    if (S->n_texts >= INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "too many texts for one search");
        return -1;
    }
    if (GROW(S->texts, S->cap_texts, S->n_texts + 1)) return -1;
    Text *t = &S->texts[S->n_texts];
    memset(t, 0, sizeof(*t));
    t->parent = parent;
    t->word = word;
    t->hot = S->texts[parent].hot + is_hot_word(S, word);
    id = (int32_t)S->n_texts++;
    if (map_put(&S->text_index, key, id)) return -1;
    return id;
}

static int32_t push_frames(Search *S, int32_t prev, int32_t start, int32_t end) {
    if (S->n_frames >= INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "too many words for one search");
        return -1;
    }
    if (GROW(S->frames, S->cap_frames, S->n_frames + 1)) return -1;
    S->frames[S->n_frames] = (Frames){start, end, prev};
    return (int32_t)S->n_frames++;
}

/* -- scores ------------------------------------------------------------------------------- */
static inline double hot_text(const Search *S, int32_t text) {  /* HotwordScorer.score */
    return S->hot_any ? S->hot_weight * (double)S->texts[text].hot : 0.0;
}

static inline double hot_partial(const Search *S, int32_t part) {  /* .score_partial_token */
    const Partial *p = &S->parts[part];
    if (!S->hot || !trie_has(S->hot, p->hot)) return 0.0;
    return S->hot_weight * (double)p->len / (double)S->hot->first_len[p->hot];
}

/* what a word being spelled adds: its hotword score where it starts a hotword, else the
 * LM's (LanguageModel.score_partial_token, or the LM's own method); NAN on error */
static double partial_score(Search *S, int32_t part) {
    Partial *p = &S->parts[part];
    if (p->has_score) return p->score;
    double v;
    if (S->hot && trie_has(S->hot, p->hot)) {
        v = hot_partial(S, part);
    } else if (S->partial_fn) {
        PyObject *s = part_str(S, part);
        PyObject *r = s ? PyObject_CallOneArg(S->partial_fn, s) : NULL;
        v = r ? PyFloat_AsDouble(r) : -1.0;
        Py_XDECREF(r);
        if (v == -1.0 && PyErr_Occurred()) return NAN;
    } else {
        /* pyctcdecode's offset * is_oov; with an offset of -inf (a lexicon) a known
           prefix scores the best LM score of the words it starts (fusion.py) */
        int oov = !S->uni || p->uni < 0;
        if (!oov && isinf(S->unk_offset)) {
            v = S->uni->best ? S->alpha * S->factor * S->uni->best[p->uni] : 0.0;
        } else {
            double u = oov ? S->unk_offset : S->unk_offset * 0.0;
            if (p->len > 6) u = u * (double)p->len / 6.0;
            v = u;
        }
    }
    p->has_score = 1;
    p->score = v;
    return v;
}

static inline void *state_at(const Search *S, int32_t i) {
    return S->states + (size_t)i * (size_t)S->api->state_size;
}

static int32_t new_state(Search *S) {
    if (S->lm_kind == LM_QUERY) {
        size_t size = (size_t)S->api->state_size, cap = S->cap_states * size;
        if (grow((void **)&S->states, &cap, (S->n_states + 1) * size, 1)) return -1;
        S->cap_states = cap / size;
    } else if (GROW(S->pstates, S->cap_pstates, S->n_states + 1)) {
        return -1;
    } else {
        S->pstates[S->n_states] = NULL;
    }
    return (int32_t)S->n_states++;
}

/* the LM's id of a partial word as a word (looked up once) */
static int32_t word_id(Search *S, int32_t part) {
    Partial *p = &S->parts[part];
    if (p->lm_id == -3) {
        PyObject *s = part_str(S, part);
        if (!s) return -2;
        p->lm_id = S->api->word_id(S->lm, s);
        if (p->lm_id == -2) {
            p->lm_id = -3;
            return -2;
        }
    }
    return p->lm_id;
}

/* LanguageModel._get_raw_end_score: log10 p(</s> | state st) with score_boundary, else 0 */
static int end_score(Search *S, int32_t st, double *out) {
    if (!S->boundary) {
        *out = 0.0;
        return 0;
    }
    int32_t tmp = new_state(S);
    if (tmp < 0) return -1;
    S->n_states--;  /* a scratch state, reused */
    *out = (double)S->api->score(S->lm, state_at(S, st), S->eos_id, state_at(S, tmp));
    return 0;
}

/* LanguageModel.score: the fused score of ``word`` after the state of text ``before``,
 * with </s> after it where ``eos``; *state: the state after the word */
static int lm_word(Search *S, int32_t before, int32_t word, int eos, double *out,
                   int32_t *state) {
    int32_t st = new_state(S);
    if (st < 0) return -1;
    *state = st;
    int32_t in = S->texts[before].state;
    if (S->lm_kind == LM_PYTHON) {
        PyObject *s = part_str(S, word);
        if (!s) return -1;
        /* lm.score(state, word, is_last_word=eos) */
        PyObject *args[4] = {S->lm, S->pstates[in], s, eos ? Py_True : Py_False};
        PyObject *r = PyObject_VectorcallMethod(S->score_name, args, 3, S->is_last_word);
        if (!r) return -1;
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_TypeError, "the language model's score() must return "
                            "(score, state)");
            return -1;
        }
        double v = PyFloat_AsDouble(PyTuple_GET_ITEM(r, 0));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(r);
            return -1;
        }
        S->pstates[st] = Py_NewRef(PyTuple_GET_ITEM(r, 1));
        Py_DECREF(r);
        *out = v;
        return 0;
    }
    if (word == 0 && eos && !S->exact_end) {  /* ended on a separator: </s>, no word */
        memcpy(state_at(S, st), state_at(S, in), (size_t)S->api->state_size);
        double end = 0.0;
        if (end_score(S, st, &end)) return -1;
        *out = S->alpha * end * S->factor;
        return 0;
    }
    int32_t w = word_id(S, word);
    if (w == -2) return -1;
    double lm = (double)S->api->score(S->lm, state_at(S, in), w, state_at(S, st));
    const Partial *p = &S->parts[word];
    if ((S->uni_nonempty && !(p->uni >= 0 && S->uni->end[p->uni])) || w == S->unk_id)
        lm += S->unk_offset;
    if (eos) {
        double end = 0.0;
        if (end_score(S, st, &end)) return -1;
        lm = lm + end;
    }
    *out = S->alpha * lm * S->factor + S->beta;
    return 0;
}

/* the cached scores of a text (PrefixSearch.lm_beams' cache), computed where missing */
static int score_text(Search *S, int32_t t) {
    Text *x = &S->texts[t];
    if (x->scored) return 0;
    int32_t parent = x->parent, word = x->word;
    if (!S->texts[parent].scored) {
        PyErr_SetString(PyExc_RuntimeError, "a text scored before the text it extends");
        return -1;
    }
    double sc;
    int32_t st;
    if (lm_word(S, parent, word, 0, &sc, &st)) return -1;
    x = &S->texts[t];
    x->raw = S->texts[parent].raw + sc;
    x->with_hot = x->raw + hot_text(S, t);
    x->state = st;
    x->scored = 1;
    return 0;
}

/* a beam's rank: acoustic + the text's fused score + the partial word's */
static inline int beam_score(Search *S, const Beam *b, double *out) {
    if (S->lm_kind == LM_NONE) {
        *out = b->logit + hot_text(S, b->text) + hot_partial(S, b->part);
        return 0;
    }
    if (score_text(S, b->text)) return -1;
    double lm = S->texts[b->text].with_hot;
    if (b->part) {
        double p = partial_score(S, b->part);
        if (isnan(p) && PyErr_Occurred()) return -1;
        lm += p;
    }
    *out = b->logit + lm;
    return 0;
}

/* -- merging, ranking, pruning ------------------------------------------------------------ */
static int merge_reset(Search *S, size_t beams) {
    size_t size = 64;
    while (size < 2 * beams + 2) size <<= 1;
    if (size > S->merge_mask + 1) {
        PyMem_Free(S->merge_slots);
        PyMem_Free(S->merge_stamp);
        S->merge_slots = PyMem_Malloc(size * sizeof(int32_t));
        S->merge_stamp = PyMem_Calloc(size, sizeof(uint32_t));
        if (!S->merge_slots || !S->merge_stamp) {
            PyErr_NoMemory();
            return -1;
        }
        S->merge_mask = size - 1;
        S->stamp = 0;
    }
    if (++S->stamp == 0) {  /* wrapped: clear for real */
        memset(S->merge_stamp, 0, (S->merge_mask + 1) * sizeof(uint32_t));
        S->stamp = 1;
    }
    S->n_next = 0;
    return GROW(S->next, S->cap_next, beams + 1);
}

static inline uint64_t beam_key(int32_t text, int32_t part, int32_t last) {
    return mix64(((uint64_t)(uint32_t)text << 32 | (uint32_t)part) ^
                 mix64((uint64_t)(uint32_t)last + 0x9e3779b97f4a7c15ULL));
}

static inline double sum_log(double s1, double s2) {  /* prefix_search.sum_log_scores */
    if (s1 >= s2) return s1 + log(1 + exp(s2 - s1));
    return s2 + log(1 + exp(s1 - s2));
}

/* merge_beams, one beam at a time: the first's place, the last's fields, the log-sum
 * (the larger score where S->viterbi) */
static inline void merge_add(Search *S, const Beam *b) {
    size_t i = beam_key(b->text, b->part, b->last) & S->merge_mask;
    for (;; i = (i + 1) & S->merge_mask) {
        if (S->merge_stamp[i] != S->stamp) {
            S->merge_stamp[i] = S->stamp;
            S->merge_slots[i] = (int32_t)S->n_next;
            S->next[S->n_next++] = *b;
            return;
        }
        Beam *seen = &S->next[S->merge_slots[i]];
        if (seen->text == b->text && seen->part == b->part && seen->last == b->last) {
            double logit = S->viterbi ? (seen->logit >= b->logit ? seen->logit : b->logit)
                                      : sum_log(seen->logit, b->logit);
            *seen = *b;
            seen->logit = logit;
            return;
        }
    }
}

/* heap order: the worse beam first (lower score; at a tie, the later one) */
static inline int worse(const double *score, int32_t a, int32_t b) {
    return score[a] < score[b] || (score[a] == score[b] && a > b);
}

static void sift_down(int32_t *h, size_t n, size_t i, const double *score) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && worse(score, h[l], h[m])) m = l;
        if (r < n && worse(score, h[r], h[m])) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* sort_and_trim of the beams within beam_prune_logp of the best: the indices of the
 * ``width`` best of S->next, best first, ties in their order; returns how many */
static size_t rank(Search *S, size_t width, double prune_logp) {
    size_t n = S->n_next;
    double best = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (S->score[i] > best) best = S->score[i];
    double floor = best + prune_logp;
    size_t k = 0;
    int32_t *h = S->heap;
    for (size_t i = 0; i < n; i++) {
        if (!(S->score[i] >= floor)) continue;
        if (k < width) {
            h[k++] = (int32_t)i;
            for (size_t j = k - 1; j > 0;) {  /* sift up */
                size_t up = (j - 1) / 2;
                if (!worse(S->score, h[j], h[up])) break;
                int32_t t = h[j];
                h[j] = h[up];
                h[up] = t;
                j = up;
            }
        } else if (worse(S->score, h[0], (int32_t)i)) {
            h[0] = (int32_t)i;
            sift_down(h, k, 0, S->score);
        }
    }
    for (size_t m = k; m > 1; m--) {  /* heap sort: the worst to the back */
        int32_t t = h[0];
        h[0] = h[m - 1];
        h[m - 1] = t;
        sift_down(h, m - 1, 0, S->score);
    }
    return k;
}

/* prune_history: of beams that agree on their last ``keep`` words, partial word and
 * last label, the first only (the rest marked -1 in ``idx``) */
static int prune_history(Search *S, int32_t *idx, size_t k, int keep) {
    size_t size = 16;
    while (size < 2 * k + 2) size <<= 1;
    int32_t *slots = PyMem_Malloc(size * sizeof(int32_t));
    uint64_t *hashes = PyMem_Malloc(k * sizeof(uint64_t) + 1);
    if (!slots || !hashes) {
        PyMem_Free(slots);
        PyMem_Free(hashes);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < size; i++) slots[i] = -1;
    for (size_t j = 0; j < k; j++) {
        const Beam *b = &S->next[idx[j]];
        uint64_t h = beam_key(0, b->part, b->last);
        int32_t t = b->text;
        for (int w = 0; w < keep && t != 0; w++, t = S->texts[t].parent)
            h = mix64(h ^ (uint64_t)(uint32_t)S->texts[t].word);
        hashes[j] = h;
        size_t i = h & (size - 1);
        int dup = 0;
        for (; slots[i] >= 0; i = (i + 1) & (size - 1)) {
            const Beam *o = &S->next[idx[slots[i]]];
            if (hashes[slots[i]] != h || o->part != b->part || o->last != b->last) continue;
            int32_t x = b->text, y = o->text, w = 0;
            for (; w < keep && x != 0 && y != 0; w++, x = S->texts[x].parent,
                 y = S->texts[y].parent)
                if (S->texts[x].word != S->texts[y].word) break;
            if (w == keep || (x == 0 && y == 0)) {
                dup = 1;
                break;
            }
        }
        if (dup) {
            idx[j] = -1;
        } else {
            slots[i] = (int32_t)j;
        }
    }
    PyMem_Free(slots);
    PyMem_Free(hashes);
    return 0;
}

/* -- one utterance ------------------------------------------------------------------------ */
static void search_free(Search *S) {
    for (Py_ssize_t k = 0; k < S->V && S->cp; k++) PyMem_Free(S->cp[k]);
    PyMem_Free(S->cp);
    PyMem_Free(S->kind);
    PyMem_Free(S->cls);
    PyMem_Free(S->bpe_start);
    PyMem_Free(S->bpe_end);
    PyMem_Free(S->cp_len);
    PyMem_Free(S->clean);
    for (size_t i = 0; i < S->n_parts; i++) Py_XDECREF(S->parts[i].str);
    PyMem_Free(S->parts);
    PyMem_Free(S->cps);
    PyMem_Free(S->part_slots);
    PyMem_Free(S->kids);
    map_free(&S->extend_memo);
    map_free(&S->text_index);
    PyMem_Free(S->texts);
    PyMem_Free(S->frames);
    PyMem_Free(S->states);
    if (S->pstates)
        for (size_t i = 0; i < S->n_states; i++) Py_XDECREF(S->pstates[i]);
    PyMem_Free(S->pstates);
    Py_XDECREF(S->is_last_word);
    Py_XDECREF(S->score_name);
    PyMem_Free(S->cur);
    PyMem_Free(S->next);
    PyMem_Free(S->score);
    PyMem_Free(S->merge_slots);
    PyMem_Free(S->merge_stamp);
    PyMem_Free(S->heap);
    PyMem_Free(S->order);
    PyMem_Free(S->cand);
    PyMem_Free(S->sa.table);
    PyMem_Free(S->sb.table);
    PyMem_Free(S->spare);
}

static const Py_UCS4 BPE_TOKEN = 0x2581;  /* ▁ */
#define DENSE_LABELS 512  /* labels up to which partial words keep their extensions */

static int setup_labels(Search *S, PyObject *labels) {
    Py_ssize_t V = S->V;
    S->kind = PyMem_Calloc((size_t)V, 1);
    S->cls = PyMem_Calloc((size_t)V, sizeof(int32_t));
    S->bpe_start = PyMem_Calloc((size_t)V, 1);
    S->bpe_end = PyMem_Calloc((size_t)V, 1);
    S->cp = PyMem_Calloc((size_t)V, sizeof(uint32_t *));
    S->cp_len = PyMem_Calloc((size_t)V, sizeof(int32_t));
    S->clean = PyMem_Calloc((size_t)V, sizeof(int32_t));
    if (!S->kind || !S->cls || !S->bpe_start || !S->bpe_end || !S->cp || !S->cp_len ||
        !S->clean) {
        PyErr_NoMemory();
        return -1;
    }
    S->simple = !S->is_bpe;
    S->dense = V <= DENSE_LABELS;
    for (Py_ssize_t k = 0; k < V; k++) {
        PyObject *s = PyList_GET_ITEM(labels, k);
        if (!PyUnicode_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "labels are str");
            return -1;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        S->cp[k] = (uint32_t *)PyUnicode_AsUCS4Copy(s);
        if (!S->cp[k]) return -1;
        S->cp_len[k] = (int32_t)n;
        S->kind[k] = n == 0 ? 0 : (!S->is_bpe && n == 1 && S->cp[k][0] == ' ') ? 1 : 2;
        S->cls[k] = (int32_t)k;
        for (Py_ssize_t j = 0; j < k; j++) {
            int eq = PyUnicode_Compare(PyList_GET_ITEM(labels, j), s);
            if (eq == -1 && PyErr_Occurred()) return -1;
            if (eq == 0) {
                S->cls[k] = S->cls[j];
                break;
            }
        }
        if (n > 1) S->simple = 0;
        S->bpe_start[k] = n > 0 && S->cp[k][0] == BPE_TOKEN;
        S->bpe_end[k] = n > 0 && S->cp[k][n - 1] == BPE_TOKEN;
    }
    return 0;
}

static int setup_tables(Search *S) {
    S->part_mask = 1023;
    S->part_slots = PyMem_Malloc(1024 * sizeof(int32_t));
    if (!S->part_slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < 1024; i++) S->part_slots[i] = -1;
    if (map_init(&S->extend_memo, 1024) || map_init(&S->text_index, 1024)) return -1;
    if (intern_partial(S, -1, NULL, 0) != 0) return -1;  /* partial 0: "" */
    for (Py_ssize_t k = 0; S->is_bpe && k < S->V; k++) {
        /* char[1:] where it starts a word, then [:-1] where it ends one */
        int32_t from = S->bpe_start[k], to = S->cp_len[k] - S->bpe_end[k];
        S->clean[k] = intern_partial(S, -1, S->cp[k] + from, to > from ? to - from : 0);
        if (S->clean[k] < 0) return -1;
    }
    if (GROW(S->texts, S->cap_texts, 1)) return -1;
    memset(&S->texts[0], 0, sizeof(Text));
    S->texts[0].scored = 1;  /* cache[("", False)] = (0.0, 0.0, start state) */
    S->n_texts = 1;
    size_t cap = sim_capacity((size_t)S->V);
    S->sa.table = PyMem_Malloc(cap * sizeof(int32_t));
    S->sb.table = PyMem_Malloc(cap * sizeof(int32_t));
    S->spare = PyMem_Malloc(cap * sizeof(int32_t));
    S->order = PyMem_Malloc(((size_t)S->V + 1) * sizeof(int32_t));
    S->cand = PyMem_Malloc(((size_t)S->V + 1) * sizeof(int32_t));
    if (!S->sa.table || !S->sb.table || !S->spare || !S->order || !S->cand) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* the LM: (kind, lm, start state, word-list trie or None, unk offset, alpha, beta,
 * log10 -> ln factor, score boundary, word list not empty, partial-score function or
 * None); kind "query" or "python" */
static int setup_lm(Search *S, PyObject *spec) {
    if (spec == Py_None) {
        S->lm_kind = LM_NONE;
        return 0;
    }
    const char *kind;
    PyObject *start, *uni, *partial_fn, *live_fn = Py_None, *last_fn = Py_None;
    S->exact_end = 0;
    if (!PyArg_ParseTuple(spec, "sOOOddddppO|OpO:lm", &kind, &S->lm, &start, &uni,
                          &S->unk_offset, &S->alpha, &S->beta, &S->factor, &S->boundary,
                          &S->uni_nonempty, &partial_fn, &live_fn, &S->exact_end, &last_fn))
        return -1;
    S->live_fn = live_fn == Py_None ? NULL : live_fn;
    S->last_fn = last_fn == Py_None ? NULL : last_fn;
    if (uni != Py_None && !PyObject_TypeCheck(uni, &TrieType)) {
        PyErr_SetString(PyExc_TypeError, "the word list is a Trie or None");
        return -1;
    }
    S->uni = uni == Py_None ? NULL : (TrieObject *)uni;
    S->partial_fn = partial_fn == Py_None ? NULL : partial_fn;
    int32_t st;
    if (!strcmp(kind, "python")) {
        S->lm_kind = LM_PYTHON;
        S->is_last_word = Py_BuildValue("(s)", "is_last_word");
        S->score_name = PyUnicode_InternFromString("score");
        if (!S->is_last_word || !S->score_name || (st = new_state(S)) < 0) return -1;
        S->pstates[st] = Py_NewRef(start);
    } else if (!strcmp(kind, "query")) {
        S->lm_kind = LM_QUERY;
        S->api = PyCapsule_Import(NNLM_KENLM_API_CAPSULE, 0);
        if (!S->api) return -1;
        if (S->api->version != NNLM_KENLM_API_VERSION ||
            !PyObject_TypeCheck(S->lm, S->api->query_type)) {
            PyErr_SetString(PyExc_TypeError, "not a query of this nnlm's kenlm module");
            return -1;
        }
        if ((st = new_state(S)) < 0 || S->api->read_state(S->lm, start, state_at(S, st)))
            return -1;
        S->unk_id = S->api->unk_id(S->lm);
        S->eos_id = S->api->eos_id(S->lm);
    } else {
        PyErr_Format(PyExc_ValueError, "no language model kind %s", kind);
        return -1;
    }
    S->start_state = st;
    return 0;
}

/* every beam extended by every label of frame t worth reading, merged as made */
static int extend(Search *S, const double *col, int32_t t, const int32_t *order, size_t n_order,
                  int *force_break) {
    if (merge_reset(S, S->n_cur * n_order)) return -1;
    for (size_t o = 0; o < n_order; o++) {
        int32_t k = order[o];
        double p = col[k];
        int kind = S->kind[k];
        int32_t cls = S->cls[k];
        for (size_t i = 0; i < S->n_cur; i++) {
            const Beam *b = &S->cur[i];
            Beam nb = *b;
            nb.last = cls;
            nb.logit = b->logit + p;
            if (kind == 0 || b->last == cls) {  /* blank or repeat: words unchanged */
                if (kind != 0) nb.pf1 = t + 1;
            } else if (S->is_bpe && (S->bpe_start[k] || *force_break)) {
                *force_break = S->bpe_end[k];  /* like ▁⁇▁: the next one starts a word */
                if (b->part) {
                    if ((nb.text = text_child(S, b->text, b->part)) < 0 ||
                        (nb.frames = push_frames(S, b->frames, b->pf0, b->pf1)) < 0)
                        return -1;
                }
                nb.part = S->clean[k];
                nb.pf0 = t;
                nb.pf1 = t + 1;
            } else if (kind == 1) {  /* the separator finishes the partial word */
                if (b->part) {
                    if ((nb.text = text_child(S, b->text, b->part)) < 0 ||
                        (nb.frames = push_frames(S, b->frames, b->pf0, b->pf1)) < 0)
                        return -1;
                }
                nb.part = 0;
                nb.pf0 = nb.pf1 = -1;
            } else {
                if ((nb.part = extend_partial(S, b->part, k)) < 0) return -1;
                nb.pf0 = b->pf0 < 0 ? t : b->pf0;
                nb.pf1 = t + 1;
            }
            merge_add(S, &nb);
        }
    }
    return 0;
}

/* score, rank and keep the merged beams (S->next) as the current ones */
/* live_fn(the LM states of the kept beams' texts): what a network's rows are worth
 * computing ahead (WholeLine.live); every kept text is scored by keep_best */
static int tell_live(Search *S) {
    PyObject *states = PyList_New((Py_ssize_t)S->n_cur);
    if (!states) return -1;
    for (size_t j = 0; j < S->n_cur; j++) {
        PyObject *st = S->pstates[S->texts[S->cur[j].text].state];
        PyList_SET_ITEM(states, (Py_ssize_t)j, Py_NewRef(st ? st : Py_None));
    }
    PyObject *r = PyObject_CallOneArg(S->live_fn, states);
    Py_DECREF(states);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static int keep_best(Search *S, size_t width, double prune_logp, int keep_words) {
    size_t n = S->n_next;
    if (GROW(S->score, S->cap_score, n + 1) || GROW(S->heap, S->cap_heap, n + 1) ||
        GROW(S->cur, S->cap_cur, (n < width ? n : width) + 1))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (beam_score(S, &S->next[i], &S->score[i])) return -1;
    size_t k = rank(S, width, prune_logp);
    if (keep_words > 0 && prune_history(S, S->heap, k, keep_words)) return -1;
    S->n_cur = 0;
    for (size_t j = 0; j < k; j++)
        if (S->heap[j] >= 0) S->cur[S->n_cur++] = S->next[S->heap[j]];
    return S->live_fn && S->lm_kind == LM_PYTHON ? tell_live(S) : 0;
}

/* a frame's labels in set order: those at least token_min_logp, and the best */
static size_t frame_order(Search *S, const double *col, double token_min_logp) {
    size_t n = 0;
    int32_t best = 0;
    for (Py_ssize_t k = 0; k < S->V; k++) {
        if (col[k] >= token_min_logp) S->cand[n++] = (int32_t)k;
        if (col[k] > col[best]) best = (int32_t)k;
    }
    return sim_order(&S->sa, &S->sb, S->spare, S->cand, n, best, S->order);
}

/* the end scores of the finished beams' texts (S->next) in one call of the Python LM's
 * score_last_words([(state, word), ...]) -> [(score, state), ...], each what
 * score(state, word, is_last_word=True) gives: a network (WholeLine) then computes the
 * rows every </s> reads in one batched pass, not one pass a beam */
static int score_last_words(Search *S) {
    PyObject *pairs = PyList_New(0), *r = NULL;
    int32_t *todo = NULL;
    size_t m = 0;
    int ret = -1;
    if (!pairs || !(todo = PyMem_Malloc((2 * S->n_next + 1) * sizeof *todo))) goto done;
    for (size_t i = 0; i < S->n_next; i++) {
        const Beam *b = &S->next[i];
        Text *x = &S->texts[b->text];
        if (x->eos_scored) continue;
        x->eos_scored = 2;  /* asked for (a text held by several beams is asked once) */
        todo[2 * m] = b->text;  /* the text, and the text before its last word */
        todo[2 * m++ + 1] = b->before;
        PyObject *w = part_str(S, b->word);
        PyObject *pair_ = w ? PyTuple_Pack(2, S->pstates[S->texts[b->before].state], w)
                            : NULL;
        if (!pair_ || PyList_Append(pairs, pair_)) {
            Py_XDECREF(pair_);
            goto done;
        }
        Py_DECREF(pair_);
    }
    if (!m) {
        ret = 0;
        goto done;
    }
    r = PyObject_CallOneArg(S->last_fn, pairs);
    if (!r) goto done;
    if (!PyList_Check(r) || (size_t)PyList_GET_SIZE(r) != m) {
        PyErr_SetString(PyExc_TypeError, "the language model's score_last_words() must "
                        "return a list of (score, state), one a pair");
        goto done;
    }
    for (size_t j = 0; j < m; j++) {
        PyObject *item = PyList_GET_ITEM(r, (Py_ssize_t)j);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "the language model's score_last_words() "
                            "must return a list of (score, state)");
            goto done;
        }
        double v = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 0));
        if (v == -1.0 && PyErr_Occurred()) goto done;
        int32_t st = new_state(S);
        if (st < 0) goto done;
        S->pstates[st] = Py_NewRef(PyTuple_GET_ITEM(item, 1));
        Text *x = &S->texts[todo[2 * j]];
        x->eos_with_hot = S->texts[todo[2 * j + 1]].raw + v + hot_text(S, todo[2 * j]);
        x->eos_state = st;
        x->eos_scored = 1;
    }
    ret = 0;
done:
    for (size_t j = 0; j < m; j++)  /* on an error, none is left half asked */
        if (S->texts[todo[2 * j]].eos_scored == 2) S->texts[todo[2 * j]].eos_scored = 0;
    PyMem_Free(todo);
    Py_XDECREF(pairs);
    Py_XDECREF(r);
    return ret;
}

/* finalize(force_next_word, is_end): where either, each partial word finished and the
 * beams merged again; each scored (with </s> after the last word where is_end) and
 * ranked: S->next in S->heap's order, how many returned (-1 on error) */
static Py_ssize_t finalize_rank(Search *S, size_t width, double prune_logp, int force,
                                int is_end) {
    if (merge_reset(S, S->n_cur)) return -1;
    for (size_t i = 0; i < S->n_cur; i++) {
        const Beam *b = &S->cur[i];
        Beam nb = *b;
        if (!force && !is_end) {  /* the beams as they are, scored again */
            S->next[S->n_next++] = nb;
            continue;
        }
        nb.before = b->text;
        if (b->part) {
            if ((nb.text = text_child(S, b->text, b->part)) < 0 ||
                (nb.frames = push_frames(S, b->frames, b->pf0, b->pf1)) < 0)
                return -1;
        }
        nb.word = b->part;
        nb.part = 0;
        nb.last = -1;
        nb.pf0 = nb.pf1 = -1;
        merge_add(S, &nb);
    }
    size_t n = S->n_next;
    if (GROW(S->score, S->cap_score, n + 1) || GROW(S->heap, S->cap_heap, n + 1)) return -1;
    if (is_end && S->lm_kind == LM_PYTHON && S->last_fn && score_last_words(S)) return -1;
    for (size_t i = 0; i < n; i++) {
        Beam *b = &S->next[i];
        if (!is_end || S->lm_kind == LM_NONE) {
            if (beam_score(S, b, &S->score[i])) return -1;
            continue;
        }
        Text *x = &S->texts[b->text];
        if (!x->eos_scored) {
            double sc;
            int32_t st;
            if (lm_word(S, b->before, b->word, 1, &sc, &st)) return -1;
            x = &S->texts[b->text];
            double raw = S->texts[b->before].raw + sc;
            x->eos_with_hot = raw + hot_text(S, b->text);
            x->eos_state = st;
            x->eos_scored = 1;
        }
        S->score[i] = b->logit + x->eos_with_hot;
    }
    return (Py_ssize_t)rank(S, width, prune_logp);
}

/* a text's words, a Python list */
static PyObject *words_list(Search *S, int32_t text) {
    Py_ssize_t n = 0;
    for (int32_t t = text; t != 0; t = S->texts[t].parent) n++;
    PyObject *words = PyList_New(n);
    for (int32_t t = text; words && t != 0; t = S->texts[t].parent) {
        PyObject *s = part_str(S, S->texts[t].word);
        if (!s) {
            Py_CLEAR(words);
            break;
        }
        PyList_SET_ITEM(words, --n, Py_NewRef(s));
    }
    return words;
}

/* a beam's word frames, a list of (start, end) */
static PyObject *frames_list(Search *S, int32_t frames) {
    Py_ssize_t n = 0;
    for (int32_t f = frames; f >= 0; f = S->frames[f].prev) n++;
    PyObject *out = PyList_New(n);
    for (int32_t f = frames; out && f >= 0; f = S->frames[f].prev) {
        PyObject *pair_ = Py_BuildValue("(ii)", S->frames[f].start, S->frames[f].end);
        if (!pair_) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, --n, pair_);
    }
    return out;
}

/* the LM's state after a text (None without an LM), a new reference */
static PyObject *state_object(Search *S, int32_t st) {
    if (S->lm_kind == LM_NONE) return Py_NewRef(Py_None);
    return S->lm_kind == LM_PYTHON ? Py_NewRef(S->pstates[st])
                                   : S->api->new_state(S->lm, state_at(S, st));
}

/* finalize(force_next_word=True, is_end=True), then the output beams: (words, frames,
 * acoustic score, combined score, the LM state after </s>'s context) */
static PyObject *finish(Search *S, size_t width, double prune_logp) {
    Py_ssize_t k = finalize_rank(S, width, prune_logp, 1, 1);
    if (k < 0) return NULL;
    PyObject *out = PyList_New(k);
    for (Py_ssize_t j = 0; out && j < k; j++) {
        const Beam *b = &S->next[S->heap[j]];
        PyObject *words = words_list(S, b->text), *frames = frames_list(S, b->frames);
        PyObject *state = words && frames ? state_object(S, S->texts[b->text].eos_state)
                                          : NULL;
        PyObject *item = state ? Py_BuildValue("(OOddO)", words, frames, b->logit,
                                               S->score[S->heap[j]], state) : NULL;
        Py_XDECREF(words);
        Py_XDECREF(frames);
        Py_XDECREF(state);
        if (!item) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, j, item);
    }
    return out;
}

/* a search set up for ``labels``: the LM and hotwords (see decode's docstring) read, the
 * tables made, the one start beam in place */
static int setup_search(Search *S, PyObject *labels, int is_bpe, PyObject *lm_spec,
                        PyObject *hot_spec) {
    PyObject *hot;
    int hot_any = 0;
    S->V = PyList_GET_SIZE(labels);
    S->is_bpe = is_bpe;
    if (S->V < 1) {
        PyErr_SetString(PyExc_ValueError, "no labels");
        return -1;
    }
    if (!PyArg_ParseTuple(hot_spec, "Odp:hotwords", &hot, &S->hot_weight, &hot_any)) return -1;
    S->hot_any = hot_any;
    if (hot != Py_None) {
        if (!PyObject_TypeCheck(hot, &TrieType)) {
            PyErr_SetString(PyExc_TypeError, "hotwords are a Trie or None");
            return -1;
        }
        S->hot = (TrieObject *)hot;
    }
    /* the LM's word list first: the partial words made from here on walk its trie */
    if (setup_labels(S, labels) || setup_lm(S, lm_spec) || setup_tables(S) ||
        GROW(S->cur, S->cap_cur, 1))
        return -1;
    S->texts[0].state = S->start_state;
    S->cur[0] = (Beam){.text = 0, .part = 0, .last = -1, .frames = -1, .pf0 = -1, .pf1 = -1,
                       .logit = 0.0};
    S->n_cur = 1;
    return 0;
}

/* the frames of ``buf`` (float64 (frames, labels)), numbered from ``first``; ``orders``:
 * None, or each frame's labels in the order to visit them */
static int run_frames(Search *S, const Py_buffer *buf, Py_ssize_t first, size_t width,
                      double prune_logp, double token_min_logp, int keep_words,
                      PyObject *orders) {
    if (buf->ndim != 2 || strcmp(buf->format, "d") || buf->shape[1] != S->V) {
        PyErr_SetString(PyExc_ValueError, "logp must be float64 (frames, labels)");
        return -1;
    }
    Py_ssize_t T = buf->shape[0];
    if (width < 1 || first < 0 || first > INT32_MAX - 1 - T) {
        PyErr_SetString(PyExc_ValueError, "beam width at least 1, frames within int32");
        return -1;
    }
    if (orders != Py_None && (!PyList_Check(orders) || PyList_GET_SIZE(orders) != T)) {
        PyErr_SetString(PyExc_ValueError, "orders: a list of each frame's labels");
        return -1;
    }
    int force_break = 0;  /* pyctcdecode's: reset at each call (each chunk) */
    for (Py_ssize_t t = 0; t < T; t++) {
        const double *col = (const double *)buf->buf + t * S->V;
        size_t n_order;
        if (orders == Py_None) {
            n_order = frame_order(S, col, token_min_logp);
        } else {
            PyObject *row = PyList_GET_ITEM(orders, t);
            if (!PyList_Check(row) || PyList_GET_SIZE(row) > S->V) {
                PyErr_SetString(PyExc_ValueError, "orders: a list of label indices a frame");
                return -1;
            }
            n_order = (size_t)PyList_GET_SIZE(row);
            for (size_t o = 0; o < n_order; o++) {
                long k = PyLong_AsLong(PyList_GET_ITEM(row, (Py_ssize_t)o));
                if (k < 0 || k >= S->V) {
                    if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "label index");
                    return -1;
                }
                S->order[o] = (int32_t)k;
            }
        }
        if (extend(S, col, (int32_t)(first + t), S->order, n_order, &force_break) ||
            keep_best(S, width, prune_logp, keep_words))
            return -1;
    }
    return 0;
}

/* -- a search carried from chunk to chunk (streaming) ------------------------------------ */
typedef struct {
    PyObject_HEAD
    Search S;
    PyObject *keep;  /* (labels, lm spec, hotword spec): what S's borrowed pointers hold */
    int ready;
} SessionObject;

static void Session_dealloc(SessionObject *self) {
    search_free(&self->S);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Session_init(SessionObject *self, PyObject *args, PyObject *kwds) {
    PyObject *labels, *lm_spec, *hot_spec;
    int is_bpe, log_add = 1;
    if (self->ready) {
        PyErr_SetString(PyExc_TypeError, "a Session is set up once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!pOO|p:Session", &PyList_Type, &labels, &is_bpe, &lm_spec,
                          &hot_spec, &log_add))
        return -1;
    self->keep = Py_BuildValue("(OOO)", labels, lm_spec, hot_spec);
    if (!self->keep || setup_search(&self->S, labels, is_bpe, lm_spec, hot_spec)) return -1;
    self->S.viterbi = !log_add;
    self->ready = 1;
    return 0;
}

/* advance(logp, beam_width, beam_prune_logp, token_min_logp, keep_words, orders,
 * first_frame): the frames of one chunk */
static PyObject *Session_advance(SessionObject *self, PyObject *args) {
    PyObject *logp_obj, *orders;
    Py_ssize_t width, first;
    double prune_logp, token_min_logp;
    int keep_words;
    if (!self->ready) {
        PyErr_SetString(PyExc_ValueError, "Session not set up");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OnddiOn:advance", &logp_obj, &width, &prune_logp,
                          &token_min_logp, &keep_words, &orders, &first))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(logp_obj, &buf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    int failed = width < 1 ? (PyErr_SetString(PyExc_ValueError, "beam_width < 1"), 1) :
        run_frames(&self->S, &buf, first, (size_t)width, prune_logp, token_min_logp,
                   keep_words, orders);
    PyBuffer_Release(&buf);
    return failed ? NULL : Py_NewRef(Py_None);
}

/* finalize(beam_width, beam_prune_logp, force_next_word, is_end) -> [LMBeam tuples]: the
 * beams (text, "", partial word, last label or None, word frames, partial frames, acoustic
 * score, combined score), which the session then carries on from */
static PyObject *Session_finalize(SessionObject *self, PyObject *args) {
    Py_ssize_t width;
    double prune_logp;
    int force, is_end;
    if (!self->ready) {
        PyErr_SetString(PyExc_ValueError, "Session not set up");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "ndpp:finalize", &width, &prune_logp, &force, &is_end))
        return NULL;
    Search *S = &self->S;
    Py_ssize_t k = finalize_rank(S, (size_t)(width < 1 ? 1 : width), prune_logp, force, is_end);
    if (k < 0) return NULL;
    PyObject *labels = PyTuple_GET_ITEM(self->keep, 0);
    PyObject *out = PyList_New(k);
    for (Py_ssize_t j = 0; out && j < k; j++) {
        const Beam *b = &S->next[S->heap[j]];
        PyObject *words = words_list(S, b->text), *frames = frames_list(S, b->frames);
        PyObject *text = NULL, *part = NULL, *item = NULL;
        if (words && frames) {
            PyObject *space = PyUnicode_FromString(" ");
            text = space ? PyUnicode_Join(space, words) : NULL;
            Py_XDECREF(space);
            part = part_str(S, b->part);
        }
        if (text && part) {
            PyObject *last = b->last < 0 ? Py_None : PyList_GET_ITEM(labels, b->last);
            item = Py_BuildValue("(OsOOO(ii)dd)", text, "", part, last, frames, b->pf0,
                                 b->pf1, b->logit, S->score[S->heap[j]]);
        }
        Py_XDECREF(words);
        Py_XDECREF(frames);
        Py_XDECREF(text);
        if (!item) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, j, item);
    }
    if (!out) return NULL;
    if (GROW(S->cur, S->cap_cur, (size_t)k + 1)) {
        Py_DECREF(out);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) S->cur[j] = S->next[S->heap[j]];
    S->n_cur = (size_t)k;
    return out;
}

/* cache() -> [(text, with hotwords, raw, state)]: what pyctcdecode's per-text cache holds
 * for the current beams' texts (for a caller that goes on in Python) */
static PyObject *Session_cache(SessionObject *self, PyObject *unused) {
    Search *S = &self->S;
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < S->n_cur && S->lm_kind != LM_NONE; i++) {
        const Text *x = &S->texts[S->cur[i].text];
        if (!x->scored) continue;
        PyObject *words = words_list(S, S->cur[i].text), *space = PyUnicode_FromString(" ");
        PyObject *text = words && space ? PyUnicode_Join(space, words) : NULL;
        PyObject *state = text ? state_object(S, x->state) : NULL;
        PyObject *item = state ? Py_BuildValue("(OddO)", text, x->with_hot, x->raw, state)
                               : NULL;
        Py_XDECREF(words);
        Py_XDECREF(space);
        Py_XDECREF(text);
        Py_XDECREF(state);
        if (!item || PyList_Append(out, item)) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

static PyMethodDef Session_methods[] = {
    {"advance", (PyCFunction)Session_advance, METH_VARARGS,
     "advance(logp, beam_width, beam_prune_logp, token_min_logp, keep_words, orders, "
     "first_frame): one chunk's frames"},
    {"finalize", (PyCFunction)Session_finalize, METH_VARARGS,
     "finalize(beam_width, beam_prune_logp, force_next_word, is_end) -> the beams"},
    {"cache", (PyCFunction)Session_cache, METH_NOARGS,
     "cache() -> [(text, score with hotwords, raw score, state)] of the current beams"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnlm.decoding.ctc._prefix_search.Session",
    .tp_doc = "Session(labels, is_bpe, lm, hotwords[, log_add]): a search carried from chunk "
              "to chunk",
    .tp_basicsize = sizeof(SessionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Session_init,
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_methods = Session_methods,
};

PyDoc_STRVAR(decode_doc,
"decode(logp, labels, is_bpe, beam_width, beam_prune_logp, token_min_logp, keep_words,\n"
"       lm, hotwords, orders[, log_add]) -> [(words, frames, logit, score, state)]\n\n"
"The output beams of one utterance, best first. ``logp``: float64 (frames, labels)\n"
"log-probabilities, C order; ``keep_words``: prune_history's n - 1 (0: no pruning);\n"
"``lm``: None or (kind, lm, start, trie, unk, alpha, beta, factor, boundary, nonempty,\n"
"partial_fn[, live_fn, exact_end, last_fn]); ``hotwords``: (trie or None, weight, any words); ``orders``: None (the\n"
"labels of each frame in Python's set order, computed here) or a list of each frame's;\n"
"``log_add``: False merges beams by their better score (the best alignment), not the sum.");

static PyObject *decode(PyObject *module, PyObject *args) {
    PyObject *logp_obj, *labels, *lm_spec, *hot_spec, *orders;
    int is_bpe, keep_words, log_add = 1;
    Py_ssize_t width;
    double prune_logp, token_min_logp;
    if (!PyArg_ParseTuple(args, "OO!pnddiOOO|p:decode", &logp_obj, &PyList_Type, &labels,
                          &is_bpe, &width, &prune_logp, &token_min_logp, &keep_words,
                          &lm_spec, &hot_spec, &orders, &log_add))
        return NULL;
    if (width < 1) {
        PyErr_SetString(PyExc_ValueError, "beam_width must be at least 1");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(logp_obj, &buf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    Search S;
    memset(&S, 0, sizeof(S));
    PyObject *out = NULL;
    S.viterbi = !log_add;
    if (!setup_search(&S, labels, is_bpe, lm_spec, hot_spec) &&
        !run_frames(&S, &buf, 0, (size_t)width, prune_logp, token_min_logp, keep_words,
                    orders))
        out = finish(&S, (size_t)width, prune_logp);
    search_free(&S);
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"set_order", set_order, METH_VARARGS,
     "set_order(indices, best) -> list: the order of set(indices) | {best}, indices "
     "ascending, as this module visits a frame's labels"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_prefix_search",
    "pyctcdecode's CTC prefix beam search in C (see nnlm.decoding.ctc.prefix_search).", -1,
    methods
};

PyMODINIT_FUNC PyInit__prefix_search(void) {
    if (PyType_Ready(&TrieType) < 0 || PyType_Ready(&SessionType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Trie", (PyObject *)&TrieType) < 0 ||
        PyModule_AddObjectRef(m, "Session", (PyObject *)&SessionType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
