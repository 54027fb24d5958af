"""pyctcdecode's API over nnlm's CTC search, for code written against pyctcdecode::

    from nnlm.pyctcdecode import build_ctcdecoder      # was: from pyctcdecode import ...

    decoder = build_ctcdecoder(labels, kenlm_model_path="kn5.bin", alpha=0.5, beta=1.0)
    text = decoder.decode(logits)                       # logits: (frames, labels)

The names, arguments, defaults, return types and exceptions are pyctcdecode 0.5's
(``build_ctcdecoder``, ``BeamSearchDecoderCTC`` with ``decode``, ``decode_beams``,
``decode_batch``, ``decode_beams_batch``, ``partial_decode_beams``, ``reset_params``,
``save_to_dir``/``load_from_dir``; ``Alphabet``, ``LanguageModel``, hotwords), and so
are the beams: the search is pyctcdecode's step for step (:mod:`.prefix_search`).
What differs, each where pyctcdecode cannot:

- ``kenlm_model_path`` takes any model nnlm reads (a KenLM binary or ARPA file, an nnlm
  model directory or file: a network, a mixture), through :mod:`nnlm.kenlm`; no kenlm
  module is needed, and numpy 2 works;
- where ``unigrams`` is not given, they come from the model (pyctcdecode reads them only
  from an ARPA file, and decodes far worse without them from a binary); from an ARPA file
  they are read as pyctcdecode reads them;
- logits holding NaN or +inf are a ValueError (pyctcdecode decodes garbage);
- ``save_to_dir`` never replaces a file: where ``alphabet.json`` or ``language_model``
  exists in the folder it raises FileExistsError.

And one addition: ``log_add`` (default True, pyctcdecode's sum over alignments; False
keeps each merged beam's better score, the best alignment's, as flashlight's decoders
can), saved in ``nnlm_search.json`` only where it is False.
"""

from __future__ import annotations

import functools
import json
import logging
import multiprocessing as mp
import os
import shutil
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import numpy as np

from ...base.checks import flag, integer, number
from ...lm import LanguageModel as NnlmLanguageModel
from ...models import load_model
from ...text.fileio import atomic_write_texts
from .. import kenlm
from ..whole_line import WholeLine, reads_whole_line
from . import compiled
from .alphabet import Alphabet, verify_alphabet_coverage
from .fusion import (
    DEFAULT_ALPHA,
    DEFAULT_BETA,
    DEFAULT_SCORE_LM_BOUNDARY,
    DEFAULT_UNK_LOGP_OFFSET,
    AbstractLanguageModel,
    AbstractLMState,
    KenlmState,
    weight,
)
from .fusion import LanguageModel as FusedLanguageModel
from .hotwords import DEFAULT_HOTWORD_WEIGHT, HotwordScorer
from .prefix_search import (
    DEFAULT_BEAM_WIDTH,
    DEFAULT_MIN_TOKEN_LOGP,
    DEFAULT_PRUNE_BEAMS,
    DEFAULT_PRUNE_LOGP,
    EMPTY_START_BEAM,
    Beam,
    LMBeam,
    LMScoreCache,
    OutputBeam,
    OutputBeamMPSafe,
    PrefixSearch,
    as_beams,
    log_probs,
)

logger = logging.getLogger(__name__)

__all__ = ["AbstractLMState", "AbstractLanguageModel", "Alphabet", "Beam",
           "BeamSearchDecoderCTC", "EMPTY_START_BEAM", "HotwordScorer", "KenlmState",
           "LMBeam", "LanguageModel", "MultiLanguageModel", "MultiLanguageModelState",
           "OutputBeam", "OutputBeamMPSafe", "build_ctcdecoder", "load_unigram_set_from_arpa"]


def load_unigram_set_from_arpa(arpa_path: str) -> set[str]:
    """The words of an ARPA file's unigrams that carry a back-off weight (the lines of
    three fields: pyctcdecode's rule, so ``</s>`` and words without one are left out)."""
    unigrams = set()
    with open(arpa_path, encoding="utf-8") as f:
        started = False
        for line in f:
            line = line.strip()
            if line == "\\1-grams:":
                started = True
            elif line == "\\2-grams:":
                break
            if started and line:
                parts = line.split("\t")
                if len(parts) == 3:
                    unigrams.add(parts[1])
    if not unigrams:
        raise ValueError("No unigrams found in arpa file. Something is wrong with the file.")
    return unigrams


class LanguageModel(FusedLanguageModel):
    """pyctcdecode's ``LanguageModel``: a kenlm-faced model (``nnlm.kenlm.Model`` or the
    kenlm module's) with its word list and weights, saved and loaded as pyctcdecode's."""

    def save_to_dir(self, filepath: str, unigram_encoding: str | None = None) -> None:
        """attrs.json, unigrams.txt and a copy of the model's file (or folder)."""
        folder = Path(filepath)
        source = self._kenlm_model.path.decode("utf-8") if getattr(
            self._kenlm_model, "path", b"") else ""
        if not source:
            raise ValueError("this language model was made from a model in memory, not a "
                             "file: make it from the model's path to save it")
        (folder / self._ATTRS_SERIALIZED_FILENAME).write_text(
            json.dumps(self.serializable_attrs))
        with open(folder / self._UNIGRAMS_SERIALIZED_FILENAME, "w",
                  encoding=unigram_encoding) as f:
            f.writelines(u + "\n" for u in sorted(self._unigram_set))
        target = folder / os.path.basename(source.rstrip("/"))
        if os.path.isdir(source):
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)

    @staticmethod
    def parse_directory_contents(filepath: str) -> dict[str, str]:
        """attrs.json, unigrams.txt and the one model entry of a saved folder."""
        contents = [c for c in os.listdir(filepath)
                    if not c.startswith(".") and not c.startswith("__")]
        if len(contents) != 3:
            raise ValueError(f"Found wrong number of files in directory. Expected 3 files, "
                             f"found {contents}")
        for name, what in ((LanguageModel._ATTRS_SERIALIZED_FILENAME, "attributes"),
                           (LanguageModel._UNIGRAMS_SERIALIZED_FILENAME, "unigrams")):
            if name not in contents:
                raise ValueError(f"did not find {what} file in files: {contents}")
            contents.remove(name)
        return {"json_attrs": os.path.join(filepath, LanguageModel._ATTRS_SERIALIZED_FILENAME),
                "unigrams": os.path.join(filepath, LanguageModel._UNIGRAMS_SERIALIZED_FILENAME),
                "kenlm": os.path.join(filepath, contents[0])}

    @classmethod
    def load_from_dir(cls, filepath: str, unigram_encoding: str | None = None
                      ) -> LanguageModel:
        files = cls.parse_directory_contents(filepath)
        with open(files["json_attrs"]) as f:
            attrs = json.load(f)
        if set(attrs) != set(cls.JSON_ATTRS):
            raise ValueError(f"Expected json serialized attributes to be {cls.JSON_ATTRS} "
                             f"but found {attrs.keys()}")
        with open(files["unigrams"], encoding=unigram_encoding) as f:
            unigrams = f.read().splitlines()
        return cls(open_model(files["kenlm"]), unigrams, **attrs)


class MultiLanguageModelState(AbstractLMState):
    """The states of a :class:`MultiLanguageModel`'s models (pyctcdecode's development
    branch; its release uses a list, as this module does: both are taken)."""

    def __init__(self, states: Sequence) -> None:
        self._states = states

    @property
    def states(self) -> Sequence:
        return self._states


class MultiLanguageModel(AbstractLanguageModel):
    """Several language models, their fused scores averaged (pyctcdecode's); a state is
    the list of theirs."""

    def __init__(self, language_models: Sequence[AbstractLanguageModel]) -> None:
        if len(language_models) < 2:
            raise ValueError("This class is meant to contain at least 2 language models.")
        self._language_models = language_models

    @property
    def order(self) -> int:
        return max(lm.order for lm in self._language_models)

    def get_start_state(self) -> list:
        return [lm.get_start_state() for lm in self._language_models]

    def score_partial_token(self, partial_token: str) -> float:
        return float(np.mean([lm.score_partial_token(partial_token)
                              for lm in self._language_models]))

    def score(self, prev_state, word: str, is_last_word: bool = False) -> tuple[float, list]:
        states = prev_state.states if isinstance(prev_state, MultiLanguageModelState) \
            else prev_state
        if len(states) != len(self._language_models):
            raise ValueError(f"Number of states ({len(states)}) does not match number of "
                             f"language models ({len(self._language_models)}).")
        total, ends = 0.0, []
        for state, lm in zip(states, self._language_models):
            score, end = lm.score(state, word, is_last_word=is_last_word)
            total += score
            ends.append(end)
        return total / len(self._language_models), ends


def valid_pool(pool):
    """The pool where it forks (pyctcdecode's rule); None, with a warning, for spawn."""
    if pool is not None and isinstance(getattr(pool, "_ctx", None), mp.context.SpawnContext):
        logger.warning("Specified pool object has a spawn context, which is not currently "
                       "supported. Falling back to sequential decoding.")
        return None
    return pool


class BeamSearchDecoderCTC:
    """CTC beam search over an alphabet with a language model (or none): pyctcdecode's
    class, its language model kept in the class-level ``model_container`` under the
    decoder's ``_model_key`` as pyctcdecode keeps it (clients read it there)."""

    model_container: dict[bytes, AbstractLanguageModel | None] = {}
    _ALPHABET_SERIALIZED_FILENAME = "alphabet.json"
    _LANGUAGE_MODEL_SERIALIZED_DIRECTORY = "language_model"
    _SEARCH_SERIALIZED_FILENAME = "nnlm_search.json"  # only where log_add is False

    def __init__(self, alphabet: Alphabet, language_model: AbstractLanguageModel | None = None,
                 log_add: bool = True) -> None:
        """``log_add`` (flashlight's name; an attribute too): merged beams sum their
        scores (pyctcdecode's), or with False keep the larger, the best alignment's."""
        self.log_add = flag(log_add, "log_add")
        self._alphabet = alphabet
        self._idx2vocab = dict(enumerate(alphabet.labels))
        self._is_bpe = alphabet.is_bpe
        self._model_key = os.urandom(16)
        BeamSearchDecoderCTC.model_container[self._model_key] = language_model

    def reset_params(self, alpha: float | None = None, beta: float | None = None,
                     unk_score_offset: float | None = None,
                     lm_score_boundary: bool | None = None) -> None:
        """New LM weights without rebuilding the decoder (a float each; a bool)."""
        lm = self._language_model
        if lm is None:
            return
        params = {k: v for k, v in (("alpha", alpha), ("beta", beta),
                                    ("unk_score_offset", unk_score_offset),
                                    ("score_boundary", lm_score_boundary)) if v is not None}
        lm.reset_params(**params)

    @classmethod
    def clear_class_models(cls) -> None:
        cls.model_container = {}

    def cleanup(self) -> None:
        BeamSearchDecoderCTC.model_container.pop(self._model_key, None)

    @property
    def _language_model(self) -> AbstractLanguageModel | None:
        return BeamSearchDecoderCTC.model_container[self._model_key]

    def _search(self) -> PrefixSearch:
        return PrefixSearch(self._alphabet.labels, self._is_bpe, self._language_model,
                            log_add=flag(self.log_add, "log_add"))

    @functools.cached_property
    def _no_hotwords(self) -> HotwordScorer:
        """The scorer of no hotwords, one a decoder (a stream's chunks then share it)."""
        return HotwordScorer.build_scorer([], weight=0.0)

    def _hotword_scorer(self, hotwords, weight: float) -> HotwordScorer:
        """The scorer of ``hotwords``, kept for the next call with the same list (a
        client passes one list utterance after utterance; 1,000 hotwords take 1 ms to
        build, a fifth of a sentence's search without a language model)."""
        if hotwords is None or isinstance(hotwords, str):
            return HotwordScorer.build_scorer(hotwords, weight=weight)
        key = (tuple(hotwords), weight)
        last = self.__dict__.get("_last_hotwords")
        if last is None or last[0] != key:
            last = self._last_hotwords = (key, HotwordScorer.build_scorer(key[0], weight))
        return last[1]

    def __getstate__(self) -> dict:
        """What a pool's worker receives with each task: the decoder without its kept
        hotword scorer, which the worker builds again rather than receive every time."""
        state = dict(self.__dict__)
        state.pop("_last_hotwords", None)
        return state

    def _check_logits_dimension(self, logits) -> None:
        """A (frames, labels) float array, no NaN or +inf (one line naming what is wrong)."""
        shape = getattr(logits, "shape", None)
        if shape is None:
            raise ValueError(f"logits must be a numpy array of shape (time, vocabulary), not "
                             f"{type(logits).__name__}")
        if len(shape) != 2:
            raise ValueError(f"Input logits have {len(shape)} dimensions, but need 2: (time, "
                             "vocabulary)")
        if shape[-1] != len(self._idx2vocab):
            raise ValueError(f"Input logits shape is {shape}, but vocabulary is size "
                             f"{len(self._idx2vocab)}. Need logits of shape: (time, vocabulary)")
        if logits.dtype.kind not in "biuf":
            raise ValueError(f"logits must be numbers, not {logits.dtype}")
        if np.isnan(logits).any() or np.isposinf(logits).any():
            raise ValueError("logits hold NaN or +inf: the acoustic model's output is broken")

    @staticmethod
    def _settings(beam_width, beam_prune_logp, token_min_logp, hotword_weight=0.0):
        integer(beam_width, "beam_width", 1)
        number(beam_prune_logp, "beam_prune_logp", high=0)
        number(token_min_logp, "token_min_logp", high=0)
        weight(hotword_weight, "hotword_weight")

    # -- pyctcdecode's steps, for clients that drive them ----------------------------------
    def _get_lm_beams(self, beams: list[Beam], hotword_scorer: HotwordScorer,
                      cached_lm_scores: LMScoreCache, cached_partial_token_scores: dict,
                      is_eos: bool = False) -> list[LMBeam]:
        return [LMBeam(*b) for b in self._search().lm_beams(
            as_beams(beams), hotword_scorer, cached_lm_scores, cached_partial_token_scores,
            is_eos)]

    def _partial_decode_logits(self, logits, beams, beam_width, beam_prune_logp,
                               token_min_logp, prune_history, hotword_scorer,
                               cached_lm_scores, cached_p_lm_scores, processed_frames=0):
        return [Beam(*b) for b in self._search().partial_decode(
            logits, as_beams(beams), beam_width, beam_prune_logp, token_min_logp, prune_history,
            hotword_scorer, cached_lm_scores, cached_p_lm_scores, processed_frames)]

    def _finalize_beams(self, beams, beam_width, beam_prune_logp, hotword_scorer,
                        cached_lm_scores, cached_p_lm_scores, force_next_word=False,
                        is_end=False) -> list[LMBeam]:
        return [LMBeam(*b) for b in self._search().finalize(
            as_beams(beams), beam_width, beam_prune_logp, hotword_scorer, cached_lm_scores,
            cached_p_lm_scores, force_next_word, is_end)]

    def _decode_logits(self, logits, beam_width, beam_prune_logp, token_min_logp,
                       prune_history, hotword_scorer, lm_start_state=None) -> list[OutputBeam]:
        return self._search().decode(logits, beam_width, beam_prune_logp, token_min_logp,
                                     prune_history, hotword_scorer, lm_start_state)

    def get_starting_state(self) -> tuple[list[Beam], LMScoreCache, dict[str, float]]:
        """The first beam and the score caches a streamed decode carries."""
        return self._search().start()

    # -- decoding ----------------------------------------------------------------------------
    def partial_decode_beams(self, logits, cached_lm_scores: LMScoreCache,
                             cached_p_lm_scores: dict[str, float], beams: list[Beam],
                             processed_frames: int, beam_width: int = DEFAULT_BEAM_WIDTH,
                             beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
                             token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
                             prune_history: bool = DEFAULT_PRUNE_BEAMS,
                             hotword_scorer: HotwordScorer | None = None,
                             force_next_word: bool = False, is_end: bool = False
                             ) -> list[LMBeam]:
        """One chunk of a streamed utterance: the beams after its frames (``beams`` and
        the caches carried from the chunk before, ``processed_frames`` its frames so far)."""
        self._check_logits_dimension(logits)
        self._settings(beam_width, beam_prune_logp, token_min_logp)
        hotword_scorer = hotword_scorer or self._no_hotwords
        search = self._search()
        logits = log_probs(logits)
        out = compiled.partial_decode(search, logits, cached_lm_scores, cached_p_lm_scores,
                                      beams, processed_frames, beam_width, beam_prune_logp,
                                      token_min_logp, prune_history, hotword_scorer,
                                      force_next_word, is_end)
        if out is not None:
            return [LMBeam(*b) for b in out]
        beams = search.partial_decode(logits, as_beams(beams), beam_width, beam_prune_logp,
                                      token_min_logp, prune_history, hotword_scorer,
                                      cached_lm_scores, cached_p_lm_scores, processed_frames)
        return [LMBeam(*b) for b in search.finalize(
            beams, beam_width, beam_prune_logp, hotword_scorer, cached_lm_scores,
            cached_p_lm_scores, force_next_word, is_end)]

    def decode_beams(self, logits, beam_width: int = DEFAULT_BEAM_WIDTH,
                     beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
                     token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
                     prune_history: bool = DEFAULT_PRUNE_BEAMS,
                     hotwords: Iterable[str] | None = None,
                     hotword_weight: float = DEFAULT_HOTWORD_WEIGHT,
                     lm_start_state: AbstractLMState | None = None) -> list[OutputBeam]:
        """The beams of one utterance, best first: text, last LM state, word frames,
        acoustic score, combined score."""
        self._check_logits_dimension(logits)
        self._settings(beam_width, beam_prune_logp, token_min_logp, hotword_weight)
        hotword_scorer = self._hotword_scorer(hotwords, hotword_weight)
        return self._search().decode(log_probs(logits), beam_width, beam_prune_logp,
                                     token_min_logp, prune_history, hotword_scorer,
                                     lm_start_state)

    def _decode_beams_mp_safe(self, logits, beam_width, beam_prune_logp, token_min_logp,
                              prune_history, hotwords, hotword_weight
                              ) -> list[OutputBeamMPSafe]:
        beams = self.decode_beams(logits, beam_width=beam_width,
                                  beam_prune_logp=beam_prune_logp,
                                  token_min_logp=token_min_logp, prune_history=prune_history,
                                  hotwords=hotwords, hotword_weight=hotword_weight)
        return [b.get_mp_safe_beam() for b in beams]

    def decode_beams_batch(self, pool, logits_list, beam_width: int = DEFAULT_BEAM_WIDTH,
                           beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
                           token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
                           prune_history: bool = DEFAULT_PRUNE_BEAMS,
                           hotwords: Iterable[str] | None = None,
                           hotword_weight: float = DEFAULT_HOTWORD_WEIGHT
                           ) -> list[list[OutputBeamMPSafe]]:
        """:meth:`decode_beams` of each utterance, on ``pool`` where it forks: each beam
        (text, word frames, acoustic score, combined score), the LM state left out as
        pyctcdecode 0.5 leaves it."""
        for logits in logits_list:
            self._check_logits_dimension(logits)
        decode = functools.partial(self._decode_beams_mp_safe, beam_width=beam_width,
                                   beam_prune_logp=beam_prune_logp,
                                   token_min_logp=token_min_logp, prune_history=prune_history,
                                   hotwords=hotwords, hotword_weight=hotword_weight)
        pool = valid_pool(pool)
        return [decode(x) for x in logits_list] if pool is None else pool.map(decode,
                                                                               logits_list)

    def decode(self, logits, beam_width: int = DEFAULT_BEAM_WIDTH,
               beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
               token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
               hotwords: Iterable[str] | None = None,
               hotword_weight: float = DEFAULT_HOTWORD_WEIGHT,
               lm_start_state: AbstractLMState | None = None) -> str:
        """The text of one utterance (the best beam, history pruned)."""
        return self.decode_beams(logits, beam_width=beam_width,
                                 beam_prune_logp=beam_prune_logp,
                                 token_min_logp=token_min_logp, prune_history=True,
                                 hotwords=hotwords, hotword_weight=hotword_weight,
                                 lm_start_state=lm_start_state)[0].text

    def decode_batch(self, pool, logits_list, beam_width: int = DEFAULT_BEAM_WIDTH,
                     beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
                     token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
                     hotwords: Iterable[str] | None = None,
                     hotword_weight: float = DEFAULT_HOTWORD_WEIGHT) -> list[str]:
        """:meth:`decode` of each utterance, on ``pool`` where it forks."""
        decode = functools.partial(self.decode, beam_width=beam_width,
                                   beam_prune_logp=beam_prune_logp,
                                   token_min_logp=token_min_logp, hotwords=hotwords,
                                   hotword_weight=hotword_weight)
        pool = valid_pool(pool)
        return [decode(x) for x in logits_list] if pool is None else pool.map(decode,
                                                                               logits_list)

    # -- saving ------------------------------------------------------------------------------
    def save_to_dir(self, filepath: str) -> None:
        """alphabet.json and the language model's folder, into the folder ``filepath``
        (FileExistsError where either is there already: nothing is replaced), and with
        ``log_add`` False, nnlm_search.json saying so (pyctcdecode's layout otherwise)."""
        folder = Path(filepath)
        alphabet = folder / self._ALPHABET_SERIALIZED_FILENAME
        lm_folder = folder / self._LANGUAGE_MODEL_SERIALIZED_DIRECTORY
        search = folder / self._SEARCH_SERIALIZED_FILENAME
        log_add = flag(self.log_add, "log_add")
        for path in (alphabet, lm_folder) + (() if log_add else (search,)):
            if path.exists():
                raise FileExistsError(f"{path} exists; save the decoder into a new folder")
        lm = self._language_model
        if lm is None:
            logger.info("decoder has no language model.")
        else:
            lm_folder.mkdir()
        files = {alphabet: self._alphabet.dumps()}
        if not log_add:
            files[search] = json.dumps({"log_add": False})
        try:
            if lm is not None:
                lm.save_to_dir(str(lm_folder))
            atomic_write_texts(files)  # the files last, all or none: the folder is whole
        except BaseException:
            if lm is not None:
                shutil.rmtree(lm_folder, ignore_errors=True)
            raise

    @staticmethod
    def parse_directory_contents(filepath: str) -> dict[str, str | None]:
        contents = [c for c in os.listdir(filepath)
                    if not c.startswith(".") and not c.startswith("__")]
        name = BeamSearchDecoderCTC._ALPHABET_SERIALIZED_FILENAME
        if name not in contents:
            raise ValueError(f"Could not find alphabet file {name}. Found {contents}")
        contents.remove(name)
        search = _take(contents, filepath, BeamSearchDecoderCTC._SEARCH_SERIALIZED_FILENAME)
        lm_name = BeamSearchDecoderCTC._LANGUAGE_MODEL_SERIALIZED_DIRECTORY
        if contents and lm_name not in contents:
            raise ValueError(f"Count not find language model directory. Looking for "
                             f"{lm_name}, found {contents}")
        return {"alphabet": os.path.join(filepath, name),
                "language_model": os.path.join(filepath, lm_name) if contents else None,
                "search": search}

    @classmethod
    def load_from_dir(cls, filepath: str, unigram_encoding: str | None = None
                      ) -> BeamSearchDecoderCTC:
        files = cls.parse_directory_contents(filepath)
        with open(files["alphabet"]) as f:
            alphabet = Alphabet.loads(f.read())
        lm = None if files["language_model"] is None else LanguageModel.load_from_dir(
            files["language_model"], unigram_encoding=unigram_encoding)
        return cls(alphabet, language_model=lm, log_add=_saved_log_add(files["search"]))

    @classmethod
    def load_from_hf_hub(cls, model_id: str, cache_dir: str | None = None, **kwargs
                         ) -> BeamSearchDecoderCTC:
        """A decoder saved in a Hugging Face Hub repository (``huggingface_hub`` needed),
        cached where pyctcdecode caches it."""
        try:
            from huggingface_hub import snapshot_download  # an optional dependency
        except ImportError:
            raise ImportError("You need to install huggingface_hub to use `load_from_hf_hub`."
                              " See https://pypi.org/project/huggingface-hub/ for "
                              "installation.") from None
        cache_dir = cache_dir or os.path.join(Path.home(), ".cache", "pyctcdecode")
        return cls.load_from_dir(snapshot_download(model_id, cache_dir=cache_dir, **kwargs))


def _take(contents: list[str], folder: str, name: str) -> str | None:
    """The path of ``name`` in ``folder`` where ``contents`` lists it (then no longer),
    else None: nnlm's search settings, where save_to_dir wrote them."""
    if name not in contents:
        return None
    contents.remove(name)
    return os.path.join(folder, name)


def _saved_log_add(path: str | None) -> bool:
    """``log_add`` as save_to_dir wrote it (True where no file says otherwise)."""
    if path is None:
        return True
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a decoder's search settings ({e})") from None
    if not isinstance(saved, dict) or set(saved) != {"log_add"} or \
            not isinstance(saved["log_add"], bool):
        raise ValueError(f'{path}: expected {{"log_add": false}}, found {saved!r}')
    return saved["log_add"]


def build_ctcdecoder(labels: list[str],
                     kenlm_model_path: str | NnlmLanguageModel | None = None,
                     unigrams: Collection[str] | None = None, alpha: float = DEFAULT_ALPHA,
                     beta: float = DEFAULT_BETA,
                     unk_score_offset: float = DEFAULT_UNK_LOGP_OFFSET,
                     lm_score_boundary: bool = DEFAULT_SCORE_LM_BOUNDARY,
                     log_add: bool = True) -> BeamSearchDecoderCTC:
    """A decoder for ``labels`` (the acoustic model's, in logit order) with the model at
    ``kenlm_model_path`` (any model nnlm reads, or one :func:`nnlm.load_model` loaded,
    e.g. a network set to bf16 products; None: no LM) fused at ``alpha`` and ``beta``.
    ``unigrams``: the words partial words are checked against (default: an ARPA file's
    unigrams as pyctcdecode reads them, else the model's vocabulary). ``log_add``
    (nnlm's): False merges beams by the best alignment, not the sum
    (:class:`BeamSearchDecoderCTC`)."""
    log_add = flag(log_add, "log_add")
    model = None
    if isinstance(kenlm_model_path, NnlmLanguageModel):  # nnlm's: a model already loaded
        model = open_loaded(kenlm_model_path)
        unigrams = model_words(model) if unigrams is None else unigrams
    elif kenlm_model_path is not None:
        model = open_model(os.fspath(kenlm_model_path))
        if unigrams is None:
            path = os.fspath(kenlm_model_path)
            unigrams = load_unigram_set_from_arpa(path) if path.endswith(".arpa") else \
                model_words(model)
    alphabet = Alphabet.build_alphabet(labels)
    if unigrams is not None:
        verify_alphabet_coverage(alphabet, unigrams)
    language_model = None if model is None else LanguageModel(
        model, unigrams, alpha=alpha, beta=beta, unk_score_offset=unk_score_offset,
        score_boundary=lm_score_boundary)
    return BeamSearchDecoderCTC(alphabet, language_model, log_add=log_add)


def open_model(path: str):
    """The model at ``path`` with the kenlm module's face: :mod:`nnlm.kenlm`'s ``Model``,
    or, for a network that reads the whole line (lstm, awd, deep, infgram), whose context
    kenlm's States cannot hold, a :class:`~nnlm.decoding.whole_line.WholeLine`."""
    if not os.path.isdir(path):
        return kenlm.Model(path)  # a file: KenLM's or nnlm's, opened where it lies
    return open_loaded(load_model(path))


def open_loaded(lm: NnlmLanguageModel):
    """A loaded nnlm model with the kenlm module's face, as :func:`open_model` gives a
    path's (a network configured as the caller chose: bf16 products, a GPU); saved with
    ``save_to_dir`` from the path it was loaded from."""
    model = WholeLine(lm) if reads_whole_line(lm) else kenlm.Model(lm)
    source = getattr(lm, "loaded_from", None)  # what save_to_dir copies
    model.path = os.path.abspath(source).encode("utf-8") if source is not None else b""
    return model


def model_words(model) -> list[str]:
    """A kenlm-faced model's vocabulary, ``<s>``, ``</s>`` and ``<unk>`` left out."""
    words = model.vocab.words if isinstance(model, WholeLine) else model.vocabulary()
    return [w for w in words if w not in ("<s>", "</s>", "<unk>")]
