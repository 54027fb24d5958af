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
 * place_into(keys, region, stride, slots): place, where the table is KenLM's own: region
 *   holds len(region) / stride buckets of stride bytes, each led by its uint64 key (any
 *   alignment), as an image of a probing file does.
 * find_in(keys, region, stride, slots): slots[i] = the bucket of keys[i] in such a table
 *   (KenLM's lookup: from key mod buckets to the key or an empty bucket), or -1.
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

static inline uint64_t key_at(const uint8_t *region, int64_t stride, int64_t b) {
    uint64_t key;
    memcpy(&key, region + b * stride, 8);
    return key;
}

static int parse_region(PyObject *args, Py_buffer *keys, Py_buffer *region, int64_t *stride,
                        Py_buffer *slots, int writable, int64_t *buckets) {
    if (!PyArg_ParseTuple(args, writable ? "y*w*Lw*" : "y*y*Lw*", keys, region, stride, slots))
        return 0;
    if (*stride < 8 || region->len % *stride || slots->len != keys->len || keys->len % 8) {
        PyErr_SetString(PyExc_ValueError, "a probing table of whole buckets, a slot a key");
        PyBuffer_Release(keys);
        PyBuffer_Release(region);
        PyBuffer_Release(slots);
        return 0;
    }
    *buckets = region->len / *stride;
    return 1;
}

static PyObject *py_place_into(PyObject *self, PyObject *args) {
    Py_buffer keys, region, slots;
    int64_t stride, buckets;
    if (!parse_region(args, &keys, &region, &stride, &slots, 1, &buckets)) return NULL;
    const uint64_t *k = keys.buf;
    uint8_t *r = region.buf;
    int64_t *s = slots.buf, n = keys.len / 8, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        uint64_t key = k[i], there;
        if (key == 0 || buckets < 1) {
            bad = i;
            break;
        }
        int64_t b = (int64_t)(key % (uint64_t)buckets), tries = 0;
        while ((there = key_at(r, stride, b)) != 0) {
            if (there == key || ++tries >= buckets) break;
            b = b + 1 == buckets ? 0 : b + 1;
        }
        if (there != 0) {
            bad = i;
            break;
        }
        memcpy(r + b * stride, &key, 8);
        s[i] = b;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (bad >= 0)
        PyErr_Format(PyExc_ValueError, "place_into: key %lld is 0, repeated, or finds the "
                     "table full", (long long)bad);
    else
        result = Py_NewRef(Py_None);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&region);
    PyBuffer_Release(&slots);
    return result;
}

static PyObject *py_find_in(PyObject *self, PyObject *args) {
    Py_buffer keys, region, slots;
    int64_t stride, buckets;
    if (!parse_region(args, &keys, &region, &stride, &slots, 0, &buckets)) return NULL;
    const uint64_t *k = keys.buf;
    const uint8_t *r = region.buf;
    int64_t *s = slots.buf, n = keys.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        uint64_t key = k[i], there;
        int64_t b = buckets ? (int64_t)(key % (uint64_t)buckets) : 0, found = -1;
        for (int64_t tries = 0; key != 0 && tries < buckets; tries++) {
            there = key_at(r, stride, b);
            if (there == key) {
                found = b;
                break;
            }
            if (there == 0) break;
            b = b + 1 == buckets ? 0 : b + 1;
        }
        s[i] = found;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&keys);
    PyBuffer_Release(&region);
    PyBuffer_Release(&slots);
    return Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"murmur64a", py_murmur64a, METH_VARARGS, "KenLM's word hashes (see kenlm_write.py)"},
    {"place", py_place, METH_VARARGS, "keys placed by linear probing (see kenlm_write.py)"},
    {"place_into", py_place_into, METH_VARARGS, "keys placed in a probing table's buckets"},
    {"find_in", py_find_in, METH_VARARGS, "keys' buckets in a probing table, or -1"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kenlm_build", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kenlm_build(void) { return PyModule_Create(&module); }
