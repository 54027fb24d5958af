"""The compiled optimizer updates (nnlm.neural.optim.compiled_updates) against torch's own:
the sparse-row paths of PaperSGD and LazyAdam with the kernels switched off, and
torch.optim.Adam / AdamW on full or dense gradients."""

from __future__ import annotations

import pytest
import torch

from nnlm.neural.optim import compiled_updates
from nnlm.neural.optim import optimizers as optim
from nnlm.neural.optim.optimizers import AdamOptimizer, LazyAdam, PaperSGD, _Scratch


def torch_path(monkeypatch):
    monkeypatch.setattr(_Scratch, "kernels", lambda self, p, *moments: None)


def sparse_grad(shape, rows, seed):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn((len(rows), *shape[1:]), generator=g)
    return torch.sparse_coo_tensor(torch.tensor(rows)[None], values, shape,
                                   check_invariants=True)


def parameters(kind):
    """A float32 parameter of each layout the kernels serve: 2-D contiguous, 2-D with rows
    padded in storage (as the bf16 output layer's), 1-D (biases)."""
    torch.manual_seed(0)
    if kind == "padded":
        return torch.nn.Parameter(torch.randn(10, 8)[:, :5])
    return torch.nn.Parameter(torch.randn(10, 5) if kind == "rows" else torch.randn(10))


ROWS = [[4, 0, 4, 7, 4], [8, 1, 2], [3, 3, 3, 0, 5, 6, 5]]  # duplicates summed; 9 untouched


class Net:
    """What PaperSGD needs of a network: weights and biases."""

    def __init__(self, w, b):
        self.w, self.b = w, b

    def weights(self):
        return [self.w]

    def biases(self):
        return [self.b]


@pytest.mark.parametrize("kind", ["rows", "padded"])
@pytest.mark.parametrize("wd", [0.0, 0.3])
def test_sparse_sgd_kernel_equals_torch_path(monkeypatch, kind, wd):
    runs = []
    for compiled in (True, False):
        with monkeypatch.context() as mp:
            if not compiled:
                torch_path(mp)
            w, b = parameters(kind), parameters("bias")
            sgd = PaperSGD(Net(w, b), lr=0.1, lr_decay=0.5, weight_decay=wd)
            for t, rows in enumerate(ROWS):
                w.grad = sparse_grad(w.shape, rows, t)
                b.grad = sparse_grad(b.shape, rows, t + 10)
                sgd.step(t, batch_size=4)
            runs.append((w.detach().clone(), b.detach().clone()))
            if compiled:
                assert sgd.scratch.buffers, "the kernels did not run"
                assert all((s.slot == -1).all() for s in sgd.scratch.buffers.values())
    (w1, b1), (w2, b2) = runs
    assert torch.allclose(w1, w2, rtol=1e-6, atol=1e-6)
    assert torch.allclose(b1, b2, rtol=1e-6, atol=1e-6)
    assert not torch.equal(w1, parameters(kind))  # something moved


@pytest.mark.parametrize("kind", ["rows", "padded", "bias"])
@pytest.mark.parametrize("decoupled", [True, False])
def test_lazy_adam_kernel_equals_torch_path(monkeypatch, kind, decoupled):
    runs = []
    for compiled in (True, False):
        with monkeypatch.context() as mp:
            if not compiled:
                torch_path(mp)
            p = parameters(kind)
            lazy = LazyAdam([{"params": [p], "weight_decay": 0.1}], lr=0.01,
                            decoupled=decoupled)
            for t, rows in enumerate(ROWS * 2):
                p.grad = sparse_grad(p.shape, rows, t)
                lazy.step()
            assert bool(lazy.scratch.buffers) == compiled
            m, v = lazy.moments[id(p)]
            runs.append((p.detach().clone(), m.clone(), v.clone()))
    for a, b in zip(*runs):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
    untouched = [9]
    assert torch.equal(runs[0][0][untouched], parameters(kind)[untouched])


@pytest.mark.parametrize("decoupled", [True, False])
def test_lazy_adam_kernel_on_full_gradients_equals_torch_adam(decoupled):
    """Every row in every gradient: lazy Adam is Adam (torch.optim's, an independent
    implementation), here through the kernel (float32)."""
    a = parameters("padded")
    b = torch.nn.Parameter(a.detach().clone())
    lazy = LazyAdam([{"params": [a], "weight_decay": 0.1}], lr=0.01, decoupled=decoupled)
    ref = (torch.optim.AdamW if decoupled else torch.optim.Adam)([b], lr=0.01, weight_decay=0.1)
    for step in range(6):
        g = torch.randn(10, 5)
        rows = torch.tensor([5, 0, 3, 1, 2, 4, 3, 6, 7, 8, 9])  # every row; row 3 twice
        values = torch.cat([g[[5, 0]], g[3:4] / 2, g[[1, 2, 4]], g[3:4] / 2, g[[6, 7, 8, 9]]])
        a.grad = torch.sparse_coo_tensor(rows[None], values, (10, 5), check_invariants=True)
        b.grad = g
        lazy.step()
        ref.step()
        assert lazy.scratch.buffers
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), step


class DenseNet(torch.nn.Module):
    def __init__(self, big: int = 3):
        super().__init__()
        torch.manual_seed(1)
        self.H = torch.nn.Parameter(torch.randn(4, 6))
        self.d = torch.nn.Parameter(torch.randn(4))
        self.U = torch.nn.Parameter(torch.randn(big, 4))

    def weights(self):
        return [self.H, self.U]

    def biases(self):
        return [self.d]


@pytest.mark.parametrize("name", ["adamw", "adam"])
def test_small_dense_tensors_take_the_kernel_and_match_torch(monkeypatch, name):
    """H and d go through the compiled kernel, U (made 'large') through torch's step; all
    three match torch's Adam alone, and the state is torch's (a checkpoint restores it
    into an optimizer that never used the kernel)."""
    monkeypatch.setattr(optim, "SMALL_DENSE", 30)  # H (24) and d (4) small, U (36) not
    ours, ref = DenseNet(big=9), DenseNet(big=9)
    opt = AdamOptimizer(ours, name, lr=0.01, weight_decay=0.2)
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    reference = cls([{"params": [ref.H, ref.U], "weight_decay": 0.2},
                     {"params": [ref.d], "weight_decay": 0.0}], lr=0.01)
    calls = []
    real = compiled_updates.adam_dense
    monkeypatch.setattr(compiled_updates, "adam_dense",
                        lambda p, *a: calls.append(tuple(p.shape)) or real(p, *a))
    for step in range(5):
        for net in (ours, ref):
            torch.manual_seed(step)
            for p in (net.H, net.d, net.U):
                p.grad = torch.randn_like(p)
        opt.step()
        reference.step()
        opt.zero_grad()
    assert sorted(calls) == sorted([(4, 6), (4,)] * 5)
    for a, b in ((ours.H, ref.H), (ours.d, ref.d), (ours.U, ref.U)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    info, tensors = opt.state()
    fresh = AdamOptimizer(DenseNet(big=9), name, lr=0.01, weight_decay=0.2)
    fresh.load_state(info, tensors)
    for p, q in zip(opt.dense.param_groups[0]["params"], fresh.dense.param_groups[0]["params"]):
        assert float(fresh.dense.state[q]["step"]) == 5
        assert torch.equal(fresh.dense.state[q]["exp_avg"], opt.dense.state[p]["exp_avg"])


def test_a_row_outside_the_parameter_is_an_error_not_a_stray_write():
    p = parameters("rows")
    before = p.detach().clone()
    p.grad = torch.sparse_coo_tensor(torch.tensor([[2, 10]]), torch.ones(2, 5), (10, 5),
                                     check_invariants=False)  # row 10 of a 10-row tensor
    sgd = PaperSGD(Net(p, parameters("bias")), lr=0.1, lr_decay=0.0, weight_decay=0.0)
    with pytest.raises(IndexError, match="outside its parameter"):
        sgd.step(0, batch_size=1)
    assert torch.equal(p.detach(), before)
    assert all((s.slot == -1).all() for s in sgd.scratch.buffers.values())


LOAD_THEN_TRAIN = """
import json, sys
from nnlm.neural.optim import compiled_updates as k
from nnlm.neural.training.run import train_from_files
toy, out = sys.argv[1], sys.argv[2]
for name, recipe, train in (("sgd", "paper", {}), ("nce", None, {"objective": "nce"})):
    train_from_files(f"{toy}/train.txt", f"{toy}/valid.txt", f"{out}/{name}", preset="tiny",
                     recipe=recipe, train=train, max_steps=2, checkpoint_every=0,
                     log=lambda message: None)
print(json.dumps({"loaded": sorted(k._loaded),
                  "signatures": {n: len(getattr(k, "_" + n).signatures) for n in k.KERNELS}}))
"""


def test_training_loads_the_kernels_it_uses_with_the_types_its_updates_pass(tmp_path):
    """Training loads its kernels before its clock starts (``compiled_updates.load``): the
    paper's SGD its sparse rows, Adam under NCE its lazy rows and small dense tensors. The
    load's tiny update must pass the types the real updates pass, or their first call
    would compile (or load) a second specialization, which is the cost it exists to move."""
    import json
    import subprocess
    import sys

    from nnlm.text.toyworld import toy_world

    train, valid, _ = toy_world(seed=0, n_train=200, n_valid=40, n_test=10)
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(valid) + "\n")
    run = subprocess.run([sys.executable, "-c", LOAD_THEN_TRAIN, str(tmp_path),
                          str(tmp_path / "runs")], capture_output=True, text=True, check=True)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["loaded"] == sorted(compiled_updates.KERNELS)
    assert got["signatures"] == {name: 1 for name in compiled_updates.KERNELS}


def test_loading_an_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="no compiled kernel 'adam_cols'"):
        compiled_updates.load("adam_cols")
