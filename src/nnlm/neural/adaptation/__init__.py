"""Test-time adaptation of a network: what it does with the text it has already scored.

Both read the evaluated text in order, and each position's probability uses only the
positions before it, so the numbers are perplexities; but they are not the static
model's, and are reported apart from it, as the literature does:

- ``cache.py``: the neural cache of Grave, Joulin & Usunier (2017), *Improving Neural
  Language Models with a Continuous Cache*: the last L positions' hidden vectors z and
  the words that followed them vote for the next word;
- ``dynamic.py``: dynamic evaluation (Krause, Kahembwe, Murray & Renals 2018, *Dynamic
  Evaluation of Neural Sequence Models*): after each segment is scored, a gradient step
  on it, pulled back toward the trained weights;
- ``hidden.py``: z and the exact log-probabilities of a run of lines, which both need;
- ``choose.py``: their settings chosen on a validation text;
- ``mixed.py``: a mixture whose one network is adapted, its weights fitted again.
"""

from .cache import CacheSettings, cache_logprobs, with_cache
from .choose import adapt, adapted_logprobs, choose_settings
from .dynamic import DynamicSettings, dynamic_logprobs
from .mixed import adapted_mixture_logprobs

__all__ = ["CacheSettings", "DynamicSettings", "adapt", "adapted_logprobs",
           "adapted_mixture_logprobs", "cache_logprobs", "choose_settings",
           "dynamic_logprobs", "with_cache"]
