"""``nnlm serve``: nnlm's models over HTTP (FastAPI and uvicorn).

Endpoints (the spec is at ``/openapi.json``, a page to explore the models at ``/``):

* ``POST /v1/score``: log10 probabilities per token and per text, as ``nnlm score`` and
  kenlm's ``full_scores`` give them;
* ``POST /v1/next``: the k most likely next words after a context;
* ``POST /v1/completions``: OpenAI's legacy completions (``echo`` + ``logprobs`` scores
  a prompt as lm-evaluation-harness asks; ``max_tokens`` samples), with vLLM's
  ``/tokenize``, ``/detokenize`` and ``/tokenizer_info`` beside it;
* ``POST /v1/embed`` and ``/v1/neighbors``: sentence embeddings and nearest words from a
  neural model's feature vectors C;
* ``GET /v1/models``, ``/health``.

Layers: :mod:`.registry` loads and names the models, :mod:`.batching` merges concurrent
requests' model calls, :mod:`.work` computes each answer, :mod:`.app` is HTTP only, and
:mod:`.runner` starts uvicorn.
"""
