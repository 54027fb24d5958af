/* nnlm.ngram.formats._arpa_lines: ARPA lines of a block of n-grams, formatted in C.
 *
 * An ARPA line is "log10 p <TAB> w1 w2 ... wk [<TAB> log10 bow] <NEWLINE>", each number
 * written as Python's f"{x:.7g}" writes it (correctly rounded to 7 significant digits,
 * as C's printf rounds), natural logs turned to log10 first and -inf written as -99.
 * In Python every line is a few str objects and two float formats, about 0.75 us an
 * n-gram, which made `nnlm ngram train --arpa` 1.7x lmplz's time; here it is one pass
 * that writes bytes. The Python formatter in arpa_write.py is the oracle of the tests.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define LOG10_E 0.4342944819032518  /* math.log10(math.e) */
#define ARPA_ZERO -99.0
#define NUMBER_BYTES 32             /* "%.7g" of a double takes at most 15 */

static inline char *number(char *out, double natural_log) {
    if (isnan(natural_log)) {  /* Python writes any NaN as "nan"; C may write "-nan" */
        memcpy(out, "nan", 3);
        return out + 3;
    }
    double x = isinf(natural_log) && natural_log < 0 ? ARPA_ZERO
                                                      : natural_log * LOG10_E + 0.0;
    return out + snprintf(out, NUMBER_BYTES, "%.7g", x);
}

/* lines(words, offsets, ids, logp, log_bow) -> bytes
 *   words    the vocabulary's words, UTF-8, end to end
 *   offsets  int64 (|V| + 1): word i is words[offsets[i]:offsets[i + 1]]
 *   ids      int64 (rows, k), C order: each n-gram's word ids, oldest first
 *   logp     float64 (rows): natural log probabilities
 *   log_bow  float64 (rows) natural log back-offs, or None (the highest order) */
static PyObject *py_lines(PyObject *self, PyObject *args) {
    Py_buffer words, offsets, ids, logp, bow = {0};
    PyObject *bow_obj;
    int k;
    if (!PyArg_ParseTuple(args, "y*y*y*iy*O", &words, &offsets, &ids, &k, &logp, &bow_obj))
        return NULL;
    PyObject *out = NULL;
    int has_bow = bow_obj != Py_None;
    if (has_bow && PyObject_GetBuffer(bow_obj, &bow, PyBUF_SIMPLE) < 0) goto done;
    int64_t rows = logp.len / (Py_ssize_t)sizeof(double);
    int64_t V = offsets.len / (Py_ssize_t)sizeof(int64_t) - 1;
    if (k < 1 || ids.len != rows * k * (Py_ssize_t)sizeof(int64_t) || V < 0 ||
        (has_bow && bow.len != logp.len)) {
        PyErr_SetString(PyExc_ValueError, "arpa lines: ids, logp and log_bow disagree");
        goto done;
    }
    const int64_t *off = offsets.buf, *id = ids.buf;
    const double *lp = logp.buf, *lb = has_bow ? bow.buf : NULL;
    int64_t size = 0;
    for (int64_t i = 0; i < rows * k; i++) {
        if (id[i] < 0 || id[i] >= V) {
            PyErr_SetString(PyExc_ValueError, "arpa lines: a word id outside the vocabulary");
            goto done;
        }
        size += off[id[i] + 1] - off[id[i]] + 1;
    }
    size += rows * (2 * NUMBER_BYTES + 2);
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!out) goto done;
    char *p = PyBytes_AS_STRING(out);
    const char *text = words.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t r = 0; r < rows; r++) {
        p = number(p, lp[r]);
        *p++ = '\t';
        for (int j = 0; j < k; j++) {
            int64_t w = id[r * k + j];
            if (j) *p++ = ' ';
            memcpy(p, text + off[w], (size_t)(off[w + 1] - off[w]));
            p += off[w + 1] - off[w];
        }
        if (lb) {
            *p++ = '\t';
            p = number(p, lb[r]);
        }
        *p++ = '\n';
    }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&out, (Py_ssize_t)(p - PyBytes_AS_STRING(out))) < 0) out = NULL;
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&logp);
    if (has_bow && bow.obj) PyBuffer_Release(&bow);
    return out;
}

static PyMethodDef methods[] = {
    {"lines", py_lines, METH_VARARGS,
     "lines(words, offsets, ids, k, logp, log_bow) -> the ARPA lines as bytes"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_arpa_lines", NULL, -1, methods};

PyMODINIT_FUNC PyInit__arpa_lines(void) { return PyModule_Create(&module); }
