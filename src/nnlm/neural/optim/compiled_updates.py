"""Optimizer updates on the CPU compiled with numba: sparse rows, and small dense tensors.

A sparse gradient (the rows of C a batch gathered; under NCE, the sampled output rows
of U, W and b) arrives uncoalesced: one entry per gather, a row seen twice listed twice.
torch's path sums the duplicates with ``coalesce`` (a sort), then reads the touched rows
of the parameter and of each moment with ``index_select``, updates them with a dozen
elementwise kernels and writes them back with ``index_copy_``. Under NCE each of these
moves only a few hundred rows, so the calls themselves, not the arithmetic, are the cost:
lazy Adam was about a third of an NCE step.

The kernels here do the same update in two passes and no allocation: the first sums the
entries row by row into a scratch buffer (a slot map of the parameter's height finds a
row's slot, so there is no sort), the second updates each touched row of the parameter
and its moments in place. They serve float32 parameters on the CPU whose rows are
contiguous; anything else (float64 tests, CUDA, bf16) takes torch's path, which stays
the reference the tests compare these kernels with.

Small dense tensors have the opposite problem: torch.optim's Adam spends 70-100 us of
Python per step whatever the size, so under NCE, where the only dense tensors are the
hidden layer's H and d (12,050 values), its step was 8% of the whole update.
:func:`adam_dense` updates such a tensor in one call, with the state torch's Adam keeps
for it (so checkpoints and shared Hogwild moments do not change).

The arithmetic is the optimizers' own (``optim.PaperSGD``, ``optim.LazyAdam``, torch's
Adam/AdamW) in float32; rows are summed in the order the gradient lists them, where
``coalesce`` sums them in sorted order, so results agree to float32 rounding, not bit for
bit.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

from ...base.jit_cache import first_call


def supported(p: torch.Tensor, *moments: torch.Tensor) -> bool:
    """Whether the sparse-row kernels can update ``p`` from its sparse gradient, and its
    ``moments`` (Adam's, contiguous), in place."""
    g = p.grad
    return (p.device.type == "cpu" and p.dtype == torch.float32 and p.dim() in (1, 2)
            and p.stride(-1) == 1 and g is not None and g.is_sparse
            and g.dtype == torch.float32 and g.sparse_dim() == 1
            and all(t.is_contiguous() and t.dtype == torch.float32 for t in moments))


def supported_dense(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether :func:`adam_dense` can update ``p`` (float32, CPU, contiguous, with a dense
    gradient) with moments ``m`` and ``v``."""
    g = p.grad
    return (p.device.type == "cpu" and p.dtype == torch.float32
            and g is not None and not g.is_sparse and g.dtype == torch.float32
            and all(t.is_contiguous() and t.dtype == torch.float32 for t in (p, g, m, v)))


class RowScratch:
    """The per-parameter buffers the kernels reuse: a slot map (-1 where a row is not
    in the gradient, restored by every call), the touched rows, their gather counts and
    their summed gradients."""

    def __init__(self, p: torch.Tensor):
        height = p.shape[0]
        self.width = p.shape[1] if p.dim() == 2 else 1
        self.slot = np.full(height, -1, np.int64)
        self.rows = np.empty(height, np.int64)
        self.counts = np.empty(height, np.float64)
        self.buf = np.empty((0, self.width), np.float32)

    def sum_buffer(self, entries: int) -> np.ndarray:
        """Room for ``entries`` distinct rows (at most the gradient's entry count)."""
        need = min(entries, len(self.slot))
        if len(self.buf) < need:
            self.buf = np.empty((max(need, 2 * len(self.buf)), self.width), np.float32)
        return self.buf


def _flat_rows(t: torch.Tensor) -> tuple[np.ndarray, int]:
    """(a 1-D numpy view from ``t``'s first element to the end of its last row, the row
    stride): rows padded in storage (the bf16 output layer pads them to 64 bytes) stay
    unit-stride slices, which the compiled loops vectorize where a strided 2-D view
    would not."""
    t = t.detach()
    stride = t.stride(0) if t.dim() == 2 else 1
    width = t.shape[1] if t.dim() == 2 else 1
    span = (t.shape[0] - 1) * stride + width
    return t.as_strided((span,), (1,)).numpy(), stride


def _entries(p: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(row index, values flattened) of each entry of ``p``'s uncoalesced sparse gradient."""
    g = p.grad
    return g._indices()[0].contiguous().numpy(), g._values().contiguous().view(-1).numpy()


def sgd_update(p: torch.Tensor, scratch: RowScratch, eps: float, wd: float) -> None:
    """The paper's SGD on the rows of ``p``'s sparse gradient: each touched row shrinks
    by eps * wd per gather and moves by -eps times its summed gradient."""
    idx, values = _entries(p)
    param, stride = _flat_rows(p)
    first_call(_sgd_rows, param, stride, scratch.width, idx, values, scratch.slot, scratch.rows,
               scratch.counts, scratch.sum_buffer(len(idx)), np.float32(eps), np.float32(wd))


def adam_update(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, scratch: RowScratch,
                lr: float, betas: tuple[float, float], step: int, eps: float, wd: float,
                decoupled: bool) -> None:
    """Lazy Adam (or AdamW when ``decoupled``) at ``step`` on the rows of ``p``'s sparse
    gradient, moments ``m`` and ``v`` (contiguous) updated in place on the same rows."""
    idx, values = _entries(p)
    param, stride = _flat_rows(p)
    first_call(_adam_rows, param, stride, _flat_rows(m)[0], _flat_rows(v)[0], scratch.width,
               idx, values, scratch.slot, scratch.rows, scratch.counts,
               scratch.sum_buffer(len(idx)), *_adam_scalars(lr, betas, step, eps, wd, decoupled))


def adam_dense(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, lr: float,
               betas: tuple[float, float], step: int, eps: float, wd: float,
               decoupled: bool) -> None:
    """Adam (AdamW when ``decoupled``) at ``step`` on all of ``p`` with its dense gradient."""
    first_call(_adam_dense, p.detach().view(-1).numpy(), p.grad.view(-1).numpy(),
               m.view(-1).numpy(), v.view(-1).numpy(),
               *_adam_scalars(lr, betas, step, eps, wd, decoupled))


KERNELS = ("sgd_rows", "adam_rows", "adam_dense")
_loaded: set[str] = set()


def load(*kernels: str) -> None:
    """Load the named kernels (``KERNELS``) now, from numba's cache or by compiling them,
    through one update of a tiny tensor of the types training passes: their first call
    in a process otherwise takes about 0.4 s (0.9 s with numba's import). Training loads
    them before its clock starts; a Hogwild worker before its first update, which would
    otherwise hold the shared update lock while the other worker waits for it."""
    for name in kernels:
        if name in _loaded:
            continue
        if name not in KERNELS:
            raise ValueError(f"no compiled kernel {name!r}; there are {', '.join(KERNELS)}")
        p = torch.zeros(3, 2)
        m, v = torch.zeros_like(p), torch.zeros_like(p)
        if name == "adam_dense":
            p.grad = torch.ones_like(p)
            adam_dense(p, m, v, 1e-3, (0.9, 0.999), 1, 1e-8, 0.0, True)
        else:
            p.grad = torch.sparse_coo_tensor(torch.tensor([[1, 2, 1]]), torch.ones(3, 2),
                                             p.shape, check_invariants=False)
            if name == "sgd_rows":
                sgd_update(p, RowScratch(p), 1e-3, 0.0)
            else:
                adam_update(p, m, v, RowScratch(p), 1e-3, (0.9, 0.999), 1, 1e-8, 0.0, True)
        _loaded.add(name)


def _adam_scalars(lr: float, betas: tuple[float, float], step: int, eps: float, wd: float,
                  decoupled: bool) -> tuple[np.float32, ...]:
    """The kernels' Adam constants as float32 (so that their arithmetic stays float32):
    lr / (1 - b1^t), b1, b2, 1 - b2^t, eps, the decoupled decay 1 - lr wd (AdamW, else 1)
    and the coupled decay wd (Adam, else 0)."""
    b1, b2 = betas
    f = np.float32
    return (f(lr / (1 - b1 ** step)), f(b1), f(b2), f(1 - b2 ** step), f(eps),
            f(1 - lr * wd if decoupled else 1), f(0 if decoupled else wd))


# error_model="numpy": a float division by zero gives inf instead of raising, which
# leaves no branch in the inner loops and lets LLVM vectorize them (about 6x here)
@njit(cache=True, nogil=True, error_model="numpy")
def _sum_rows(width, idx, values, slot, rows, counts, buf):
    """Sum the entries per row into ``buf``; return how many distinct rows there are."""
    distinct = 0
    for e in range(len(idx)):
        r = idx[e]
        if r < 0 or r >= len(slot):  # never from autograd; a write out of bounds otherwise
            for k in range(distinct):
                slot[rows[k]] = -1  # the slot map stays clean for the next call
            raise IndexError("a sparse gradient names a row outside its parameter")
        s = slot[r]
        if s < 0:
            s = distinct
            slot[r] = s
            rows[s] = r
            counts[s] = 0.0
            buf[s] = 0.0
            distinct += 1
        counts[s] += 1.0
        buf[s] += values[e * width:(e + 1) * width]
    return distinct


@njit(cache=True, nogil=True, error_model="numpy")
def _sgd_rows(param, stride, width, idx, values, slot, rows, counts, buf, eps, wd):
    """All arithmetic in float32 (the scalars come as np.float32), as torch's is."""
    distinct = _sum_rows(width, idx, values, slot, rows, counts, buf)
    for s in range(distinct):
        r = rows[s]
        shrink = np.float32(1.0) - eps * wd * np.float32(counts[s])
        x = param[r * stride:r * stride + width]
        g = buf[s]
        for j in range(width):
            x[j] = x[j] * shrink - eps * g[j]
        slot[r] = -1


@njit(cache=True, nogil=True, error_model="numpy")
def _adam_rows(param, stride, m, v, width, idx, values, slot, rows, counts, buf, step, b1,
               b2, c2, eps, decay, coupled):
    """``step`` = lr / (1 - b1^t), ``c2`` = 1 - b2^t; ``decay`` = 1 - lr wd for AdamW (else
    1) and ``coupled`` = wd for Adam (else 0). All float32, as torch's arithmetic is."""
    distinct = _sum_rows(width, idx, values, slot, rows, counts, buf)
    for s in range(distinct):
        r = rows[s]
        _adam(param[r * stride:r * stride + width], buf[s], m[r * width:(r + 1) * width],
              v[r * width:(r + 1) * width], step, b1, b2, c2, eps, decay, coupled)
        slot[r] = -1


@njit(cache=True, nogil=True, error_model="numpy")
def _adam_dense(param, grad, m, v, step, b1, b2, c2, eps, decay, coupled):
    _adam(param, grad, m, v, step, b1, b2, c2, eps, decay, coupled)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _adam(x, g, m, v, step, b1, b2, c2, eps, decay, coupled):
    """One Adam update of the values ``x`` with gradient ``g``, moments ``m`` and ``v``."""
    a1, a2 = np.float32(1.0) - b1, np.float32(1.0) - b2
    for j in range(len(x)):
        gj = g[j] + coupled * x[j]
        mj = b1 * m[j] + a1 * gj
        vj = b2 * v[j] + a2 * gj * gj
        m[j] = mj
        v[j] = vj
        x[j] = x[j] * decay - step * mj / (np.sqrt(vj / c2) + eps)
