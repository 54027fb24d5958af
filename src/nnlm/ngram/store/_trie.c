/* nnlm.ngram.store._trie: the lookup loops of nnlm's mapped trie (trie.py), in C.
 *
 * find(...): for each pair (p, w), the entry of one order whose word is w in the run of
 * entries [parents[p], parents[p + 1]) (the extensions of the (k-1)-gram p), or -1. The
 * run pointers are bit-packed or 64 to a cache line (pointers.h).
 * BackoffNgram's scorers call it once per order for a whole batch of tokens, so that
 * one order's arrays stay in cache while they are searched (a fused token-by-token
 * scorer in C measured 20-30% slower: the orders evict each other). Arrays are
 * bit-packed uint64 (nnlm.ngram.store.bits: little-endian fields, one spare word at
 * the end).
 *
 * The work is memory latency: each step of a search is a load that may miss the cache.
 * So lookups go in groups of GROUP, one step for the whole group at a time, and each
 * step first asks for the lines it will read (prefetch): the misses of a group overlap
 * instead of queueing. Orders with a table (trie.py: HASHED_ORDERS) probe it; the
 * others halve their run branch-free. Pointers are clamped to the order, so a corrupt
 * file can give wrong numbers but never a read outside the buffers (trie.py checks
 * every size against the file before mapping it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "../../base/portable.h"

#include "pointers.h"
#include "trie_level.h"
#include "value_codes.h"
#include "values.h"
#include "vocab_hash.h"

#ifndef GROUP
#define GROUP 8
#endif
#ifndef AHEAD
#define AHEAD 4
#endif

static inline void prefetch_field(const uint64_t *data, uint64_t bits, uint64_t i) {
    NNLM_PREFETCH(data + ((i * bits) >> 6));
}

typedef TrieLevel Level;  /* order k >= 2 of the trie (trie_level.h) */

/* [lo, end) of the runs of the pairs (p[i], w[i]), i < size <= GROUP (empty where the
 * pair is not valid), clamped to the order */
static void group_bounds(const Level *L, int size, const int64_t *p, const int64_t *w,
                         uint64_t *lo, uint64_t *end) {
    for (int i = 0; i < size; i++) {
        lo[i] = end[i] = 0;
        if (p[i] < 0 || w[i] < 0 || (uint64_t)p[i] >= L->n_parents) continue;
        uint64_t a, b;
        pointers_pair(&L->parents, (uint64_t)p[i], &a, &b);
        if (a > L->n) a = L->n;
        if (b > L->n) b = L->n;
        lo[i] = a;
        end[i] = b > a ? b : a;
    }
}

/* The entries of the pairs (p[i], w[i]), i < size <= GROUP, into out[i] (-1: absent);
 * without a table, in the runs [bounds_lo[i], bounds_end[i]) found by group_bounds. */
static void group_find(const Level *L, uint64_t V, int size, const int64_t *p,
                       const int64_t *w, int64_t *out, const uint64_t *bounds_lo,
                       const uint64_t *bounds_end) {
    uint64_t lo[GROUP], end[GROUP], len[GROUP];
    int active = 0;
    if (L->slots) {
        /* the order's table: the run's bounds and the home slot are independent loads,
         * asked for together; then the entries the slots name */
        uint64_t pos[GROUP], e[GROUP];
        int ok[GROUP];
        for (int i = 0; i < size; i++) {
            out[i] = -1;
            ok[i] = p[i] >= 0 && w[i] >= 0 && (uint64_t)p[i] < L->n_parents;
            if (!ok[i]) continue;
            pos[i] = trie_home_slot(L, (uint64_t)p[i], (uint64_t)w[i], V);
            pointers_prefetch(&L->parents, (uint64_t)p[i]);
            prefetch_field(L->slots, L->slot_bits, pos[i]);
        }
        for (int i = 0; i < size; i++) {
            if (!ok[i]) continue;
            uint64_t a, b;
            pointers_pair(&L->parents, (uint64_t)p[i], &a, &b);
            lo[i] = a;
            end[i] = b < L->n ? b : L->n;
            e[i] = unpack(L->slots, L->slot_bits, L->smask, pos[i]);
            if (e[i]) prefetch_field(L->words, L->word_bits, e[i] - 1);
        }
        for (int i = 0; i < size; i++) {
            if (!ok[i]) continue;
            uint64_t v = e[i], at = pos[i];
            for (uint64_t tries = 0; v && tries < L->n_slots; tries++) {
                uint64_t entry = v - 1;
                if (entry >= lo[i] && entry < end[i] &&
                    unpack(L->words, L->word_bits, L->wmask, entry) == (uint64_t)w[i]) {
                    out[i] = (int64_t)entry;
                    break;
                }
                if (++at == L->n_slots) at = 0;  /* a collision: probe on, alone */
                v = unpack(L->slots, L->slot_bits, L->smask, at);
            }
        }
        return;
    }
    for (int i = 0; i < size; i++) {
        out[i] = -1;
        lo[i] = bounds_lo[i];
        end[i] = bounds_end[i];
        len[i] = end[i] - lo[i];
        active |= len[i] > 1;
    }
    /* branch-free halving: lo stays at the last entry known to be below the word */
    while (active) {
        active = 0;
        for (int i = 0; i < size; i++) {
            uint64_t half = len[i] >> 1;
            uint64_t probe = lo[i] + half;
            uint64_t found = half ? unpack(L->words, L->word_bits, L->wmask, probe) : 0;
            lo[i] = (half && found < (uint64_t)w[i]) ? probe : lo[i];
            len[i] -= half;
            active |= len[i] > 1;
        }
    }
    for (int i = 0; i < size; i++) {
        if (!len[i]) continue;
        uint64_t at = lo[i];
        uint64_t found = unpack(L->words, L->word_bits, L->wmask, at);
        if (found < (uint64_t)w[i] && ++at < end[i])
            found = unpack(L->words, L->word_bits, L->wmask, at);
        if (at < end[i] && found == (uint64_t)w[i]) out[i] = (int64_t)at;
    }
}

/* out[i] = the entry of the pair (q[i], x[i]) in order L, or -1, for i < m: groups of
 * GROUP lookups, each group's first loads asked for AHEAD groups before (see above) */
static void find_many(const Level *L, uint64_t V, Py_ssize_t m, const int64_t *q,
                      const int64_t *x, int64_t *out) {
    uint64_t bounds[2][2][GROUP];  /* [lo, end) of this group's runs and of the next's */
    int cur = 0;
    if (!L->slots && m > 0)
        group_bounds(L, m < GROUP ? (int)m : GROUP, q, x, bounds[0][0], bounds[0][1]);
    for (Py_ssize_t g = 0; g < m; g += GROUP) {
        /* ask now for what the group AHEAD groups on will read first (its runs' bounds
         * and home slots): by the time it is searched, those lines are on their way */
        Py_ssize_t a0 = g + AHEAD * GROUP, a1 = a0 + GROUP < m ? a0 + GROUP : m;
        for (Py_ssize_t i = a0; i < a1; i++) {
            if (q[i] < 0 || x[i] < 0 || (uint64_t)q[i] >= L->n_parents) continue;
            pointers_prefetch(&L->parents, (uint64_t)q[i]);
            if (L->slots)
                prefetch_field(L->slots, L->slot_bits,
                               trie_home_slot(L, (uint64_t)q[i], (uint64_t)x[i], V));
        }
        /* the group two on: its lines have arrived; ask for what exceptions need */
        Py_ssize_t e0 = g + 2 * GROUP, e1 = e0 + GROUP < m ? e0 + GROUP : m;
        if (L->parents.linear)
            for (Py_ssize_t i = e0; i < e1; i++)
                if (q[i] >= 0 && (uint64_t)q[i] < L->n_parents)
                    pointers_prefetch_exception(&L->parents, (uint64_t)q[i]);
        Py_ssize_t b0 = g + GROUP;
        if (!L->slots && b0 < m) {  /* the next group: its pointers have arrived; find its
                                      runs and ask for the middle of each */
            int size = m - b0 < GROUP ? (int)(m - b0) : GROUP;
            uint64_t *lo = bounds[cur ^ 1][0], *end = bounds[cur ^ 1][1];
            group_bounds(L, size, q + b0, x + b0, lo, end);
            for (int i = 0; i < size; i++)
                if (lo[i] < end[i]) prefetch_field(L->words, L->word_bits, lo[i] + ((end[i] - lo[i]) >> 1));
        }
        group_find(L, V, m - g < GROUP ? (int)(m - g) : GROUP, q + g, x + g, out + g,
                   bounds[cur][0], bounds[cur][1]);
        cur ^= 1;
    }
}

static PyObject *find(PyObject *self, PyObject *args) {
    Py_buffer wb, pb[2], qb, xb, ob, sb;
    unsigned long long word_bits, parent_bits, n_exc, n_parents, n, slot_bits, n_slots, V;
    int linear;
    if (!PyArg_ParseTuple(args, "y*K(iy*y*KK)KKy*y*w*y*KKK", &wb, &word_bits, &linear,
                          &pb[0], &pb[1], &parent_bits, &n_exc, &n_parents, &n, &qb, &xb, &ob,
                          &sb, &slot_bits, &n_slots, &V))
        return NULL;
    PyObject *result = NULL;
    Level L = {0};
    L.words = wb.buf;
    L.parents.linear = linear != 0;
    L.parents.data = pb[0].buf;
    L.parents.exceptions = pb[1].buf;
    L.parents.bits = parent_bits; L.parents.mask = mask_of(parent_bits);
    L.parents.n_blocks = linear ? (n_parents >> LINE_SHIFT) + 1 : 0;
    L.parents.n_exceptions = n_exc;
    L.word_bits = word_bits; L.wmask = mask_of(word_bits);
    L.n = n; L.n_parents = n_parents;
    L.slots = sb.len ? sb.buf : NULL;
    L.slot_bits = slot_bits; L.smask = mask_of(slot_bits); L.n_slots = n_slots;
    Py_ssize_t m = qb.len / 8;
    if (ob.len != qb.len || xb.len != qb.len || V == 0 ||
        !trie_level_sizes_ok(&L, (uint64_t)wb.len, (uint64_t)pb[0].len, (uint64_t)pb[1].len,
                             (uint64_t)sb.len)) {
        PyErr_SetString(PyExc_ValueError, "find: buffers do not match the sizes given");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    find_many(&L, V, m, qb.buf, xb.buf, ob.buf);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&wb);
    for (int i = 0; i < 2; i++) PyBuffer_Release(&pb[i]);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&sb);
    return result;
}

/* -- score_run: BackoffNgram.logprobs_and_orders over a mapped trie, in one call --------
 * The numpy scorer's steps (backoff.py, _score_run), with the same batching: one order
 * at a time over a whole run of tokens (find_many), so each order's arrays stay in cache;
 * C only removes the numpy passes between the lookups (each a pass over the run). The
 * sums are the numpy scorer's, in its order, so the numbers are equal to the last bit. */
#define MAX_ORDER 16
#define BUFFERS_PER_LEVEL 32  /* a coded order 2: its trie's 4, codes' 13, unigrams' 8 */
#ifndef VALUE_AHEAD
#define VALUE_AHEAD 16  /* entries ahead whose value is asked for (a load that misses) */
#endif

typedef TrieLevel ScoredLevel;  /* an order with its values (trie_level.h) */

typedef struct {
    Py_buffer *held;
    int *n_held;
} Holder;

/* a buffer of any item size, held until the run ends (trie_level.h's TakeBytes) */
static int take_bytes(void *ctx, PyObject *obj, const void **out, Py_ssize_t *bytes) {
    Holder *h = ctx;
    if (*h->n_held >= MAX_ORDER * BUFFERS_PER_LEVEL) return -1;
    Py_buffer *view = &h->held[*h->n_held];
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    (*h->n_held)++;
    *out = view->buf;
    *bytes = view->len;
    return 0;
}

/* one order as its spec tuple gives it (trie_level.h); a coded order 2 fills U too; -1
 * with no exception set where it does not fit */
static int scored_level(PyObject *t, int top, uint64_t n_lower, ScoredLevel *S,
                        CodedUnigrams *U, Py_buffer *held, int *n_held) {
    Holder h = {held, n_held};
    if (trie_level_take(t, top, n_lower, S, take_bytes, &h) < 0 ||
        (S->coded && U && !U->p &&  /* order 2's parents are the words: n_lower = V */
         coded_unigrams_take(t, n_lower, VC_BOS_ID, U, take_bytes, &h) < 0)) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* a context's float32 log back-off from its symbol (UINT32_MAX: not found, a damaged
 * file: NaN, which the caller's checks refuse) */
static inline float context_bow(const CodeField *c, uint32_t sym) {
    return sym < c->n_symbols ? c->bow[sym] : NAN;
}

/* A coded model: row r found entry e of order j + 2. Carry its p up one order (from its
 * numerator, and the S and gamma of its context: the word before r (order 2) or the
 * entry row r - 1 found one order down), note its escape's float32, and keep its
 * symbol as a context for row r + 1. Row 0's context is outside the run and its score
 * is not given: its p is not carried. prev: the word before row r; at: r's place in its
 * line (0: the context is <s>). */
static inline void decode_row(const ScoredLevel *S, const CodedUnigrams *U, Py_ssize_t j,
                              int32_t r, uint64_t e, Py_ssize_t n_levels, Py_ssize_t m,
                              uint32_t *syms, const int8_t *length, double *chain,
                              float *escaped, int64_t prev,
                              int64_t at, int64_t bos) {
    int64_t escape, unused;
    if (j + 1 < n_levels)
        syms[(size_t)j * m + r] = (uint32_t)field_symbol(&S[j].c, e, &unused);
    if (r == 0) return;
    uint64_t sa = field_symbol(&S[j].a, e, &escape);
    double Sh = NAN, gamma = NAN;
    if (j == 0) {
        uint32_t sc = U->sym[at > 0 ? prev : bos];
        Sh = U->c.S[sc];
        gamma = U->c.gamma[sc];
    } else {
        /* row r - 1 found its n-gram of order j + 1 (a stored k-gram's context always
           is: otherwise the file is damaged, and p comes out NaN) */
        uint32_t sc = length[r - 1] >= j + 1 ? syms[(size_t)(j - 1) * m + r - 1] : UINT32_MAX;
        if (sc < S[j - 1].c.n_symbols) {
            Sh = S[j - 1].c.S[sc];
            gamma = S[j - 1].c.gamma[sc];
        }
    }
    chain[r] = chain_p(S[j].a.num[sa], Sh, gamma, chain[r]);
    escaped[r] = escape >= 0 ? S[j].a.escape_logp[escape] : NAN;
}

/* score_run(levels, V, bos, unigram_logp, unigram_log_bow, start_bows, ids, pos, a,
 * out_logp, out_length): _score_run of backoff.py. levels: orders 2..n as c_spec
 * tuples; unigram_*: float64 (V); start_bows: float64 (n + 1); ids, pos: int64 (b);
 * out_logp: float64 (b - a - 1); out_length: int8 (b - a - 1). */
static PyObject *score_run(PyObject *self, PyObject *args) {
    PyObject *levels;
    unsigned long long V;
    long long bos;
    Py_ssize_t a;
    Py_buffer ub[7];
    if (!PyArg_ParseTuple(args, "OKLy*y*y*y*y*nw*w*", &levels, &V, &bos, &ub[0], &ub[1],
                          &ub[2], &ub[3], &ub[4], &a, &ub[5], &ub[6]))
        return NULL;
    PyObject *result = NULL;
    ScoredLevel S[MAX_ORDER];
    Py_buffer held[MAX_ORDER * BUFFERS_PER_LEVEL];
    int n_held = 0;
    int64_t *scratch = NULL;
    int8_t *length = NULL;
    double *logp = NULL, *chain = NULL;
    CodedUnigrams U;
    memset(&U, 0, sizeof U);
    const char *problem = NULL;
    Py_ssize_t n_levels = PyList_Check(levels) ? PyList_GET_SIZE(levels) : -1;
    int order = (int)n_levels + 1;
    Py_ssize_t b = ub[3].len / 8, m = b - a;
    if (n_levels < 1 || n_levels >= MAX_ORDER || V == 0 || V > INT32_MAX ||
        (uint64_t)ub[0].len != 8 * V ||
        (uint64_t)ub[1].len != 8 * V || ub[2].len != 8 * (order + 1) ||
        ub[4].len != ub[3].len || a < order - 1 || m < 1 || m > INT32_MAX ||
        ub[5].len != 8 * (m - 1) ||
        ub[6].len != m - 1) {
        PyErr_SetString(PyExc_ValueError, "score_run: buffers do not match the sizes given");
        goto done;
    }
    uint64_t n_lower = V;
    for (Py_ssize_t k = 0; k < n_levels; k++) {
        if (scored_level(PyList_GET_ITEM(levels, k), k == n_levels - 1, n_lower, &S[k], &U,
                         held, &n_held) < 0 || S[k].coded != S[0].coded) {
            PyErr_Format(PyExc_ValueError, "score_run: order %zd's arrays do not match the "
                         "sizes given", k + 2);
            goto done;
        }
        n_lower = S[k].n;
    }
    int coded = S[0].coded;
    /* the rows still extending and their entries (two generations: ids and out), the
     * words that extend them (x), each row's back-off at orders 2..n-1 (float32, as
     * stored), log p and match length: about 50 bytes a token for a 5-gram */
    size_t n_bows = (size_t)n_levels - 1;
    scratch = PyMem_Malloc((size_t)m * (3 * sizeof(int64_t) + sizeof(int32_t) +
                                        n_bows * sizeof(float)));
    length = PyMem_Malloc((size_t)m);
    logp = PyMem_Malloc(sizeof(double) * (size_t)m);
    if (coded) {  /* each row's p carried in float64, and its escape's float32 or NaN */
        chain = PyMem_Malloc((size_t)m * (sizeof(double) + sizeof(float)));
        if (!chain) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (!scratch || !length || !logp) {
        PyErr_NoMemory();
        goto done;
    }
    const double *uni_logp = ub[0].buf, *uni_bow = ub[1].buf, *start_bows = ub[2].buf;
    const int64_t *ids = ub[3].buf, *pos = ub[4].buf, *words = ids + a;
    int64_t *found = scratch, *x = found + m, *out = x + m;
    int32_t *rows = (int32_t *)(out + m);
    float *bows = (float *)(rows + m);
    /* a coded model keeps each row's context symbols where the back-offs would be */
    uint32_t *syms = (uint32_t *)bows;
    float *escaped = coded ? (float *)(chain + m) : NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < b; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= V) problem = "a word id is outside the vocabulary";
    if (!problem) {
        for (Py_ssize_t i = 0; i < m; i++) {
            logp[i] = uni_logp[words[i]];
            length[i] = 1;
            rows[i] = (int32_t)i;
            found[i] = words[i];
            if (coded) chain[i] = U.p[words[i]];
        }
        /* order k = j + 2 extends the rows that order k - 1 found by the word k - 1 back
         * (<s> before the line's start); a row stops at its first miss */
        Py_ssize_t active = m;
        for (Py_ssize_t j = 0; j < n_levels && active; j++) {
            int64_t back = j + 1;
            for (Py_ssize_t c = 0; c < active; c++) {
                int64_t g = rows[c] + a;
                x[c] = pos[g] >= back && g >= back ? ids[g - back] : bos;
            }
            find_many(&S[j], V, active, found, x, out);
            const Values *P = &S[j].logp, *B = j + 1 < n_levels ? &S[j].bow : NULL;
            float *bows_j = bows + (size_t)j * m;
            Py_ssize_t kept = 0;
            for (Py_ssize_t c = 0; c < active; c++) {
                int64_t ahead = c + VALUE_AHEAD < active ? out[c + VALUE_AHEAD] : -1;
                if (coded) {
                    int64_t near = c + VALUE_AHEAD / 2 < active ? out[c + VALUE_AHEAD / 2] : -1;
                    if (near >= 0) {
                        field_prefetch_escape(&S[j].a, (uint64_t)near);
                        if (B) field_prefetch_escape(&S[j].c, (uint64_t)near);
                    }
                }
                if (ahead >= 0) {
                    if (coded) {
                        field_prefetch(&S[j].a, (uint64_t)ahead);
                        if (B) field_prefetch(&S[j].c, (uint64_t)ahead);
                    } else {
                        values_prefetch(P, (uint64_t)ahead);
                        if (B) values_prefetch(B, (uint64_t)ahead);
                    }
                }
                if (out[c] < 0) continue;
                int32_t r = rows[c];
                length[r] = (int8_t)(j + 2);
                rows[kept] = r;
                found[kept++] = out[c];
                if (coded) {
                    decode_row(S, &U, j, r, (uint64_t)out[c], n_levels, m, syms, length,
                               chain, escaped, ids[a + r - (r > 0)], pos[a + r], bos);
                    continue;
                }
                logp[r] = value_ln(P, (uint64_t)out[c]);
                if (B) bows_j[r] = value_ln(B, (uint64_t)out[c]);
            }
            active = kept;
        }
        /* the context of row r + 1 is row r's n-gram: add its back-offs from r + 1's
         * match length up (unigram first, then ascending orders, as the numpy scorer
         * adds them), where r + 1 is not a line's first word, which adds the all-<s>
         * context's instead */
        double *out_logp = ub[5].buf;
        int8_t *out_length = ub[6].buf;
        if (coded)  /* each row's float32 log p, from the p its walk carried */
            for (Py_ssize_t r = 1; r < m; r++)
                if (length[r] >= 2)
                    logp[r] = entry_ln(chain[r], escaped[r]);
        for (Py_ssize_t r = 0; r < m; r++) {
            if (r + 1 < m && pos[a + r + 1] != 0) {
                int top = length[r] < n_levels ? length[r] : (int)n_levels;  /* <= n-1 */
                int from = length[r + 1];
                if (from <= 1) logp[r + 1] += uni_bow[words[r]];
                for (int k = from > 2 ? from : 2; k <= top; k++)
                    logp[r + 1] += coded ? context_bow(&S[k - 2].c, syms[(size_t)(k - 2) * m + r])
                                         : bows[(size_t)(k - 2) * m + r];
            }
            if (pos[a + r] == 0) logp[r] += start_bows[length[r]];
            if (r) {
                out_logp[r - 1] = logp[r];
                out_length[r - 1] = length[r];
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (problem) {
        PyErr_Format(PyExc_ValueError, "score_run: %s", problem);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(chain);
    PyMem_Free(U.sym);
    PyMem_Free(scratch);
    PyMem_Free(length);
    PyMem_Free(logp);
    for (int i = 0; i < n_held; i++) PyBuffer_Release(&held[i]);
    for (int i = 0; i < 7; i++) PyBuffer_Release(&ub[i]);
    return result;
}

/* gather(data, bits, index, out): out[i] = field index[i] of a packed array (an index
 * past n is clamped to the last field: no read outside the buffer). */
static PyObject *gather(PyObject *self, PyObject *args) {
    Py_buffer db, ib, ob;
    unsigned long long bits, n;
    if (!PyArg_ParseTuple(args, "y*KKy*w*", &db, &bits, &n, &ib, &ob)) return NULL;
    PyObject *result = NULL;
    if (bits < 1 || bits > 64 || ib.len != ob.len || n == 0 ||
        (unsigned long long)db.len < 8 * ((n * bits + 63) / 64 + 1)) {
        PyErr_SetString(PyExc_ValueError, "gather: buffers do not match the sizes given");
        goto done;
    }
    const uint64_t *data = db.buf;
    const int64_t *index = ib.buf;
    int64_t *out = ob.buf;
    uint64_t mask = mask_of(bits);
    Py_ssize_t m = ib.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t at = (uint64_t)index[i];
        out[i] = (int64_t)unpack(data, bits, mask, at < n ? at : n - 1);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&db);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&ob);
    return result;
}

/* pack(values, bits, out): values (uint64, each below 2^bits) into the zeroed packed
 * array out (nnlm.ngram.store.bits.pack's layout); a value too wide is an error. */
static PyObject *pack(PyObject *self, PyObject *args) {
    Py_buffer vb, ob;
    unsigned long long bits;
    if (!PyArg_ParseTuple(args, "y*Kw*", &vb, &bits, &ob)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = vb.len / 8;
    if (bits < 1 || bits > 64 || (unsigned long long)ob.len < 8 * ((n * bits + 63) / 64 + 1)) {
        PyErr_SetString(PyExc_ValueError, "pack: buffers do not match the sizes given");
        goto done;
    }
    const uint64_t *v = vb.buf;
    uint64_t *out = ob.buf, mask = mask_of(bits);
    int wide = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (v[i] & ~mask) { wide = 1; break; }
        uint64_t pos = (uint64_t)i * bits, w = pos >> 6, off = pos & 63;
        out[w] |= v[i] << off;
        if (off + bits > 64) out[w + 1] |= v[i] >> (64 - off);
    }
    Py_END_ALLOW_THREADS
    if (wide) {
        PyErr_Format(PyExc_ValueError, "a value needs more than %llu bits", bits);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&vb);
    PyBuffer_Release(&ob);
    return result;
}

/* -- WordIndex: the mapped vocabulary's word -> id mapping (vocab_hash.h) --------------
 * WordIndex(slots, blob, offsets): the dict-like view that nnlm.vocab.Vocabulary.index
 * is for a vocabulary read into Python, over the sections of a trie file instead: get,
 * [], in and len, with no Python object per word. It holds the buffers (and so the
 * mapping) while it lives. vocab_table.py checks the sections before making one. */
typedef struct {
    PyObject_HEAD
    VocabTable t;
    Py_buffer buffers[3];
    int n_buffers;
} WordIndexObject;

static void WordIndex_dealloc(WordIndexObject *self) {
    for (int i = 0; i < self->n_buffers; i++) PyBuffer_Release(&self->buffers[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int WordIndex_init(WordIndexObject *self, PyObject *args, PyObject *kwds) {
    PyObject *objs[3];
    if (self->n_buffers) {
        PyErr_SetString(PyExc_TypeError, "WordIndex is initialized once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2])) return -1;
    static const Py_ssize_t itemsize[3] = {4, 1, 8};
    for (int i = 0; i < 3; i++) {
        if (PyObject_GetBuffer(objs[i], &self->buffers[i], PyBUF_C_CONTIGUOUS) < 0) return -1;
        self->n_buffers++;
        if (self->buffers[i].len % itemsize[i]) goto bad;
    }
    Py_ssize_t n_slots = self->buffers[0].len / 4, n_offsets = self->buffers[2].len / 8;
    if (n_slots < 1 || (n_slots & (n_slots - 1)) || n_offsets < 1) goto bad;
    self->t.slots = self->buffers[0].buf;
    self->t.mask = (uint64_t)n_slots - 1;
    self->t.blob = self->buffers[1].buf;
    self->t.offsets = self->buffers[2].buf;
    self->t.n_words = n_offsets - 1;
    if (self->t.offsets[0] != 0 || self->t.offsets[n_offsets - 1] != self->buffers[1].len)
        goto bad;
    for (Py_ssize_t i = 0; i + 1 < n_offsets; i++)
        if (self->t.offsets[i + 1] < self->t.offsets[i]) goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "WordIndex: the table, words and offsets do not fit "
                    "together");
    return -1;
}

/* the id of a str (-1: not a word of the vocabulary, or not a str); -2 on error */
static int64_t word_index_find(WordIndexObject *self, PyObject *word) {
    if (!PyUnicode_Check(word)) return -1;
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(word, &n);
    if (!p) {  /* a lone surrogate: no word of a UTF-8 vocabulary */
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -2;
        PyErr_Clear();
        return -1;
    }
    return vocab_find(&self->t, p, (int64_t)n);
}

static PyObject *WordIndex_get(WordIndexObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n < 1 || n > 2) {
        PyErr_SetString(PyExc_TypeError, "get(word, default=None)");
        return NULL;
    }
    int64_t id = word_index_find(self, args[0]);
    if (id == -2) return NULL;
    if (id >= 0) return PyLong_FromLongLong(id);
    PyObject *fallback = n == 2 ? args[1] : Py_None;
    Py_INCREF(fallback);
    return fallback;
}

static PyObject *WordIndex_subscript(WordIndexObject *self, PyObject *word) {
    int64_t id = word_index_find(self, word);
    if (id == -2) return NULL;
    if (id < 0) {
        PyErr_SetObject(PyExc_KeyError, word);
        return NULL;
    }
    return PyLong_FromLongLong(id);
}

static int WordIndex_contains(WordIndexObject *self, PyObject *word) {
    int64_t id = word_index_find(self, word);
    return id == -2 ? -1 : id >= 0;
}

static Py_ssize_t WordIndex_length(WordIndexObject *self) { return (Py_ssize_t)self->t.n_words; }

static PyMethodDef WordIndex_methods[] = {
    {"get", (PyCFunction)(void (*)(void))WordIndex_get, METH_FASTCALL,
     "get(word, default=None): the word's id, or default"},
    {NULL, NULL, 0, NULL}};

static PyMappingMethods WordIndex_mapping = {(lenfunc)WordIndex_length,
                                             (binaryfunc)WordIndex_subscript, NULL};
static PySequenceMethods WordIndex_sequence = {.sq_contains = (objobjproc)WordIndex_contains};

static PyTypeObject WordIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nnlm.ngram.store._trie.WordIndex",
    .tp_basicsize = sizeof(WordIndexObject),
    .tp_dealloc = (destructor)WordIndex_dealloc,
    .tp_as_mapping = &WordIndex_mapping,
    .tp_as_sequence = &WordIndex_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WordIndex(slots, blob, offsets): word -> id over a mapped vocabulary",
    .tp_methods = WordIndex_methods,
    .tp_init = (initproc)WordIndex_init,
    .tp_new = PyType_GenericNew,
};

/* exact_log(x, out): value_codes.h's exact_log of each float64 (what the readers of coded
 * values compute; value_codes.exact_log is the same in numpy, which tests hold it to) */
static PyObject *exact_log_many(PyObject *self, PyObject *args) {
    Py_buffer x, out;
    if (!PyArg_ParseTuple(args, "y*w*", &x, &out)) return NULL;
    PyObject *result = NULL;
    if (x.len != out.len || x.len % 8) {
        PyErr_SetString(PyExc_ValueError, "exact_log: two float64 buffers of one length");
    } else {
        const double *in = x.buf;
        double *o = out.buf;
        for (Py_ssize_t i = 0; i < x.len / 8; i++) o[i] = exact_log(in[i]);
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"exact_log", exact_log_many, METH_VARARGS, "exact_log(x, out): value_codes' log of each "
     "float64"},
    {"find", find, METH_VARARGS, "find(words, word_bits, (kind, data, exceptions, bits, n_exceptions), "
     "n_parents, n, ids, firsts, out, slots, slot_bits, n_slots, V): the trie lookups of "
     "nnlm.ngram.store.trie.TrieLevel.find"},
    {"score_run", score_run, METH_VARARGS, "score_run(levels, V, bos, unigram_logp, "
     "unigram_log_bow, start_bows, ids, pos, a, out_logp, out_length): "
     "nnlm.ngram.backoff.BackoffNgram._score_run over a mapped trie"},
    {"pack", pack, METH_VARARGS, "pack(values, bits, out): bit-pack uint64 values"},
    {"gather", gather, METH_VARARGS, "gather(data, bits, n, index, out): fields of a packed "
     "array"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie", NULL, -1, methods};

PyMODINIT_FUNC PyInit__trie(void) {
    if (PyType_Ready(&WordIndexType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&WordIndexType);
    if (PyModule_AddObject(m, "WordIndex", (PyObject *)&WordIndexType) < 0) {
        Py_DECREF(&WordIndexType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
