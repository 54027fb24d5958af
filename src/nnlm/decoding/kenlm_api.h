/* The per-call queries of nnlm.decoding._kenlm_query as C functions, for another
 * extension (the CTC prefix search) to score words with no Python call between them.
 *
 * The module publishes one NnlmKenlmAPI in a capsule named NNLM_KENLM_API_CAPSULE
 * (its attribute "_C_API"); a client imports it with PyCapsule_Import and checks
 * ``version``. A state is ``state_size`` bytes the client owns (a State object's struct;
 * its object header is never read), written only by these functions. */
#ifndef NNLM_KENLM_API_H
#define NNLM_KENLM_API_H

#include <Python.h>
#include <stdint.h>

#define NNLM_KENLM_API_CAPSULE "nnlm.decoding._kenlm_query._C_API"
#define NNLM_KENLM_API_VERSION 1

typedef struct {
    int version;
    Py_ssize_t state_size;
    PyTypeObject *query_type;  /* the Query type: a client checks its object against it */
    /* a word's id, <unk>'s where unknown; -2 with an exception set on error */
    int32_t (*word_id)(PyObject *query, PyObject *word);
    int32_t (*unk_id)(PyObject *query);
    int32_t (*eos_id)(PyObject *query);
    /* log10 p(w | in); out (not in) becomes the state after w (KenLM's BaseScore) */
    float (*score)(PyObject *query, const void *in, int32_t w, void *out);
    /* a State object's words into out: -1 with an exception where it is not this
       query's State */
    int (*read_state)(PyObject *query, PyObject *state, void *out);
    /* a new State object holding in */
    PyObject *(*new_state)(PyObject *query, const void *in);
} NnlmKenlmAPI;

#endif
