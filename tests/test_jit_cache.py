"""numba's cache is written by one process at a time (numba issue 4807): a kernel's
first call in a process waits while another process holds the compile lock, and
processes that start together on an empty cache all succeed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


def test_a_first_call_waits_for_the_lock_and_later_calls_do_not(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from nnlm.base.jit_cache import compile_lock\n"
        "with compile_lock():\n    print('held', flush=True); time.sleep(1.5)")],
        env=env, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    waited = subprocess.run([sys.executable, "-c", (
        "import time; from nnlm.base.jit_cache import first_call\n"
        "t = time.monotonic(); first_call(abs, -1); a = time.monotonic() - t\n"
        "t = time.monotonic(); first_call(abs, -1); b = time.monotonic() - t\n"
        "print(a, b)")], env=env, capture_output=True, text=True, timeout=60)
    holder.wait(30)
    first, second = map(float, waited.stdout.split())
    assert first > 0.5 and second < 0.1, waited.stdout
    assert (tmp_path / "nnlm-numba.lock").exists()


@pytest.mark.slow  # four processes compile every kernel, one after another
def test_processes_starting_together_on_an_empty_cache_all_succeed(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n-1.0\t<unk>\n-99\t<s>\t-0.3\n"
                    "-0.5\t</s>\n-0.4\ta\t-0.2\n\n\\2-grams:\n-0.2\t<s> a\n-0.3\ta </s>\n\n"
                    "\\end\\\n")
    code = ("from nnlm.ngram import read_arpa\n"
            "from nnlm.neural.optim import compiled_updates as k\n"
            f"read_arpa({str(arpa)!r}); k.load(*k.KERNELS); print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    start = time.monotonic()
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 and out.strip() == "ok" for p, (out, _) in zip(procs, outs)), \
        [err[-500:] for _, err in outs]
    assert time.monotonic() - start < 600
