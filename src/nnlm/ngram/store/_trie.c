/* nnlm.ngram.store._trie: the lookup loop of nnlm's mapped trie (trie.py), in C.
 *
 * find(words, word_bits, parents, parent_bits, n_parents, n, ids, firsts, out): for each
 * pair (p, w) of ids[i], firsts[i], the index in [parents[p], parents[p + 1]) of the
 * entry whose word is w, or -1 (also where p or w is negative). words and parents are bit-packed uint64 arrays
 * (nnlm.ngram.store.bits: little-endian fields, one spare word at the end). The
 * queries are searched in groups of GROUP at once, step by step, so that the loads of
 * one step are independent and the memory system overlaps their misses; a plain loop
 * of binary searches waits for each miss in turn. Pointers are clamped to [0, n], so a
 * corrupt file can give wrong answers but never a read outside the buffers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define GROUP 16

static inline uint64_t unpack(const uint64_t *data, uint64_t bits, uint64_t mask, uint64_t i) {
    uint64_t pos = i * bits, w = pos >> 6, off = pos & 63;
    return ((data[w] >> off) | ((data[w + 1] << 1) << (63 - off))) & mask;
}

static PyObject *find(PyObject *self, PyObject *args) {
    Py_buffer wb, pb, qb, xb, ob;
    unsigned long long word_bits, parent_bits, n_parents, n;
    if (!PyArg_ParseTuple(args, "y*Ky*KKKy*y*w*", &wb, &word_bits, &pb, &parent_bits,
                          &n_parents, &n, &qb, &xb, &ob))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t m = qb.len / 8;
    if (ob.len != qb.len || xb.len != qb.len || word_bits < 1 || word_bits > 64 ||
        parent_bits < 1 || parent_bits > 64 ||
        (unsigned long long)wb.len < 8 * ((n * word_bits + 63) / 64 + 1) ||
        (unsigned long long)pb.len < 8 * (((n_parents + 1) * parent_bits + 63) / 64 + 1)) {
        PyErr_SetString(PyExc_ValueError, "find: buffers do not match the sizes given");
        goto done;
    }
    const uint64_t *words = wb.buf, *parents = pb.buf;
    const int64_t *q = qb.buf, *x = xb.buf;
    int64_t *out = ob.buf;
    uint64_t wmask = word_bits == 64 ? ~0ULL : (1ULL << word_bits) - 1;
    uint64_t pmask = parent_bits == 64 ? ~0ULL : (1ULL << parent_bits) - 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t g = 0; g < m; g += GROUP) {
        int size = m - g < GROUP ? (int)(m - g) : GROUP;
        uint64_t base[GROUP], len[GROUP], end[GROUP], want[GROUP];
        int active = 0;
        for (int j = 0; j < size; j++) {
            int64_t p = q[g + j], w = x[g + j];
            if (p < 0 || w < 0 || (uint64_t)p >= n_parents) {
                base[j] = end[j] = 0;
                len[j] = 0;
                continue;
            }
            want[j] = (uint64_t)w;
            uint64_t a = unpack(parents, parent_bits, pmask, p);
            uint64_t b = unpack(parents, parent_bits, pmask, p + 1);
            if (a > n) a = n;
            if (b > n) b = n;
            if (b < a) b = a;
            base[j] = a;
            len[j] = b - a;
            end[j] = b;
            active |= b - a > 1;
        }
        /* branchless halving (the compiler makes a conditional move of it): each step
         * keeps base at the last entry known to be below the word, as far as len says */
        while (active) {
            active = 0;
            for (int j = 0; j < size; j++) {
                uint64_t half = len[j] >> 1;
                uint64_t probe = base[j] + half;
                uint64_t w = len[j] > 1 ? unpack(words, word_bits, wmask, probe) : 0;
                base[j] = (len[j] > 1 && w < want[j]) ? probe : base[j];
                len[j] -= half;
                active |= len[j] > 1;
            }
        }
        for (int j = 0; j < size; j++) {
            uint64_t i = base[j];
            if (len[j] == 1 && unpack(words, word_bits, wmask, i) < want[j]) i++;
            out[g + j] = (len[j] >= 1 && i < end[j] &&
                          unpack(words, word_bits, wmask, i) == want[j]) ? (int64_t)i : -1;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&wb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&ob);
    return result;
}

/* -- score: a whole stream's log-probabilities ------------------------------------------ */
#define MAX_ORDER 16

typedef struct {          /* order k >= 2 of the trie */
    const uint64_t *words, *parents;  /* parents: the child pointers of order k-1 */
    uint64_t word_bits, wmask, parent_bits, pmask, n, n_parents;
    const float *logp, *log_bow;      /* float32, or NULL: quantized */
    const uint64_t *logp_codes, *bow_codes;
    const float *logp_centers, *bow_centers;
    uint64_t logp_bits, logp_mask, bow_bits, bow_mask;
} Level;

static inline double level_logp(const Level *L, uint64_t i) {
    return L->logp ? L->logp[i] : L->logp_centers[unpack(L->logp_codes, L->logp_bits,
                                                         L->logp_mask, i)];
}

static inline double level_bow(const Level *L, uint64_t i) {
    return L->log_bow ? L->log_bow[i] : L->bow_centers[unpack(L->bow_codes, L->bow_bits,
                                                              L->bow_mask, i)];
}

static uint64_t mask_of(uint64_t bits) { return bits >= 64 ? ~0ULL : (1ULL << bits) - 1; }

/* score(levels, unigram_logp, unigram_log_bow, start_bows, bos, ids, offsets, logp, orders)
 * levels: a tuple, per order k >= 2, of (words, word_bits, parents, parent_bits,
 * n_parents, n, logp, log_bow, logp_centers, bow_centers, logp_bits, bow_bits): with
 * bits 0 the values are float32 arrays, else packed codes into the centers (log_bow of
 * the top order: an empty buffer). The scorer of BackoffNgram.logprobs_and_orders, token
 * by token: the longest stored n-gram's probability, plus the back-offs of the context
 * n-grams that the previous token's chain found, longer than the match. */
static PyObject *score(PyObject *self, PyObject *args) {
    PyObject *levels_arg;
    Py_buffer ub, bb, sb, ib, ob, lb, rb;
    long long bos;
    if (!PyArg_ParseTuple(args, "O!y*y*y*Ly*y*w*w*", &PyTuple_Type, &levels_arg, &ub, &bb, &sb,
                          &bos, &ib, &ob, &lb, &rb))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_levels = PyTuple_GET_SIZE(levels_arg);
    Level levels[MAX_ORDER];
    Py_buffer held[MAX_ORDER][6];
    int n_held = 0;
    Py_ssize_t V = ub.len / 8, T = ib.len / 4, lines = ob.len / 8 - 1;
    int order = (int)n_levels + 1;
    if (n_levels + 1 > MAX_ORDER || bb.len != ub.len || sb.len < 8 * (order + 1) ||
        lb.len != 8 * T || rb.len != T || lines < 0) {
        PyErr_SetString(PyExc_ValueError, "score: arguments do not match");
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_levels; k++, n_held++) {
        PyObject *spec = PyTuple_GET_ITEM(levels_arg, k);
        Py_buffer *h = held[k];
        unsigned long long wbits, pbits, npar, n, lbits, bbits;
        Level *L = &levels[k];
        if (!PyArg_ParseTuple(spec, "y*Ky*KKKy*y*y*y*KK", &h[0], &wbits, &h[1], &pbits, &npar,
                              &n, &h[2], &h[3], &h[4], &h[5], &lbits, &bbits))
            goto done;
        L->words = h[0].buf; L->parents = h[1].buf;
        L->word_bits = wbits; L->wmask = mask_of(wbits);
        L->parent_bits = pbits; L->pmask = mask_of(pbits);
        L->n = n; L->n_parents = npar;
        L->logp_bits = lbits; L->logp_mask = mask_of(lbits);
        L->bow_bits = bbits; L->bow_mask = mask_of(bbits);
        int top = k == n_levels - 1;
        uint64_t vals = lbits ? 8 * ((n * lbits + 63) / 64 + 1) : 4 * n;
        uint64_t bows = top ? 0 : bbits ? 8 * ((n * bbits + 63) / 64 + 1) : 4 * n;
        if (wbits < 1 || wbits > 64 || pbits < 1 || pbits > 64 || lbits > 25 || bbits > 25 ||
            (uint64_t)h[0].len < 8 * ((n * wbits + 63) / 64 + 1) ||
            (uint64_t)h[1].len < 8 * (((npar + 1) * pbits + 63) / 64 + 1) ||
            (uint64_t)h[2].len < vals || (uint64_t)h[3].len < bows ||
            (lbits && (uint64_t)h[4].len < 4 * (1ULL << lbits)) ||
            (bbits && !top && (uint64_t)h[5].len < 4 * (1ULL << bbits)) ||
            (k == 0 && npar != (uint64_t)V) ||
            (k > 0 && npar != levels[k - 1].n)) {
            n_held++;
            PyErr_SetString(PyExc_ValueError, "score: a level's buffers do not match its sizes");
            goto done;
        }
        L->logp = lbits ? NULL : h[2].buf;
        L->logp_codes = lbits ? h[2].buf : NULL;
        L->log_bow = bbits ? NULL : h[3].buf;
        L->bow_codes = bbits ? h[3].buf : NULL;
        L->logp_centers = h[4].buf; L->bow_centers = h[5].buf;
    }
    const double *uni_logp = ub.buf, *uni_bow = bb.buf, *start_bows = sb.buf;
    const int32_t *ids = ib.buf;
    const int64_t *offsets = ob.buf;
    double *out = lb.buf;
    int8_t *orders = rb.buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Tokens go in blocks of GROUP, order by order: the searches of one order are
     * independent across the block, so their cache misses overlap (interleaved binary
     * search); a token's chain stops at its first miss. */
    int64_t chain[GROUP][MAX_ORDER], prev[MAX_ORDER];  /* chain[j][i]: id at order i + 1 */
    int length[GROUP], prev_len = 0;
    int64_t line_start[GROUP];
    Py_ssize_t line = 0;
    for (int64_t t0 = 0; t0 < T && !bad; t0 += GROUP) {
        int size = T - t0 < GROUP ? (int)(T - t0) : GROUP;
        for (int j = 0; j < size; j++) {
            int64_t t = t0 + j;
            while (line < lines && offsets[line + 1] <= t) line++;
            int64_t w = ids[t];
            if (line >= lines || offsets[line] > t || w < 0 || w >= V) { bad = 1; break; }
            line_start[j] = offsets[line];
            chain[j][0] = w;
            length[j] = 1;
        }
        if (bad) break;
        for (int k = 2; k <= order; k++) {
            const Level *L = &levels[k - 2];
            uint64_t base[GROUP], len[GROUP], end[GROUP], want[GROUP];
            int active = 0, any = 0;
            for (int j = 0; j < size; j++) {
                len[j] = 0;
                if (length[j] != k - 1) continue;
                int64_t t = t0 + j, d = k - 1;
                int64_t c = t - d >= line_start[j] ? ids[t - d] : bos;
                uint64_t p = (uint64_t)chain[j][k - 2];
                if (c < 0 || c >= V) { bad = 1; break; }
                if (p >= L->n_parents) continue;
                uint64_t a = unpack(L->parents, L->parent_bits, L->pmask, p);
                uint64_t b = unpack(L->parents, L->parent_bits, L->pmask, p + 1);
                if (a > L->n) a = L->n;
                if (b > L->n) b = L->n;
                if (b <= a) continue;
                base[j] = a;
                len[j] = b - a;
                end[j] = b;
                want[j] = (uint64_t)c;
                active |= len[j] > 1;
                any = 1;
            }
            if (bad || !any) break;
            while (active) {  /* one halving step for every search of the block */
                active = 0;
                for (int j = 0; j < size; j++) {
                    uint64_t half = len[j] >> 1;
                    if (!half) continue;
                    uint64_t probe = base[j] + half;
                    base[j] = unpack(L->words, L->word_bits, L->wmask, probe) < want[j]
                              ? probe : base[j];
                    len[j] -= half;
                    active |= len[j] > 1;
                }
            }
            for (int j = 0; j < size; j++) {
                if (!len[j]) continue;
                uint64_t i = base[j];
                uint64_t found = unpack(L->words, L->word_bits, L->wmask, i);
                if (found < want[j] && ++i < end[j])
                    found = unpack(L->words, L->word_bits, L->wmask, i);
                if (i < end[j] && found == want[j]) {
                    chain[j][k - 1] = (int64_t)i;
                    length[j] = k;
                }
            }
        }
        if (bad) break;
        for (int j = 0; j < size; j++) {
            int64_t t = t0 + j;
            int n_match = length[j];
            double logp = n_match > 1 ? level_logp(&levels[n_match - 2],
                                                   (uint64_t)chain[j][n_match - 1])
                                      : uni_logp[chain[j][0]];
            if (t == line_start[j]) {
                logp += start_bows[n_match];
            } else {
                const int64_t *before = j ? chain[j - 1] : prev;
                int before_len = j ? length[j - 1] : prev_len;
                int top = before_len < order - 1 ? before_len : order - 1;
                for (int i = n_match; i <= top; i++)
                    logp += i == 1 ? uni_bow[before[0]]
                                   : level_bow(&levels[i - 2], (uint64_t)before[i - 1]);
            }
            out[t] = logp;
            orders[t] = (int8_t)n_match;
        }
        memcpy(prev, chain[size - 1], sizeof(int64_t) * length[size - 1]);
        prev_len = length[size - 1];
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "score: a word id or line offset is out of range");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < n_held && k < n_levels; k++)
        for (int i = 0; i < 6; i++)
            if (held[k][i].obj || held[k][i].buf) PyBuffer_Release(&held[k][i]);
    PyBuffer_Release(&ub); PyBuffer_Release(&bb); PyBuffer_Release(&sb);
    PyBuffer_Release(&ib); PyBuffer_Release(&ob); PyBuffer_Release(&lb); PyBuffer_Release(&rb);
    return result;
}

static PyMethodDef methods[] = {
    {"find", find, METH_VARARGS, "find(words, word_bits, parents, parent_bits, n_parents, "
     "n, ids, firsts, out): the trie lookups of nnlm.ngram.store.trie.TrieLevel.find"},
    {"score", score, METH_VARARGS, "score(levels, unigram_logp, unigram_log_bow, start_bows, "
     "bos, ids, offsets, logp, orders): a stream's log-probabilities and match lengths"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trie", NULL, -1, methods};

PyMODINIT_FUNC PyInit__trie(void) { return PyModule_Create(&module); }
