# The README's two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# the CPU wheel of torch this project is tested with; override for a CUDA build
TORCH  ?= torch==2.13.0

.PHONY: demo test test-slow test-all lint docs clean pyctcdecode-env plain-env wheels wheels-test

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[all,dev]"
	@# KenLM's Python module: an independent oracle for the ARPA tests (they skip without it)
	$(BIN)/python -m pip install --quiet kenlm || echo "kenlm could not be built: its tests will skip"
	@# flashlight-text, the decoder behind torchaudio's ctc_decoder, with its own KenLM
	@# class: the oracle of nnlm's adapter (tests/test_flashlight.py skips without it)
	$(BIN)/python -m pip install --quiet flashlight-text || echo "flashlight-text could not be installed: its tests will skip"
	@# infini-gram's engine and indexer: the oracle of nnlm's suffix-array index
	$(BIN)/python -m pip install --quiet infini-gram || echo "infini-gram could not be installed: its tests will skip"
	@# lm-evaluation-harness's API client, a real client of nnlm serve: the package without
	@# its training stack (transformers, datasets), and the three libraries its client uses
	$(BIN)/python -m pip install --quiet --no-deps lm_eval && \
	  $(BIN)/python -m pip install --quiet aiohttp tenacity requests || \
	  echo "lm_eval could not be installed: its server test will skip"
	@# transformers, whose Wav2Vec2ProcessorWithLM decodes through pyctcdecode: the client
	@# of nnlm.pyctcdecode in tests/test_pyctcdecode_api.py (which skips without it)
	$(BIN)/python -m pip install --quiet transformers || echo "transformers could not be installed: its test will skip"
	@# DataTrove, whose perplexity stage nnlm filter replaces: its KenlmModel is the oracle
	@# of tests/test_filter.py (which skips those cases without it)
	$(BIN)/python -m pip install --quiet datatrove || echo "datatrove could not be installed: its tests will skip"
	@# Ray Data, whose map_batches runs nnlm.integrations.ray's class (a slow test)
	$(BIN)/python -m pip install --quiet "ray[data]" || echo "ray could not be installed: its test will skip"
	@# numba's cache of the compiled optimizer updates, built once here: processes that
	@# start together (torchrun ranks, --workers) then load it instead of writing it at
	@# the same moment, which can crash one of them (numba issue 4807)
	$(BIN)/python -c "from nnlm.neural.optim import compiled_updates as k; k.load(*k.KERNELS)"
	touch $@

# pyctcdecode, the CTC decoder most Python speech systems use with KenLM, as a real client
# of nnlm.decoding.kenlm and of nnlm's PyctcdecodeLM (tests/test_kenlm_module.py): it pins
# numpy below 2, so it gets its own environment, with the kenlm module beside it as the
# oracle and torch's CPU wheel for the networks
PYCTC := .venv-pyctcdecode
$(PYCTC)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(PYCTC)
	$(PYCTC)/bin/python -m pip install --quiet --upgrade pip
	$(PYCTC)/bin/python -m pip install --quiet "numpy<2" pyctcdecode kenlm numba tqdm
	$(PYCTC)/bin/python -m pip install --quiet "numpy<2" transformers || echo "no transformers: its pyctcdecode test will skip"
	$(PYCTC)/bin/python -m pip install --quiet "$(TORCH)" safetensors || echo "no torch: the network decodes will skip"
	$(PYCTC)/bin/python -m pip install --quiet --no-deps -e .
	touch $@

pyctcdecode-env: $(PYCTC)/.installed

# nnlm as a user installs it without the neural extra (pip install ., not editable): the
# package's files, the count-based side and the one-line refusal of neural commands are
# tested from it (tests/test_extras.py; it skips when this environment is absent)
PLAIN := .venv-plain
$(PLAIN)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(PLAIN)
	$(PLAIN)/bin/python -m pip install --quiet --upgrade pip
	$(PLAIN)/bin/python -m pip install --quiet .
	touch $@

plain-env: $(PLAIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/nnlm demo

# the fast part, on up to 4 cores at once (pytest-xdist; about three minutes on 2 cores);
# test-slow: what carries the slow marker (Brown, training), one test at a time
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
test: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not slow" -n $(JOBS)

test-slow: $(BIN)/.installed
	$(BIN)/python -m pytest -m slow

test-all: $(BIN)/.installed
	$(BIN)/python -m pytest

# the documentation site in site/ (MkDocs Material; the API pages from the docstrings)
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# manylinux wheels for each CPython 3.10-3.13 found (pyenv's, or PYTHONS="..."), in dist/;
# wheels-test: each in a fresh venv, the core's tests (numpy 1.26 with the oldest Python)
wheels:
	.ci/wheels build

wheels-test: wheels
	.ci/wheels test

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests bench

clean:
	rm -rf $(VENV) $(PYCTC) $(PLAIN) runs site .pytest_cache dist build/wheels
