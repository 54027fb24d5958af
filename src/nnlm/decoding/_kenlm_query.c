/* nnlm._kenlm_query: the per-call path of nnlm.kenlm for back-off models, in C.
 *
 * KenLM's Python module answers BaseScore in about 0.4 us; a Python implementation
 * spends 50-100 us making arrays and objects per call. This module keeps the model's
 * numbers as KenLM does (log10 in float32, a flag per n-gram saying whether it can
 * extend) and reads each order where its numbers lie, in whichever layout that is, over
 * the buffers it is given, without copying them and without making a Python object per
 * call beyond the result. Each layout is read by the header beside the code that owns it
 * (see Level below); this file holds the API and the walk.
 *
 * The algorithm is KenLM's (lm/model.cc, FullScore and ResumeScore; Heafield 2011):
 * a State holds the last words, most recent first, and the log10 back-off weight of each
 * context n-gram they form; scoring word w walks w, (c1 w), (c2 c1 w), ... as far as the
 * n-grams are stored, takes the longest one's probability, adds the back-off weights of
 * the context n-grams longer than it, and keeps in the new state only as many words as
 * the longest stored n-gram ending in w that can still extend ("right state
 * minimization").
 *
 * Types: State and FullScoreReturn (kenlm's), and Query, the model: built once from a
 * spec (nnlm.ngram.store.query_spec.QuerySpec) by nnlm.kenlm, which keeps it alive. The
 * buffers are read-only views; the model must not change under a Query.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "structmember.h"

#include "../ngram/formats/kenlm_probing.h"
#include "../ngram/formats/kenlm_trie.h"
#include "../ngram/store/hash_level.h"
#include "../ngram/store/trie_level.h"
#include "../ngram/store/vocab_hash.h"
#include "kenlm_api.h"

#define MAX_ORDER 12

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
/* One order k >= 2 in any of the layouts the queries read, each read by the header
 * beside the code that writes or reads the layout: nnlm's in-memory hash index
 * (ngram/store/hash_level.h), nnlm's mapped trie, its values as floats or coded as counts
 * (ngram/store/trie_level.h, shared with the bulk scorer _trie.c), and KenLM's probing and
 * trie binaries where they lie (ngram/formats/kenlm_probing.h, kenlm_trie.h). Each level
 * tuple names its layout in its first item. */
typedef enum { HASH_LEVEL = 1, TRIE_LEVEL, PROBING_LEVEL, KENLM_TRIE_LEVEL } LevelKind;

typedef struct {
    LevelKind kind;
    union {
        HashLevel hash;
        TrieLevel trie;
        ProbingLevel probing;
        KenlmTrieLevel kenlm;
    } as;
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
    CodedUnigrams uni;
    Level levels[MAX_ORDER]; /* levels[k] for order k >= 2 */
    Py_buffer buffers[24 * MAX_ORDER + 16];  /* MAX_BUFFERS */
    int ready;               /* __init__ ran: a second call is refused (it would leak) */
    int n_buffers;
} QueryObject;

static PyTypeObject QueryType;

static void Query_dealloc(QueryObject *self) {
    PyMem_Free(self->table);
    PyMem_Free(self->own_pb);
    PyMem_Free(self->uni.sym);
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

#define LOG10_E 0.43429448190325182765

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

/* the entries of order k, which the order above points into */
static uint64_t level_entries(const Level *L) {
    switch (L->kind) {
    case HASH_LEVEL: return L->as.hash.n;
    case TRIE_LEVEL: return L->as.trie.n;
    case KENLM_TRIE_LEVEL: return L->as.kenlm.n;
    default: return 0;
    }
}

/* order k from its tagged tuple, each layout by its own header; orders of one model
 * agree (a coded trie is coded from order 2 up; a KenLM trie's orders chain, order 2
 * from the unigram records) */
static int take_level(QueryObject *self, int k, PyObject *t) {
    Level *L = &self->levels[k];
    int top = k == self->order;
    PyObject *tag = PyTuple_Check(t) && PyTuple_GET_SIZE(t) > 0 ? PyTuple_GET_ITEM(t, 0) : NULL;
    if (!tag || !PyUnicode_Check(tag)) {
        PyErr_Format(PyExc_TypeError, "order %d: a tuple whose first item names its layout", k);
        return -1;
    }
    const char *name = PyUnicode_AsUTF8(tag);
    if (!name) return -1;
    if (!strcmp(name, "hash")) {
        L->kind = HASH_LEVEL;
        return hash_level_take(t, top, &L->as.hash, take_bytes, self);
    }
    if (!strcmp(name, "trie") || !strcmp(name, "coded")) {
        L->kind = TRIE_LEVEL;
        uint64_t n_lower = k == 2 ? (uint64_t)self->V : level_entries(&self->levels[k - 1]);
        if (trie_level_take(t, top, n_lower, &L->as.trie, take_bytes, self) < 0) return -1;
        if (k == 2 && L->as.trie.coded) {
            if (coded_unigrams_take(t, (uint64_t)self->V, (uint64_t)self->bos, &self->uni,
                                    take_bytes, self) < 0)
                return -1;
            self->coded = 1;
        }
        return L->as.trie.coded == self->coded ? 0 : -1;
    }
    if (!strcmp(name, "probing")) {
        L->kind = PROBING_LEVEL;
        return probing_level_take(t, top, self->V, &L->as.probing, take_bytes, self);
    }
    if (!strcmp(name, "kenlm-trie")) {
        L->kind = KENLM_TRIE_LEVEL;
        if (kenlm_trie_level_take(t, top, self->V, &L->as.kenlm, take_bytes, self) < 0)
            return -1;
        /* order 2 reads the unigram records; each order above, the one below it */
        return k == 2 ? (L->as.kenlm.unigrams ? 0 : -1)
                      : (self->levels[k - 1].kind == KENLM_TRIE_LEVEL ? 0 : -1);
    }
    PyErr_Format(PyExc_ValueError, "order %d: no layout named '%s'", k, name);
    return -1;
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
    for (Py_ssize_t i = 0; i < n_levels; i++)
        if (take_level(self, (int)i + 2, PyList_GET_ITEM(levels, i)) < 0) goto bad_size;
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

/* A walk up the orders for one word: the entry found at the order below (the word's id
 * at order 1), a probing file's hash of the n-gram so far, and a coded model's p carried
 * in float64 with the symbols of the contexts (value_codes.h) */
typedef struct {
    int64_t id;
    uint64_t hash;
    double p64;
    float escaped;
    const uint32_t *ctx;            /* the in-state's contexts' symbols */
    uint32_t out_ctx[MAX_ORDER - 1];
} Walk;

/* the entry of order k holding the n-gram (before, then the n-gram walk->id found at
 * order k - 1, whose last word is w), or -1 */
static inline int64_t level_find(const QueryObject *q, int k, Walk *walk, int32_t w,
                                 int32_t before) {
    const Level *L = &q->levels[k];
    switch (L->kind) {
    case TRIE_LEVEL:
        return trie_level_find(&L->as.trie, (uint64_t)walk->id, (uint64_t)before,
                               (uint64_t)q->V);
    case KENLM_TRIE_LEVEL:
        return kenlm_trie_level_find(&L->as.kenlm, k == 2 ? NULL : &q->levels[k - 1].as.kenlm,
                                     (uint64_t)walk->id, (uint64_t)before);
    case PROBING_LEVEL: {
        const int64_t *kid = L->as.probing.kid;
        walk->hash = probing_combine(k == 2 ? (uint64_t)kid[w] : walk->hash,
                                     (uint64_t)kid[before]);
        return probing_level_find(&L->as.probing, walk->hash);
    }
    default:
        return hash_level_find(&L->as.hash, walk->id * q->V + before);
    }
}

/* a coded order's step: p carried up from its numerator and its context's S and gamma
 * (value_codes.h), its escape noted, and below the top its back-off and context symbol */
static inline void coded_step(const QueryObject *q, int k, uint64_t e, int top,
                              float *backoff, Walk *walk) {
    const TrieLevel *L = &q->levels[k].as.trie;
    int64_t escape, unused;
    uint64_t sa = field_symbol(&L->a, e, &escape);
    const CodeField *C = k == 2 ? &q->uni.c : &q->levels[k - 1].as.trie.c;
    uint32_t sc = walk->ctx[k - 2];
    double Sh = NAN, gamma = NAN;
    if (sc < C->n_symbols) {
        Sh = C->S[sc];
        gamma = C->gamma[sc];
    }
    walk->p64 = chain_p(L->a.num[sa], Sh, gamma, walk->p64);
    walk->escaped = escape >= 0 ? L->a.escape_logp[escape] : NAN;
    if (!top) {
        uint64_t so = field_symbol(&L->c, e, &unused);
        *backoff = (float)(L->c.bow[so] * LOG10_E);
        walk->out_ctx[k - 1] = (uint32_t)so;
    }
}

/* log10 p of entry e of order k and, below the top order, its log10 back-off (a coded
 * model's p is carried in walk and read when the walk ends) */
static inline float level_values(const QueryObject *q, int k, uint64_t e, int top,
                                 float *backoff, Walk *walk) {
    const Level *L = &q->levels[k];
    switch (L->kind) {
    case TRIE_LEVEL:
        if (L->as.trie.coded) {
            coded_step(q, k, e, top, backoff, walk);
            return NAN;
        }
        if (!top) *backoff = (float)(value_ln(&L->as.trie.bow, e) * LOG10_E);
        return (float)(value_ln(&L->as.trie.logp, e) * LOG10_E);
    case KENLM_TRIE_LEVEL:
        return kenlm_trie_level_values(&L->as.kenlm, e, top, backoff);
    case PROBING_LEVEL:
        return probing_level_values(&L->as.probing, e, top, backoff);
    default:
        return hash_level_values(&L->as.hash, e, backoff);
    }
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
            if (id >= 0 && id < q->V) found[0] = q->uni.sym[id];
            continue;
        }
        if (id < 0 || i + 1 >= q->order) break;
        const TrieLevel *L = &q->levels[i + 1].as.trie;
        if ((id = trie_level_find(L, (uint64_t)id, (uint64_t)in->words[i], (uint64_t)q->V)) < 0)
            break;
        int64_t unused;
        found[i] = (uint32_t)field_symbol(&L->c, (uint64_t)id, &unused);
    }
    return found;
}

/* log10 p(w | in) as KenLM's FullScore; fills out (if not NULL) and the n-gram length.
 * The walk: w, (c1 w), (c2 c1 w), ... as far as the n-grams are stored; the longest
 * one's p, plus the back-offs of the context n-grams longer than it; the state keeps the
 * words of the longest n-gram ending in w that can still extend. */
static float score_word(const QueryObject *q, const StateObject *in, int32_t w,
                        StateObject *out, int *length) {
    float prob = q->uni_pb[2 * w];
    int ngram_length = 1;
    float out_backoff[MAX_ORDER - 1];
    out_backoff[0] = q->uni_pb[2 * w + 1];
    int keep = extends(out_backoff[0]) ? 1 : 0;
    uint32_t found_ctx[MAX_ORDER - 1];
    Walk walk = {.id = w, .escaped = NAN};
    if (q->coded) {
        walk.p64 = q->uni.p[w];
        walk.out_ctx[0] = q->uni.sym[w];
        walk.ctx = in_contexts(q, in, found_ctx);
    }
    for (int j = 0; j < in->length && j + 2 <= q->order; j++) {
        int k = j + 2, top = k == q->order;
        int64_t pos = level_find(q, k, &walk, w, in->words[j]);
        if (pos < 0) break;
        walk.id = pos;
        float backoff = 0;
        prob = level_values(q, k, (uint64_t)pos, top, &backoff, &walk);
        ngram_length = k;
        if (!top) {
            out_backoff[k - 1] = backoff;
            if (extends(backoff)) keep = k;
        }
    }
    if (q->coded && ngram_length >= 2) prob = (float)(entry_ln(walk.p64, walk.escaped) * LOG10_E);
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
        if (q->coded) memcpy(out->ctx, walk.out_ctx, sizeof(uint32_t) * keep);
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
    if (q->coded) s->ctx[0] = q->uni.sym[q->bos];
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

/* word_ids(words): each word's id as run_sentence would find it (a list of ints; -1 for a
 * "word" KenLM would not read as one word: empty, or holding whitespace) */
static PyObject *Query_word_ids(QueryObject *self, PyObject *words) {
    PyObject *seq = PySequence_Fast(words, "word_ids takes a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (!out) { Py_DECREF(seq); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *word = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t size;
        const char *text = PyUnicode_Check(word) ? PyUnicode_AsUTF8AndSize(word, &size) : NULL;
        if (!text) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                PyErr_Clear();
                size = -1;  /* not a str, or a lone surrogate: no word */
            } else {
                goto fail;
            }
        }
        int32_t id = size > 0 ? 0 : -1;
        for (Py_ssize_t j = 0; j < size; j++)
            if (is_space(text[j])) { id = -1; break; }
        if (id == 0) id = bytes_id(self, text, size);
        PyObject *v = PyLong_FromLong(id);
        if (!v) goto fail;
        PyList_SET_ITEM(out, i, v);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

/* score_ids(ids, bounds, out, bos=True, eos=True): sentences of word ids (int32 ids,
 * sentence i being ids[bounds[i]:bounds[i + 1]], bounds int64) scored as score() scores
 * their text: out[i] (float64) = the float32 sum of their log10 probabilities */
static PyObject *Query_score_ids(QueryObject *self, PyObject *args, PyObject *kwds) {
    Py_buffer ids, bounds, out;
    int bos = 1, eos = 1;
    static char *names[] = {"ids", "bounds", "out", "bos", "eos", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*y*w*|pp", names, &ids, &bounds, &out,
                                     &bos, &eos))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_ids = ids.len / 4, n = bounds.len / 8 - 1;
    const int32_t *w = ids.buf;
    const int64_t *b = bounds.buf;
    double *o = out.buf;
    if (ids.len % 4 || bounds.len % 8 || n < 0 || out.len != n * 8 || b[0] != 0 ||
        b[n] != n_ids) {
        PyErr_SetString(PyExc_ValueError, "score_ids: ids, bounds and out disagree");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (b[i + 1] < b[i]) {
            PyErr_SetString(PyExc_ValueError, "score_ids: bounds go down");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n_ids; i++) {
        if (w[i] < 0 || w[i] >= self->V) {
            PyErr_Format(PyExc_ValueError, "score_ids: id %d is not a word of the model",
                         (int)w[i]);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < n; s++) {
        StateObject a, c;
        StateObject *in = &a, *next = &c;
        a.owner = 0;
        a.length = 0;
        a.ctx_length = 0;
        if (bos) begin(self, &a);
        float total = 0;
        int length;
        for (int64_t i = b[s]; i < b[s + 1]; i++) {
            total += score_word(self, in, w[i], next, &length);
            StateObject *tmp = in; in = next; next = tmp;
        }
        if (eos) total += score_word(self, in, self->eos, next, &length);
        o[s] = (double)total;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&ids);
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&out);
    return result;
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
    {"word_ids", (PyCFunction)Query_word_ids, METH_O,
     "each word's id as score() finds it (-1: not one word as KenLM splits)"},
    {"score_ids", (PyCFunction)(void (*)(void))Query_score_ids, METH_VARARGS | METH_KEYWORDS,
     "many sentences of word ids scored as score() scores their text"},
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

/* -- the C API (kenlm_api.h) ---------------------------------------------------------- */
static int32_t api_word_id(PyObject *query, PyObject *word) {
    return scored_word_id((QueryObject *)query, word);
}

static int32_t api_unk_id(PyObject *query) { return ((QueryObject *)query)->unk; }

static int32_t api_eos_id(PyObject *query) { return ((QueryObject *)query)->eos; }

static float api_score(PyObject *query, const void *in, int32_t w, void *out) {
    int length;
    return score_word((QueryObject *)query, (const StateObject *)in, w, (StateObject *)out,
                      &length);
}

static int api_read_state(PyObject *query, PyObject *state, void *out) {
    if (check_state((QueryObject *)query, state, "state")) return -1;
    memcpy(out, state, sizeof(StateObject));
    return 0;
}

static PyObject *api_new_state(PyObject *query, const void *in) {
    StateObject *s = PyObject_New(StateObject, &StateType);
    if (!s) return NULL;
    const size_t head = offsetof(StateObject, owner);
    memcpy((char *)s + head, (const char *)in + head, sizeof(StateObject) - head);
    return (PyObject *)s;
}

static NnlmKenlmAPI c_api = {
    NNLM_KENLM_API_VERSION, sizeof(StateObject), &QueryType, api_word_id, api_unk_id,
    api_eos_id, api_score, api_read_state, api_new_state,
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
    PyObject *api = PyCapsule_New(&c_api, NNLM_KENLM_API_CAPSULE, NULL);
    if (!api || PyModule_AddObject(m, "_C_API", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
