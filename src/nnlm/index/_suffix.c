/* nnlm.index._suffix: the two searches every suffix-array query is made of, in C.
 *
 * An index shard is infini-gram's layout (Liu et al. 2024): the token ids of its documents
 * as little-endian integers of w bytes, each document after a separator of w 0xff bytes
 * (``tokenized``), and the suffix array over that byte string restricted to token
 * boundaries, each entry the byte offset of a suffix in p bytes, little-endian (``table``).
 * Suffixes sort as byte strings, so every query here compares bytes (memcmp) and a
 * pattern is its tokens' little-endian bytes: the order is the table's whatever w is.
 *
 * find       for each pattern, the range [lo, hi) of table entries whose suffix starts
 *            with it (an empty pattern: the whole table): its count is hi - lo;
 * followers  for each range and depth d (bytes), the distinct tokens found d bytes into
 *            the range's suffixes, with their counts: the next-token distribution after
 *            a d-byte context. Equal tokens are contiguous in a range whose suffixes share
 *            their first d bytes, so each distinct token costs one exponential search,
 *            O(T log R) for T distinct tokens in a range of R, however large R is.
 *
 * Both take a batch (one call, the GIL released) and read the buffers in place: the
 * shard's files are memory-mapped and never copied. The numpy path in
 * nnlm.index.search gives the same answers, and the tests compare the two.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../base/portable.h"

/* entry() and the patterns read little-endian integers in place: refuse to build
 * elsewhere (nnlm.index.search's numpy path then answers, in the file's byte order) */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nnlm.index._suffix reads infini-gram's little-endian files in place"
#endif

typedef struct {
    const uint8_t *text;
    int64_t size;         /* bytes of text */
    const uint8_t *table;
    int64_t entries;      /* suffixes */
    int ptr;              /* bytes an entry */
} Shard;

static inline int64_t entry(const Shard *s, int64_t i) {
    uint64_t v = 0;
    memcpy(&v, s->table + i * s->ptr, (size_t)s->ptr);  /* little-endian: checked above */
    return (int64_t)v;
}

/* <0, 0, >0: the suffix at table entry i, from byte depth, against pattern (m bytes);
 * 0 when the pattern is a prefix of it. A suffix that ends first is the smaller. */
static inline int compare(const Shard *s, int64_t i, int64_t depth, const uint8_t *pattern,
                          int64_t m) {
    int64_t at = entry(s, i) + depth;
    int64_t avail = at < s->size ? s->size - at : 0;
    int64_t k = m < avail ? m : avail;
    int c = k ? memcmp(s->text + at, pattern, (size_t)k) : 0;
    if (c) return c;
    return avail < m ? -1 : 0;
}

static int shard_from(Shard *s, Py_buffer *text, Py_buffer *table, int ptr) {
    if (ptr < 1 || ptr > 8 || table->len % ptr) {
        PyErr_SetString(PyExc_ValueError, "a table entry is 1 to 8 bytes, the table whole");
        return -1;
    }
    s->text = (const uint8_t *)text->buf;
    s->size = text->len;
    s->table = (const uint8_t *)table->buf;
    s->entries = table->len / ptr;
    s->ptr = ptr;
    return 0;
}

/* The batch's searches advance together, one step of every search at a time, and each
 * step is three passes over the batch: prefetch each search's table entry, read it and
 * prefetch the text it points at, then compare. So the cache misses of a whole batch
 * overlap (the memory system serves many at once) instead of costing one after another,
 * which is what a large index's binary search spends its time on. The lower bound's
 * search also keeps the first entry it saw above the pattern, where the upper bound's
 * search ends at the latest. */
#define PREFETCH(p) NNLM_PREFETCH_ONCE(p)

/* The first 8 bytes of a pattern as a big-endian number, its missing bytes 0 (low) or
 * 0xff (high): a sampled suffix whose 8 bytes are below the low key sorts below the
 * pattern, one above the high key above every suffix that starts with it. */
static uint64_t key8(const uint8_t *p, int64_t m, uint8_t fill) {
    uint64_t k = 0;
    for (int j = 0; j < 8; j++) k = (k << 8) | (j < m ? p[j] : fill);
    return k;
}

/* Where the sample (every stride-th entry's 8-byte key) puts a pattern's range: its
 * lower bound is above the last sample below the low key, its upper bound at most the
 * first sample above the high key. */
static void from_sample(const Shard *s, const uint64_t *sample, int64_t n, int64_t stride,
                        const uint8_t *p, int64_t m, int64_t *a, int64_t *b) {
    uint64_t low = key8(p, m, 0), high = key8(p, m, 0xff);
    int64_t x = 0, y = n;
    while (x < y) {  /* the first sample not below low */
        int64_t mid = x + (y - x) / 2;
        if (sample[mid] < low) x = mid + 1; else y = mid;
    }
    *a = x > 0 ? (x - 1) * stride + 1 : 0;
    y = n;
    while (x < y) {  /* the first sample above high */
        int64_t mid = x + (y - x) / 2;
        if (sample[mid] <= high) x = mid + 1; else y = mid;
    }
    *b = x < n && x * stride < s->entries ? x * stride : s->entries;
}

static void bounds(const Shard *s, int64_t q, const uint8_t *pat, const int64_t *off,
                   const uint64_t *sample, int64_t n_sample, int64_t stride,
                   int64_t *los, int64_t *his, int64_t *a, int64_t *b, int64_t *mids) {
    for (int upper = 0; upper < 2; upper++) {
        for (int64_t i = 0; i < q; i++) {
            if (!upper) {
                a[i] = 0; b[i] = s->entries;
                if (n_sample)
                    from_sample(s, sample, n_sample, stride, pat + off[i],
                                off[i + 1] - off[i], &a[i], &b[i]);
                his[i] = b[i];
            }
            else { a[i] = los[i]; b[i] = his[i]; }
        }
        for (int active = 1; active;) {
            active = 0;
            for (int64_t i = 0; i < q; i++) {
                if (a[i] < b[i]) {
                    mids[i] = a[i] + (b[i] - a[i]) / 2;
                    PREFETCH(s->table + mids[i] * s->ptr);
                }
            }
            for (int64_t i = 0; i < q; i++)
                if (a[i] < b[i]) PREFETCH(s->text + entry(s, mids[i]));
            for (int64_t i = 0; i < q; i++) {
                if (a[i] >= b[i]) continue;
                int c = compare(s, mids[i], 0, pat + off[i], off[i + 1] - off[i]);
                if (upper ? c <= 0 : c < 0) a[i] = mids[i] + 1;
                else {
                    b[i] = mids[i];
                    if (!upper && c > 0 && mids[i] < his[i]) his[i] = mids[i];
                }
                active |= a[i] < b[i];
            }
        }
        for (int64_t i = 0; i < q; i++) {
            if (upper) his[i] = a[i]; else los[i] = a[i];
        }
    }
}

/* find(text, table, ptr, patterns, offsets, lo, hi[, sample, stride]): offsets (int64,
 * Q + 1) cut patterns (bytes) into Q patterns; lo and hi (int64, Q) receive the ranges.
 * sample: the 8-byte keys (uint64) of every stride-th entry, which start each search
 * within a stride of its answer (nnlm.index.search.sample_keys). */
static PyObject *find(PyObject *self, PyObject *args) {
    Py_buffer text, table, patterns, offsets, lo, hi, sample = {0};
    int ptr;
    long long stride = 0;
    if (!PyArg_ParseTuple(args, "y*y*iy*y*w*w*|y*L", &text, &table, &ptr, &patterns,
                          &offsets, &lo, &hi, &sample, &stride))
        return NULL;
    PyObject *out = NULL;
    Shard s;
    int64_t q = offsets.len / 8 - 1, *work = NULL;
    if (shard_from(&s, &text, &table, ptr) < 0) goto done;
    if (q < 0 || lo.len != q * 8 || hi.len != q * 8) {
        PyErr_SetString(PyExc_ValueError, "find: Q + 1 offsets and Q lows and highs");
        goto done;
    }
    const int64_t *off = (const int64_t *)offsets.buf;
    for (int64_t i = 0; i < q; i++) {
        if (off[i] < 0 || off[i + 1] < off[i] || off[i + 1] > patterns.len) {
            PyErr_SetString(PyExc_ValueError, "find: offsets outside the patterns");
            goto done;
        }
    }
    int64_t n_sample = sample.buf ? sample.len / 8 : 0;
    if (n_sample && (stride < 1 || (n_sample - 1) * stride >= s.entries ||
                     (s.entries - 1) / stride + 1 != n_sample)) {
        PyErr_SetString(PyExc_ValueError, "find: a sample of every stride-th entry");
        goto done;
    }
    work = malloc((size_t)(3 * (q ? q : 1)) * sizeof(int64_t));
    if (!work) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    bounds(&s, q, (const uint8_t *)patterns.buf, off, (const uint64_t *)sample.buf, n_sample,
           (int64_t)stride, (int64_t *)lo.buf, (int64_t *)hi.buf, work, work + q,
           work + 2 * q);
    Py_END_ALLOW_THREADS
    out = Py_NewRef(Py_None);
done:
    free(work);
    if (sample.buf) PyBuffer_Release(&sample);
    PyBuffer_Release(&text); PyBuffer_Release(&table); PyBuffer_Release(&patterns);
    PyBuffer_Release(&offsets); PyBuffer_Release(&lo); PyBuffer_Release(&hi);
    return out;
}

/* narrow(text, table, ptr, lo, hi, depth, tokens, out_lo, out_hi): within each range
 * [lo, hi), whose suffixes share their first depth bytes, the entries whose next
 * token's bytes (tokens: Q patterns of equal length) follow: the range of the context one
 * token longer. What a decoder's state pays a word: one search inside a range. */
static PyObject *narrow(PyObject *self, PyObject *args) {
    Py_buffer text, table, lo, hi, depth, tokens, olo, ohi;
    int ptr;
    if (!PyArg_ParseTuple(args, "y*y*iy*y*y*y*w*w*", &text, &table, &ptr, &lo, &hi, &depth,
                          &tokens, &olo, &ohi))
        return NULL;
    PyObject *out = NULL;
    Shard s;
    int64_t q = lo.len / 8;
    if (shard_from(&s, &text, &table, ptr) < 0) goto done;
    if (hi.len != lo.len || depth.len != lo.len || olo.len != lo.len || ohi.len != lo.len ||
        (q && tokens.len % q)) {
        PyErr_SetString(PyExc_ValueError, "narrow: as many ranges, depths, tokens, outputs");
        goto done;
    }
    const int64_t *los = (const int64_t *)lo.buf, *his = (const int64_t *)hi.buf;
    const int64_t *ds = (const int64_t *)depth.buf;
    int64_t w = q ? tokens.len / q : 0;
    for (int64_t i = 0; i < q; i++) {
        if (los[i] < 0 || his[i] < los[i] || his[i] > s.entries || ds[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "narrow: a range outside the table");
            goto done;
        }
    }
    int64_t *a = (int64_t *)olo.buf, *b = (int64_t *)ohi.buf;
    const uint8_t *tok = (const uint8_t *)tokens.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < q; i++) {
        int64_t x = los[i], y = his[i];
        while (x < y) {
            int64_t mid = x + (y - x) / 2;
            if (compare(&s, mid, ds[i], tok + i * w, w) < 0) x = mid + 1; else y = mid;
        }
        a[i] = x;
        y = his[i];
        while (x < y) {
            int64_t mid = x + (y - x) / 2;
            if (compare(&s, mid, ds[i], tok + i * w, w) <= 0) x = mid + 1; else y = mid;
        }
        b[i] = x;
    }
    Py_END_ALLOW_THREADS
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&text); PyBuffer_Release(&table); PyBuffer_Release(&lo);
    PyBuffer_Release(&hi); PyBuffer_Release(&depth); PyBuffer_Release(&tokens);
    PyBuffer_Release(&olo); PyBuffer_Release(&ohi);
    return out;
}

typedef struct { uint32_t *tokens; int64_t *counts; int64_t n, cap; } Found;

static int found_push(Found *f, uint32_t token, int64_t count) {
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 1024;
        uint32_t *t = realloc(f->tokens, (size_t)cap * sizeof(uint32_t));
        if (!t) return -1;
        f->tokens = t;
        int64_t *c = realloc(f->counts, (size_t)cap * sizeof(int64_t));
        if (!c) return -1;
        f->counts = c;
        f->cap = cap;
    }
    f->tokens[f->n] = token;
    f->counts[f->n++] = count;
    return 0;
}

/* The distinct tokens d bytes into the suffixes of [lo, hi), with counts; suffixes that
 * end within those d + w bytes (the text's end) are counted in *ends. */
#define SCAN 64  /* a range this small is read whole: its loads do not wait on each other */

/* follow()'s small case: every entry's token read in one pass (the table's entries lie
 * together; the text's loads are independent, so the processor overlaps their misses),
 * then the runs of equal tokens counted. */
static int follow_scan(const Shard *s, int w, int64_t lo, int64_t hi, int64_t depth,
                       Found *f, int64_t *ends) {
    uint32_t values[SCAN];
    int n = 0;
    for (int64_t i = lo; i < hi; i++) {
        int64_t at = entry(s, i) + depth;
        if (at + w > s->size) { (*ends)++; continue; }
        uint32_t v = 0;
        memcpy(&v, s->text + at, (size_t)w);
        values[n++] = v;
    }
    for (int a = 0; a < n;) {
        int b = a + 1;
        while (b < n && values[b] == values[a]) b++;
        if (found_push(f, values[a], b - a) < 0) return -1;
        a = b;
    }
    return 0;
}

static int follow(const Shard *s, int w, int64_t lo, int64_t hi, int64_t depth, Found *f,
                  int64_t *ends) {
    int64_t i = lo;
    *ends = 0;
    if (hi - lo <= SCAN) return follow_scan(s, w, lo, hi, depth, f, ends);
    while (i < hi) {
        int64_t at = entry(s, i) + depth;
        if (at + w > s->size) {
            (*ends)++;
            i++;
            continue;
        }
        const uint8_t *token = s->text + at;
        int64_t step = 1, last = i;  /* last: known equal; find the first unequal after */
        while (i + step < hi && compare(s, i + step, depth, token, w) == 0) {
            last = i + step;
            step *= 2;
        }
        int64_t a = last + 1, b = i + step < hi ? i + step : hi;
        while (a < b) {
            int64_t mid = a + (b - a) / 2;
            if (compare(s, mid, depth, token, w) == 0) a = mid + 1; else b = mid;
        }
        uint32_t value = 0;
        memcpy(&value, token, (size_t)w);
        if (found_push(f, value, a - i) < 0) return -1;
        i = a;
    }
    return 0;
}

/* followers(text, table, ptr, width, lo, hi, depth) -> (tokens, counts, offsets, ends) as
 * bytes: uint32 tokens and int64 counts, cut by int64 offsets (Q + 1); ends (int64, Q). */
static PyObject *followers(PyObject *self, PyObject *args) {
    Py_buffer text, table, lo, hi, depth;
    int ptr, width;
    if (!PyArg_ParseTuple(args, "y*y*iiy*y*y*", &text, &table, &ptr, &width, &lo, &hi,
                          &depth))
        return NULL;
    PyObject *out = NULL;
    Shard s;
    Found f = {0};
    int64_t q = lo.len / 8, *offsets = NULL, *ends = NULL;
    int failed = 0;
    if (shard_from(&s, &text, &table, ptr) < 0) goto done;
    if (width != 1 && width != 2 && width != 4) {
        PyErr_SetString(PyExc_ValueError, "followers: a token is 1, 2 or 4 bytes");
        goto done;
    }
    if (hi.len != lo.len || depth.len != lo.len) {
        PyErr_SetString(PyExc_ValueError, "followers: as many lows, highs and depths");
        goto done;
    }
    const int64_t *los = (const int64_t *)lo.buf, *his = (const int64_t *)hi.buf;
    const int64_t *ds = (const int64_t *)depth.buf;
    for (int64_t i = 0; i < q; i++) {
        if (los[i] < 0 || his[i] < los[i] || his[i] > s.entries || ds[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "followers: a range outside the table");
            goto done;
        }
    }
    offsets = malloc((size_t)(q + 1) * sizeof(int64_t));
    ends = malloc((size_t)(q ? q : 1) * sizeof(int64_t));
    if (!offsets || !ends) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    offsets[0] = 0;
    for (int64_t i = 0; i < q && !failed; i++) {
        failed = follow(&s, width, los[i], his[i], ds[i], &f, &ends[i]) < 0;
        offsets[i + 1] = f.n;
    }
    Py_END_ALLOW_THREADS
    if (failed) { PyErr_NoMemory(); goto done; }
    static const char none[1] = "";  /* y# makes None of NULL: no followers is b"" */
    out = Py_BuildValue("(y#y#y#y#)", f.n ? (const char *)f.tokens : none,
                        (Py_ssize_t)(f.n * 4), f.n ? (const char *)f.counts : none,
                        (Py_ssize_t)(f.n * 8),
                        (const char *)offsets, (Py_ssize_t)((q + 1) * 8),
                        (const char *)ends, (Py_ssize_t)(q * 8));
done:
    free(f.tokens); free(f.counts); free(offsets); free(ends);
    PyBuffer_Release(&text); PyBuffer_Release(&table); PyBuffer_Release(&lo);
    PyBuffer_Release(&hi); PyBuffer_Release(&depth);
    return out;
}

static PyMethodDef methods[] = {
    {"find", find, METH_VARARGS, "the table range of each pattern"},
    {"followers", followers, METH_VARARGS, "the distinct next tokens of each range"},
    {"narrow", narrow, METH_VARARGS, "each range's part whose next token is given"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_suffix", NULL, -1, methods};

PyMODINIT_FUNC PyInit__suffix(void) { return PyModule_Create(&module); }
