"""Optimizers for any network of the family: the paper's SGD and Adam/AdamW.

Paper SGD (Bengio et al. 2003, section 2): stochastic gradient ascent on the
log-likelihood with learning rate eps_t = eps_0 / (1 + r t), t the number of updates,
and weight decay lambda on the weights (C, H, U, W) but not on the biases (b, d). The loss
of a minibatch is *summed* over its B examples, so eps_0 is per example as in the paper,
and the decay is applied once per example: a step shrinks dense weights by
eps_t * lambda * B, and a sparsely updated row (a row of C seen in the batch; under NCE
an output row that was sampled) by eps_t * lambda * (the number of times the batch
gathered it).

Adam / AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019): torch's fused implementation
for dense gradients. Parameters whose gradients are sparse (the rows of C and, under NCE,
the output rows and biases) get *lazy* Adam: the moments and values of the rows present
in the gradient are updated, the others left as they are (as TensorFlow's LazyAdam and
torch's SparseAdam do), so a step costs O(rows touched) instead of O(|V|).

Sparse updates of float32 CPU parameters run in compiled kernels (``compiled_updates``:
no sort, no allocation, one pass over the rows), and so do Adam's updates of small dense
float32 CPU tensors (torch.optim's per-call overhead exceeds their arithmetic); other
parameters take torch's path, which the tests hold the kernels to.

Both speak one small protocol the Trainer uses: ``step(t, batch_size)``, ``zero_grad()``,
``lr_at(t)`` / ``scale_lr(f)``, and ``state()`` / ``load_state(info, tensors)`` (JSON + named
tensors for safetensors: no pickle).
"""

from __future__ import annotations

import torch

from ..networks.network import Network


def _row_counts(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, summed values, gathers per row) of an uncoalesced sparse gradient."""
    idx = grad._indices()[0]
    g = grad.coalesce()
    rows = g.indices()[0]
    counts = torch.bincount(idx, minlength=grad.shape[0]).index_select(0, rows)
    counts = counts.to(g.values().dtype)
    return rows, g.values(), counts


#: dense tensors up to this many values are cheaper in the compiled kernel (one thread)
#: than in torch.optim's step (70-100 us of Python a call); larger ones are worth torch's
#: fused, multithreaded kernel
SMALL_DENSE = 1 << 16


class _Scratch:
    """Per-parameter buffers of the compiled sparse-row kernels, made on first use."""

    def __init__(self):
        self.buffers = {}

    def kernels(self, p: torch.Tensor, *moments: torch.Tensor):
        """(the kernel module, ``p``'s buffers) when the kernels can update ``p`` (and
        its ``moments``) from its sparse gradient, else None."""
        if p.device.type != "cpu":
            return None
        from . import compiled_updates as kernels  # numba: loaded only where used

        if not kernels.supported(p, *moments):
            return None
        if id(p) not in self.buffers:
            self.buffers[id(p)] = kernels.RowScratch(p)
        return kernels, self.buffers[id(p)]


def _load_kernels(params, *kernels: str) -> None:
    """Load the compiled kernels now where ``params`` (some tensors) are ones they serve."""
    if any(p.device.type == "cpu" and p.dtype == torch.float32 for p in params):
        from . import compiled_updates  # numba: loaded only where used

        compiled_updates.load(*kernels)


class PaperSGD:
    def __init__(self, model: Network, lr: float, lr_decay: float, weight_decay: float,
                 sparse: list[torch.Tensor] = ()):
        self.model, self.lr0, self.lr_decay, self.weight_decay = model, lr, lr_decay, weight_decay
        self.scale = 1.0  # multiplied down by plateau decay
        self.scratch = _Scratch()
        self.sparse = list(sparse)  # the parameters whose gradients will be sparse

    def load_kernels(self) -> None:
        """Load the compiled sparse-row update now if a step will use it (see
        ``compiled_updates.load``)."""
        _load_kernels(self.sparse, "sgd_rows")

    def lr_at(self, t: int) -> float:
        return self.scale * self.lr0 / (1.0 + self.lr_decay * t)

    def scale_lr(self, factor: float) -> None:
        self.scale *= factor

    @torch.no_grad()
    def step(self, t: int, batch_size: int) -> None:
        """One update at step ``t`` for a batch of ``batch_size`` summed examples."""
        eps = self.lr_at(t)
        m = self.model
        for p in m.weights():
            self._update(p, eps, self.weight_decay, batch_size)
        for p in m.biases():
            self._update(p, eps, 0.0, batch_size)

    def _update(self, p: torch.Tensor, eps: float, wd: float, batch_size: int) -> None:
        if p.grad is None:
            return
        if not p.grad.is_sparse:
            if wd:
                p.mul_(1.0 - eps * wd * batch_size)
            p.add_(p.grad, alpha=-eps)
            return
        compiled = self.scratch.kernels(p)
        if compiled:
            kernels, buffers = compiled
            kernels.sgd_update(p, buffers, eps, wd)
            return
        rows, values, counts = _row_counts(p.grad)
        if wd:
            shrink = (1.0 - eps * wd * counts).view(-1, *([1] * (p.dim() - 1)))
            p.index_copy_(0, rows, p.index_select(0, rows).mul_(shrink).sub_(values, alpha=eps))
        else:
            p.index_add_(0, rows, values, alpha=-eps)

    def zero_grad(self) -> None:
        for p in self.model.parameters():
            p.grad = None

    def state(self) -> tuple[dict, dict[str, torch.Tensor]]:
        return {"scale": self.scale}, {}

    def load_state(self, info: dict, tensors: dict[str, torch.Tensor]) -> None:
        self.scale = float(info["scale"])


class LazyAdam:
    """Adam / AdamW on the rows of sparse gradients only (see the module docstring)."""

    def __init__(self, groups: list[dict], lr: float, decoupled: bool,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        self.param_groups = [{"params": g["params"], "weight_decay": g["weight_decay"],
                              "lr": lr} for g in groups]
        self.decoupled, self.betas, self.eps = decoupled, betas, eps
        # a tensor, so that Hogwild workers sharing the moments share the count too
        self.step_count = torch.zeros((), dtype=torch.int64)
        self.moments = {id(p): (torch.zeros_like(p), torch.zeros_like(p))
                        for g in self.param_groups for p in g["params"]}
        self.scratch = _Scratch()

    @property
    def steps(self) -> int:
        return int(self.step_count)

    @steps.setter
    def steps(self, value: int) -> None:
        self.step_count.fill_(value)

    @torch.no_grad()
    def step(self) -> None:
        self.step_count += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.steps, 1 - b2 ** self.steps
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m, v = self.moments[id(p)]
                compiled = self.scratch.kernels(p, m, v)
                if compiled:
                    kernels, buffers = compiled
                    kernels.adam_update(p, m, v, buffers, lr, self.betas, self.steps,
                                        self.eps, wd, self.decoupled)
                    continue
                g = p.grad.coalesce()
                rows, gv = g.indices()[0], g.values()
                # row-wise kernels (index_select / index_copy_), not advanced indexing
                value = p.index_select(0, rows)
                if wd and not self.decoupled:
                    gv = gv + wd * value
                mr = m.index_select(0, rows).mul_(b1).add_(gv, alpha=1 - b1)
                vr = v.index_select(0, rows).mul_(b2).addcmul_(gv, gv, value=1 - b2)
                m.index_copy_(0, rows, mr)
                v.index_copy_(0, rows, vr)
                if wd and self.decoupled:
                    value.mul_(1 - lr * wd)
                value.addcdiv_(mr, vr.div_(c2).sqrt_().add_(self.eps), value=-lr / c1)
                p.index_copy_(0, rows, value)

    def params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]


class AdamOptimizer:
    """Adam or AdamW, weight decay on weights only; ``sparse`` parameters get LazyAdam."""

    def __init__(self, model: Network, name: str, lr: float, weight_decay: float,
                 sparse: list[torch.Tensor] = ()):
        self.model = model
        sparse_ids = {id(p) for p in sparse}
        groups = [(model.weights(), weight_decay), (model.biases(), 0.0)]
        dense = [{"params": [p for p in ps if id(p) not in sparse_ids], "weight_decay": wd}
                 for ps, wd in groups]
        lazy = [{"params": [p for p in ps if id(p) in sparse_ids], "weight_decay": wd}
                for ps, wd in groups]
        dense = [g for g in dense if g["params"]]
        lazy = [g for g in lazy if g["params"]]
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        self.dense = None
        if dense:
            try:
                # fused: one kernel per tensor, ~5x faster; capturable on a GPU: its step
                # counts stay on the device, so a CUDA graph can hold the update
                self.dense = cls(dense, lr=lr, fused=True,
                                 capturable=dense[0]["params"][0].is_cuda)
            except (RuntimeError, TypeError, ValueError):
                self.dense = cls(dense, lr=lr)
        self.lazy = LazyAdam(lazy, lr, decoupled=name == "adamw") if lazy else None

    def load_kernels(self) -> None:
        """Load the compiled updates a step will use now (see ``compiled_updates.load``):
        lazy Adam's sparse rows, and Adam on the small dense tensors."""
        if self.lazy:
            _load_kernels(self.lazy.params(), "adam_rows")
        if self.dense:
            _load_kernels([p for g in self.dense.param_groups for p in g["params"]
                           if p.numel() <= SMALL_DENSE], "adam_dense")

    @property
    def param_groups(self) -> list[dict]:
        return [*(self.dense.param_groups if self.dense else []),
                *(self.lazy.param_groups if self.lazy else [])]

    def lr_at(self, t: int = 0) -> float:
        """The current step size (plateau decay included; Adam has no schedule in t)."""
        return self.param_groups[0]["lr"]

    def scale_lr(self, factor: float) -> None:
        for group in self.param_groups:
            group["lr"] *= factor

    def step(self, t: int = 0, batch_size: int = 0) -> None:
        if self.dense and self._compiled_dense_step():
            self.dense.step()
        if self.lazy:
            self.lazy.step()

    @torch.no_grad()
    def _compiled_dense_step(self) -> int:
        """Update the small dense float32 CPU tensors with the compiled kernel, in the
        state torch's Adam keeps for them, and take their gradients away so that torch's
        step skips them; return how many tensors with gradients are left for it."""
        left = 0
        decoupled = isinstance(self.dense, torch.optim.AdamW)
        for group in self.dense.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.device.type != "cpu" or p.numel() > SMALL_DENSE:
                    left += 1
                    continue
                from . import compiled_updates as kernels  # numba: loaded only where used

                state = self._dense_state(p)
                if not kernels.supported_dense(p, state["exp_avg"], state["exp_avg_sq"]):
                    left += 1
                    continue
                state["step"] += 1
                kernels.adam_dense(p, state["exp_avg"], state["exp_avg_sq"], group["lr"],
                                   group["betas"], int(state["step"]), group["eps"],
                                   group["weight_decay"], decoupled)
                p.grad = None
        return left

    def _dense_state(self, p: torch.Tensor) -> dict:
        """torch's Adam state of ``p`` (step, moments), created as its first step would."""
        state = self.dense.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def zero_grad(self) -> None:
        for p in self.model.parameters():
            p.grad = None

    #: the per-parameter state of torch's Adam, in the order ``share_memory`` lists it
    DENSE_STATE = ("step", "exp_avg", "exp_avg_sq")

    def share_memory(self) -> list[torch.Tensor]:
        """Move the moments and step counts to shared memory (creating them, as torch
        would at the first step, if none has run) and list them in a fixed order: what
        Hogwild workers adopt with ``use_shared``, so that all of them update one set of
        moments, as one process would."""
        tensors = []
        if self.dense:
            for group in self.dense.param_groups:
                for p in group["params"]:
                    state = self._dense_state(p)
                    tensors += [state[k].share_memory_() for k in self.DENSE_STATE]
        if self.lazy:
            for p in self.lazy.params():
                tensors += [t.share_memory_() for t in self.lazy.moments[id(p)]]
            tensors.append(self.lazy.step_count.share_memory_())
        return tensors

    def use_shared(self, tensors: list[torch.Tensor]) -> None:
        """Make ``tensors`` (another process's ``share_memory``) this optimizer's state."""
        it = iter(tensors)
        if self.dense:
            for group in self.dense.param_groups:
                for p in group["params"]:
                    self.dense.state[p] = {k: next(it) for k in self.DENSE_STATE}
        if self.lazy:
            for p in self.lazy.params():
                self.lazy.moments[id(p)] = (next(it), next(it))
            self.lazy.step_count = next(it)

    def state(self) -> tuple[dict, dict[str, torch.Tensor]]:
        info, tensors = {}, {}
        if self.dense:
            info["dense"], dense_tensors = _flatten_optimizer(self.dense.state_dict())
            tensors.update({f"dense.{k}": v for k, v in dense_tensors.items()})
        if self.lazy:
            info["lazy"] = {"steps": self.lazy.steps,
                            "lr": [g["lr"] for g in self.lazy.param_groups]}
            for i, p in enumerate(self.lazy.params()):
                m, v = self.lazy.moments[id(p)]
                tensors[f"lazy.{i}.exp_avg"], tensors[f"lazy.{i}.exp_avg_sq"] = m, v
        return info, tensors

    def load_state(self, info: dict, tensors: dict[str, torch.Tensor]) -> None:
        if self.dense:
            dense = {k[len("dense."):]: v for k, v in tensors.items() if k.startswith("dense.")}
            self.dense.load_state_dict(_unflatten_optimizer(info["dense"], dense))
        if self.lazy:
            self.lazy.steps = int(info["lazy"]["steps"])
            for g, lr in zip(self.lazy.param_groups, info["lazy"]["lr"]):
                g["lr"] = float(lr)
            for i, p in enumerate(self.lazy.params()):
                m, v = self.lazy.moments[id(p)]
                m.copy_(tensors[f"lazy.{i}.exp_avg"])
                v.copy_(tensors[f"lazy.{i}.exp_avg_sq"])


def grad_norm(model: Network) -> float:
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.coalesce().values() if p.grad.is_sparse else p.grad
            total += float(g.pow(2).sum())
    return total ** 0.5


@torch.no_grad()
def clip_gradients(model: Network, max_norm: float) -> float:
    norm = grad_norm(model)
    if norm > max_norm:
        scale_gradients(model, max_norm / (norm + 1e-6))
    return norm


@torch.no_grad()
def scale_gradients(model: Network, factor: float) -> None:
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(factor)


def _flatten_optimizer(state: dict) -> tuple[dict, dict[str, torch.Tensor]]:
    """torch optimizer state -> (JSON-able dict, named tensors) for safetensors."""
    tensors, info = {}, {"param_groups": state["param_groups"], "state": {}}
    for idx, entry in state["state"].items():
        info["state"][str(idx)] = {}
        for k, v in entry.items():
            if torch.is_tensor(v):
                tensors[f"{idx}.{k}"] = v.contiguous()
                info["state"][str(idx)][k] = "__tensor__"
            else:
                info["state"][str(idx)][k] = v
    return info, tensors


def _unflatten_optimizer(info: dict, tensors: dict) -> dict:
    state = {}
    for idx, entry in info["state"].items():
        state[int(idx)] = {k: tensors[f"{idx}.{k}"] if v == "__tensor__" else v
                           for k, v in entry.items()}
    return {"param_groups": info["param_groups"], "state": state}
