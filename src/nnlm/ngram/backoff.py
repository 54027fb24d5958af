"""Back-off n-gram models: the form ARPA files store, and how nnlm scores KN models.

    p(w | h) = P(h w)                    if the n-gram (h w) is stored
             = bow(h) * p(w | h')        otherwise (h' drops the oldest word of h;
                                         bow(h) = 1 when h is not stored)

Interpolated Kneser-Ney is exactly such a model once P(h w) holds the interpolated
probability and bow(h) the interpolation weight gamma(h), which is why one scorer
serves models estimated here and models read from ARPA files.

Storage, per order k >= 2, sorted by the suffix key of :mod:`nnlm.ngram.estimate.counts`
(``key = id(g2..gk) * |V| + g1``, where unigram ids are word ids): ``logp`` and
``log_bow`` (natural logs), ``prefix`` (the id of the context g1..g_{k-1}) and ``last``
(the predicted word gk). Unigrams are dense arrays over the vocabulary.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..base.errors import NnlmError
from ..lm import LanguageModel
from ..model_files import header_binding, load_vocab_for
from ..text.stream import Stream
from ..text.vocab import BOS_ID, EOS_ID, UNK_ID, Vocabulary
from .store import trie as trie_store
from .store.levels import LOG10_E, NgramLevel, backoff_arrays_problem, expand_ranges, log10_entries
from .store.query_spec import QuerySpec
from .store.trie import FILE_NAME, TrieLevel
from .store.trie_map import map_trie, read_trie_header
from .store.trie_write import write_trie
from .store.values import extension_of
from .store.vocab_table import word_bytes


def _positions(offsets: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Each slot's place in its line for the slots lo..hi-1 of a stream (one repeat of
    the lines' starts, not a search per slot)."""
    first = int(np.searchsorted(offsets, lo, side="right")) - 1
    last = int(np.searchsorted(offsets, hi - 1, side="right")) - 1
    bounds = offsets[first:last + 2].copy()
    bounds[0], bounds[-1] = lo, hi
    return np.arange(lo, hi) - np.repeat(offsets[first:last + 1], np.diff(bounds))


# tokens scored at a time: the batch's index arrays stay in cache and the peak memory
# stays low. Measured on a 10M-token KN5 scoring 1.4M tokens: 2^17 ran as fast as 2^20
# (3.5-3.6M tokens/s) and peaked at 181 MB of the process against 286. Smaller batches
# cost speed where the model is large: each order's lookups for a whole batch run
# together while its arrays are in cache (measured on the 10M KN5 trie: 2.9-4.1M tokens/s
# at 2^14 against 3.8-4.8M at 2^17; the in-memory hash indexes from ARPA, Brown KN5:
# 5.3-5.5M against 7.1-7.3M). Only Brown-sized tries gain (6.2-6.8M against 5.8-5.9M,
# and 9 MB less), which is not worth a rule.
SCORE_BATCH = 1 << 17
# the compiled scorer over a mapped trie (store._trie.score_run) keeps about 50 bytes a
# token where numpy's passes keep several times that, so it takes longer runs, which are
# faster: each order's lookups for the whole run go together.
FUSED_BATCH = 1 << 19

class BackoffNgram(LanguageModel):
    """A back-off n-gram model over ``vocab`` (see the module docstring)."""

    kind = "backoff"

    def __init__(self, vocab: Vocabulary, unigram_logp, unigram_log_bow, levels: list[NgramLevel]):
        self.vocab = vocab
        self.order = 1 + len(levels)
        self.unigram_logp = np.asarray(unigram_logp, np.float64)
        self.unigram_log_bow = np.asarray(unigram_log_bow, np.float64)
        self.levels = levels

    null_context = True  # a context id of -1 means "no word" (KenLM's NullContext)
    # KenLM gives an ARPA file's missing <unk> a back-off of +0.0, which it reads as "may
    # extend", so a state after an unknown word keeps it; read_arpa sets this to match
    unk_extends = False

    def _log_bow(self, k: int, ids: np.ndarray) -> np.ndarray:
        """log bow of order-k entries ``ids`` (0 where id is -1: not stored)."""
        table = self.unigram_log_bow if k == 1 else self.levels[k - 2].log_bow
        return np.where(ids >= 0, table[np.maximum(ids, 0)], 0.0)

    def _context_ids(self, contexts: np.ndarray) -> list[np.ndarray]:
        """ids[j] = id at order j+1 of the context (c_{j+1} .. c1), -1 where not stored."""
        contexts = np.asarray(contexts, np.int64)
        if self.order < 2:
            return []
        out = [contexts[:, -1].copy()]
        for rows, ids in self._extend(out[0], lambda j, rows: contexts[rows, -j], self.order - 1):
            full = np.full(len(contexts), -1, np.int64)
            full[rows] = ids
            out.append(full)
        out.extend(np.full(len(contexts), -1, np.int64) for _ in range(self.order - 1 - len(out)))
        return out

    def _extend(self, ids: np.ndarray, word_at, max_order: int, null_words: bool = True):
        """Grow n-grams leftwards one word at a time, as far as they are stored.

        ``ids``: each row's unigram (word id; -1: none). ``word_at(k, rows)``: the word
        that the rows' k-grams add on the left. Returns, for k = 2, 3, ...: (rows, ids)
        of the rows whose k-gram is stored, and its id at order k (orders where none is
        stored are left out, and so are all above them). A row stops at its
        first miss: every stored n-gram's suffix is stored (ARPA's rule, and KN's), so a
        k-gram that is absent has no stored extension. ``null_words=False`` promises
        that ``word_at`` never gives -1 (KenLM's null context), which saves a pass.
        """
        V = len(self.vocab)
        rows = np.flatnonzero(ids >= 0)
        ids = ids[rows]
        out = []
        for k in range(2, max_order + 1):
            found = self.levels[k - 2].find_pairs(ids, word_at(k, rows), V)
            keep = np.flatnonzero(found >= 0)
            if not len(keep):
                break
            rows, ids = rows[keep], found[keep]
            out.append((rows, ids))
        return out

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return self.target_logprobs_and_orders(contexts, targets)[0]

    def backoff_sums(self, contexts: np.ndarray) -> np.ndarray:
        """The log back-off weights every stored suffix of each context adds to a word
        stored after none of them (what KenLM adds to ``<s>``'s unigram score when a
        decoder scores ``<s>`` as a word)."""
        contexts = np.asarray(contexts, np.int64)
        out = np.zeros(len(contexts))
        if self.order == 1:
            return out
        last = contexts[:, -1]
        rows = np.flatnonzero(last >= 0)
        out[rows] += self.unigram_log_bow[last[rows]]
        for j, (rows, ids) in enumerate(
                self._extend(last, lambda j, rows: contexts[rows, -j], self.order - 1), start=2):
            out[rows] += self.levels[j - 2].log_bow[ids]
        return out

    def matched_orders(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Length of the longest stored n-gram ending in each target (KenLM's ngram_length)."""
        return self.target_logprobs_and_orders(contexts, targets)[1]

    def target_logprobs_and_orders(self, contexts: np.ndarray,
                                   targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log p(targets[i] | contexts[i]) and the length of the longest stored n-gram
        ending in targets[i]: P(h' w) of the longest stored (h' w), plus the log back-off
        weights of every context c_j .. c_1 (stored ones) from that length up."""
        contexts = np.asarray(contexts, np.int64)
        targets = np.asarray(targets, np.int64)
        logp = self.unigram_logp[targets]
        length = np.ones(len(targets), np.int64)
        if self.order == 1:
            return logp, length
        for k, (rows, ids) in enumerate(
                self._extend(targets, lambda k, rows: contexts[rows, -(k - 1)], self.order),
                start=2):
            logp[rows] = self.levels[k - 2].logp[ids]
            length[rows] = k
        last = contexts[:, -1]
        rows = np.flatnonzero((last >= 0) & (length <= 1))
        logp[rows] += self.unigram_log_bow[last[rows]]
        for j, (rows, ids) in enumerate(
                self._extend(last, lambda j, rows: contexts[rows, -j], self.order - 1), start=2):
            use = np.flatnonzero(length[rows] <= j)
            logp[rows[use]] += self.levels[j - 2].log_bow[ids[use]]
        return logp, length

    def extends(self, k: int) -> np.ndarray:
        """bool per stored k-gram (k < order): whether it can matter as context, i.e. its
        back-off weight is not 1 or some stored (k+1)-gram has it as context. KenLM's
        ``HasExtension`` (lm/blank.hh), on which its right-state minimization rests."""
        cache = self.__dict__.setdefault("_extends", {})
        if k not in cache and self.__dict__.get("signed_backoffs"):

            cache[k] = extension_of(self.unigram_log_bow if k == 1
                                    else self.levels[k - 2].log_bow)
        if k not in cache:
            bow = np.asarray(self.unigram_log_bow if k == 1 else self.levels[k - 2].log_bow)
            has_child = np.zeros(len(bow), bool)
            if k < self.order:
                has_child[self.levels[k - 1].prefix] = True
            cache[k] = has_child | (bow != 0)
            if k == 1 and self.unk_extends:
                cache[k][UNK_ID] = True
        return cache[k]

    def query_spec(self) -> QuerySpec | None:
        """The model as nnlm.kenlm's compiled queries take it (KenLM's numbers: log10 in
        float32, an extension flag per n-gram): each order in its own layout, where it
        lies (a mapped trie's arrays, a KenLM probing file's buckets) or through the
        order's hash index (built here if scoring has not yet). None where an order is
        none of these."""
        levels = []
        for k, level in enumerate(self.levels, start=2):
            top = k == self.order
            spec = None
            if not isinstance(level, NgramLevel):  # KenLM's probing buckets, or nothing
                if not hasattr(level, "c_spec"):
                    return None
                spec = level.c_spec(top)
            elif isinstance(level, TrieLevel) and getattr(self, "signed_backoffs", False):
                spec = level.c_spec(top)  # where it lies; None: numbers set in memory
            levels.append(spec if spec is not None else
                          level.hash_spec(None if top else self.extends(k)))
        uni_logp = np.asarray(self.unigram_logp, np.float64).copy()
        uni_logp[BOS_ID] = -99.0 / LOG10_E  # never scored, as KenLM's <s>: finite
        unigrams = log10_entries(uni_logp, self.unigram_log_bow, self.extends(1))
        words = getattr(self.vocab, "mapped_sections", None)
        if words is not None:  # a trie file's own words and table (store.vocab_table)
            return QuerySpec(words[0], words[1], len(self.vocab), BOS_ID, EOS_ID, UNK_ID,
                             unigrams, levels, self.order, self.vocab.index, words[2])
        try:  # the words' bytes, for sentences split and looked up without Python strings
            blob, offsets = word_bytes(self.vocab.words)
        except UnicodeEncodeError:  # a word no sentence can hold: no compiled queries
            return None
        return QuerySpec(blob, offsets, len(self.vocab), BOS_ID, EOS_ID, UNK_ID, unigrams,
                         levels, self.order, self.vocab.index)

    def state_lengths(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """How many of the last words (target included) a decoder's state must keep after
        each target: the length of the longest stored n-gram ending in it that can still
        extend (:meth:`extends`), at most order - 1 (Heafield 2011, KenLM's right state
        minimization). Two hypotheses whose kept words are equal score every continuation
        alike, so a decoder may recombine them; 0 means the null context."""
        contexts = np.asarray(contexts, np.int64)
        targets = np.asarray(targets, np.int64)
        keep = np.where(self.extends(1)[targets], 1, 0)
        chain = self._extend(targets, lambda k, rows: contexts[rows, -(k - 1)], self.order - 1)
        for k, (rows, ids) in enumerate(chain, start=2):
            keep[rows[self.extends(k)[ids]]] = k
        return keep

    def logprobs(self, stream: Stream, batch_size: int | None = None) -> np.ndarray:
        """float64, one natural-log probability per predicted token of ``stream`` (see
        :meth:`logprobs_and_orders`)."""
        return self.logprobs_and_orders(stream, batch_size)[0]

    def logprobs_and_orders(self, stream: Stream,
                            batch_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per predicted token of ``stream``: the natural-log probability, and the length of
        the longest stored n-gram ending in it (:meth:`matched_orders`).

        Running text is scored in one chain of lookups per token rather than two: the
        context of token t (the words before it, ``<s>``-padded) is the n-gram ending at
        token t-1, so the ids that token t-1's lookups find are the ids of token t's
        contexts, whose back-off weights it needs. Same numbers as
        :meth:`target_logprobs` over :meth:`Stream.contexts`; ``batch_size`` tokens at a
        time bound the memory.
        """
        n = self.order
        if n == 1:
            return self.unigram_logp[stream.ids], np.ones(len(stream), np.int8)
        start_bows = self._start_bows()
        logp = np.empty(len(stream))
        orders = np.empty(len(stream), np.int8)
        fused = self._fused_run()
        if batch_size is None:
            batch_size = SCORE_BATCH if fused is None else FUSED_BATCH
        for lo in range(0, len(stream), batch_size):
            hi = min(lo + batch_size, len(stream))
            # slots lo-n .. hi-1: every look-back of the run's n-grams lies inside
            before = max(n - lo, 0)  # slots before the stream: <s>, position -1
            ids = np.full(hi - lo + n, BOS_ID, np.int64)
            ids[before:] = stream.ids[lo - n + before:hi]
            pos = np.full(len(ids), -1, np.int64)
            pos[before:] = _positions(stream.offsets, lo - n + before, hi)
            if fused is not None:
                fused(ids, pos, n - 1, start_bows, logp[lo:hi], orders[lo:hi])
            else:
                logp[lo:hi], orders[lo:hi] = self._score_run(ids, pos, n - 1, start_bows)
        return logp, orders

    def _fused_run(self):
        """:meth:`_score_run` in one compiled call (``store._trie.score_run``: the same
        lookups and sums, without numpy's passes between them), where every order is a
        mapped trie's as the file holds it; else None."""
        native = trie_store.compiled_loops()
        if native is None or not self.levels or \
                not all(isinstance(level, TrieLevel) for level in self.levels):
            return None
        specs = [level.c_spec(k == self.order) for k, level in enumerate(self.levels, start=2)]
        if any(spec is None for spec in specs):
            return None
        uni_logp = np.ascontiguousarray(self.unigram_logp, np.float64)
        uni_bow = np.ascontiguousarray(self.unigram_log_bow, np.float64)
        V = len(uni_logp)

        def run(ids, pos, a, start_bows, out_logp, out_orders):
            native.score_run(specs, V, BOS_ID, uni_logp, uni_bow, start_bows, ids, pos, a,
                             out_logp, out_orders)
        return run

    def _start_bows(self) -> np.ndarray:
        """S[L] = the summed log bow of the all-``<s>`` context from order L up: what a
        line's first word adds when its longest match has length L."""
        n = self.order
        bows = np.zeros(n + 1)
        bos = np.array([BOS_ID], np.int64)
        bows[1] = self.unigram_log_bow[BOS_ID]
        for j, (_, ids) in enumerate(self._extend(bos, lambda j, rows: bos[rows], n - 1),
                                     start=2):
            bows[j] = self.levels[j - 2].log_bow[ids[0]]
        bows[n:] = 0.0
        return np.cumsum(bows[::-1])[::-1].copy()  # contiguous: the compiled scorer's

    def _score_run(self, ids, pos, a: int, start_bows: np.ndarray):
        """Log-probabilities and match lengths of the tokens ids[a+1:] (ids[a] is only the
        context of ids[a+1]); ``pos``: each slot's position in its line (-1: before the
        stream); ids[:a] are the words that the n-grams look back to."""
        b = len(ids)
        words = ids[a:b]
        logp = self.unigram_logp[words]
        m = b - a
        length = np.ones(m + 1, np.int8)  # one sentinel row: "row r + 1" is always valid
        starts = np.ones(m + 1, bool)
        starts[:m] = pos[a:b] == 0  # first words: their context is all <s>, not the last line

        def word_at(k, rows):  # the word k-1 back, <s> before the line's start
            g = rows + a
            return np.where(pos[g] >= k - 1, ids[g - (k - 1)], BOS_ID)

        chain = self._extend(words, word_at, self.order, null_words=False)
        for k, (rows, found) in enumerate(chain, start=2):
            logp[rows] = self.levels[k - 2].logp[found]
            length[rows] = k
        # the context of row r + 1 is row r's n-gram: add its bow where r + 1 backs off
        # past it (the sentinel row is a "start", so the last row adds nothing)
        backs_off = ~starts[1:]
        use = np.flatnonzero(backs_off & (length[1:] <= 1))
        logp[use + 1] += self.unigram_log_bow[words[use]]
        for j, (rows, found) in enumerate(chain[: self.order - 2], start=2):
            use = np.flatnonzero(backs_off[rows] & (length[rows + 1] <= j))
            logp[rows[use] + 1] += self.levels[j - 2].log_bow[found[use]]
        first = np.flatnonzero(starts[:m])
        logp[first] += start_bows[length[first]]
        return logp[1:], length[1:m]

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        """Every word's log p after each context, in one pass over the row: with c_j the
        last j words and S_j the sum of log bow(c_i) for i >= j, a word whose longest
        stored n-gram is (c_j w) gets log P(c_j w) + S_{j+1}. So each row is the unigrams
        plus S_1, then the stored children of each c_j overwritten (log space: no
        underflow)."""
        contexts = np.asarray(contexts, np.int64)
        B = len(contexts)
        ids = self._context_ids(contexts)
        bows = np.zeros((len(ids) + 1, B))  # bows[j - 1] = log bow(c_j); a last row of 0
        for j, ctx in enumerate(ids, start=1):
            bows[j - 1] = self._log_bow(j, ctx)
        after = np.cumsum(bows[::-1], axis=0)[::-1]  # after[j - 1] = S_j; after[k] = 0
        logp = self.unigram_logp[None, :] + after[0][:, None]
        for k, ctx in enumerate(ids, start=2):
            level = self.levels[k - 2]
            rows = np.flatnonzero(ctx >= 0)
            ctx = ctx[rows]
            r, e = expand_ranges(level.prefix_offsets[ctx], level.prefix_offsets[ctx + 1])
            e = level.by_prefix[e]
            logp[rows[r], level.last[e]] = level.logp[e] + after[k - 1][rows[r]]
        return logp

    # -- persistence (see nnlm.models) ------------------------------------------------
    def config(self) -> dict:
        return {"order": self.order}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"unigram_logp": self.unigram_logp, "unigram_log_bow": self.unigram_log_bow}
        for k, level in enumerate(self.levels, start=2):
            for name in ("keys", "logp", "log_bow", "prefix", "last"):
                out[f"{name}_{k}"] = getattr(level, name)
        return out

    # the on-disk form: nnlm's mapped trie (nnlm.ngram.store.trie); (P, B) quantizes it;
    # store_compress codes the values as the counts they come from (a KN estimate that
    # kept them: store.value_codes)
    store_quantize: tuple[int, int] | None = None
    store_compress: bool = False
    value_inputs: dict | None = None
    bound_by_content = True  # one trie file: save_model derives its id from it

    def save_files(self, directory: Path, binding: str, save) -> None:
        """The model as ``ngrams.trie`` (mapped when loaded: float32, quantized, or its
        values coded as counts)."""

        write_trie(self, Path(directory) / FILE_NAME, binding, self.store_quantize,
                   compress=self.store_compress)
        if hasattr(self, "write_extra_files"):
            self.write_extra_files(directory)

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab: Vocabulary, load) -> BackoffNgram:
        """A model directory holding ``ngrams.trie`` (mapped: memory grows only with the
        pages that queries touch, and processes share them), or, as saved before the
        trie existed, ``arrays.npz`` (read whole)."""

        trie = Path(path) / FILE_NAME
        if not trie.exists():
            return super().load_dir(path, header, vocab, load)
        return cls.from_trie(trie, header_binding(header), vocab, header["config"])

    @classmethod
    def load_dir_mapped(cls, path: Path, header: dict) -> BackoffNgram | None:
        """The model of a directory whose ``ngrams.trie`` holds its vocabulary, mapped
        with it (vocab.txt is not read: see :mod:`.store.vocab_table`); None for any
        other directory, which :meth:`load_dir` reads."""

        trie = Path(path) / FILE_NAME
        binding = header_binding(header)  # what vouches for the file's vocabulary
        if binding is None or not trie.is_file() or "vocab" not in read_trie_header(trie)[0]:
            return None
        mapped = map_trie(trie, binding, header["vocab_size"], header["vocab_fingerprint"],
                          lambda: load_vocab_for(Path(path), header).counts)
        return cls.from_mapped(trie, mapped, mapped["vocab"], header["config"])

    @classmethod
    def from_trie(cls, trie: Path, binding: str | None, vocab: Vocabulary,
                  config: dict) -> BackoffNgram:
        """The model mapped from the trie file ``trie`` (see :mod:`.store.trie`), with
        ``vocab`` (the file's own, where it holds one, must be the same)."""

        mapped = map_trie(trie, binding, len(vocab), vocab.fingerprint)
        own = mapped["vocab"]
        return cls.from_mapped(trie, mapped, vocab if own is None else own, config)

    @classmethod
    def from_mapped(cls, trie: Path, mapped: dict, vocab: Vocabulary,
                    config: dict) -> BackoffNgram:
        """The model over a mapped trie file (:func:`.store.trie_map.map_trie`)."""
        if mapped["order"] != config.get("order"):
            raise NnlmError(f"{trie}: holds an order-{mapped['order']} model, config.json says "
                            f"{config.get('order')}; the directory was mixed")
        model = cls.__new__(cls)
        BackoffNgram.__init__(model, vocab, mapped["unigram_logp"], mapped["unigram_log_bow"],
                              mapped["levels"])
        model.unk_extends = mapped["unk_extends"]
        model.store_quantize = tuple(mapped["quantize"]) if mapped["quantize"] else None
        model.store_compress = "coded" in mapped  # written again, it stays coded
        model.signed_backoffs = True
        model._restore_config(config)
        return model

    @classmethod
    def saved_array_problem(cls, arrays: dict) -> str | None:
        return backoff_arrays_problem(arrays)

    @classmethod
    def from_saved(cls, vocab: Vocabulary, config: dict, arrays: dict):
        levels = []
        sizes = [len(vocab)]
        for k in range(2, config["order"] + 1):
            level = NgramLevel(*(arrays[f"{n}_{k}"] for n in
                                 ("keys", "logp", "log_bow", "prefix", "last")), sizes[-1])
            levels.append(level)
            sizes.append(len(level))
        model = cls.__new__(cls)
        BackoffNgram.__init__(model, vocab, arrays["unigram_logp"], arrays["unigram_log_bow"],
                              levels)
        model._restore_config(config)
        return model

    def _restore_config(self, config: dict) -> None:
        """Subclasses restore their own settings here."""

    def num_ngrams(self) -> list[int]:
        return [len(self.vocab)] + [len(level) for level in self.levels]


# -- the words of stored n-grams (ARPA writing, pruning, reports) --------------------
def ngram_words(model: BackoffNgram) -> list[np.ndarray]:
    """For each order k >= 2, an int64 (M_k, k) array of each stored n-gram's word ids."""
    return [words_of(model, k, np.arange(len(level)))
            for k, level in enumerate(model.levels, start=2)]


def words_of(model: BackoffNgram, k: int, ids: np.ndarray) -> np.ndarray:
    """The word ids (g1..gk) of the order-k entries ``ids``, an int64 (len(ids), k) array:
    g1 from the entry, the rest from its suffix g2..gk one order down."""
    V = len(model.vocab)
    ids = np.asarray(ids, np.int64)
    out = np.empty((len(ids), k), np.int64)
    for j in range(k, 1, -1):  # column k - j is g_{k-j+1}
        first, ids = model.levels[j - 2].first_and_suffix(ids, V)
        out[:, k - j] = first
    out[:, k - 1] = ids
    return out
