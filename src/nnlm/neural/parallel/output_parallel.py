"""The parameter-parallel output layer of Bengio et al. (2003), section 3.2.

Each of P ranks owns a contiguous slice [lo, hi) of the |V_out| output units: its rows of
the output weights (U and W, or the log-bilinear model's q) and biases b. The word
features C and the hidden layer (H, d) are replicated. Every rank sees the same batch and
computes the same z; the output layer's work and memory are split P ways. The ranks
exchange only what the paper exchanges (and Megatron-LM's vocabulary-parallel
cross-entropy, Shoeybi et al. 2019, too):

    forward:   max_i y_i, sum_i exp(y_i - max), y_target      all-reduce: 3 numbers a row
    backward:  dL/dz = sum over ranks of dL/dy_slice W_slice  all-reduce: k numbers a row

so that after backward every rank holds the same gradient for the replicated C, H, d (no
further exchange) and the gradient of its own output rows. Under NCE the scores of the
target and of the K noise words are summed over ranks (each rank fills the rows it owns)
and the same dL/dz exchange follows.

With tied output weights (U = C, the ``modern`` preset) C is replicated, so a rank scores
its slice of C's rows and the output part of C's gradient is all-gathered: the compute is
split but not the memory (docs/scaling.md).

A checkpoint gathers the slices (:meth:`OutputShard.full_tensors`), so a model trained
this way is an ordinary model that loads anywhere.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ...base.errors import NnlmError
from ..networks.network import Network
from ..objectives import NCE, FullSoftmax, Objective, SelfNormalized
from .distributed import World, shard_range


class OutputShard:
    """Cuts a network's output layer down to this rank's rows, and computes with them."""

    def __init__(self, world: World, net: Network):
        if not net.linear_output:
            raise NnlmError("output_parallel=True splits a linear output layer; the "
                            f"{net.config.network_name} network scores its outputs another "
                            "way: train it data-parallel (torchrun without output_parallel=True)")
        if net.config.outputs < net.config.vocab_size:
            raise NnlmError("output_parallel=True with a short-list: its n-gram share is not "
                            "split over the ranks; train the short-list network in one "
                            "process or data-parallel")
        V = net.config.outputs
        if world.size > V:
            raise NnlmError(f"output_parallel=True with {world.size} ranks for {V} output rows: "
                            "each rank needs at least one row")
        self.world, self.tied = world, net.tied
        self.lo, self.hi = shard_range(V, world.size, world.rank)
        self.outputs = V
        with torch.no_grad():
            for name, p in list(net.named_parameters(recurse=False)):
                if p is net.b or (p is net.output_matrix and not self.tied):
                    setattr(net, name, nn.Parameter(p.detach()[self.lo : self.hi].clone()))
            net.mask = net.mask[self.lo : self.hi].clone()
        #: the checkpoint names whose rows are split over the ranks
        self.names = [k for k in ("U", "W", "b") if k in net.named_tensors()]

    # -- the shards and the checkpoint --------------------------------------------------
    def weight_rows(self, net: Network) -> torch.Tensor:
        """This rank's output rows (a slice of C when tied)."""
        w = net.output_matrix
        return w[self.lo : self.hi] if self.tied else w

    def shard_tensors(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Full checkpoint tensors -> this rank's (the split ones sliced)."""
        return {k: v[self.lo : self.hi] if k in self.names else v for k, v in tensors.items()}

    def full_tensors(self, net: Network) -> dict[str, torch.Tensor]:
        """The whole network's named tensors, on the CPU, on every rank (a collective)."""
        out = {}
        for k, v in net.named_tensors().items():
            v = v.detach().contiguous()
            if k in self.names:
                v = torch.cat(self.world.all_gather_rows(v, "gathering the output rows"))
            out[k] = v.cpu().clone()
        return out

    def sharded_params(self, net: Network) -> list[nn.Parameter]:
        return [p for p in (net.b, None if self.tied else net.output_matrix) if p is not None]

    # -- training -------------------------------------------------------------------------
    def loss(self, objective: Objective, net: Network, contexts: torch.Tensor,
             targets: torch.Tensor, bf16: bool = False, sparse: bool = False) -> torch.Tensor:
        """The objective's loss summed over the batch, equal on every rank."""
        z = net.hidden_input(contexts, sparse)
        if isinstance(objective, (FullSoftmax, SelfNormalized)):
            alpha = getattr(objective, "alpha", 0.0)
            return ParallelSoftmaxNLL.apply(z, net.output_matrix, net.b, net.mask, targets,
                                            self, bf16, alpha)
        if isinstance(objective, NCE):
            if self.tied:
                raise NnlmError("output_parallel=True with tied output weights and NCE: every "
                                "rank holds all of the output rows already (they are C), so "
                                "there is nothing to split; train it data-parallel")
            if objective.per_position:
                raise NnlmError("output_parallel=True takes NCE's shared noise samples, not "
                                "noise_per_position=True")
            noise = objective.draw((objective.samples,))
            return ParallelSharedNCE.apply(z, net.output_matrix, net.b, targets, noise,
                                           objective.log_kq, self, sparse)
        raise NnlmError(f"output_parallel=True does not know the {objective.name} objective")

    @torch.no_grad()
    def grad_norm_squared(self, net: Network) -> float:
        """||gradient||^2 of the whole (unsplit) model: the split rows summed over ranks,
        the replicated parameters counted once."""
        split = {id(p) for p in self.sharded_params(net)}
        own = rep = 0.0
        for p in net.parameters():
            if p.grad is None:
                continue
            g = p.grad.coalesce().values() if p.grad.is_sparse else p.grad
            if id(p) in split:
                own += float(g.double().pow(2).sum())
            else:
                rep += float(g.double().pow(2).sum())
        return rep + self.world.all_sum([own], "the gradient norm")[0]

    # -- evaluation -----------------------------------------------------------------------
    @torch.no_grad()
    def nll_and_log_z(self, net: Network, contexts: torch.Tensor,
                      targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-log p(target | context) and log Z per row (float64), computed across ranks."""
        z = net.hidden_input(contexts)
        w, bias = self.weight_rows(net), net.b + net.mask
        _, log_z, picked = self._softmax(z, w, bias, targets)
        return (log_z - picked).double(), log_z.double()

    def _softmax(self, z, w, bias, targets):
        """This rank's slice of softmax(y), the global log Z and y_target per row (w in
        bfloat16: the product in bfloat16 with float32 accumulation)."""
        logits = (z.to(w.dtype) @ w.t()).float() if w.dtype != z.dtype else z @ w.t()
        logits += bias  # (B, V_slice)
        local = targets - self.lo
        inside = (local >= 0) & (local < len(w))
        picked = logits.gather(1, local.clamp(0, len(w) - 1)[:, None])[:, 0]
        picked = torch.where(inside, picked, torch.zeros_like(picked))
        mx = logits.amax(dim=1)
        self.world.collective("the softmax maximum", dist.all_reduce, mx, op=dist.ReduceOp.MAX)
        logits.sub_(mx[:, None]).exp_()
        both = torch.stack([logits.sum(dim=1), picked])  # (2, B): one exchange
        self.world.collective("the softmax sum", dist.all_reduce, both)
        total, picked = both[0], both[1]
        logits.div_(total[:, None])  # this rank's slice of the softmax
        return logits, mx + total.log(), picked


class ParallelSoftmaxNLL(torch.autograd.Function):
    """sum_i [-log softmax(y_i)[target_i] + alpha (log Z_i)^2] over a vocabulary split by
    rank (see the module docstring); backward all-reduces dL/dz."""

    @staticmethod
    def forward(ctx, z, weight, bias, mask, targets, shard: OutputShard, bf16: bool,
                alpha: float):
        w = weight[shard.lo : shard.hi] if shard.tied else weight
        if bf16:  # the products in bfloat16 (float32 accumulation), as output.py does
            w = w.to(torch.bfloat16)
        probs, log_z, picked = shard._softmax(z, w, bias + mask, targets)
        loss = (log_z - picked).sum()
        if alpha:
            loss = loss + alpha * log_z.square().sum()
        ctx.save_for_backward(z, w, probs, targets, log_z)
        ctx.shard, ctx.alpha, ctx.weight_shape = shard, alpha, weight.shape
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z, w, grad, targets, log_z = ctx.saved_tensors
        shard = ctx.shard
        if ctx.alpha:
            grad.mul_((1.0 + 2.0 * ctx.alpha * log_z)[:, None])
        local = targets - shard.lo
        rows = torch.nonzero((local >= 0) & (local < len(w)))[:, 0]
        grad[rows, local[rows]] -= 1.0
        grad.mul_(grad_loss)
        if w.dtype == torch.bfloat16:
            grad = grad.to(torch.bfloat16)
            grad_z = (grad @ w).float()
            grad_w = (grad.t() @ z.to(torch.bfloat16)).float()
            grad = grad.float()
        else:
            grad_z = grad @ w
            grad_w = grad.t() @ z
        shard.world.collective("the dL/dz all-reduce", dist.all_reduce, grad_z)
        if shard.tied:  # rows of C: every rank needs the whole output part of C's gradient
            grad_w = torch.cat(shard.world.all_gather_rows(grad_w, "the output-row gather"))
        return grad_z, grad_w, grad.sum(0), None, None, None, None, None


class ParallelSharedNCE(torch.autograd.Function):
    """NCE with K noise words shared by the batch (objectives.FusedSharedNCE) over output
    rows split by rank: each rank scores the rows it owns, the scores are summed over
    ranks, the loss is then the same everywhere; backward all-reduces dL/dz."""

    @staticmethod
    def forward(ctx, z, weight, bias, targets, noise, log_kq, shard: OutputShard,
                sparse: bool):
        rows = torch.cat([targets, noise])  # global ids (B + K,)
        local = rows - shard.lo
        own = (local >= 0) & (local < len(weight))
        local = local.clamp(0, len(weight) - 1)
        w = weight.index_select(0, local) * own[:, None]  # zero where another rank owns it
        b = bias.index_select(0, local) * own
        B = len(targets)
        s_t = (z * w[:B]).sum(1) + b[:B]
        s_n = torch.addmm(b[B:], z, w[B:].t())  # (B, K)
        both = torch.cat([s_t, s_n.reshape(-1)])
        shard.world.collective("the NCE score exchange", dist.all_reduce, both)
        shift = log_kq.index_select(0, rows)
        s_t = both[:B] - shift[:B]
        s_n = both[B:].view(B, -1) - shift[B:]
        loss = torch.nn.functional.softplus(-s_t).sum() + \
            torch.nn.functional.softplus(s_n).sum()
        ctx.save_for_backward(z, w, local, own, s_t, s_n)
        ctx.shard, ctx.sparse, ctx.shapes = shard, sparse, (weight.shape, bias.shape)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z, w, local, own, s_t, s_n = ctx.saved_tensors
        B = len(s_t)
        g_t = torch.sigmoid(s_t).sub_(1).mul_(grad_loss)  # (B,)
        g_n = torch.sigmoid(s_n).mul_(grad_loss)  # (B, K)
        grad_z = torch.addmm(w[:B] * g_t[:, None], g_n, w[B:])  # own rows only (w is 0)
        ctx.shard.world.collective("the dL/dz all-reduce", dist.all_reduce, grad_z)
        keep = torch.nonzero(own)[:, 0]
        grad_rows = torch.cat([z * g_t[:, None], g_n.t() @ z]).index_select(0, keep)
        grad_bias_rows = torch.cat([g_t, g_n.sum(0)]).index_select(0, keep)
        idx = local.index_select(0, keep)
        w_shape, b_shape = ctx.shapes
        if ctx.sparse:
            grad_w = torch.sparse_coo_tensor(idx[None], grad_rows, w_shape,
                                             check_invariants=False)
            grad_b = torch.sparse_coo_tensor(idx[None], grad_bias_rows, b_shape,
                                             check_invariants=False)
        else:
            grad_w = grad_rows.new_zeros(w_shape).index_add_(0, idx, grad_rows)
            grad_b = grad_rows.new_zeros(b_shape).index_add_(0, idx, grad_bias_rows)
        return grad_z, grad_w, grad_b, None, None, None, None, None
