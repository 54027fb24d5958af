"""A Kneser-Ney model's values stored as the counts they come from, without loss.

A KN probability is, per n-gram h w of order k (:mod:`nnlm.ngram.estimate.kneser_ney`),

    p(w | h) = (a(h w) - D(a(h w))) / S(h) + gamma(h) p(w | h')

and a reader walking the reversed trie meets p(w | h') one order before p(w | h): it
is the suffix's entry. So an order needs, instead of 32 bits of float32 log p an n-gram,

* per n-gram, its numerator a - D(a): an order has a few hundred distinct ones;
* per context h (an n-gram of the order below, or a word), S(h) and gamma(h), and its
  float32 log back-off, which is log gamma(h): a few thousand distinct triples;

each coded as its rank among the order's symbols (the most frequent first) in a fixed
width, the rarer symbols escaping: their code is the top one, 2^bits - 1, a bit an entry
flags them and a count every 512 entries gives an escape's place in a table of their
symbols (:class:`Field`). The width minimizes the bits, widened where lookups would
meet escapes too often (:func:`code_width`). A reader carries
p in float64 down the walk, computing each order's p with the estimator's own float64
operations (no fused multiply-add), so the p it holds is the estimate itself, bit for
bit, and the float32 log p it gives is :func:`exact_log` of it, rounded. That log is
this module's own (frexp and a fixed series: the same bits in numpy, in C and on every
machine, whatever their libm), and where it rounds otherwise than the estimator's
``np.log`` (rarely, if ever: numpy's and glibc's logs never did once rounded to float32
on 41.4M values) the entry escapes with the stored float32 itself. So every reader gives
the numbers of the float32 file, to the bit.

The writer makes the codes (:class:`CodedValues`), the numpy reader decodes an order
whole (:class:`Coding`), and the C readers (``value_codes.h``) decode an entry on the
path of a lookup. The file's sections are in docs/ngram_store.md.
"""

from __future__ import annotations

import numpy as np

from . import bits as bitpack
from .trie_layout import ESCAPE_BLOCK_SHIFT, coded_spec

# -- the log every reader shares ------------------------------------------------------------
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")  # ln 2 in 32 bits: e * LN2_HI is exact
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")  # ln 2 - LN2_HI
SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
# 1/3, 1/5, ..., 1/21: log m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1),
# |s| <= 0.1716, so ten terms leave under 2^-54 of the sum
SERIES = tuple(float.fromhex(h) for h in (
    "0x1.5555555555555p-2", "0x1.999999999999ap-3", "0x1.2492492492492p-3",
    "0x1.c71c71c71c71cp-4", "0x1.745d1745d1746p-4", "0x1.3b13b13b13b14p-4",
    "0x1.1111111111111p-4", "0x1.e1e1e1e1e1e1ep-5", "0x1.af286bca1af28p-5",
    "0x1.8618618618618p-5"))


def exact_log(x) -> np.ndarray:
    """Natural log of float64 ``x`` from IEEE operations alone, in an order that
    ``value_codes.h``'s ``exact_log`` repeats: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
    log m from the atanh series. Within about 2 ulps of the true log; -inf at 0, NaN
    below it."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):  # 0, inf and NaN are answered below
        m, e = np.frexp(x)
        low = m < SQRT_HALF
        m = np.where(low, m * 2.0, m)
        f = m - 1.0
        s = f / (2.0 + f)
        z = s * s
        poly = np.full_like(z, SERIES[-1])
        for c in SERIES[-2::-1]:
            poly = poly * z + c
        t = s + s * (z * poly)
        dk = (e - low).astype(np.float64)
        out = dk * LN2_HI + (2.0 * t + dk * LN2_LO)
        return np.where(x > 0, np.where(np.isinf(x), x, out),
                        np.where(x == 0, -np.inf, np.nan))


# -- symbols and their codes -----------------------------------------------------------------
# an escape's cost beyond its code: its symbol (32 bits) and, for numerators, a float32
ESCAPE_BITS = {"a": 64, "c": 32}
OVERRIDE = 1 << 31  # an escaped numerator's symbol with this bit: its float32 is the value
# A field is widened until its escapes carry at most escape_share(k) of its weight
# (counts for numerators, S for contexts: how often running text meets them); the
# unigrams' codes are decoded once a scoring run (and at nnlm.kenlm's opening), so they
# keep the narrowest. Measured, bulk scoring's time over the float32 file's, each a
# median of alternating passes: Brown KN5 and a 10M-token KN5, 1.24x and 1.19x with the
# narrowest codes, 1.15x and 1.12x widened to 0.1 at every order for files 4% and 3%
# larger; a 50M-token KN5 widened to 0.1 at every order was 0.508x KenLM's trie, and at
# orders 2-3 only 0.480x and 1.31x, then with 0.2 at orders 4-5 0.490x and 1.19x.
LOOKUP_ESCAPES = {1: 1.0, 2: 0.1, 3: 0.1}
HIGHER_ESCAPES = 0.2


def escape_share(k: int) -> float:
    """The share of order k's lookups that may escape (:func:`code_width`)."""
    return LOOKUP_ESCAPES.get(k, HIGHER_ESCAPES)


BLOCK_SHIFT = ESCAPE_BLOCK_SHIFT  # escape_block[b]: the escapes before entry b << 9


def ranked(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank of each row's symbol, the distinct symbols in rank order, their counts):
    ``keys`` is one uint64 column or several (rows are symbols); rank 0 is the most
    frequent (ties: the smaller symbol)."""
    keys = np.ascontiguousarray(keys)
    if keys.ndim == 1:
        uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    else:
        rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
        _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True,
                                              return_counts=True)
        uniq = keys[first]
    order = np.argsort(-counts, kind="stable")
    rank_of = np.empty(len(counts), np.int64)
    rank_of[order] = np.arange(len(counts))
    return rank_of[inverse.ravel()], uniq[order], counts[order]


def code_width(counts: np.ndarray, escape_bits: int, weights: np.ndarray | None = None,
               share: float = 0.1) -> int:
    """The width w minimizing n w + escape_bits * (escapes) for symbols of ``counts`` (in
    rank order) coded by rank, ranks from 2^w - 1 up escaping (the top code says
    "escaped"); then, where ``weights`` (each symbol's, in rank order) say how often
    readers meet it, widened until escapes carry at most ``share`` of that weight
    (:func:`escape_share`). Readers meet frequent n-grams most,
    and their large counts are the rare symbols: without it, 40-70% of the bigrams looked
    up in running text escaped."""
    n = int(counts.sum())
    held = np.concatenate([[0], np.cumsum(counts)])
    best = None
    for w in range(1, 32):
        direct = min((1 << w) - 1, len(counts))
        bits = n * w + escape_bits * (n - int(held[direct]))
        if best is None or bits < best[1]:
            best = (w, bits)
        if direct == len(counts):
            break
    w = best[0]
    if weights is not None and len(weights):
        met = np.concatenate([[0.0], np.cumsum(weights, dtype=np.float64)])
        while (1 << w) - 1 < len(counts) and \
                met[-1] - met[(1 << w) - 1] > share * met[-1]:
            w += 1
    return w


def flag_words(escaped: np.ndarray) -> np.ndarray:
    """One bit an entry (bit i % 64 of word i // 64), 1 where it escapes, and a spare
    word: 512 entries' bits are one 64-byte line."""
    words = np.zeros(len(escaped) // 64 + 1, np.uint64)
    bits = np.packbits(escaped, bitorder="little")
    words.view(np.uint8)[:len(bits)] = bits
    return words


class Field:
    """One order's codes of one kind (``a``: the entries' numerators; ``c``: their S,
    gamma and back-off as contexts): ``codes`` (bit-packed, ``bits`` each; the top code
    2^bits - 1 says "escaped"), ``flags`` (a bit an entry, 1 where escaped) and
    ``block`` (the escapes before each 512 entries): an escape's place among the
    escapes is block[i >> 9] plus the flags before i in its line, one popcount. There
    ``symbol`` holds its symbol (uint32; for numerators, with :data:`OVERRIDE` where
    ``logp`` holds the float32 the entry gives, exact_log rounding otherwise)."""

    def __init__(self, rank: np.ndarray, bits: int, override: np.ndarray | None = None,
                 values: np.ndarray | None = None):
        top = (1 << bits) - 1
        escaped = rank >= top
        if override is not None:
            escaped |= override
        self.bits, self.n = bits, len(rank)
        self.codes = bitpack.pack(np.where(escaped, top, rank), bits)
        self.flags = flag_words(escaped)
        where = np.flatnonzero(escaped)
        self.block = np.searchsorted(where, np.arange((self.n >> BLOCK_SHIFT) + 2)
                                     << BLOCK_SHIFT).astype(np.uint64)
        self.symbol = rank[where].astype(np.uint32)
        self.logp = None
        if values is not None:
            self.symbol |= np.where(override[where], OVERRIDE, 0).astype(np.uint32)
            self.logp = np.where(override[where], values[where],
                                 np.float32(np.nan)).astype(np.float32)


def escape_places(flags, n: int) -> np.ndarray:
    """Each entry's place among the escapes (the escapes before it), from the flags."""
    bits = np.unpackbits(np.asarray(flags, np.uint64).view(np.uint8), count=n,
                         bitorder="little")
    return np.cumsum(bits, dtype=np.int64) - bits


def symbols(codes, bits: int, n: int, flags, escape_symbol, n_symbols: int,
            index: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(symbol, escape place or -1) of entries ``index`` (default: all ``n``); a symbol
    past the table (a damaged file) reads as the last, as the C readers do. The place
    is where the escape's float32 lies, or -1 where it has none."""
    if index is None:
        code = bitpack.unpack_all(codes, bits, n).astype(np.int64)
        index = np.arange(n, dtype=np.int64)
    else:
        index = np.asarray(index, np.int64)
        code = bitpack.unpack(codes, bits, index).astype(np.int64)
    place = np.full(len(index), -1, np.int64)
    esc = np.flatnonzero(code == (1 << bits) - 1)
    if len(esc):
        table = np.asarray(escape_symbol, np.int64)
        at = escape_places(flags, n)[index[esc]]
        sym = np.zeros(len(at), np.int64)  # an escape past the table (damaged): symbol 0
        inside = at < len(table)
        sym[inside] = table[at[inside]]
        code[esc] = sym & (OVERRIDE - 1)
        place[esc] = np.where(sym & OVERRIDE, at, -1)
    return np.minimum(code, max(n_symbols - 1, 0)), place


def numerators(a: np.ndarray, discounts: np.ndarray) -> np.ndarray:
    """a - D(a) in float64, as the estimator computes it (``np.subtract(a, D)`` with
    kneser_ney.discount_of's D: 0 for a = 0, then D_1, D_2, D_3+)."""
    return np.subtract(a, np.concatenate([[0.0], discounts])[np.minimum(a, 3)])


def chain(num: np.ndarray, S: np.ndarray, gamma: np.ndarray, p_lower: np.ndarray
          ) -> np.ndarray:
    """p(w | h) of an order's entries from their numerators, their contexts' S and gamma
    and their suffixes' p(w | h'), in the estimator's operations: the first term is 0
    where S(h) = 0, then gamma(h) p(w | h') is added (``value_codes.h``: the same)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        first = np.where(S > 0, num / np.where(S > 0, S, 1.0), 0.0)
    return first + gamma * p_lower


def code_numerators(num: np.ndarray, p: np.ndarray, stored: np.ndarray, share: float
                    ) -> tuple[Field, np.ndarray]:
    """An order's entry codes: ``num`` (a - D(a)), ``p`` its probabilities (float64, as
    the chain gives them) and ``stored`` the float32 log p the file must give; ``share``:
    of lookups that may escape (:func:`code_width`). Returns the field and the table of
    numerators (float64, rank order)."""
    rank, table, counts = ranked(num.view(np.uint64))
    bits = code_width(counts, ESCAPE_BITS["a"],
                      counts * (np.maximum(table.view(np.float64), 0) + 1), share)
    predicted = exact_log(p).astype(np.float32)
    stored = np.asarray(stored, np.float32)
    override = predicted.view(np.uint32) != stored.view(np.uint32)
    return Field(rank, bits, override, stored), table.view(np.float64)


def code_contexts(S: np.ndarray, gamma: np.ndarray, log_bow: np.ndarray, share: float
                  ) -> tuple[Field, np.ndarray, np.ndarray, np.ndarray]:
    """An order's context codes: each entry's S and gamma as a context of the order
    above and its float32 back-off as stored (signed zero included); ``share``: of
    lookups that may escape. Returns the field and the tables of S, gamma (float64) and
    back-offs (float32), rank order."""
    bow = np.asarray(log_bow, np.float32)
    keys = np.stack([np.asarray(S, np.float64).view(np.uint64),
                     np.asarray(gamma, np.float64).view(np.uint64),
                     bow.view(np.uint32).astype(np.uint64)], axis=1)
    rank, table, counts = ranked(keys)
    S_table, gamma_table = (table[:, i].copy().view(np.float64) for i in (0, 1))
    bits = code_width(counts, ESCAPE_BITS["c"], counts * (S_table + 1), share)
    return (Field(rank, bits), S_table, gamma_table,
            table[:, 2].astype(np.uint32).view(np.float32))


# -- the writer's sections --------------------------------------------------------------------
def field_sections(kind: str, k: int, field: Field, tables: dict) -> list:
    """(name, array) of one field's sections: codes, escapes, tables."""
    out = [(f"{kind}codes_{k}", field.codes), (f"{kind}flags_{k}", field.flags),
           (f"{kind}block_{k}", field.block), (f"{kind}esc_{k}", field.symbol)]
    if field.logp is not None:
        out.append((f"{kind}esc_logp_{k}", field.logp))
    return out + [(f"{name}_{k}", table) for name, table in tables.items()]


class CodedValues:
    """The writer's source of coded values for a KN model estimated with
    ``keep_counts`` (its ``value_inputs``): :meth:`sections` yields order k's, in
    ascending k (each order's p is the next one's p(w | h'))."""

    def __init__(self, model):
        self.model, self.V, self.n = model, len(model.vocab), model.order
        self.inputs = model.value_inputs
        if self.inputs is None:  # a coded file mapped: its own codes, decoded
            self.inputs = model.levels[0].coding.value_inputs()
        self.p_lower = self.inputs["uni_p"]

    def sections(self, k: int, source, meta: dict):
        """Order k's sections (k = 1: the unigrams' p and their codes as contexts),
        filling ``meta["coded"]``; ``source``: the writer's :class:`WholeModel`."""
        inputs, coded = self.inputs, meta.setdefault("coded", {})
        if k == 1:
            yield "unigram_p", np.asarray(self.p_lower, np.float64)
            bow = source.unigram_log_bow()
        else:
            level = self.model.levels[k - 2]
            prefix, suffix = np.asarray(level.prefix), np.asarray(level.keys) // self.V
            num = inputs["num"][k - 2] if "num" in inputs else \
                numerators(inputs["a"][k - 2], self.model.discounts[k - 1])
            S, gamma = inputs["S"][k - 2], inputs["gamma"][k - 2]
            p = chain(num, S[prefix], gamma[prefix], self.p_lower[suffix])
            del prefix, suffix
            field, table = code_numerators(num, p, source.whole(k, "logp").astype(np.float32),
                                           escape_share(k))
            coded[f"a_{k}"] = [field.bits, len(table), len(field.symbol)]
            yield from field_sections("a", k, field, {"anum": table})
            self.p_lower = p
            bow = source.whole(k, "log_bow") if k < self.n else None
        if k < self.n:
            field, S, gamma, bows = code_contexts(inputs["S"][k - 1], inputs["gamma"][k - 1],
                                                  bow, escape_share(k))
            coded[f"c_{k}"] = [field.bits, len(S), len(field.symbol)]
            yield from field_sections("c", k, field, {"cS": S, "cgamma": gamma, "cbow": bows})


# -- the numpy reader ---------------------------------------------------------------------------
class Coding:
    """A mapped file's coded values (``section(name)``: its arrays) for numpy's readers,
    which index an order's values at random (full next-word distributions, ARPA output,
    scoring without the compiled loops): the first such read decodes every order whole,
    walking the chain up from the unigrams, and keeps float32 log p and log back-offs
    (what the float32 file would hold in its pages). The compiled readers decode on a
    lookup's path instead (``value_codes.h``) and never call this."""

    def __init__(self, header: dict, section, levels: list):
        self.header, self.section, self.levels = header, section, levels
        self.n, self.counts, self.coded = header["order"], header["counts"], header["coded"]
        self._logp: dict[int, np.ndarray] = {}
        self._log_bow: dict[int, np.ndarray] = {}

    def field(self, kind: str, k: int, index=None) -> tuple[np.ndarray, np.ndarray]:
        """(symbol, escape place or -1) of order k's entries ``index`` (default all) in
        field ``kind`` (:func:`symbols`)."""
        bits, n_symbols, _ = self.coded[f"{kind}_{k}"]
        return symbols(self.section(f"{kind}codes_{k}"), bits, self.counts[k - 1],
                       self.section(f"{kind}flags_{k}"), self.section(f"{kind}esc_{k}"),
                       n_symbols, index)

    def c_spec(self, trie_spec: tuple, k: int, top: bool) -> tuple:
        """Order k for the C readers (:func:`.trie_layout.coded_spec`)."""
        return coded_spec(self.header, self.section, k, trie_spec)

    def value_inputs(self) -> dict:
        """What the writer codes (KneserNey's ``value_inputs``, with each entry's
        numerator in place of its a): a coded file written again (a directory made a
        one-file model) stays coded."""
        def context(k):
            sym = self.field("c", k)[0]
            return self.section(f"cS_{k}")[sym], self.section(f"cgamma_{k}")[sym]

        contexts = [context(k) for k in range(1, self.n)]
        return {"uni_p": np.asarray(self.section("unigram_p")),
                "num": [self.section(f"anum_{k}")[self.field("a", k)[0]]
                        for k in range(2, self.n + 1)],
                "S": [c[0] for c in contexts], "gamma": [c[1] for c in contexts]}

    def log_bow(self, k: int) -> np.ndarray:
        """Order k's float32 log back-offs (k < n; 1 for the unigrams)."""
        if k not in self._log_bow:
            self._log_bow[k] = self.section(f"cbow_{k}")[self.field("c", k)[0]]
        return self._log_bow[k]

    def logp(self, k: int) -> np.ndarray:
        """Order k's float32 log p (k >= 2), decoding every order the first time."""
        if k not in self._logp:
            p_lower = self.section("unigram_p")
            for j in range(2, self.n + 1):
                level = self.levels[j - 2]
                context = self.field("c", j - 1)[0][np.asarray(level.prefix)]
                sym, place = self.field("a", j)
                p = chain(self.section(f"anum_{j}")[sym], self.section(f"cS_{j - 1}")[context],
                          self.section(f"cgamma_{j - 1}")[context],
                          p_lower[level._parent_of_each()])
                del context, sym
                logp = exact_log(p).astype(np.float32)
                held = np.flatnonzero(place >= 0)
                escaped = self.section(f"aesc_logp_{j}")[place[held]]
                kept = ~np.isnan(escaped)  # NaN: no float32 of its own (value_codes.h's
                logp[held[kept]] = escaped[kept]  # entry_ln reads it the same way)
                self._logp[j] = logp
                p_lower = p
        return self._logp[k]


class Decoded:
    """An order's values as an array that is decoded on first use (:class:`Coding`):
    indexing, ``len`` and ``np.asarray`` as the float32 array would."""

    dtype = np.dtype(np.float32)

    def __init__(self, decode, n: int):
        self._decode, self.n = decode, n

    def __len__(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def __getitem__(self, index):
        return self._decode()[index]

    def __array__(self, dtype=None, copy=None):
        a = self._decode()
        return a if dtype is None else a.astype(dtype)
