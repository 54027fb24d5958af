/* nnlm.ngram.formats._kenlm_build: the two sequential steps of writing a KenLM probing
 * file, in C (kenlm_write.py holds the same two in Python, the path without a compiler
 * and the tests' oracle, and says what the file holds).
 *
 * murmur64a(blob, offsets, out): out[i] (uint64) = MurmurHash64A, seed 0, of the bytes
 *   blob[offsets[i]:offsets[i + 1]]: KenLM's hash of a word (lm/vocab.cc HashForVocab;
 *   Appleby's MurmurHash2, 64-bit, read little-endian).
 * place(keys, table, slots): each key in order into an open-addressing table of uint64
 *   (0: empty), at key mod len(table) or the first empty bucket after it (linear probing,
 *   wrapping): slots[i] (int64) = its bucket. KenLM inserts in the ARPA file's order, so
 *   the same order gives build_binary's buckets. A key already in the table, a key 0 or a
 *   full table is a ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MURMUR_M 0xc6a4a7935bd1e995ULL
#define MURMUR_R 47

static uint64_t murmur64a(const uint8_t *data, int64_t len) {
    uint64_t h = (uint64_t)len * MURMUR_M;  /* seed 0 */
    int64_t blocks = len / 8;
    for (int64_t b = 0; b < blocks; b++) {
        uint64_t k;
        memcpy(&k, data + 8 * b, 8);  /* little-endian hosts: KenLM reads natively */
        k *= MURMUR_M;
        k ^= k >> MURMUR_R;
        k *= MURMUR_M;
        h ^= k;
        h *= MURMUR_M;
    }
    const uint8_t *tail = data + 8 * blocks;
    int rest = (int)(len & 7);
    if (rest) {
        for (int j = rest - 1; j >= 0; j--) h ^= (uint64_t)tail[j] << (8 * j);
        h *= MURMUR_M;
    }
    h ^= h >> MURMUR_R;
    h *= MURMUR_M;
    h ^= h >> MURMUR_R;
    return h;
}

static PyObject *py_murmur64a(PyObject *self, PyObject *args) {
    Py_buffer blob, offsets, out;
    if (!PyArg_ParseTuple(args, "y*y*w*", &blob, &offsets, &out)) return NULL;
    PyObject *result = NULL;
    int64_t n = offsets.len / 8 - 1;
    if (n < 0 || out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "murmur64a: offsets and out disagree");
        goto done;
    }
    const int64_t *off = offsets.buf;
    for (int64_t i = 0; i < n; i++) {
        if (off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > blob.len) {
            PyErr_SetString(PyExc_ValueError, "murmur64a: an offset past the bytes");
            goto done;
        }
    }
    uint64_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++)
        o[i] = murmur64a((const uint8_t *)blob.buf + off[i], off[i + 1] - off[i]);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&blob);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *py_place(PyObject *self, PyObject *args) {
    Py_buffer keys, table, slots;
    if (!PyArg_ParseTuple(args, "y*w*w*", &keys, &table, &slots)) return NULL;
    PyObject *result = NULL;
    int64_t n = keys.len / 8, buckets = table.len / 8;
    if (slots.len != keys.len || buckets < 1 || n >= buckets) {
        PyErr_SetString(PyExc_ValueError, "place: the table has no room for the keys");
        goto done;
    }
    const uint64_t *k = keys.buf;
    uint64_t *t = table.buf;
    int64_t *s = slots.buf, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n && bad < 0; i++) {
        uint64_t key = k[i];
        if (key == 0) {
            bad = i;
            break;
        }
        int64_t b = (int64_t)(key % (uint64_t)buckets);
        for (int64_t tries = 0; t[b] != 0; tries++) {
            if (t[b] == key || tries >= buckets) {
                bad = i;
                break;
            }
            b = b + 1 == buckets ? 0 : b + 1;
        }
        if (bad >= 0) break;
        t[b] = key;
        s[i] = b;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "place: key %lld (%llu) is 0, repeated, or finds the "
                     "table full", (long long)bad, (unsigned long long)k[bad]);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&table);
    PyBuffer_Release(&slots);
    return result;
}

static PyMethodDef methods[] = {
    {"murmur64a", py_murmur64a, METH_VARARGS, "KenLM's word hashes (see kenlm_write.py)"},
    {"place", py_place, METH_VARARGS, "keys placed by linear probing (see kenlm_write.py)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kenlm_build", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kenlm_build(void) { return PyModule_Create(&module); }
