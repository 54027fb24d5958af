"""The layer that runs a job: which device, how many threads, how memory is kept.

Model code never touches process-wide settings; the commands (``nnlm train``, ``eval``,
``score``) and benchmarks call :func:`prepare_process` once, then place their models.

- ``--device cpu`` (the default), ``cuda`` or ``auto`` (CUDA when there is one). Asking
  for CUDA where torch sees none is a one-line error, never a silent fall-back.
- CPU: the thread count (``torch.set_num_threads``) and glibc's allocator thresholds
  (``allocator.keep_freed_memory``: |V|-wide buffers are reused instead of mapped and
  zeroed by the kernel at every step).
"""

from __future__ import annotations

import os

import torch

from ..base.errors import NnlmError, a
from .allocator import keep_freed_memory
from .settings import DEVICES


def resolve_device(name: str | torch.device = "cpu") -> torch.device:
    """torch.device for ``cpu``, ``cuda`` (or ``cuda:N``) or ``auto``."""
    name = str(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else \
                f"built for CUDA {torch.version.cuda}"
            raise NnlmError(f"device={name}: no CUDA device is available (torch "
                            f"{torch.__version__}, {build}); use device=cpu or auto")
        try:
            device = torch.device(name)
        except RuntimeError:
            raise NnlmError(f"device={name}: not a device name (cpu, cuda, cuda:N, auto)") \
                from None
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise NnlmError(f"device={name}: only {torch.cuda.device_count()} CUDA "
                            "device(s) here")
        return device
    if name != "cpu":
        raise NnlmError(f"device={name}: choose from {', '.join(DEVICES)}")
    return torch.device("cpu")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def prepare_process(threads: int | None = None, device: str | torch.device = "cpu"
                    ) -> torch.device:
    """Set the process up for a job on ``device``; returns the resolved device. Under
    torchrun the default thread count is this host's cores over its processes
    (LOCAL_WORLD_SIZE), so P processes on a machine do not fight over its cores."""
    device = resolve_device(device)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    if not threads and local > 1:
        threads = max(1, available_cores() // local)
    if threads:
        torch.set_num_threads(threads)
    if device.type == "cpu":
        keep_freed_memory()
    return device


def native_bf16(device: torch.device) -> bool:
    """Whether bfloat16 products run in hardware here: any GPU torch supports, or an x86
    CPU with AVX-512 BF16 or AMX. Elsewhere torch emulates them, 10-40x slower than
    float32 (measured on an AVX2-only EPYC: mlp1 trained at 71 words/s against 3,000)."""
    if device.type != "cpu":
        return True
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True  # ARM's bf16 instructions: torch's kernels use them where present
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported",
                                                          "_is_amx_tile_supported")]
    return any(check() for check in checks if check is not None)


def bf16_hint(parts: list, tokens: int) -> str | None:
    """A note for a long float32 scoring run on hardware with bfloat16 instructions:
    --bf16 would be about 4x faster there, within the documented tolerance."""
    if not parts or tokens < 50_000 or any(lm.bf16 or lm.self_normalized for lm in parts):
        return None
    device = next(parts[0].model.parameters()).device
    if not native_bf16(device):
        return None
    return ("bf16=True scores about 4x faster on this machine, with perplexity within about "
            "0.01% (per-token log-probabilities within ~0.05)")


def configure_for_scoring(model, device: str | torch.device = "cpu", bf16: bool = False,
                          self_normalized: bool = False, threads: int | None = None) -> list:
    """Place every network inside ``model`` (itself, a mixture's components) on the device
    and set how it scores. Returns those networks' LanguageModels."""
    device = prepare_process(threads, device)
    parts = model.neural_parts()
    if device.type != "cpu" and not parts:
        raise NnlmError(f"device={device}: {a(model.kind)} model runs on the CPU only; "
                        "only neural models use a GPU")
    if self_normalized and not parts:
        raise NnlmError(f"self_normalized=True applies to neural models, not to {a(model.kind)} "
                        "model")
    for lm in parts:
        lm.model.to(device)
        lm.bf16 = bf16
        lm.self_normalized = self_normalized
    return parts
