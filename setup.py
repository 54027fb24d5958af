"""nnlm's compiled parts (see their sources):

- nnlm.decoding._kenlm_query, the per-call path of nnlm.kenlm (its C API: kenlm_api.h);
- nnlm.decoding.ctc._prefix_search, pyctcdecode's CTC search, scoring words through that
  API;
- nnlm.ngram.store._trie, the lookup loop of the mapped n-gram trie;
- nnlm.index._suffix, the suffix array's searches;
- nnlm.text._words, a corpus's lines split into numbered words;
- nnlm.ngram.formats._arpa_lines, ARPA's lines formatted;
- nnlm.ngram.formats._arpa_scan, ARPA's n-gram lines read into arrays;
- nnlm.ngram.formats._kenlm_build, KenLM's word hashes and probing tables placed.

Everything else is in pyproject.toml. ``optional``: without a C compiler the install
still succeeds and each answers from its Python or numpy path, slower."""

import sys

from setuptools import Extension, setup

# each storage layout's reader (its level tuple, run pointers, values, vocabulary table)
PORTABLE = "src/nnlm/base/portable.h"  # the builtins' fallbacks for other compilers
HEADERS = ["src/nnlm/ngram/store/pointers.h", "src/nnlm/ngram/store/values.h",
           "src/nnlm/ngram/store/vocab_hash.h", "src/nnlm/ngram/store/trie_level.h",
           "src/nnlm/ngram/store/hash_level.h", "src/nnlm/ngram/store/take_bytes.h",
           "src/nnlm/ngram/formats/kenlm_probing.h", "src/nnlm/ngram/formats/kenlm_trie.h",
           "src/nnlm/ngram/store/value_codes.h", PORTABLE]
# value_codes.h repeats numpy's float64 sums one by one: no fused multiply-adds (MSVC's
# default, /fp:precise, does not fuse them either)
EXACT = ["/O2"] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]
FAST = ["/O2"] if sys.platform == "win32" else ["-O3"]

KENLM_API = "src/nnlm/decoding/kenlm_api.h"

setup(ext_modules=[Extension("nnlm.decoding._kenlm_query",
                             ["src/nnlm/decoding/_kenlm_query.c"], depends=HEADERS + [KENLM_API],
                             extra_compile_args=EXACT, optional=True),
                   # its sums and products are Python's, in its order: no contractions
                   Extension("nnlm.decoding.ctc._prefix_search",
                             ["src/nnlm/decoding/ctc/_prefix_search.c"], depends=[KENLM_API],
                             extra_compile_args=EXACT, optional=True),
                   Extension("nnlm.ngram.store._trie", ["src/nnlm/ngram/store/_trie.c"],
                             depends=HEADERS, extra_compile_args=EXACT, optional=True),
                   Extension("nnlm.index._suffix", ["src/nnlm/index/_suffix.c"],
                             depends=[PORTABLE], extra_compile_args=FAST, optional=True),
                   Extension("nnlm.text._words", ["src/nnlm/text/_words.c"],
                             extra_compile_args=FAST, optional=True),
                   Extension("nnlm.ngram.formats._arpa_lines",
                             ["src/nnlm/ngram/formats/_arpa_lines.c"],
                             extra_compile_args=EXACT, optional=True),
                   Extension("nnlm.ngram.formats._arpa_scan",
                             ["src/nnlm/ngram/formats/_arpa_scan.c"],
                             extra_compile_args=EXACT, optional=True),
                   Extension("nnlm.ngram.formats._kenlm_build",
                             ["src/nnlm/ngram/formats/_kenlm_build.c"],
                             extra_compile_args=FAST, optional=True)])
