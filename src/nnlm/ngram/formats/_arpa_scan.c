/* nnlm.ngram.formats._arpa_scan: ARPA's n-gram lines read into arrays, in C.
 *
 * An ARPA section is one n-gram a line: "log10p w1 ... wk [log10bow]", fields separated
 * by blanks (space, tab, CR, VT, FF). Read with Python's str.split and float, a field
 * costs about 60 ns; here each line's numbers are parsed in place and each word is
 * hashed (FNV-1a) and found in an open-addressing table of the unigrams by comparing
 * its bytes, so no Python object is made for any word above the unigrams.
 *
 * What the scan does not judge it hands back: a line it cannot read stops the scan with
 * its status and position, and arpa_read.py re-reads that one line in Python to say
 * what is wrong with it. arpa_scan.py holds the same four functions in Python (the path
 * without a compiler, and the tests' oracle) and documents their arguments.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { DONE = 0, HEADER = 1, BAD_LINE = 2, UNKNOWN_WORD = 3 };  /* why a scan stopped */

#define FNV_OFFSET 0xCBF29CE484222325ULL
#define FNV_PRIME 0x100000001B3ULL
#define GOLDEN 0x9E3779B97F4A7C15ULL
#define MANTISSA_LIMIT 100000000000000000LL  /* 10^17: further digits only shift the exponent */

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int blank(uint8_t c) { return c == 32 || c == 9 || c == 13 || c == 11 || c == 12; }
static inline int ends_field(uint8_t c) { return c == 10 || blank(c); }
static inline int is_digit(uint8_t c) { return c >= 48 && c <= 57; }

/* The decimal number at buf[*i:n] (sign, digits, point, exponent); 0 where there is
 * none. Up to 18 significant digits are kept exactly in an integer, then one
 * multiplication or division by an exact power of ten (correctly rounded for the
 * seven-digit numbers ARPA files hold). "nan" and "inf" are not numbers here. */
static int number(const uint8_t *buf, int64_t *at, int64_t n, double *out) {
    int64_t i = *at;
    int neg = 0;
    if (i < n && (buf[i] == '-' || buf[i] == '+')) neg = buf[i++] == '-';
    int64_t mant = 0, digits = 0, exp10 = 0;
    for (; i < n && is_digit(buf[i]); i++, digits++) {
        if (mant < MANTISSA_LIMIT) mant = mant * 10 + (buf[i] - 48);
        else exp10++;
    }
    if (i < n && buf[i] == '.') {
        for (i++; i < n && is_digit(buf[i]); i++, digits++) {
            if (mant < MANTISSA_LIMIT) {
                mant = mant * 10 + (buf[i] - 48);
                exp10--;
            }
        }
    }
    *at = i;
    if (digits == 0) return 0;
    if (i < n && (buf[i] == 'e' || buf[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (buf[i] == '-' || buf[i] == '+')) eneg = buf[i++] == '-';
        int64_t e = 0, edigits = 0;
        for (; i < n && is_digit(buf[i]); i++, edigits++)
            if (e < 100000) e = e * 10 + (buf[i] - 48);
        *at = i;
        if (edigits == 0) return 0;
        exp10 += eneg ? -e : e;
    }
    double value = (double)mant;
    if (exp10 > 0) value = exp10 <= 22 ? value * POW10[exp10] : value * pow(10.0, (double)exp10);
    else if (exp10 >= -22) value = value / POW10[-exp10];
    else if (exp10 >= -300) value = value / pow(10.0, (double)-exp10);
    else value = value / 1e300 / pow(10.0, (double)(-exp10 - 300));  /* 10^-exp10 overflows */
    *out = neg ? -value : value;
    return 1;
}

static inline uint64_t hash_bytes(const uint8_t *s, int64_t len) {
    uint64_t h = FNV_OFFSET;
    for (int64_t i = 0; i < len; i++) h = (h ^ s[i]) * FNV_PRIME;
    return h;
}

static inline int64_t slot_of(uint64_t h, int bits) { return (int64_t)((h * GOLDEN) >> (64 - bits)); }

static int check_bits(int bits, Py_ssize_t slots_len) {
    if (bits < 1 || bits > 62 || slots_len != ((Py_ssize_t)1 << bits) * 8) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: the table's size is not 2 ** bits slots");
        return 0;
    }
    return 1;
}

/* word_table(words, starts, lengths, slots, bits) -> the first unigram repeating an
 * earlier one, or -1; fills slots (int64, 2 ** bits, all -1 on entry). */
static PyObject *py_word_table(PyObject *self, PyObject *args) {
    Py_buffer words, starts, lengths, slots;
    int bits;
    if (!PyArg_ParseTuple(args, "y*y*y*w*i", &words, &starts, &lengths, &slots, &bits)) return NULL;
    PyObject *out = NULL;
    int64_t U = starts.len / 8, repeat = -1;
    if (!check_bits(bits, slots.len)) goto done;
    if (lengths.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: starts and lengths differ in length");
        goto done;
    }
    const uint8_t *w = words.buf;
    const int64_t *st = starts.buf, *ln = lengths.buf;
    int64_t *sl = slots.buf, mask = ((int64_t)1 << bits) - 1;
    for (int64_t u = 0; u < U; u++) {
        if (st[u] < 0 || ln[u] < 0 || st[u] + ln[u] > words.len) {
            PyErr_SetString(PyExc_ValueError, "arpa scan: a word outside the words' bytes");
            goto done;
        }
    }
    if (U > mask) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: more words than the table holds");
        goto done;
    }
    for (int64_t u = 0; u < U && repeat < 0; u++) {
        int64_t slot = slot_of(hash_bytes(w + st[u], ln[u]), bits);
        while (sl[slot] >= 0) {
            int64_t v = sl[slot];
            if (ln[v] == ln[u] && memcmp(w + st[v], w + st[u], (size_t)ln[u]) == 0) {
                repeat = u;
                break;
            }
            slot = (slot + 1) & mask;
        }
        if (repeat < 0) sl[slot] = u;
    }
    out = PyLong_FromLongLong(repeat);
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&slots);
    return out;
}

typedef struct {  /* the unigrams' table, where k > 1 */
    const uint8_t *words;
    const int64_t *starts, *lengths, *slots, *remap;
    int64_t mask, U;
    int bits;
} Table;

/* The unigram index of buf[s:e], or -1. */
static inline int64_t find_word(const Table *t, const uint8_t *buf, int64_t s, int64_t e) {
    int64_t slot = slot_of(hash_bytes(buf + s, e - s), t->bits);
    for (;;) {
        int64_t u = t->slots[slot];
        if (u < 0) return -1;
        if (t->lengths[u] == e - s && memcmp(t->words + t->starts[u], buf + s, (size_t)(e - s)) == 0)
            return u;
        slot = (slot + 1) & t->mask;
    }
}

/* One line's fields at buf[i:n], its first non-blank byte; k word ids (k = 1: the word's
 * start and length) into row. Returns the status (DONE: read) and sets *end to its
 * newline (or n). */
static int read_line(const uint8_t *buf, int64_t i, int64_t n, int k, const Table *t,
                     double *p, double *b, int64_t *row, int64_t *end) {
    if (!number(buf, &i, n, p) || i >= n || !blank(buf[i])) return BAD_LINE;
    for (int j = 0; j < k; j++) {
        while (i < n && blank(buf[i])) i++;
        if (i >= n || buf[i] == 10) return BAD_LINE;
        int64_t s = i;
        while (i < n && !ends_field(buf[i])) i++;
        if (k == 1) {
            row[0] = s;
            row[1] = i - s;
            continue;
        }
        int64_t u = find_word(t, buf, s, i);
        if (u < 0) return UNKNOWN_WORD;
        row[j] = t->remap[u];
    }
    while (i < n && blank(buf[i])) i++;
    *b = 0.0;
    if (i < n && buf[i] != 10) {
        if (!number(buf, &i, n, b)) return BAD_LINE;
        while (i < n && blank(buf[i])) i++;
        if (i < n && buf[i] != 10) return BAD_LINE;
    }
    *end = i;
    return DONE;
}

/* scan(buf, pos, n, k, line, m, logp, bow, ids, lines, words, starts, lengths, slots,
 *      bits, remap) -> (pos, line, m, status): see arpa_scan.scan. */
static PyObject *py_scan(PyObject *self, PyObject *args) {
    Py_buffer buf, logp, bow, ids, lines, words, starts, lengths, slots, remap;
    long long pos, n, line, m;
    int k, bits;
    if (!PyArg_ParseTuple(args, "y*LLiLLw*w*w*w*y*y*y*y*iy*", &buf, &pos, &n, &k, &line, &m,
                          &logp, &bow, &ids, &lines, &words, &starts, &lengths, &slots, &bits,
                          &remap))
        return NULL;
    PyObject *out = NULL;
    int64_t cap = logp.len / 8, width = k == 1 ? 2 : k;
    if (k < 1 || pos < 0 || n > buf.len || pos > n || bow.len != logp.len ||
        lines.len != logp.len || ids.len != cap * width * 8 || m < 0) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: the arrays disagree with each other");
        goto done;
    }
    Table t = {words.buf, starts.buf, lengths.buf, slots.buf, remap.buf, 0, starts.len / 8, bits};
    if (k > 1) {
        if (!check_bits(bits, slots.len)) goto done;
        t.mask = ((int64_t)1 << bits) - 1;
        if (lengths.len != starts.len || remap.len < starts.len) {
            PyErr_SetString(PyExc_ValueError, "arpa scan: the unigrams' table disagrees");
            goto done;
        }
    }
    const uint8_t *b = buf.buf;
    double *lp = logp.buf, *bw = bow.buf;
    int64_t *id = ids.buf, *ln = lines.buf, row[2 + 64];
    int status = DONE;
    if (k > 64) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: orders above 64 are not read");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    while (pos < n) {
        int64_t i = pos;
        while (i < n && blank(b[i])) i++;
        if (i >= n) {
            pos = n;
            break;
        }
        if (b[i] == 10) {  /* a blank line */
            pos = i + 1;
            line++;
            continue;
        }
        if (b[i] == 92) {
            status = HEADER;
            break;
        }
        double p, w;
        int64_t end;
        status = read_line(b, i, n, k, &t, &p, &w, row, &end);
        if (status != DONE) break;
        if (m < cap) {
            memcpy(id + m * width, row, (size_t)width * 8);
            lp[m] = p;
            bw[m] = w;
            ln[m] = line;
        }
        m++;
        line++;
        pos = end + 1;
    }
    if (pos > n) pos = n;
    Py_END_ALLOW_THREADS
    out = Py_BuildValue("LLLi", pos, line, m, status);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&logp);
    PyBuffer_Release(&bow);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&lines);
    PyBuffer_Release(&words);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&remap);
    return out;
}

static inline int64_t row_slot(const int64_t *row, int64_t j, int bits) {
    uint64_t h = FNV_OFFSET;
    for (int64_t c = 0; c < j; c++) h = (h ^ (uint64_t)row[c]) * FNV_PRIME;
    return slot_of(h, bits);
}

/* rows_table(rows, j, slots, bits): fills slots (int64, 2 ** bits, all -1 on entry) with
 * the index of each distinct row of rows (int64 (M, j), C order); a repeat keeps the
 * first. */
static PyObject *py_rows_table(PyObject *self, PyObject *args) {
    Py_buffer rows, slots;
    long long j;
    int bits;
    if (!PyArg_ParseTuple(args, "y*Lw*i", &rows, &j, &slots, &bits)) return NULL;
    PyObject *out = NULL;
    if (!check_bits(bits, slots.len)) goto done;
    if (j < 1 || rows.len % (j * 8) != 0 || rows.len / (j * 8) >= ((int64_t)1 << bits)) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: rows do not fit the table");
        goto done;
    }
    const int64_t *r = rows.buf;
    int64_t *sl = slots.buf, mask = ((int64_t)1 << bits) - 1, M = rows.len / (j * 8);
    for (int64_t i = 0; i < M; i++) {
        int64_t slot = row_slot(r + i * j, j, bits);
        while (sl[slot] >= 0 && memcmp(r + sl[slot] * j, r + i * j, (size_t)j * 8) != 0)
            slot = (slot + 1) & mask;
        if (sl[slot] < 0) sl[slot] = i;
    }
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&rows);
    PyBuffer_Release(&slots);
    return out;
}

/* find_rows(slots, bits, rows, queries, j, out): out[q] (int64) = the index of the row
 * of rows equal to queries[q], or -1. */
static PyObject *py_find_rows(PyObject *self, PyObject *args) {
    Py_buffer slots, rows, queries, found;
    long long j;
    int bits;
    if (!PyArg_ParseTuple(args, "y*iy*y*Lw*", &slots, &bits, &rows, &queries, &j, &found))
        return NULL;
    PyObject *out = NULL;
    if (!check_bits(bits, slots.len)) goto done;
    if (j < 1 || rows.len % (j * 8) || queries.len % (j * 8) ||
        found.len != queries.len / j) {
        PyErr_SetString(PyExc_ValueError, "arpa scan: rows, queries and out disagree");
        goto done;
    }
    const int64_t *sl = slots.buf, *r = rows.buf, *qs = queries.buf, M = rows.len / (j * 8);
    int64_t *o = found.buf, mask = ((int64_t)1 << bits) - 1, Q = queries.len / (j * 8);
    for (int64_t i = 0; i < (int64_t)(slots.len / 8); i++) {
        if (sl[i] >= M) {
            PyErr_SetString(PyExc_ValueError, "arpa scan: a slot past the rows");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (int64_t q = 0; q < Q; q++) {
        const int64_t *row = qs + q * j;
        int64_t slot = row_slot(row, j, bits);
        o[q] = -1;
        while (sl[slot] >= 0) {
            if (memcmp(r + sl[slot] * j, row, (size_t)j * 8) == 0) {
                o[q] = sl[slot];
                break;
            }
            slot = (slot + 1) & mask;
        }
    }
    Py_END_ALLOW_THREADS
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&slots);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&queries);
    PyBuffer_Release(&found);
    return out;
}

static PyMethodDef methods[] = {
    {"word_table", py_word_table, METH_VARARGS, "the unigrams' table (see arpa_scan.py)"},
    {"scan", py_scan, METH_VARARGS, "read n-gram lines into arrays (see arpa_scan.py)"},
    {"rows_table", py_rows_table, METH_VARARGS, "a table of distinct rows (see arpa_scan.py)"},
    {"find_rows", py_find_rows, METH_VARARGS, "rows found in a table (see arpa_scan.py)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_arpa_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__arpa_scan(void) { return PyModule_Create(&module); }
