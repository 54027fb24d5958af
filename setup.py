"""The one compiled part of nnlm: nnlm._kenlm_query, the per-call path of nnlm.kenlm (see
its source). Everything else is in pyproject.toml. ``optional``: without a C compiler the
install still succeeds and nnlm.kenlm answers from its Python path, slower."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nnlm._kenlm_query", ["src/nnlm/_kenlm_query.c"],
                             extra_compile_args=["-O3"], optional=True)])
