/* nnlm._kenlm_query: the per-call path of nnlm.kenlm for back-off models, in C.
 *
 * KenLM's Python module answers BaseScore in about 0.4 us; a Python implementation
 * spends 50-100 us making arrays and objects per call. This module keeps the model's
 * numbers as KenLM does (log10 in float32, a flag per n-gram saying whether it can
 * extend) and looks n-grams up in nnlm's own hash indexes (nnlm.ngram.store.hashindex:
 * open addressing, Fibonacci hashing, linear probing) over the arrays it is given,
 * without copying them and without making a Python object per call beyond the result.
 *
 * The algorithm is KenLM's (lm/model.cc, FullScore and ResumeScore; Heafield 2011):
 * a State holds the last words, most recent first, and the log10 back-off weight of each
 * context n-gram they form; scoring word w walks w, (c1 w), (c2 c1 w), ... as far as the
 * n-grams are stored, takes the longest one's probability, adds the back-off weights of
 * the context n-grams longer than it, and keeps in the new state only as many words as
 * the longest stored n-gram ending in w that can still extend ("right state
 * minimization"). Stored n-grams of order k are keyed by (id of their (k-1)-word suffix)
 * * |V| + (their first word), as in nnlm.ngram.backoff.
 *
 * Types: State and FullScoreReturn (kenlm's), and Query, the model: built once from
 * numpy arrays by nnlm.kenlm, which keeps them alive. The buffers are read-only views;
 * the model must not change under a Query.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "structmember.h"

#include "../ngram/store/level_spec.h"
#include "../ngram/store/pointers.h"
#include "../ngram/store/value_codes.h"
#include "../ngram/store/values.h"
#include "../ngram/store/vocab_hash.h"

#define MAX_ORDER 12
#define GOLDEN 0x9E3779B97F4A7C15ULL

/* -- State ---------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    long long owner;                  /* serial of the Query that wrote it; 0: fresh */
    int length;                       /* words that matter (KenLM's state.length) */
    int32_t words[MAX_ORDER - 1];     /* most recent first */
    float backoff[MAX_ORDER - 1];     /* log10 bow of the context of length i + 1 */
    /* a model of coded values (value_codes.h): the context of length i + 1's symbol at
       its order, for the first ctx_length contexts (0: words set from Python) */
    int ctx_length;
    uint32_t ctx[MAX_ORDER - 1];
} StateObject;

static PyTypeObject StateType;

static int State_init(StateObject *self, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "State() takes no arguments");
        return -1;
    }
    self->owner = 0;
    self->length = 0;
    self->ctx_length = 0;
    return 0;
}

static int state_compare(const StateObject *a, const StateObject *b) {
    if (a->length != b->length) return a->length < b->length ? -1 : 1;
    for (int i = 0; i < a->length; i++)
        if (a->words[i] != b->words[i]) return a->words[i] < b->words[i] ? -1 : 1;
    return 0;
}

static PyObject *State_richcompare(PyObject *a, PyObject *b, int op) {
    if (!PyObject_TypeCheck(a, &StateType) || !PyObject_TypeCheck(b, &StateType)) {
        if (op == Py_EQ) Py_RETURN_FALSE;
        if (op == Py_NE) Py_RETURN_TRUE;
        Py_RETURN_NOTIMPLEMENTED;
    }
    int r = state_compare((StateObject *)a, (StateObject *)b);
    Py_RETURN_RICHCOMPARE(r, 0, op);
}

static Py_hash_t State_hash(StateObject *self) {
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)self->length;
    for (int i = 0; i < self->length; i++) {
        h ^= (uint32_t)self->words[i];
        h *= 0x100000001b3ULL;
    }
    Py_hash_t out = (Py_hash_t)(h >> 1);
    return out == -1 ? -2 : out;
}

static PyObject *State_copy(StateObject *self, PyObject *unused) {
    StateObject *out = PyObject_New(StateObject, &StateType);
    if (!out) return NULL;
    out->owner = self->owner;
    out->length = self->length;
    memcpy(out->words, self->words, sizeof(self->words));
    memcpy(out->backoff, self->backoff, sizeof(self->backoff));
    out->ctx_length = self->ctx_length;
    memcpy(out->ctx, self->ctx, sizeof(self->ctx));
    return (PyObject *)out;
}

static PyObject *State_deepcopy(StateObject *self, PyObject *memo) {
    return State_copy(self, NULL);
}

static PyObject *State_repr(StateObject *self) {
    return PyUnicode_FromFormat("State(%d words)", self->length);
}

static PyObject *State_words(StateObject *self, void *closure) {
    /* the kept words' ids, oldest first (for tests and debugging) */
    PyObject *t = PyTuple_New(self->length);
    if (!t) return NULL;
    for (int i = 0; i < self->length; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLong(self->words[self->length - 1 - i]));
    return t;
}

static int State_set_words(StateObject *self, PyObject *value, void *closure) {
    /* the Python path of nnlm.kenlm (networks) keeps its words here, oldest first */
    PyObject *seq = PySequence_Fast(value, "State words must be a sequence of ids");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_ORDER - 1) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a State holds at most %d words", MAX_ORDER - 1);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (id == -1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        self->words[n - 1 - i] = (int32_t)id;
        self->backoff[n - 1 - i] = 0;
    }
    self->length = (int)n;
    self->ctx_length = 0;
    Py_DECREF(seq);
    return 0;
}

static PyObject *State_get_owner(StateObject *self, void *closure) {
    return PyLong_FromLongLong(self->owner);
}

static int State_set_owner(StateObject *self, PyObject *value, void *closure) {
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    self->owner = v;
    return 0;
}

static PyMethodDef State_methods[] = {
    {"__copy__", (PyCFunction)State_copy, METH_NOARGS, NULL},
    {"__deepcopy__", (PyCFunction)State_deepcopy, METH_O, NULL},
    {NULL}
};

static PyGetSetDef State_getset[] = {
    {"_words", (getter)State_words, (setter)State_set_words, "the kept word ids, oldest first",
     NULL},
    {"_owner", (getter)State_get_owner, (setter)State_set_owner,
     "the serial of the model that wrote it (0: fresh)", NULL},
    {NULL}
};

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnlm.kenlm.State",
    .tp_doc = "The words a model still needs to see; compares, orders, hashes and copies "
              "as kenlm's State. A fresh State is the null context.",
    .tp_basicsize = sizeof(StateObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)State_init,
    .tp_richcompare = State_richcompare,
    .tp_hash = (hashfunc)State_hash,
    .tp_repr = (reprfunc)State_repr,
    .tp_methods = State_methods,
    .tp_getset = State_getset,
};

/* -- FullScoreReturn ------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    double log_prob;
    int ngram_length;
    int oov;
} FullScoreObject;

static PyTypeObject FullScoreType;

static PyObject *FullScore_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    double p; int n; int oov;
    static char *names[] = {"log_prob", "ngram_length", "oov", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "dip", names, &p, &n, &oov)) return NULL;
    FullScoreObject *self = (FullScoreObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->log_prob = (float)p;
    self->ngram_length = n;
    self->oov = oov;
    return (PyObject *)self;
}

static PyObject *FullScore_repr(FullScoreObject *self) {
    PyObject *p = PyFloat_FromDouble(self->log_prob);
    if (!p) return NULL;
    PyObject *out = PyUnicode_FromFormat("FullScoreReturn(%R, %d, %s)", p, self->ngram_length,
                                         self->oov ? "True" : "False");
    Py_DECREF(p);
    return out;
}

static PyObject *FullScore_get_oov(FullScoreObject *self, void *closure) {
    return PyBool_FromLong(self->oov);
}

static PyMemberDef FullScore_members[] = {
    {"log_prob", T_DOUBLE, offsetof(FullScoreObject, log_prob), READONLY, "log10 p"},
    {"ngram_length", T_INT, offsetof(FullScoreObject, ngram_length), READONLY, NULL},
    {NULL}
};

static PyGetSetDef FullScore_getset[] = {
    {"oov", (getter)FullScore_get_oov, NULL, "whether the word is unknown", NULL},
    {NULL}
};

static PyTypeObject FullScoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnlm.kenlm.FullScoreReturn",
    .tp_doc = "What BaseFullScore returns: log_prob (log10), ngram_length, oov.",
    .tp_basicsize = sizeof(FullScoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = FullScore_new,
    .tp_repr = (reprfunc)FullScore_repr,
    .tp_members = FullScore_members,
    .tp_getset = FullScore_getset,
};

/* -- Query ---------------------------------------------------------------------------- */
typedef struct {
    int trie;                /* 0: nnlm's hash index and packed entries; 1: a mapped trie */
    /* hash index mode */
    const int64_t *slot_keys, *slot_values;
    uint64_t mask;
    int bits;
    const float *pb;         /* per n-gram: log10 probability, then (below the top order)
                                its log10 back-off, whose -0.0 says "cannot extend" (KenLM's
                                kNoExtensionBackoff): one cache line holds both */
    int stride;              /* 2 below the top order, 1 at it */
    /* trie mode (nnlm.ngram.store.trie): bit-packed words, the run pointers (either
       layout of pointers.h), the order's table if it has one, the values where they lie
       (back-offs' zeros signed as KenLM's) */
    const uint64_t *words, *tslots;
    Pointers parents;        /* order k-1's run pointers (ngram/store/pointers.h) */
    uint64_t word_bits, wmask, n, n_parents, slot_bits, smask, n_slots;
    Values logp, bow;
    /* coded trie mode (the same trie, its values coded as counts: value_codes.h): the
       entries' numerators and their codes as contexts (below the top order) */
    int coded;
    CodeField ca, cc;
    /* probing mode (a KenLM probing file where it lies): buckets of itemsize bytes, each
       (uint64 hash of the n-gram, float32 log10 p whose sign bit is a flag, then below
       the top order the float32 log10 back-off), empty where the hash is 0; kid: each
       word's id in KenLM's vocabulary, which its hashes combine */
    int probing;
    const char *ptable;
    uint64_t buckets;
    Py_ssize_t itemsize;
    const int64_t *kid;
    /* KenLM trie mode (a KenLM trie file where it lies): per entry, total bits: the word,
       then the value fields (floats: 31 bits of p's magnitude, then 32 of the back-off;
       quantized: the back-off's code, then p's), then (below the top order) the low bits of
       the pointer into the next order, whose high bits, with array-compressed pointers,
       come from a sorted table (ArrayBhiksha); order 2's parents are the unigram records
       (float p, float b, uint64 next) */
    int ktrie;
    const uint8_t *kbits, *kuni;
    uint64_t kn, ktotal, kword_bits, kvalue_bits, kprob_bits, kbow_bits, kinline, kn_offsets;
    int kquant;
    const float *kprob_c, *kbow_c;
    const uint64_t *koffsets;
} Level;

typedef struct {
    PyObject_HEAD
    long long serial;
    int order;
    int64_t V;
    int32_t bos, eos, unk;
    PyObject *index;         /* dict: word -> id, or None: look words up in vocab */
    const char *blob;        /* the vocabulary's words in UTF-8, end to end */
    const int64_t *offsets;  /* word i is blob[offsets[i]:offsets[i + 1]] */
    int32_t *table;          /* the table built here, if the file had none */
    float *own_pb;           /* uni_pb when computed here from a file's unigrams */
    VocabTable vocab;        /* the words' table (vocab_hash.h) */
    const float *uni_pb;     /* per word: log10 p, log10 back-off (sign of zero: extension) */
    /* a trie of coded values: the words' p in float64, their codes as contexts, and each
       word's symbol decoded at opening */
    int coded;
    const double *uni_p;
    CodeField uc;
    uint32_t *uni_sym;
    Level levels[MAX_ORDER]; /* levels[k] for order k >= 2 */
    Py_buffer buffers[24 * MAX_ORDER + 16];  /* MAX_BUFFERS */
    int ready;               /* __init__ ran: a second call is refused (it would leak) */
    int n_buffers;
} QueryObject;

static PyTypeObject QueryType;

static void Query_dealloc(QueryObject *self) {
    PyMem_Free(self->table);
    PyMem_Free(self->own_pb);
    PyMem_Free(self->uni_sym);
    for (int i = 0; i < self->n_buffers; i++) PyBuffer_Release(&self->buffers[i]);
    Py_XDECREF(self->index);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define MAX_BUFFERS (24 * MAX_ORDER + 16)

static const void *take(QueryObject *self, PyObject *obj, Py_ssize_t itemsize,
                        Py_ssize_t *count) {
    if (self->n_buffers >= MAX_BUFFERS) {  /* more arrays than any model of MAX_ORDER has */
        PyErr_SetString(PyExc_ValueError, "too many arrays for one model");
        return NULL;
    }
    Py_buffer *view = &self->buffers[self->n_buffers];
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    self->n_buffers++;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "an array of %zd-byte items was given where %zd-byte "
                     "ones are needed", view->itemsize, itemsize);
        return NULL;
    }
    *count = view->len / itemsize;
    return view->buf;
}

/* a buffer of any item size, held with the others (value_codes.h's TakeBytes) */
static int take_bytes(void *ctx, PyObject *obj, const void **out, Py_ssize_t *bytes) {
    QueryObject *self = ctx;
    if (self->n_buffers >= MAX_BUFFERS) return -1;
    Py_buffer *view = &self->buffers[self->n_buffers];
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->n_buffers++;
    *out = view->buf;
    *bytes = view->len;
    return 0;
}

/* the vocabulary's table (vocab_hash.h): the trie file's own when it has one (a mapped
 * vocabulary), else built here over the words' bytes */
static int build_table(QueryObject *self, PyObject *slots) {
    self->vocab.blob = self->blob;
    self->vocab.offsets = self->offsets;
    self->vocab.n_words = self->V;
    if (slots != Py_None) {
        Py_ssize_t n;
        if (!(self->vocab.slots = take(self, slots, 4, &n))) return -1;
        if (n < 16 || (n & (n - 1)) || n < 2 * self->V) {
            PyErr_SetString(PyExc_ValueError, "the vocabulary's table has the wrong size");
            return -1;
        }
        self->vocab.mask = (uint64_t)n - 1;
        return 0;
    }
    uint64_t size = 16;
    while (size < (uint64_t)self->V * 2) size <<= 1;
    self->table = PyMem_Malloc(sizeof(int32_t) * size);
    if (!self->table) { PyErr_NoMemory(); return -1; }
    memset(self->table, 0xff, sizeof(int32_t) * size);
    self->vocab.slots = self->table;
    self->vocab.mask = size - 1;
    for (int64_t id = 0; id < self->V; id++) {
        const char *w = self->blob + self->offsets[id];
        uint64_t pos = vocab_hash(w, self->offsets[id + 1] - self->offsets[id]) & self->vocab.mask;
        while (self->table[pos] != -1) pos = (pos + 1) & self->vocab.mask;
        self->table[pos] = (int32_t)id;
    }
    return 0;
}

/* the id of the word p[0:n] (UTF-8), <unk>'s if it is not in the vocabulary */
static inline int32_t bytes_id(const QueryObject *q, const char *p, Py_ssize_t n) {
    int64_t id = vocab_find(&q->vocab, p, (int64_t)n);
    return id < 0 ? q->unk : (int32_t)id;
}

/* -- the mapped trie: see nnlm/ngram/store/_trie.c, whose layout this reads ---------- */
#define LOG10_E 0.43429448190325182765

/* the entry of (word, then the (k-1)-gram parent), or -1 */
static inline int64_t trie_find(const Level *L, uint64_t parent, uint64_t word, uint64_t V) {
    if (parent >= L->n_parents) return -1;
    uint64_t a, b;
    pointers_pair(&L->parents, parent, &a, &b);
    if (b > L->n) b = L->n;
    if (a >= b) return -1;
    if (L->tslots) {
        uint64_t key = parent * V + word;
        uint64_t pos = (((key * GOLDEN) >> 32) * L->n_slots) >> 32;
        for (uint64_t tries = 0; tries < L->n_slots; tries++) {
            uint64_t v = unpack(L->tslots, L->slot_bits, L->smask, pos);
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

static inline float value_at(const Values *v, uint64_t i) {
    return (float)(value_ln(v, i) * LOG10_E);
}

static int take_values(QueryObject *self, Values *v, PyObject *values, PyObject *centers,
                       long long bits, uint64_t n) {
    Py_ssize_t itemsize = bits ? 8 : 4, count, n_centers = 0;
    const void *data;
    if (bits < 0 || bits > 25 || !(data = take(self, values, itemsize, &count))) return -1;
    v->bits = (uint64_t)bits;
    v->mask = mask_of(v->bits);
    v->values = bits ? NULL : data;
    v->codes = bits ? data : NULL;
    v->centers = NULL;
    if (bits && !(v->centers = take(self, centers, 4, &n_centers))) return -1;
    v->n_centers = (uint64_t)n_centers;
    return values_sizes_ok(v->bits, n, (uint64_t)(count * itemsize),
                           (uint64_t)n_centers * 4) ? 0 : -1;
}

/* a level of a mapped trie: ("trie", words, word_bits, pointers, n_parents, n, slots,
 * slot_bits, n_slots, logp, logp_centers, logp_bits, bow, bow_centers, bow_bits), with
 * pointers = (kind, data, exceptions, bits, n_exceptions) as run_pointers' c_spec()
 * gives them; slots and (at the top order) bow may be empty bytes */
static int trie_level(QueryObject *self, Level *L, PyObject *t, int top, int64_t n_lower,
                      int coded) {
    LevelSpec s;
    if (parse_level_spec(t, &s) < 0) return -1;
    unsigned long long wb = s.word_bits, pbits = s.pointer_bits, n_exc = s.n_exceptions,
        npar = s.n_parents, n = s.n, sbits = s.slot_bits, nslots = s.n_slots;
    int linear = s.linear;
    PyObject *words = s.words, *data = s.data, *exceptions = s.exceptions, *slots = s.slots;
    Py_ssize_t count, data_count, exc_count = 0;
    L->trie = 1;
    L->word_bits = wb; L->wmask = mask_of(wb);
    L->n = n; L->n_parents = npar;
    if (wb < 1 || wb > 64 || (int64_t)npar != n_lower) return -1;
    if (!(L->words = take(self, words, 8, &count)) ||
        !packed_fits(n, wb, 8 * (uint64_t)count)) return -1;
    Pointers *P = &L->parents;
    P->linear = linear != 0;
    P->bits = pbits; P->mask = mask_of(pbits);
    P->n_blocks = P->linear ? (npar >> LINE_SHIFT) + 1 : 0;
    P->n_exceptions = n_exc;
    if (!(P->data = take(self, data, 8, &data_count))) return -1;
    if (P->linear && !(P->exceptions = take(self, exceptions, 8, &exc_count))) return -1;
    if (!pointers_sizes_ok(P, npar + 1, 8 * (uint64_t)data_count, 8 * (uint64_t)exc_count))
        return -1;
    L->tslots = NULL;
    if (PyObject_Length(slots) > 0) {
        L->slot_bits = sbits; L->smask = mask_of(sbits); L->n_slots = nslots;
        if (sbits < 1 || sbits > 64 || nslots == 0 ||
            !(L->tslots = take(self, slots, 8, &count)) ||
            !packed_fits(nslots, sbits, 8 * (uint64_t)count)) return -1;
    }
    if (coded) return 0;
    if (take_values(self, &L->logp, s.logp, s.logp_centers, s.logp_bits, n) < 0) return -1;
    if (!top && take_values(self, &L->bow, s.bow, s.bow_centers, s.bow_bits, n) < 0)
        return -1;
    return 0;
}

/* a trie level of coded values: ("coded", the trie tuple, numerators, contexts (None at
 * the top), the unigrams' p, their contexts), as trie_layout.coded_spec gives it; order
 * 2's also fills the Query's unigram part and decodes each word's symbol */
static int coded_level(QueryObject *self, Level *L, PyObject *t, int top, int64_t n_lower,
                       int first) {
    if (trie_level(self, L, PyTuple_GET_ITEM(t, 1), top, n_lower, 1) < 0 ||
        parse_code_field(PyTuple_GET_ITEM(t, 2), 1, L->n, &L->ca, take_bytes, self) < 0 ||
        (!top && parse_code_field(PyTuple_GET_ITEM(t, 3), 0, L->n, &L->cc, take_bytes,
                                  self) < 0))
        return -1;
    L->coded = 1;
    if (!first) return self->coded ? 0 : -1;
    const void *p;
    Py_ssize_t len;
    if (take_bytes(self, PyTuple_GET_ITEM(t, 4), &p, &len) < 0 || len != 8 * self->V ||
        !probabilities_in_range(p, (uint64_t)self->V, (uint64_t)self->bos) ||
        parse_code_field(PyTuple_GET_ITEM(t, 5), 0, (uint64_t)self->V, &self->uc, take_bytes,
                         self) < 0)
        return -1;
    if (!(self->uni_sym = PyMem_Malloc((size_t)self->V * sizeof(uint32_t)))) {
        PyErr_NoMemory();
        return -1;
    }
    field_symbols_all(&self->uc, self->uni_sym);
    self->uni_p = p;
    self->coded = 1;
    return 0;
}

/* uni_pb from a trie file's two float32 unigram sections, (natural-log p, natural-log
 * back-off whose sign of zero says whether the word extends), as nnlm.kenlm's numpy path
 * computes it: log10 in float32, -0.0 kept, <s>'s probability -99 (never scored). A NaN
 * or an infinity (other than <s>'s log p) is a damaged file: ValueError. */
static int unigram_entries(QueryObject *self, PyObject *pair) {
    Py_ssize_t n_logp, n_bow;
    const float *logp, *bow;
    if (PyTuple_GET_SIZE(pair) != 2 ||
        !(logp = take(self, PyTuple_GET_ITEM(pair, 0), 4, &n_logp)) ||
        !(bow = take(self, PyTuple_GET_ITEM(pair, 1), 4, &n_bow))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "unigrams: a pair (log p, log back-off)");
        return -1;
    }
    if (n_logp != self->V || n_bow != self->V) {
        PyErr_SetString(PyExc_ValueError, "array sizes do not agree");
        return -1;
    }
    if (!(self->own_pb = PyMem_Malloc(2 * (size_t)self->V * sizeof(float)))) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t i = 0; i < self->V; i++) {
        double p = logp[i], b = bow[i];
        if (i == self->bos && (isfinite(p) || p < 0)) {  /* never scored; -inf as saved */
            p = -99.0 / LOG10_E;
        } else if (!isfinite(p)) {
            PyErr_Format(PyExc_ValueError, "unigram_logp holds %s at entry %lld",
                         isnan(p) ? "NaN" : "an infinity", (long long)i);
            return -1;
        }
        if (!isfinite(b)) {
            PyErr_Format(PyExc_ValueError, "unigram_log_bow holds %s at entry %lld",
                         isnan(b) ? "NaN" : "an infinity", (long long)i);
            return -1;
        }
        self->own_pb[2 * i] = (float)(p * LOG10_E);
        self->own_pb[2 * i + 1] = b == 0 ? (float)b : (float)(b * LOG10_E);
    }
    self->uni_pb = self->own_pb;
    return 0;
}

/* A KenLM probing order: ("probing", table bytes, itemsize, buckets, kid) */
static int probing_level(QueryObject *self, Level *L, PyObject *t, int top) {
    PyObject *tag, *table, *kid;
    Py_ssize_t itemsize, n_table, n_kid;
    unsigned long long buckets;
    if (!PyArg_ParseTuple(t, "OOnKO", &tag, &table, &itemsize, &buckets, &kid)) return -1;
    L->probing = 1;
    if (itemsize < (top ? 12 : 16) || buckets < 1 || !(L->ptable = take(self, table, 1,
                                                                          &n_table)) ||
        (uint64_t)n_table != (uint64_t)itemsize * buckets ||
        !(L->kid = take(self, kid, 8, &n_kid)) || n_kid != self->V)
        return -1;
    for (int64_t i = 0; i < self->V; i++)
        if (L->kid[i] < 0) return -1;
    L->buckets = buckets;
    L->itemsize = itemsize;
    return 0;
}

/* A KenLM trie order: ("kenlm-trie", bits, n, total, word_bits, quantized, prob_bits,
 * bow_bits, prob_centers, bow_centers, inline_bits, offsets, unigram records) */
static int kenlm_trie_level(QueryObject *self, Level *L, PyObject *t, int top) {
    PyObject *tag, *bits, *pc, *bc, *offsets, *uni;
    unsigned long long n, total, word_bits, prob_bits, bow_bits, inline_bits;
    int quant;
    Py_ssize_t n_bits, n_pc = 0, n_bc = 0, n_off = 0, n_uni = 0;
    if (!PyArg_ParseTuple(t, "OOKKKiKKOOKOO", &tag, &bits, &n, &total, &word_bits, &quant,
                          &prob_bits, &bow_bits, &pc, &bc, &inline_bits, &offsets, &uni))
        return -1;
    L->ktrie = 1;
    L->kn = n; L->ktotal = total; L->kword_bits = word_bits; L->kquant = quant;
    L->kprob_bits = prob_bits; L->kbow_bits = bow_bits; L->kinline = inline_bits;
    L->kvalue_bits = quant ? prob_bits + (top ? 0 : bow_bits) : (top ? 31 : 63);
    if (word_bits < 1 || word_bits > 32 || inline_bits > 57 || (top && inline_bits) ||
        total != word_bits + L->kvalue_bits + inline_bits || prob_bits > 25 || bow_bits > 25)
        return -1;
    /* (n + 1) * total bits must not wrap: n comes from the file's header */
    if (n >= (UINT64_MAX - 7) / total - 1 || !(L->kbits = take(self, bits, 1, &n_bits)) ||
        (uint64_t)n_bits < ((n + 1) * total + 7) / 8 + 8)
        return -1;
    if (quant) {
        if (!(L->kprob_c = take(self, pc, 4, &n_pc)) || (uint64_t)n_pc != (1ULL << prob_bits))
            return -1;
        if (!top && (!(L->kbow_c = take(self, bc, 4, &n_bc)) ||
                     (uint64_t)n_bc != (1ULL << bow_bits)))
            return -1;
    }
    L->koffsets = NULL;
    if (PyObject_Length(offsets) > 0) {
        if (!(L->koffsets = take(self, offsets, 8, &n_off))) return -1;
        L->kn_offsets = (uint64_t)n_off;
    }
    L->kuni = NULL;
    if (PyObject_Length(uni) > 0) {
        if (!(L->kuni = take(self, uni, 1, &n_uni)) || n_uni < 16 * (self->V + 2)) return -1;
    }
    return 0;
}

static int Query_init(QueryObject *self, PyObject *args, PyObject *kwds) {
    PyObject *index, *blob, *offsets, *uni_pb, *levels, *slots = Py_None;
    long long serial, V;
    int bos, eos, unk;
    if (!PyArg_ParseTuple(args, "LOOOLiiiOO!|O", &serial, &index, &blob, &offsets, &V, &bos,
                          &eos, &unk, &uni_pb, &PyList_Type, &levels, &slots))
        return -1;
    if (self->ready || self->n_buffers) {
        PyErr_SetString(PyExc_TypeError, "a Query is initialized once");
        return -1;
    }
    self->ready = 1;
    if (index != Py_None && !PyDict_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "index: a dict, or None (the words' table)");
        return -1;
    }
    if (V < 3 || V > INT32_MAX || bos < 0 || bos >= V || eos < 0 || eos >= V || unk < 0 ||
        unk >= V) {  /* before offsets[V] is read; ids are int32 */
        PyErr_Format(PyExc_ValueError, "a vocabulary of %lld words with <s>, </s>, <unk> at "
                     "%d, %d, %d", V, bos, eos, unk);
        return -1;
    }
    Py_ssize_t n_levels = PyList_GET_SIZE(levels);
    if (n_levels + 1 > MAX_ORDER) {
        PyErr_Format(PyExc_ValueError, "order %zd is above %d", n_levels + 1, MAX_ORDER);
        return -1;
    }
    self->serial = serial;
    self->V = V;
    self->bos = bos; self->eos = eos; self->unk = unk;
    self->order = (int)n_levels + 1;
    Py_INCREF(index);
    self->index = index;
    Py_ssize_t n, blob_size;
    if (!(self->blob = take(self, blob, 1, &blob_size))) return -1;
    if (!(self->offsets = take(self, offsets, 8, &n)) || n != V + 1) goto bad_size;
    if (self->offsets[0] != 0 || self->offsets[V] != blob_size) goto bad_size;
    for (int64_t i = 0; i < V; i++)
        if (self->offsets[i + 1] < self->offsets[i]) goto bad_size;
    if (build_table(self, slots) < 0) return -1;
    if (PyTuple_Check(uni_pb)) {
        if (unigram_entries(self, uni_pb) < 0) return -1;
    } else if (!(self->uni_pb = take(self, uni_pb, 4, &n)) || n != 2 * V) {
        goto bad_size;
    }
    for (Py_ssize_t i = 0; i < n_levels; i++) {
        PyObject *t = PyList_GET_ITEM(levels, i);
        Level *L = &self->levels[i + 2];
        if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 13 &&
            PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {  /* ("kenlm-trie", ...) */
            if (kenlm_trie_level(self, L, t, i + 2 == self->order) < 0) goto bad_size;
            if (i == 0 && !L->kuni) goto bad_size;  /* order 2 needs the unigram records */
            if (i > 0 && !self->levels[i + 1].ktrie) goto bad_size;
            continue;
        }
        if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 5 &&
            PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {  /* ("probing", ...) */
            if (probing_level(self, L, t, i + 2 == self->order) < 0) goto bad_size;
            continue;
        }
        if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 15) {
            if (self->coded || trie_level(self, L, t, i + 2 == self->order, i == 0 ? V :
                                          (int64_t)self->levels[i + 1].n, 0) < 0)
                goto bad_size;
            continue;
        }
        if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 6) {  /* ("coded", ...) */
            if ((i > 0 && !self->coded) ||
                coded_level(self, L, t, i + 2 == self->order, i == 0 ? V :
                            (int64_t)self->levels[i + 1].n, i == 0) < 0)
                goto bad_size;
            continue;
        }
        PyObject *keys, *values, *pb;
        int bits;
        Py_ssize_t entries;
        if (!PyArg_ParseTuple(t, "OOinO", &keys, &values, &bits, &entries, &pb)) return -1;
        if (entries < 0) goto bad_size;
        L->n = (uint64_t)entries;
        Py_ssize_t slots, m;
        if (!(L->slot_keys = take(self, keys, 8, &slots))) return -1;
        if (!(L->slot_values = take(self, values, 8, &n)) || n != slots) goto bad_size;
        if (bits < 1 || bits > 62 || ((Py_ssize_t)1 << bits) != slots) goto bad_size;
        L->bits = bits;
        L->mask = ((uint64_t)1 << bits) - 1;
        L->stride = i + 2 < self->order ? 2 : 1;
        if (!(L->pb = take(self, pb, 4, &m)) || m != L->stride * entries) goto bad_size;
        for (Py_ssize_t j = 0; j < slots; j++)  /* every value must index an entry */
            if (L->slot_keys[j] != -1 && (L->slot_values[j] < 0 || L->slot_values[j] >= entries))
                goto bad_size;
    }
    return 0;
bad_size:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "array sizes do not agree");
    return -1;
}

/* KenLM's HasExtension: a back-off of -0.0 marks an n-gram that cannot extend */
static inline int extends(float backoff) {
    uint32_t bits;
    memcpy(&bits, &backoff, 4);
    return bits != 0x80000000u;
}

static inline int64_t find(const Level *L, int64_t key) {
    uint64_t pos = ((uint64_t)key * GOLDEN) >> (64 - L->bits);
    for (;;) {
        int64_t k = L->slot_keys[pos];
        if (k == key) return L->slot_values[pos];
        if (k == -1) return -1;
        pos = (pos + 1) & L->mask;
    }
}

/* KenLM's probing lookup: the slot holding ``hash`` (linear probing from hash mod the
 * table's size; a key of 0 is an empty bucket), or -1 */
static inline int64_t probe(const Level *L, uint64_t hash) {
    uint64_t pos = hash % L->buckets;
    for (uint64_t tries = 0; tries < L->buckets; tries++) {
        uint64_t key;
        memcpy(&key, L->ptable + pos * L->itemsize, 8);
        if (key == hash) return (int64_t)pos;
        if (key == 0) return -1;
        if (++pos == L->buckets) pos = 0;
    }
    return -1;
}

/* len (<= 57) bits at bit offset ``bit`` of a little-endian bit stream (KenLM pads its
 * arrays with 8 bytes, so the 8-byte read stays inside) */
static inline uint64_t read_bits(const uint8_t *base, uint64_t bit, uint64_t len) {
    uint64_t v;
    memcpy(&v, base + (bit >> 3), 8);
    return (v >> (bit & 7)) & (len >= 64 ? ~0ULL : ((1ULL << len) - 1));
}

/* Where entry i of KenLM trie order L points into the next order */
static inline uint64_t ktrie_child(const Level *L, uint64_t i) {
    uint64_t low = read_bits(L->kbits, i * L->ktotal + L->kword_bits + L->kvalue_bits,
                             L->kinline);
    if (!L->koffsets) return low;
    uint64_t lo = 0, hi = L->kn_offsets;  /* the last table entry <= i: the high bits */
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (L->koffsets[mid] <= i) lo = mid + 1; else hi = mid;
    }
    return ((lo ? lo - 1 : 0) << L->kinline) | low;
}

/* The entry of order k (L) holding ``word`` among the children of entry ``parent`` of
 * order k - 1 (the unigram records' pointers when k == 2), or -1 */
static inline int64_t ktrie_find(const QueryObject *q, int k, uint64_t parent, uint64_t word) {
    const Level *L = &q->levels[k];
    uint64_t begin, end;
    if (k == 2) {
        memcpy(&begin, L->kuni + 16 * parent + 8, 8);
        memcpy(&end, L->kuni + 16 * (parent + 1) + 8, 8);
    } else {
        const Level *P = &q->levels[k - 1];
        begin = ktrie_child(P, parent);
        end = ktrie_child(P, parent + 1);
    }
    if (end > L->kn) end = L->kn;
    while (begin < end) {  /* a run's words are sorted */
        uint64_t mid = begin + (end - begin) / 2;
        uint64_t w = read_bits(L->kbits, mid * L->ktotal, L->kword_bits);
        if (w == word) return (int64_t)mid;
        if (w < word) begin = mid + 1; else end = mid;
    }
    return -1;
}

/* log10 p (and, below the top order, the back-off) of entry e of KenLM trie order L */
static inline float ktrie_values(const Level *L, uint64_t e, int top, float *backoff) {
    uint64_t at = e * L->ktotal + L->kword_bits;
    if (L->kquant) {
        if (top) return L->kprob_c[read_bits(L->kbits, at, L->kprob_bits)];
        *backoff = L->kbow_c[read_bits(L->kbits, at, L->kbow_bits)];
        return L->kprob_c[read_bits(L->kbits, at + L->kbow_bits, L->kprob_bits)];
    }
    uint32_t pbits = (uint32_t)read_bits(L->kbits, at, 31) | 0x80000000u;  /* always < 0 */
    float p;
    memcpy(&p, &pbits, 4);
    if (!top) {
        uint32_t bbits = (uint32_t)read_bits(L->kbits, at + 31, 32);
        memcpy(backoff, &bbits, 4);
    }
    return p;
}

/* KenLM's CombineWordHash: the hash of an n-gram extended one word to the left */
static inline uint64_t combine(uint64_t node, uint64_t word) {
    return (node * 8978948897894561157ULL) ^ ((word + 1) * 17894857484156487943ULL);
}

/* a coded model: the symbols of in's contexts (the context of length i + 1 at order
 * i + 1), from the State, or found again where its words were set from Python
 * (UINT32_MAX where one is not stored: its p comes out NaN, which callers refuse) */
static const uint32_t *in_contexts(const QueryObject *q, const StateObject *in,
                                   uint32_t *found) {
    if (in->ctx_length >= in->length) return in->ctx;
    int64_t id = in->words[0];
    for (int i = 0; i < in->length; i++) {
        found[i] = UINT32_MAX;
        if (i == 0) {
            if (id >= 0 && id < q->V) found[0] = q->uni_sym[id];
            continue;
        }
        const Level *L = &q->levels[i + 1];
        if (id < 0 || i + 1 >= q->order || !L->coded ||
            (id = trie_find(L, (uint64_t)id, (uint64_t)in->words[i], (uint64_t)q->V)) < 0)
            break;
        int64_t unused;
        found[i] = (uint32_t)field_symbol(&L->cc, (uint64_t)id, &unused);
    }
    return found;
}

/* log10 p(w | in) as KenLM's FullScore; fills out (if not NULL) and the n-gram length */
static float score_word(const QueryObject *q, const StateObject *in, int32_t w,
                        StateObject *out, int *length) {
    float prob = q->uni_pb[2 * w];
    int ngram_length = 1;
    float out_backoff[MAX_ORDER - 1];
    out_backoff[0] = q->uni_pb[2 * w + 1];
    int keep = extends(out_backoff[0]) ? 1 : 0;
    int64_t id = w;
    uint64_t hash = 0;
    /* a coded model carries p in float64 up the orders (value_codes.h) */
    double p64 = 0;
    float escaped = NAN;
    uint32_t out_ctx[MAX_ORDER - 1], found_ctx[MAX_ORDER - 1];
    const uint32_t *ctx = NULL;
    if (q->coded) {
        p64 = q->uni_p[w];
        out_ctx[0] = q->uni_sym[w];
        ctx = in_contexts(q, in, found_ctx);
    }
    for (int j = 0; j < in->length && j + 2 <= q->order; j++) {
        int k = j + 2;
        const Level *L = &q->levels[k];
        if (L->coded) {
            int64_t pos = trie_find(L, (uint64_t)id, (uint64_t)in->words[j], (uint64_t)q->V);
            if (pos < 0) break;
            id = pos;
            int64_t escape, unused;
            uint64_t sa = field_symbol(&L->ca, (uint64_t)pos, &escape);
            const CodeField *C = k == 2 ? &q->uc : &q->levels[k - 1].cc;
            uint32_t sc = ctx[j];
            double Sh = NAN, gamma = NAN;
            if (sc < C->n_symbols) {
                Sh = C->S[sc];
                gamma = C->gamma[sc];
            }
            p64 = chain_p(L->ca.num[sa], Sh, gamma, p64);
            escaped = escape >= 0 ? L->ca.escape_logp[escape] : NAN;
            ngram_length = k;
            if (k < q->order) {
                uint64_t so = field_symbol(&L->cc, (uint64_t)pos, &unused);
                out_backoff[k - 1] = (float)(L->cc.bow[so] * LOG10_E);
                out_ctx[k - 1] = (uint32_t)so;
                if (extends(out_backoff[k - 1])) keep = k;
            }
            continue;
        }
        if (L->ktrie) {  /* KenLM's trie file, where it lies */
            int64_t pos = ktrie_find(q, k, (uint64_t)id, (uint64_t)in->words[j]);
            if (pos < 0) break;
            id = pos;
            float bo = 0;
            prob = ktrie_values(L, (uint64_t)pos, k == q->order, &bo);
            ngram_length = k;
            if (k < q->order) {
                out_backoff[k - 1] = bo;
                if (extends(bo)) keep = k;
            }
            continue;
        }
        if (L->probing) {  /* KenLM's probing file: the n-gram's hash, its bucket */
            hash = combine(k == 2 ? (uint64_t)L->kid[w] : hash,
                           (uint64_t)L->kid[in->words[j]]);
            int64_t pos = probe(L, hash);
            if (pos < 0) break;
            const char *e = L->ptable + (uint64_t)pos * L->itemsize;
            float p;
            memcpy(&p, e + 8, 4);
            prob = -fabsf(p);  /* the sign bit is KenLM's "independent left" flag */
            ngram_length = k;
            if (k < q->order) {
                memcpy(&out_backoff[k - 1], e + 12, 4);
                if (extends(out_backoff[k - 1])) keep = k;
            }
            continue;
        }
        if (L->trie) {
            int64_t pos = trie_find(L, (uint64_t)id, (uint64_t)in->words[j], (uint64_t)q->V);
            if (pos < 0) break;
            id = pos;
            prob = value_at(&L->logp, (uint64_t)pos);
            ngram_length = k;
            if (k < q->order) {  /* -0.0: cannot extend (the trie keeps KenLM's signs) */
                out_backoff[k - 1] = value_at(&L->bow, (uint64_t)pos);
                if (extends(out_backoff[k - 1])) keep = k;
            }
            continue;
        }
        int64_t pos = find(L, id * q->V + in->words[j]);
        if (pos < 0) break;
        id = pos;
        const float *e = L->pb + L->stride * pos;
        prob = e[0];
        ngram_length = k;
        if (k < q->order) {
            out_backoff[k - 1] = e[1];
            if (extends(e[1])) keep = k;
        }
    }
    if (q->coded && ngram_length >= 2) {
        prob = (float)(entry_ln(p64, escaped) * LOG10_E);
    }
    for (int i = ngram_length - 1; i < in->length; i++) prob += in->backoff[i];
    *length = ngram_length;
    if (out) {
        int32_t words[MAX_ORDER - 1];
        words[0] = w;
        for (int i = 1; i < keep; i++) words[i] = in->words[i - 1];
        memcpy(out->words, words, sizeof(int32_t) * keep);
        memcpy(out->backoff, out_backoff, sizeof(float) * keep);
        out->length = keep;
        out->owner = q->serial;
        out->ctx_length = q->coded ? keep : 0;
        if (q->coded) memcpy(out->ctx, out_ctx, sizeof(uint32_t) * keep);
    }
    return prob;
}

static int check_state(const QueryObject *q, PyObject *s, const char *name) {
    if (!PyObject_TypeCheck(s, &StateType)) {
        PyErr_Format(PyExc_TypeError, "Argument '%s' has incorrect type (expected "
                     "nnlm.kenlm.State, got %s)", name, Py_TYPE(s)->tp_name);
        return -1;
    }
    long long owner = ((StateObject *)s)->owner;
    if (owner != 0 && owner != q->serial) {
        PyErr_SetString(PyExc_ValueError, "this State was written by another model; states "
                        "are the model's own word ids and cannot be shared");
        return -1;
    }
    return 0;
}

/* a word's id: <unk>'s if unknown; -2 and an exception on error */
static int32_t word_id(const QueryObject *q, PyObject *word) {
    if (q->index == Py_None) {  /* a mapped vocabulary: its table, over UTF-8 */
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(word, &n);
        if (p) return bytes_id(q, p, n);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -2;
        PyErr_Clear();  /* a lone surrogate: no word of the vocabulary */
        return q->unk;
    }
    PyObject *id = PyDict_GetItemWithError(q->index, word);
    if (id == NULL) return PyErr_Occurred() ? -2 : q->unk;
    return (int32_t)PyLong_AsLong(id);
}

static int32_t scored_word_id(const QueryObject *q, PyObject *word) {
    if (!PyUnicode_Check(word)) {
        PyErr_Format(PyExc_TypeError, "Argument 'word' has incorrect type (expected str, got "
                     "%s)", Py_TYPE(word)->tp_name);
        return -2;
    }
    return word_id(q, word);  /* <s> too: kenlm scores it as a word (its stored -99) */
}

static PyObject *Query_BaseScore(QueryObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "BaseScore(in_state, word, out_state)");
        return NULL;
    }
    if (check_state(self, args[0], "in_state") || check_state(self, args[2], "out_state"))
        return NULL;
    int32_t w = scored_word_id(self, args[1]);
    if (w == -2) return NULL;
    int length;
    float p = score_word(self, (StateObject *)args[0], w, (StateObject *)args[2], &length);
    return PyFloat_FromDouble(p);
}

/* flashlight-text's LM.score for a back-off model, in C (nnlm.decoding.flashlight binds it
 * with functools.partial, so flashlight's call into Python runs no Python frame):
 * memo_score(states, scored, ids, state, token) -> (child state, log10 p). ``states``
 * maps flashlight's LMState to this module's State, ``scored`` (state, token) to the
 * answer (each pair scored once), ``ids`` (int32) the model's id of each token index. */
static PyObject *child_name;  /* "child", interned at import */

static PyObject *Query_memo_score(QueryObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 5 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "memo_score(states, scored, ids, state, token)");
        return NULL;
    }
    PyObject *states = args[0], *scored = args[1], *state = args[3], *token = args[4];
    PyObject *key = PyTuple_Pack(2, state, token);
    if (!key) return NULL;
    PyObject *hit = PyDict_GetItemWithError(scored, key);
    if (hit || PyErr_Occurred()) {
        Py_DECREF(key);
        Py_XINCREF(hit);
        return hit;
    }
    PyObject *result = NULL, *out = NULL, *after = NULL;
    Py_ssize_t t = PyLong_AsSsize_t(token);
    Py_buffer view;
    if ((t == -1 && PyErr_Occurred()) ||
        PyObject_GetBuffer(args[2], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    int32_t w = -1;
    if (view.itemsize == 4 && t >= 0 && t < view.len / 4) w = ((const int32_t *)view.buf)[t];
    PyBuffer_Release(&view);
    if (w < 0 || w >= self->V || w == self->bos) {
        PyErr_Format(PyExc_ValueError, "flashlight LM: invalid token index %zd", t);
        goto done;
    }
    PyObject *in = PyDict_GetItemWithError(states, state);
    if (!in) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "flashlight LM: a state this LM did not return "
                            "since its last start() (states belong to one LM and one "
                            "utterance)");
        goto done;
    }
    /* the child by a method name made once, and the State allocated zeroed (the null
     * context, as State() makes it): no format string or type call a miss */
    if (check_state(self, in, "state") ||
        !(out = PyObject_CallMethodOneArg(state, child_name, token)) ||
        !(after = StateType.tp_alloc(&StateType, 0)))
        goto done;
    int length;
    float p = score_word(self, (StateObject *)in, w, (StateObject *)after, &length);
    PyObject *score = PyFloat_FromDouble((double)p);
    if (!score) goto done;
    if (PyDict_SetItem(states, out, after) == 0) result = PyTuple_Pack(2, out, score);
    Py_DECREF(score);
    if (!result) goto done;
    if (PyDict_SetItem(scored, key, result) < 0) Py_CLEAR(result);
done:
    Py_DECREF(key);
    Py_XDECREF(out);
    Py_XDECREF(after);
    return result;
}

static PyObject *Query_BaseFullScore(QueryObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "BaseFullScore(in_state, word, out_state)");
        return NULL;
    }
    if (check_state(self, args[0], "in_state") || check_state(self, args[2], "out_state"))
        return NULL;
    int32_t w = scored_word_id(self, args[1]);
    if (w == -2) return NULL;
    int length;
    float p = score_word(self, (StateObject *)args[0], w, (StateObject *)args[2], &length);
    FullScoreObject *r = PyObject_New(FullScoreObject, &FullScoreType);
    if (!r) return NULL;
    r->log_prob = p;
    r->ngram_length = length;
    r->oov = w == self->unk;
    return (PyObject *)r;
}

static void begin(const QueryObject *q, StateObject *s) {
    s->owner = q->serial;
    s->length = 1;
    s->words[0] = q->bos;
    s->backoff[0] = q->uni_pb[2 * q->bos + 1];
    s->ctx_length = q->coded ? 1 : 0;
    if (q->coded) s->ctx[0] = q->uni_sym[q->bos];
}

static PyObject *Query_BeginSentenceWrite(QueryObject *self, PyObject *state) {
    if (check_state(self, state, "state")) return NULL;
    begin(self, (StateObject *)state);
    Py_RETURN_NONE;
}

static PyObject *Query_NullContextWrite(QueryObject *self, PyObject *state) {
    if (check_state(self, state, "state")) return NULL;
    ((StateObject *)state)->owner = self->serial;
    ((StateObject *)state)->length = 0;
    Py_RETURN_NONE;
}

static inline int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* the words of a sentence (UTF-8, split on ASCII whitespace, as KenLM splits):
 * (log10 p, length, oov) each, or their float32 sum */
static PyObject *run_sentence(QueryObject *self, const char *text, Py_ssize_t size, int bos,
                              int eos, int want_list) {
    StateObject a, b;
    StateObject *in = &a, *out = &b;
    a.owner = 0;
    a.length = 0;
    a.ctx_length = 0;
    if (bos) begin(self, &a);
    PyObject *list = want_list ? PyList_New(0) : NULL;
    if (want_list && !list) return NULL;
    float total = 0;
    Py_ssize_t i = 0;
    for (;;) {
        while (i < size && is_space(text[i])) i++;
        int32_t w;
        int oov = 0;
        if (i < size) {
            Py_ssize_t start = i;
            while (i < size && !is_space(text[i])) i++;
            w = bytes_id(self, text + start, i - start);  /* <s>: a word, as kenlm's */
            oov = w == self->unk;
        } else if (eos) {
            w = self->eos;
            eos = 0;
        } else {
            break;
        }
        int length;
        float p = score_word(self, in, w, out, &length);
        total += p;
        if (want_list) {
            PyObject *t = Py_BuildValue("(diO)", (double)p, length, oov ? Py_True : Py_False);
            if (!t || PyList_Append(list, t) < 0) { Py_XDECREF(t); goto fail; }
            Py_DECREF(t);
        }
        StateObject *tmp = in; in = out; out = tmp;
    }
    return want_list ? list : PyFloat_FromDouble(total);
fail:
    Py_XDECREF(list);
    return NULL;
}

static PyObject *Query_sentence(QueryObject *self, PyObject *args, PyObject *kwds,
                                int want_list) {
    PyObject *sentence;
    int bos = 1, eos = 1;
    static char *names[] = {"sentence", "bos", "eos", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|pp", names, &sentence, &bos, &eos))
        return NULL;
    const char *text;
    Py_ssize_t size;
    if (PyBytes_Check(sentence)) {  /* checked to be UTF-8, as nnlm.kenlm decodes bytes */
        PyObject *decoded = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(sentence),
                                                 PyBytes_GET_SIZE(sentence), "strict");
        if (!decoded) return NULL;
        Py_DECREF(decoded);
        text = PyBytes_AS_STRING(sentence);
        size = PyBytes_GET_SIZE(sentence);
    } else if (PyUnicode_Check(sentence)) {
        text = PyUnicode_AsUTF8AndSize(sentence, &size);
        if (!text) return NULL;
    } else {
        PyErr_Format(PyExc_TypeError, "Cannot convert %s to string",
                     Py_TYPE(sentence)->tp_name);
        return NULL;
    }
    return run_sentence(self, text, size, bos, eos, want_list);
}

static PyObject *Query_score(QueryObject *self, PyObject *args, PyObject *kwds) {
    return Query_sentence(self, args, kwds, 0);
}

static PyObject *Query_full_scores_list(QueryObject *self, PyObject *args, PyObject *kwds) {
    return Query_sentence(self, args, kwds, 1);
}

static PyMethodDef Query_methods[] = {
    {"BaseScore", (PyCFunction)(void (*)(void))Query_BaseScore, METH_FASTCALL,
     "log10 p(word | in_state); out_state becomes the state after word"},
    {"memo_score", (PyCFunction)(void (*)(void))Query_memo_score, METH_FASTCALL,
     "flashlight-text's LM.score for a back-off model (nnlm.decoding.flashlight)"},
    {"BaseFullScore", (PyCFunction)(void (*)(void))Query_BaseFullScore, METH_FASTCALL,
     "FullScoreReturn(log10 p, n-gram length, oov); out_state becomes the state after word"},
    {"BeginSentenceWrite", (PyCFunction)Query_BeginSentenceWrite, METH_O,
     "make state the start of a sentence (<s>)"},
    {"NullContextWrite", (PyCFunction)Query_NullContextWrite, METH_O,
     "make state the null context"},
    {"score", (PyCFunction)(void (*)(void))Query_score, METH_VARARGS | METH_KEYWORDS,
     "log10 p(sentence), summed in float32"},
    {"full_scores_list", (PyCFunction)(void (*)(void))Query_full_scores_list,
     METH_VARARGS | METH_KEYWORDS, "[(log10 p, n-gram length, oov)] of a sentence"},
    {NULL}
};

static PyTypeObject QueryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnlm._kenlm_query.Query",
    .tp_doc = "A back-off model's KenLM-style queries over nnlm's arrays (see the module).",
    .tp_basicsize = sizeof(QueryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Query_init,
    .tp_dealloc = (destructor)Query_dealloc,
    .tp_methods = Query_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kenlm_query",
    "KenLM's per-call queries over nnlm's back-off arrays, in C (see nnlm.kenlm).", -1, NULL
};

PyMODINIT_FUNC PyInit__kenlm_query(void) {
    if (PyType_Ready(&StateType) < 0 || PyType_Ready(&FullScoreType) < 0 ||
        PyType_Ready(&QueryType) < 0)
        return NULL;
    child_name = PyUnicode_InternFromString("child");
    if (!child_name) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *v = PyLong_FromLong(MAX_ORDER);
    if (PyModule_AddObjectRef(m, "State", (PyObject *)&StateType) < 0 ||
        PyModule_AddObjectRef(m, "FullScoreReturn", (PyObject *)&FullScoreType) < 0 ||
        PyModule_AddObjectRef(m, "Query", (PyObject *)&QueryType) < 0 ||
        PyModule_AddObject(m, "MAX_ORDER", v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
