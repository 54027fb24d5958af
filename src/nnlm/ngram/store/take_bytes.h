/* How the C readers of every storage layout take the buffers they read: a callback that
 * gives a buffer's start and length in bytes and holds it until the reader is done (each
 * extension its own way: a Query holds its buffers for its life, a bulk run for the
 * run). Each layout's header checks every length against its counts. Include after
 * Python.h. */
#ifndef NNLM_TAKE_BYTES_H
#define NNLM_TAKE_BYTES_H

/* a buffer of obj: 0 and its start and length in bytes, or -1 */
typedef int (*TakeBytes)(void *ctx, PyObject *obj, const void **out, Py_ssize_t *bytes);

/* obj's buffer as count items of itemsize bytes (its length a whole number of them) */
static inline const void *take_items(TakeBytes take, void *ctx, PyObject *obj,
                                     Py_ssize_t itemsize, Py_ssize_t *count) {
    const void *p;
    Py_ssize_t bytes;
    if (take(ctx, obj, &p, &bytes) < 0) return NULL;
    if (bytes % itemsize) {
        PyErr_Format(PyExc_ValueError, "an array of %zd bytes is not made of %zd-byte items",
                     bytes, itemsize);
        return NULL;
    }
    *count = bytes / itemsize;
    return p;
}

#endif
