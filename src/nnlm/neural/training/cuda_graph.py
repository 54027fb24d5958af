"""A training update captured once as a CUDA graph and replayed for every full batch.

On a GPU the NPLM's update at the recipes' batch of 256 is a fraction of a millisecond of
kernels behind some sixty launches from Python: on an H100, mlp1's step held 0.35 ms of
device work in 2.8 ms of wall time, so the GPU idled seven eighths of the time (the plain
PyTorch version idles as much). Capturing the forward pass, the backward pass and the
optimizer's fused update with ``torch.cuda.graph`` turns the update into one launch
(Nguyen et al., "CUDA Graphs", NVIDIA 2019; PyTorch's "whole-network capture").

What is captured: the full batches of a single-process run on CUDA whose gradients are
dense (the ``softmax`` and ``selfnorm`` objectives), trained with Adam or AdamW and no
``--clip``. NCE's sampled rows, the paper's sparse SGD, data- and output-parallel ranks,
clipping and the shorter last batch of an epoch run as before, step by step. Set
``NNLM_CUDA_GRAPHS=0`` to run everything step by step. A network whose update cannot be
captured (an operation that reads a value back to the host, say) is told in one log line
and runs step by step: nothing runs during a capture, so the weights are untouched.

The arithmetic is the same kernels in the same order, so a graphed run computes what the
step-by-step run computes (``tests/test_cuda.py`` compares them). Two things move:

- The loss of each update stays on the GPU. The trainer reads the sum and the worst
  update every ``Trainer.LOG_EVERY`` updates, so a divergence is reported within that
  many updates of where it began (the checkpoint kept is still the last good one: the
  weights are checked before every save).
- The first ``WARMUP`` updates after the graph is made run step by step on a side stream
  (cuBLAS and the optimizer's state are created outside the capture, as PyTorch asks).
  The graph is made again, without a new warm-up, after the step size changes (a plateau
  halves it; the size is a constant inside the graph).

Dropout inside the graph draws from the GPU's generator as the step-by-step kernels would
(PyTorch's graph-safe generator state), and checkpoints save that generator's state.
"""

from __future__ import annotations

import os

import torch

from ..optim import AdamOptimizer

WARMUP = 3  # step-by-step updates before the first capture


def graphs_enabled() -> bool:
    return os.environ.get("NNLM_CUDA_GRAPHS", "1") != "0"


class GraphedStep:
    """The update of one full batch as a replayed CUDA graph (see the module docstring):
    ``net`` trained on ``objective`` by ``optimizer``, on the device ``net`` is on."""

    def __init__(self, net, objective, optimizer, batch_size: int, bf16: bool = False,
                 log=print):
        self.net, self.objective, self.optimizer, self.bf16 = net, objective, optimizer, bf16
        self.log, self.batch_size = log, batch_size
        dev, k = next(net.parameters()).device, net.config.context_size
        self.device = dev
        self.contexts = torch.zeros(batch_size, k, dtype=torch.int64, device=dev)
        self.targets = torch.zeros(batch_size, dtype=torch.int64, device=dev)
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
        self.worst = torch.full((), -torch.inf, dtype=torch.float32, device=dev)
        self.graph = None
        self.lr = None
        self.warm = 0
        self.eager = False  # a capture failed: every update runs step by step

    @staticmethod
    def can_capture(device: torch.device, objective, optimizer, sparse: bool,
                    clip: float) -> bool:
        """Whether such an update can be captured (see the module docstring); the parallel
        scheme's part is the caller's to check."""

        return (graphs_enabled() and device.type == "cuda" and not sparse
                and not objective.sparse_output and isinstance(optimizer, AdamOptimizer)
                and optimizer.lazy is None and optimizer.dense is not None and not clip)

    def _update(self) -> None:
        """Forward, backward and optimizer step on the static batch; the loss is added to
        the running sum on the device."""
        net = self.net
        net.train()
        targets = self.targets
        if net.config.outputs < net.config.vocab_size:
            targets = targets.clamp(max=net.config.outputs - 1)
        loss = self.objective.loss(net, self.contexts, targets, bf16=self.bf16, sparse=False)
        (loss / self.batch_size).backward()
        self.optimizer.step()
        loss = loss.detach()
        self.loss_sum.add_(loss)
        torch.maximum(self.worst, loss.float() / self.batch_size, out=self.worst)

    def __call__(self, contexts: torch.Tensor, targets: torch.Tensor) -> None:
        """One update on a full batch (host or device tensors)."""
        opt, device = self.optimizer, self.device
        lr = opt.lr_at()
        if self.graph is not None and lr != self.lr:
            self.graph = None
        self.contexts.copy_(contexts, non_blocking=True)
        self.targets.copy_(targets, non_blocking=True)
        if self.eager:
            opt.zero_grad()
            self._update()
            return
        if self.graph is None and self.warm < WARMUP:
            side = torch.cuda.Stream(device=device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                opt.zero_grad()
                self._update()
            torch.cuda.current_stream(device).wait_stream(side)
            self.warm += 1
            return
        if self.graph is None:
            opt.zero_grad()  # the captured backward writes fresh gradients
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    self._update()
            except RuntimeError as err:  # an operation that cannot be captured
                # Nothing ran during the capture: the weights and the optimizer's state
                # are as they were, so this update runs again, step by step.
                torch.cuda.synchronize(device)
                reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
                self.log(f"the update could not be captured as a CUDA graph ({reason}); "
                      "running step by step")
                self.eager = True
                return self(contexts, targets)
            self.graph, self.lr = graph, lr
        self.graph.replay()

    def flush(self) -> tuple[float, float]:
        """(summed loss, worst per-token loss) of the updates since the last flush."""
        total, worst = torch.stack([self.loss_sum, self.worst.double()]).tolist()
        self.loss_sum.zero_()
        self.worst.fill_(-torch.inf)
        return total, worst


def graphed_step_for(parts, scheme, config, device: torch.device, log) -> GraphedStep | None:
    """The CUDA-graph update of a run's full batches, or None: the scheme must allow one
    (``scheme.graphable``: one process, the whole batch), the network must not be
    recurrent, and the update must be capturable (:meth:`GraphedStep.can_capture`)."""
    if not (scheme.graphable and not parts.model.recurrent and GraphedStep.can_capture(
            device, parts.objective, parts.optimizer, parts.sparse, config.clip)):
        return None
    log("each full batch's update runs as one CUDA graph (NNLM_CUDA_GRAPHS=0 runs it "
        "kernel by kernel)")
    return GraphedStep(parts.model, parts.objective, parts.optimizer, config.batch_size,
                       config.bf16, log)
