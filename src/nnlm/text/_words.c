/* nnlm.text._words: a text's lines split into words and the words numbered, in C.
 *
 * Reading a corpus is its lines split on whitespace (Python's str.split()) and each word
 * looked up in a table that numbers words in order of first occurrence. In Python that
 * is a str made for every word and a dict lookup for each: at 50 M tokens about 6 s, a
 * quarter of estimating KN5. Here a block of whole lines is read as bytes, once:
 *
 *   - lines end at \n, \r\n or \r (Python's universal newlines);
 *   - words are split on every character str.split() splits on: the ASCII whitespace
 *     \t \n \v \f \r, \x1c-\x1f and space, and the Unicode spaces U+0085, U+00A0,
 *     U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 (their UTF-8 bytes);
 *   - a word is looked up by its bytes in an open-addressing hash table; a new word gets
 *     the next number and its bytes are kept for words().
 *
 * A block that is not valid UTF-8, or holds a NUL byte, is refused (None) before any
 * word is numbered, and the caller decodes it in Python to name the line and column.
 * nnlm.text.corpus compares this path with str.split and a dict in its tests.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t hash;
    int64_t offset;  /* of the word's bytes in the arena */
    int32_t length;
    int32_t id;      /* -1: empty slot */
} Slot;

typedef struct {
    Slot *slots;
    int64_t capacity;  /* a power of two */
    int64_t count;
    char *arena;
    int64_t arena_used, arena_size;
    int64_t *starts;   /* id -> offset of its bytes */
    int32_t *lengths;  /* id -> length */
    int64_t words_size;
} Table;

static const char *CAPSULE = "nnlm.text._words.Table";

static inline uint64_t hash_bytes(const uint8_t *p, int64_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, (size_t)n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 32);
}

static void table_free(Table *t) {
    if (!t) return;
    free(t->slots);
    free(t->arena);
    free(t->starts);
    free(t->lengths);
    free(t);
}

static void capsule_free(PyObject *capsule) {
    table_free((Table *)PyCapsule_GetPointer(capsule, CAPSULE));
}

static int grow_slots(Table *t) {
    int64_t cap = t->capacity * 2;
    Slot *slots = malloc((size_t)cap * sizeof(Slot));
    if (!slots) return -1;
    for (int64_t i = 0; i < cap; i++) slots[i].id = -1;
    for (int64_t i = 0; i < t->capacity; i++) {
        Slot s = t->slots[i];
        if (s.id < 0) continue;
        int64_t j = (int64_t)(s.hash & (uint64_t)(cap - 1));
        while (slots[j].id >= 0) j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(t->slots);
    t->slots = slots;
    t->capacity = cap;
    return 0;
}

/* The word's id, numbered next if new; -1 when out of memory. */
static int32_t lookup(Table *t, const uint8_t *word, int64_t n, int add) {
    uint64_t h = hash_bytes(word, n);
    int64_t mask = t->capacity - 1, j = (int64_t)(h & (uint64_t)mask);
    for (;;) {
        Slot *s = &t->slots[j];
        if (s->id < 0) break;
        if (s->hash == h && s->length == n && !memcmp(t->arena + s->offset, word, (size_t)n))
            return s->id;
        j = (j + 1) & mask;
    }
    if (!add) return -2;
    if (t->count >= INT32_MAX) return -1;
    if (t->arena_used + n > t->arena_size) {
        int64_t size = t->arena_size * 2 > t->arena_used + n ? t->arena_size * 2
                                                             : (t->arena_used + n) * 2;
        char *arena = realloc(t->arena, (size_t)size);
        if (!arena) return -1;
        t->arena = arena;
        t->arena_size = size;
    }
    if (t->count == t->words_size) {
        int64_t size = t->words_size * 2;
        int64_t *starts = realloc(t->starts, (size_t)size * sizeof(int64_t));
        if (!starts) return -1;
        t->starts = starts;
        int32_t *lengths = realloc(t->lengths, (size_t)size * sizeof(int32_t));
        if (!lengths) return -1;
        t->lengths = lengths;
        t->words_size = size;
    }
    memcpy(t->arena + t->arena_used, word, (size_t)n);
    Slot *s = &t->slots[j];
    s->hash = h;
    s->offset = t->arena_used;
    s->length = (int32_t)n;
    s->id = (int32_t)t->count;
    t->starts[t->count] = t->arena_used;
    t->lengths[t->count] = (int32_t)n;
    t->arena_used += n;
    t->count++;
    if (t->count * 2 > t->capacity && grow_slots(t) < 0) return -1;
    return (int32_t)(t->count - 1);
}

/* Whether p[0..n) is UTF-8 with no NUL byte (overlong forms and surrogates refused, as
 * Python's decoder refuses them). */
static int valid_text(const uint8_t *p, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            /* eight ASCII bytes, none of them NUL */
            if (!(v & 0x8080808080808080ULL) &&
                !((v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = p[i];
        if (c == 0) return 0;
        if (c < 0x80) { i++; continue; }
        int k;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) k = 1;
        else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            if (c == 0xe0) lo = 0xa0;
            if (c == 0xed) hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else return 0;
        if (i + k >= n) return 0;  /* the sequence runs past the block */
        if (p[i + 1] < lo || p[i + 1] > hi) return 0;
        for (int j = 2; j <= k; j++)
            if (p[i + j] < 0x80 || p[i + j] > 0xbf) return 0;
        i += k + 1;
    }
    return 1;
}

static inline int ascii_space(uint8_t c) {
    return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f);
}

/* Bytes of the Unicode space starting at p (valid UTF-8 before end), or 0. */
static inline int unicode_space(const uint8_t *p, const uint8_t *end) {
    uint8_t c = p[0];
    if (c == 0xc2 && p + 1 < end) return (p[1] == 0x85 || p[1] == 0xa0) ? 2 : 0;
    if (p + 2 >= end) return 0;
    if (c == 0xe1) return (p[1] == 0x9a && p[2] == 0x80) ? 3 : 0;
    if (c == 0xe2) {
        if (p[1] == 0x80) return ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 ||
                                  p[2] == 0xa9 || p[2] == 0xaf) ? 3 : 0;
        return (p[1] == 0x81 && p[2] == 0x9f) ? 3 : 0;
    }
    if (c == 0xe3) return (p[1] == 0x80 && p[2] == 0x80) ? 3 : 0;
    return 0;
}

typedef struct {
    char *data;
    int64_t used, size;
} Buffer;

static int push(Buffer *b, const void *item, int64_t n) {
    if (b->used + n > b->size) {
        int64_t size = b->size ? b->size * 2 : 1 << 16;
        while (size < b->used + n) size *= 2;
        char *data = realloc(b->data, (size_t)size);
        if (!data) return -1;
        b->data = data;
        b->size = size;
    }
    memcpy(b->data + b->used, item, (size_t)n);
    b->used += n;
    return 0;
}

static Table *table_of(PyObject *capsule) {
    return (Table *)PyCapsule_GetPointer(capsule, CAPSULE);
}

static PyObject *py_new(PyObject *self, PyObject *args) {
    Table *t = calloc(1, sizeof(Table));
    if (!t) return PyErr_NoMemory();
    t->capacity = 1 << 12;
    t->arena_size = 1 << 16;
    t->words_size = 1 << 11;
    t->slots = malloc((size_t)t->capacity * sizeof(Slot));
    t->arena = malloc((size_t)t->arena_size);
    t->starts = malloc((size_t)t->words_size * sizeof(int64_t));
    t->lengths = malloc((size_t)t->words_size * sizeof(int32_t));
    if (!t->slots || !t->arena || !t->starts || !t->lengths) {
        table_free(t);
        return PyErr_NoMemory();
    }
    for (int64_t i = 0; i < t->capacity; i++) t->slots[i].id = -1;
    PyObject *capsule = PyCapsule_New(t, CAPSULE, capsule_free);
    if (!capsule) table_free(t);
    return capsule;
}

/* encode(table, block) -> (ids: bytearray of int32, words a line: bytearray of int64),
 * every line of the block counted, blank ones as 0; None when the block is not UTF-8
 * or holds a NUL byte. */
static PyObject *py_encode(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Oy*", &capsule, &view)) return NULL;
    Table *t = table_of(capsule);
    if (!t) { PyBuffer_Release(&view); return NULL; }
    const uint8_t *p = view.buf, *end = p + view.len;
    if (!valid_text(p, view.len)) { PyBuffer_Release(&view); Py_RETURN_NONE; }
    Buffer ids = {0}, counts = {0};
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < end && !failed) {
        int64_t words = 0;
        while (p < end) {
            uint8_t c = *p;
            if (c == '\n') { p++; break; }
            if (c == '\r') { p++; if (p < end && *p == '\n') p++; break; }
            if (ascii_space(c)) { p++; continue; }
            int w = c >= 0x80 ? unicode_space(p, end) : 0;
            if (w) { p += w; continue; }
            const uint8_t *q = p + 1;
            while (q < end) {
                uint8_t d = *q;
                if (d < 0x80 ? ascii_space(d) : unicode_space(q, end) > 0) break;
                q++;
            }
            int32_t id = lookup(t, p, q - p, 1);
            if (id < 0 || push(&ids, &id, sizeof id) < 0) { failed = 1; break; }
            words++;
            p = q;
        }
        if (!failed && push(&counts, &words, sizeof words) < 0) failed = 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *out = NULL;
    if (failed) PyErr_NoMemory();
    else out = Py_BuildValue("(NN)", PyByteArray_FromStringAndSize(ids.data ? ids.data : "",
                                                                    ids.used),
                             PyByteArray_FromStringAndSize(counts.data ? counts.data : "",
                                                           counts.used));
    free(ids.data);
    free(counts.data);
    return out;
}

/* words(table) -> list of str, by id. */
static PyObject *py_words(PyObject *self, PyObject *args) {
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    Table *t = table_of(capsule);
    if (!t) return NULL;
    PyObject *out = PyList_New((Py_ssize_t)t->count);
    if (!out) return NULL;
    for (int64_t i = 0; i < t->count; i++) {
        PyObject *w = PyUnicode_DecodeUTF8(t->arena + t->starts[i], t->lengths[i], "strict");
        if (!w) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, (Py_ssize_t)i, w);
    }
    return out;
}

/* find(table, word: bytes, add: bool) -> its id; -1 when absent and not added. */
static PyObject *py_find(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer view;
    int add;
    if (!PyArg_ParseTuple(args, "Oy*p", &capsule, &view, &add)) return NULL;
    Table *t = table_of(capsule);
    if (!t) { PyBuffer_Release(&view); return NULL; }
    int32_t id = lookup(t, view.buf, view.len, add);
    PyBuffer_Release(&view);
    if (id == -1) return PyErr_NoMemory();
    return PyLong_FromLong(id < 0 ? -1 : id);
}

static PyObject *py_size(PyObject *self, PyObject *args) {
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    Table *t = table_of(capsule);
    return t ? PyLong_FromLongLong(t->count) : NULL;
}

static PyMethodDef methods[] = {
    {"new", py_new, METH_NOARGS, "An empty word table."},
    {"encode", py_encode, METH_VARARGS,
     "encode(table, block) -> (int32 ids, int64 words a line) as bytearrays, or None"},
    {"words", py_words, METH_VARARGS, "words(table) -> the words, by id"},
    {"find", py_find, METH_VARARGS, "find(table, word, add) -> id or -1"},
    {"size", py_size, METH_VARARGS, "size(table) -> number of words"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_words", NULL, -1, methods};

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
