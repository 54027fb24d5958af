"""The kenlm module's Python API over any nnlm model: ``import nnlm.kenlm as kenlm``.

A client of KenLM's Python module (pyctcdecode, a hand-written beam search, kenlm's own
python/example.py) changes one import, or installs this module under kenlm's name
before importing a library that imports kenlm::

    import sys, nnlm.kenlm
    sys.modules["kenlm"] = nnlm.kenlm

The names (Model, LanguageModel, State, FullScoreReturn, Config, LoadMethod,
ARPALoadComplain) and their behaviour are the kenlm module's (python/kenlm.pyx), odd
parts included, so that numbers and states match it:

* log10 probabilities, each rounded to float32 as KenLM stores them, and ``score`` sums
  them in float32 as KenLM does;
* ``path`` is the absolute path as bytes;
* a fresh ``State()`` is the null context (no words), not ``<s>``;
  ``BeginSentenceWrite`` makes it ``<s>``;
* ``"<unk>" in model`` is False (KenLM asks whether a word has an id other than <unk>'s);
* ``score``, ``full_scores``, ``perplexity`` and ``in`` take str or UTF-8 bytes;
  ``BaseScore`` and ``BaseFullScore`` take str only; anything else is a TypeError;
* ``full_scores`` flags ``</s>`` as never out of vocabulary;
* a model that fails to load is an OSError, "Cannot read model ...".

States are minimized as KenLM minimizes them (Heafield 2011, "KenLM: Faster and
Smaller Language Model Queries", section 4.1): for back-off models a state keeps only the
last words whose n-grams can still extend, so a decoder recombines the hypotheses
KenLM's would. A network has no null context and never forgets: its state is the last
n-1 words, and the empty state is the start of a sentence. Through ``BaseScore`` its
next-word distribution is computed once per State and kept in a bounded LRU cache, so a
beam search that asks for many words after one State pays one network pass. On a GPU,
where a pass of hundreds of rows costs about what one row does, the States that
``BaseScore`` writes are also queued and computed with the next miss, in one batched pass
(a beam's new States are written in one step and read in the next). On the CPU that
does not pay: in pyctcdecode and flashlight-text most written States are pruned before
they are read (about 1 in 4 is), and a row in a batch of 64 costs a fifth of a lone one.

Beyond kenlm: any nnlm model loads (a model directory, an ARPA file, a neural model, a
mixture), or a loaded :class:`nnlm.LanguageModel` may be passed instead of a path; a
State written by one model is refused by another (ValueError).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from collections import OrderedDict
from pathlib import Path

from ..base.compiled import extension
from ..base.errors import NnlmError
from ..text.specials import BOS_ID, EOS_ID, KENLM_BOS_LOG10, NO_WORD, UNK_ID

# numpy loads with the first model that needs it: a back-off model's trie file or a
# KenLM binary, opened by :func:`_open_file`, never does, so such a process is as small
# as kenlm's own
LOG10_E = math.log10(math.e)  # nnlm.lm's

CACHE_BYTES = 256 << 20  # networks: next-word distributions kept per State (LRU)
PENDING_ROWS = 512  # networks on a GPU: written States computed with the next miss, at most
_serials = itertools.count(1)  # each model's own: a State remembers which one wrote it


def _as_str(data) -> str:
    """kenlm's ``as_str``: str as it is, bytes decoded as UTF-8, anything else TypeError."""
    if isinstance(data, str):
        return data
    if isinstance(data, bytes):
        return data.decode("utf-8")
    raise TypeError(f"Cannot convert {type(data)} to string")


class FullScoreReturn:
    """What ``BaseFullScore`` returns: ``log_prob`` (log10), ``ngram_length``, ``oov``."""

    __slots__ = ("log_prob", "ngram_length", "oov")

    def __init__(self, log_prob, ngram_length, oov):
        import numpy as np

        self.log_prob = float(np.float32(log_prob))
        self.ngram_length = int(ngram_length)
        self.oov = bool(oov)

    def __repr__(self) -> str:
        return f"FullScoreReturn({self.log_prob!r}, {self.ngram_length!r}, {self.oov!r})"


class State:
    """The words a model still needs to see (most recent last). Compares, orders, hashes
    and copies as kenlm's State: by its length, then its words."""

    __slots__ = ("_words", "_owner")

    def __init__(self):
        self._words: tuple[int, ...] = ()
        self._owner = 0  # the serial of the model that wrote it (0: fresh)

    def _key(self):
        return len(self._words), self._words[::-1]

    def _check(self, other) -> State:
        if not isinstance(other, State):
            raise TypeError(f"'<' not supported between State and {type(other).__name__}")
        return other

    def __eq__(self, other) -> bool:
        return isinstance(other, State) and self._words == other._words

    def __ne__(self, other) -> bool:
        return not self == other

    def __lt__(self, other) -> bool:
        return self._key() < self._check(other)._key()

    def __le__(self, other) -> bool:
        return self._key() <= self._check(other)._key()

    def __gt__(self, other) -> bool:
        return self._key() > self._check(other)._key()

    def __ge__(self, other) -> bool:
        return self._key() >= self._check(other)._key()

    def __hash__(self) -> int:
        return hash(self._words)

    def __copy__(self) -> State:
        out = State()
        out._words, out._owner = self._words, self._owner
        return out

    def __deepcopy__(self, memo=None) -> State:
        return self.__copy__()

    def __repr__(self) -> str:
        return f"State({len(self._words)} words)"


# the compiled per-call path, or None (no compiler, or NNLM_NO_C=1): Python's
_fast = extension("nnlm.decoding._kenlm_query")

if _fast is not None:
    State = _fast.State  # noqa: F811 - the same API, in C
    FullScoreReturn = _fast.FullScoreReturn  # noqa: F811
    MAX_ORDER = _fast.MAX_ORDER
else:
    MAX_ORDER = 1 << 30


def _query(spec, serial: int):
    """The compiled queries of a back-off model from its spec
    (:class:`nnlm.ngram.store.query_spec.QuerySpec`): (queries, word index, order)."""
    query = _fast.Query(serial, spec.index if spec.slots is None else None, spec.blob,
                        spec.offsets, spec.vocab_size, spec.bos, spec.eos, spec.unk,
                        spec.unigrams, spec.levels,
                        *(() if spec.slots is None else (spec.slots,)))
    return query, spec.index, spec.order


def _open_file(text: str, serial: int):
    """(compiled queries, word index, order) of a back-off model read straight from its
    file where it lies, without numpy and without loading the model: nnlm's trie file
    (:func:`nnlm.ngram.store.query_spec.open_trie_spec`) or a KenLM binary
    (:func:`nnlm.ngram.formats.kenlm_query_spec.open_kenlm_spec`). None for anything
    else, or for a file that fails a check: then :func:`nnlm.models.load_model` opens it,
    and names what is wrong."""
    if _fast is None:
        return None
    from ..ngram.store.query_spec import open_trie_spec

    spec = open_trie_spec(text, _fast.MAX_ORDER)
    if spec is None:  # KenLM's reader loads only for a file that is not nnlm's
        from ..ngram.formats.kenlm_query_spec import open_kenlm_spec

        spec = open_kenlm_spec(text, _fast.MAX_ORDER)
    if spec is None:
        spec = _arpa_spec(text)
    if spec is None:
        return None
    try:
        return _query(spec, serial)
    except (ValueError, TypeError):  # sizes that do not agree: load_model says what
        return None


def _arpa_spec(text: str):
    """The spec of an ARPA file read into KenLM's probing layout in memory, as the kenlm
    module reads one (:mod:`nnlm.ngram.formats.arpa_probing`); None for anything else, or
    for a file that layout cannot hold as it is (pruned, odd): the whole reader then
    loads it, and warns or names the line."""
    from ..models import is_arpa

    if not is_arpa(Path(text)):
        return None
    from ..ngram.formats.arpa_probing import probing_image
    from ..ngram.formats.kenlm_query_spec import kenlm_spec

    built = probing_image(text)
    return None if built is None else kenlm_spec(text, built[0], _fast.MAX_ORDER)


def _model_query(lm, serial: int):
    """The compiled queries of a loaded back-off model (None where there are none: no
    compiler, a network, Stupid Backoff's own penalty, an order above the queries')."""
    if _fast is None or not hasattr(lm, "query_spec") or lm.order > _fast.MAX_ORDER \
            or not getattr(lm, "normalized", True):
        return None
    spec = lm.query_spec()
    return None if spec is None else _query(spec, serial)[0]


class LoadMethod:
    """kenlm's load methods; nnlm reads every model the same way and ignores them."""

    LAZY, POPULATE_OR_LAZY, POPULATE_OR_READ, READ, PARALLEL_READ = range(5)


class ARPALoadComplain:
    """kenlm's ARPA complaint levels; nnlm warns through Python's warnings instead."""

    ALL, EXPENSIVE, NONE = range(3)


def _option(name: str, values: range):
    """A Config attribute that takes only one of kenlm's enum values (ValueError)."""
    def get(self):
        return self.__dict__[name]

    def put(self, value):
        if isinstance(value, bool) or not isinstance(value, int) or value not in values:
            raise ValueError(f"Config.{name} is one of {values.start}..{values.stop - 1} "
                             f"(kenlm's enum), not {value!r}")
        self.__dict__[name] = value

    return property(get, put)


class Config:
    """kenlm's load options. Checked as kenlm's enums; they change nothing here (nnlm
    maps every file the same way and warns through Python's warnings)."""

    load_method = _option("load_method", range(5))
    arpa_complain = _option("arpa_complain", range(3))

    def __init__(self):
        self.load_method = LoadMethod.POPULATE_OR_READ
        self.show_progress = True
        self.arpa_complain = ARPALoadComplain.ALL


def _on_gpu(lm) -> bool:
    """Whether a network of ``lm`` runs on a GPU (where batching States pays)."""
    parts = lm.neural_parts()
    return bool(parts) and next(parts[0].model.parameters()).device.type != "cpu"


class Model:
    """A language model with kenlm's ``Model`` API (see the module docstring)."""

    def __init__(self, path, config: Config | None = None, verify: bool = False):
        """``verify``: check every section of nnlm's mapped files against its checksum
        first (a read of the whole file; kenlm checks nothing, and neither does nnlm's
        opening by default, which reads only the pages that queries touch)."""
        if config is not None and not isinstance(config, Config):
            raise TypeError(f"Argument 'config' has incorrect type (expected Config, got "
                            f"{type(config).__name__})")
        self._serial = next(_serials)
        self._cache: OrderedDict = OrderedDict()  # networks: state -> distribution
        self._pending: dict = {}  # networks: states written, not computed yet (ordered)
        self._verify = bool(verify)
        if verify:
            from ..ngram.store.trie_layout import verifying

            with verifying():
                self._open(path)
        else:
            self._open(path)

    def _open(self, path) -> None:
        opened = None
        if isinstance(path, (str, bytes, os.PathLike)):
            text = os.fspath(path) if isinstance(path, os.PathLike) else _as_str(path)
            self._text = text.decode("utf-8") if isinstance(text, bytes) else text
            self.path = os.path.abspath(self._text).encode("utf-8")
            self._model = None
            opened = _open_file(self._text, self._serial)
        else:
            from ..lm import LanguageModel

            if not isinstance(path, LanguageModel):
                _as_str(path)  # kenlm's TypeError
            self._model, self.path = path, b""
        if opened is not None:  # a trie file, read where it lies: no model, no numpy
            self._fast, self._index, self._order = opened
            self._backoff = True
        else:
            lm = self._lm
            self._order = lm.order
            self._index = lm.vocab.index
            self._backoff = hasattr(lm, "state_lengths")  # null context, minimized states
            self._fast = _model_query(lm, self._serial)
        self._k = self._order - 1
        self._queue_rows = not self._backoff and _on_gpu(self._lm)
        if self._k > MAX_ORDER - 1:
            raise ValueError(f"order {self._order}: the kenlm API holds at most "
                             f"{MAX_ORDER - 1} words of state; for a model that reads "
                             "the whole line (deep, lstm, infgram) use nnlm.Decoder, whose "
                             "states hold any number of words (an LSTM's: its hidden "
                             "state)")
        if self._fast is not None:  # the per-call methods, straight to C
            for name in ("BaseScore", "BaseFullScore", "BeginSentenceWrite", "NullContextWrite",
                         "score"):
                setattr(self, name, getattr(self._fast, name))

    @property
    def _lm(self):
        """The model itself, loaded when first needed (a trie file's queries never do)."""
        if self._model is None:
            from ..models import load_model

            try:
                self._model = load_model(self._text, verify=self._verify)
            except NnlmError as e:
                raise OSError(f"Cannot read model '{self._text}' ({e})") from None
        return self._model

    @property
    def order(self) -> int:
        return self._order

    def __contains__(self, word) -> bool:
        return self._index.get(_as_str(word), UNK_ID) != UNK_ID

    def vocabulary(self) -> list[str]:
        """The model's words, ``<unk>``, ``<s>`` and ``</s>`` included (nnlm's addition
        to kenlm's API: what a decoder's word list is made of)."""
        if self._model is None and isinstance(self._index, dict):  # KenLM's layout, read
            return list(self._index)  # where it lies: its words in id order
        return list(self._lm.vocab.words)

    def __repr__(self) -> str:
        return f"<Model from {os.path.basename(self.path.decode('utf-8')) or self._lm.kind}>"

    def __reduce__(self):
        if not self.path:
            raise TypeError("a Model made from a loaded model cannot be pickled; load it "
                            "from a path")
        return (Model, (self.path,))

    # -- states --------------------------------------------------------------------------
    @functools.cached_property
    def _core(self):
        """The checks, lookups and scores nnlm.Decoder shares (:mod:`nnlm.decoding.core`),
        over the loaded model: the path of networks, of KenLM's probing files, and of
        back-off models where no C compiler built the compiled queries (numpy's side:
        imported only here)."""
        from .core import DecoderCore

        return DecoderCore(self._lm, self._serial)

    def BeginSentenceWrite(self, state: State) -> None:  # noqa: N802 (kenlm's names)
        """Make ``state`` the start of a sentence: the context ``<s>``."""
        self._core.own(state, State, write=True)._words = (BOS_ID,) if self._backoff else \
            (BOS_ID,) * self._k

    def NullContextWrite(self, state: State) -> None:  # noqa: N802
        """Make ``state`` the null context: no words (a network, which has none, reads
        it as the start of a sentence: see the module docstring)."""
        self._core.own(state, State, write=True)._words = ()

    def _contexts(self, histories):
        """One row of k ids per state's words: NO_WORD before a back-off model's words
        (the null context), ``<s>`` before a network's."""
        import numpy as np

        pad = NO_WORD if self._backoff else BOS_ID
        core = self._core
        return np.array([core.context(words, pad) for words in histories],
                        np.int64).reshape(len(histories), self._k)

    def BaseFullScore(self, in_state: State, word: str,  # noqa: N802
                      out_state: State) -> FullScoreReturn:
        """log10 p(word | in_state), the n-gram length and whether ``word`` is unknown;
        ``out_state`` becomes the state after ``word``."""
        import numpy as np

        core = self._core
        core.own(in_state, State, name="in_state")
        core.own(out_state, State, name="out_state")
        wid = core.word_id(word, bos=True)  # <s> too, as kenlm scores it
        words = in_state._words
        if not self._backoff:  # a network: its distribution after this state, cached
            score = self._distribution(words)[wid] if wid != BOS_ID else KENLM_BOS_LOG10
            after = (words + (wid,))[-self._k:] if self._k else ()
            out_state._words = after
            out_state._owner = self._serial
            if self._queue_rows and after not in self._cache \
                    and len(self._pending) < PENDING_ROWS:
                self._pending[after] = None
            return FullScoreReturn(score, self._lm.order, wid == UNK_ID)
        contexts = self._contexts([words])
        targets = np.array([wid], np.int64)
        logp, length = core.scores(contexts, targets, kenlm_bos=True)
        out_state._words = core.kept([words], contexts, targets)[0]
        out_state._owner = self._serial
        return FullScoreReturn(np.float32(logp[0]), length[0], wid == UNK_ID)

    def BaseScore(self, in_state: State, word: str, out_state: State) -> float:  # noqa: N802
        """log10 p(word | in_state); ``out_state`` becomes the state after ``word``."""
        return self.BaseFullScore(in_state, word, out_state).log_prob

    def _distribution(self, words: tuple[int, ...]):
        """float32 log10 p(. | words) over the vocabulary, kept in a bounded LRU cache
        (``CACHE_BYTES``), so a decoder that scores a beam's candidate words one call at a
        time pays one pass per distinct context, not one per word; a miss computes the
        queued States too, in the same batched pass."""
        import numpy as np

        cache = self._cache
        dist = cache.get(words)
        if dist is not None:
            cache.move_to_end(words)
            return dist
        todo = [words] + [w for w in self._pending if w != words and w not in cache]
        self._pending.clear()
        rows = (self._lm.next_logprobs(self._contexts(todo)) * LOG10_E).astype(np.float32)
        keep = max(16, CACHE_BYTES // max(rows[0].nbytes, 1))
        for state_words, row in zip(todo[::-1], rows[::-1]):  # ``words`` ends newest
            cache[state_words] = row
            cache.move_to_end(state_words)
        while len(cache) > keep:
            cache.popitem(last=False)
        return cache[words]

    # -- whole sentences -----------------------------------------------------------------
    def full_scores(self, sentence, bos: bool = True, eos: bool = True):
        """(log10 p, n-gram length, oov) for each word, then ``</s>`` if ``eos`` (its oov
        is always False, as kenlm's)."""
        if self._fast is not None:
            return iter(self._fast.full_scores_list(sentence, bos, eos))
        import numpy as np

        core = self._core
        ids = core.sentence_ids(sentence, bos=True)  # kenlm's split; <s> a word, as kenlm
        targets = ids + [EOS_ID] if eos else ids
        if not targets:
            return iter(())
        k = self._k
        pad = BOS_ID if bos or not self._backoff else NO_WORD
        history = [pad] * k + targets
        contexts = np.array([history[i:i + k] for i in range(len(targets))],
                            np.int64).reshape(len(targets), k)
        logp, length = core.scores(contexts, np.array(targets, np.int64), kenlm_bos=True)
        logp = logp.astype(np.float32)
        oov = [w == UNK_ID for w in ids] + ([False] if eos else [])
        return iter([(float(p), int(n), o) for p, n, o in zip(logp, length, oov)])

    def score(self, sentence, bos: bool = True, eos: bool = True) -> float:
        """log10 p(sentence), ``</s>`` included if ``eos``, conditioned on ``<s>`` if
        ``bos``; summed in float32 as kenlm sums."""
        import numpy as np

        total = np.float32(0)
        for p, _, _ in self.full_scores(sentence, bos, eos):
            total = np.float32(total + np.float32(p))
        return float(total)

    # -- nnlm's additions: many sentences in one call -------------------------------------
    def word_ids(self, words) -> list[int] | None:
        """Each word's id in this model's compiled queries, as :meth:`score` finds it in a
        sentence (``<unk>``'s if unknown; -1 for a string KenLM would not read as one word:
        empty, or holding whitespace); None where the model has no compiled queries (a
        network, no C compiler). Not in kenlm: for :meth:`score_ids`."""
        return None if self._fast is None else self._fast.word_ids(list(words))

    def score_ids(self, ids, bounds, bos: bool = True, eos: bool = True):
        """:meth:`score` of many sentences given as :meth:`word_ids`: sentence i is
        ``ids[bounds[i]:bounds[i + 1]]`` (int32 ids, int64 bounds from 0 to ``len(ids)``);
        float64 array of the float32 sums :meth:`score` gives their text, to the bit.
        No Python runs between words or sentences. Not in kenlm."""
        import numpy as np

        if self._fast is None:
            raise ValueError("score_ids needs the model's compiled queries (a back-off "
                             "model, with nnlm's compiled parts); use score")
        ids = np.ascontiguousarray(ids, np.int32)
        bounds = np.ascontiguousarray(bounds, np.int64)
        out = np.empty(max(len(bounds) - 1, 0), np.float64)
        if len(bounds):
            self._fast.score_ids(ids, bounds, out, bool(bos), bool(eos))
        return out

    def perplexity(self, sentence) -> float:
        """10^(-score / (words + 1)): ``</s>`` is counted (kenlm's ``perplexity``)."""
        from .core import sentence_words

        words = len(sentence_words(sentence)) + 1
        return 10.0 ** (-self.score(sentence) / words)


class LanguageModel(Model):
    """kenlm's backwards-compatibility name for :class:`Model`."""


__all__ = ["ARPALoadComplain", "Config", "FullScoreReturn", "LanguageModel", "LoadMethod",
           "Model", "State"]
