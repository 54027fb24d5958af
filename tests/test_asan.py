"""The C extensions built with AddressSanitizer, run over the damaged-file cases.

A damaged mapped file must give one line or wrong numbers, never a read outside its
buffers; the sizes the C code trusts are checked before it runs. This builds
``decoding/_kenlm_query.c``, ``ngram/store/_trie.c``, ``text/_words.c`` (over bytes that
are not UTF-8 and blocks cut anywhere), ``ngram/formats/_arpa_lines.c`` and
``index/_suffix.c`` (the index's searches, damaged shards included) and
``decoding/ctc/_prefix_search.c`` (the CTC search over every alphabet its tests hold) with
``-fsanitize=address``
into a copy of the package, and runs the tests that hand damaged, truncated and odd
files to them (every section flipped, every KenLM layout, values coded as counts
scribbled over, the reliability table) in a process with ASan loaded: any overflow
fails the run with ASan's report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from nnlm.base.doctor import COMPILED

ROOT = Path(__file__).resolve().parents[1]
EXTENSIONS = [name.replace(".", "/") + ".c" for name in COMPILED]  # every compiled part
TESTS = ["tests/test_mapped_files.py", "tests/test_kenlm_module.py",
         "tests/test_ngram_store.py", "tests/test_kenlm_binary.py",
         "tests/test_kenlm_files.py", "tests/test_reliability.py", "tests/test_decoding.py",
         "tests/test_word_blocks.py", "tests/test_arpa_lines.py",
         "tests/test_value_codes.py", "tests/test_index.py", "tests/test_ctc_compiled.py",
         "tests/test_ctc_prefix_search.py", "tests/test_ngram.py", "tests/test_kenlm_write.py",
         "tests/test_arpa_probing.py"]


def _runtime(name: str) -> str | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    found = subprocess.run([gcc, f"-print-file-name={name}"], capture_output=True,
                           text=True).stdout.strip()
    return found if found and Path(found).exists() and found != name else None


@pytest.mark.slow
def test_the_c_extensions_under_address_sanitizer(tmp_path):
    asan, cxx = _runtime("libasan.so"), _runtime("libstdc++.so.6")
    if asan is None or cxx is None:
        pytest.skip("gcc with AddressSanitizer's runtime is not installed")
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for c_file in EXTENSIONS:
        source = src / c_file
        subprocess.run(["gcc", "-shared", "-fPIC", "-fsanitize=address",
                        "-fno-omit-frame-pointer", "-ffp-contract=off", "-O1", "-g",
                        f"-I{include}", str(source),
                        "-o", str(source.with_name(source.stem + suffix))], check=True)
    # ASan first; libstdc++ so that its interception of C++ throws (matplotlib's fonts)
    # finds the real one
    env = {**os.environ, "LD_PRELOAD": f"{asan} {cxx}", "ASAN_OPTIONS": "detect_leaks=0",
           "PYTHONPATH": str(src)}
    probe = subprocess.run([sys.executable, "-c", "import importlib, sys; print(*(importlib."
                            "import_module(m).__file__ for m in sys.argv[1:]))", *COMPILED],
                           env=env, capture_output=True, text=True, cwd=ROOT)
    assert probe.returncode == 0, probe.stderr
    assert all(p.startswith(str(src)) for p in probe.stdout.split()), probe.stdout
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p",
                           "no:cacheprovider", "-m", "not slow", "-k", "not pyctcdecode",
                           *TESTS], env=env, capture_output=True, text=True, cwd=ROOT,
                          timeout=900)
    assert done.returncode == 0, (done.stdout[-3000:] + done.stderr[-3000:])
    assert "AddressSanitizer" not in done.stderr
