"""Training objectives: what a network's output layer is trained to do.

Each objective takes what a network computes (z = ``hidden_input(contexts)``, the output
rows and biases) and returns a loss summed over the batch, in nats. The Trainer takes one;
the paper's SGD and AdamW work with each.

- :class:`FullSoftmax`: -log p(w | context) with p the softmax over all |V_out| outputs
  (Bengio et al. 2003). One fused kernel (``output.fused_output_nll``).
- :class:`SelfNormalized`: -log p + alpha (log Z)^2 (Devlin et al. 2014, *Fast and Robust
  Neural Network Joint Models for Statistical Machine Translation*, section 5), so that
  Z(context) stays near 1 and a trained model can be scored from its raw output y_w,
  without the sum over the vocabulary. Output biases start at log 1/|V|.
- :class:`NCE`: noise-contrastive estimation (Gutmann & Hyvarinen 2010; for language
  models Mnih & Teh 2012, *A fast and simple algorithm for training neural probabilistic
  language models*). K noise words are drawn from the unigram distribution q (raised to
  ``noise_power``); the model learns to tell the data word from them with the binary
  logistic loss on s(w) = y_w - log(K q(w)), with ln Z fixed at 0:

      loss = -log sigma(s(w_t)) - sum_{j=1..K} log(1 - sigma(s(w_j)))

  Only the target's and the K noise words' output rows enter a step, so their gradients
  are sparse and the optimizers update those rows alone (as the paper does for the rows
  of C). By default the K samples are shared across the batch's positions (one (B, K)
  product); ``per_position`` draws K for each position. Evaluation stays exact (the full
  softmax) unless told otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..base.errors import NnlmError
from .networks.network import Network, uniform_log_bias
from .networks.output import fused_output_nll, gather_rows
from .settings import OBJECTIVES, ObjectiveSpec, TrainConfig


class Objective:
    """The loss of a batch given a network."""

    name = "softmax"
    #: True when only the sampled output rows get a gradient (sparse output updates)
    sparse_output = False
    #: True when the objective trains log Z toward 0 (the model may be scored from raw y_w)
    self_normalizing = False

    def loss(self, net: Network, contexts: torch.Tensor, targets: torch.Tensor,
             bf16: bool = False, sparse: bool = False) -> torch.Tensor:
        raise NotImplementedError

    def prepare(self, net: Network) -> None:
        """Adjust a freshly initialized network (e.g. output biases) before training."""

    def loss_limit(self, outputs: int) -> float:
        """A loss per token above this means the run diverged (a uniform model over
        ``outputs`` words scores log |V_out|)."""
        return 2 * math.log(outputs) + 5

    def to(self, device: torch.device) -> Objective:
        return self

    def config(self) -> dict:
        return {"objective": self.name}

    @property
    def spec(self) -> ObjectiveSpec:
        """What this objective can do (``settings.OBJECTIVES``)."""
        return OBJECTIVES[self.name]


class FullSoftmax(Objective):
    """sum_t -log softmax(y)[w_t]: the paper's maximum likelihood."""

    def loss(self, net, contexts, targets, bf16=False, sparse=False):
        if not net.linear_output:
            y = net.scores(contexts, sparse=sparse, bf16=bf16)
            return F.cross_entropy(y, targets, reduction="sum")
        z = net.hidden_input(contexts, sparse)
        return fused_output_nll(z, net.output_matrix, net.b, net.mask, targets, bf16)


class SelfNormalized(Objective):
    """sum_t -log p(w_t) + alpha (log Z_t)^2 (Devlin et al. 2014)."""

    name = "selfnorm"
    self_normalizing = True

    def __init__(self, alpha: float = 0.1):
        if not alpha >= 0 or not math.isfinite(alpha):
            raise NnlmError(f"selfnorm_alpha={alpha}: must be >= 0")
        self.alpha = float(alpha)

    def prepare(self, net):
        net.init_output_bias(uniform_log_bias(net.config))

    def loss(self, net, contexts, targets, bf16=False, sparse=False):
        if not net.linear_output:
            y = net.scores(contexts, sparse=sparse, bf16=bf16)
            log_z = torch.logsumexp(y, 1)
            picked = y.gather(1, targets[:, None]).squeeze(1)
            return (log_z - picked).sum() + self.alpha * log_z.square().sum()
        z = net.hidden_input(contexts, sparse)
        return fused_output_nll(z, net.output_matrix, net.b, net.mask, targets, bf16,
                                alpha=self.alpha)

    def loss_limit(self, outputs):
        return super().loss_limit(outputs) + self.alpha * (2 * math.log(outputs)) ** 2

    def config(self):
        return {"objective": self.name, "selfnorm_alpha": self.alpha}


class NCE(Objective):
    """Noise-contrastive estimation with unigram noise (Mnih & Teh 2012); ln Z = 0."""

    name = "nce"
    sparse_output = True
    self_normalizing = True

    def __init__(self, counts: np.ndarray, samples: int = 25, power: float = 0.75,
                 per_position: bool = False, seed: int = 0):
        """``counts``: training counts of each output (the noise is q ~ counts^power)."""
        if samples < 1:
            raise NnlmError(f"noise_samples={samples}: must be at least 1")
        if not 0 <= power <= 1:
            raise NnlmError(f"noise_power={power}: must be in [0, 1]")
        counts = np.asarray(counts, np.float64)
        if counts.sum() <= 0:
            raise NnlmError("NCE needs training counts for its noise distribution")
        q = np.where(counts > 0, counts, 0.0) ** power
        q[counts <= 0] = 0.0
        self.q = torch.from_numpy(q / q.sum())  # float64, sums to 1
        self.cdf = torch.cumsum(self.q, 0)  # sampling stays on the CPU (its generator's)
        self.log_kq = torch.log(samples * self.q).float()  # -inf where q = 0 (never drawn)
        self.samples, self.power, self.per_position = int(samples), float(power), per_position
        self.generator = torch.Generator().manual_seed(seed)

    def to(self, device):
        self.log_kq = self.log_kq.to(device)
        return self

    def prepare(self, net):
        net.init_output_bias(uniform_log_bias(net.config))

    def draw(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Noise word ids of ``shape``, i.i.d. from q (inverse CDF on seeded uniforms)."""
        u = torch.rand(shape, generator=self.generator, dtype=torch.float64)
        ids = torch.searchsorted(self.cdf, u * float(self.cdf[-1]))
        return ids.clamp_(max=len(self.q) - 1).to(self.log_kq.device, non_blocking=True)

    def loss(self, net, contexts, targets, bf16=False, sparse=False, noise=None):
        """``noise``: (K,) or (B, K) ids to use instead of drawing (tests)."""
        B = len(targets)
        if noise is None:
            noise = self.draw((B, self.samples) if self.per_position else (self.samples,))
        if not net.linear_output:  # any network's scores of the B + K candidates
            s_target = net.scores(contexts, targets[:, None], sparse).squeeze(1)
            s_noise = net.scores(contexts, noise, sparse)
            s_target = s_target - self.log_kq[targets]
            s_noise = s_noise - self.log_kq[noise]
            return F.softplus(-s_target).sum() + F.softplus(s_noise).sum()
        z = net.hidden_input(contexts, sparse)  # (B, k)
        if noise.dim() == 1:  # shared samples: the fused layer (same loss, fewer passes)
            return FusedSharedNCE.apply(z, net.output_matrix, net.b, targets, noise,
                                        self.log_kq, sparse)
        rows = torch.cat([targets, noise.reshape(-1)])
        # gathered rows of the output layer: sparse gradients touch only these rows
        w = gather_rows(net.output_matrix, rows, sparse)  # (B + K', k)
        b = gather_rows(net.b, rows, sparse)
        log_kq = self.log_kq[rows]
        s_target = (z * w[:B]).sum(1) + b[:B] - log_kq[:B]  # (B,)
        if noise.dim() == 1:  # shared: one (B, K) product
            s_noise = z @ w[B:].t() + (b[B:] - log_kq[B:])  # (B, K)
        else:
            wn = w[B:].view(B, -1, w.shape[1])  # (B, K, k)
            s_noise = torch.einsum("bk,bjk->bj", z, wn) + (b[B:] - log_kq[B:]).view(B, -1)
        # -log sigma(s) = softplus(-s); -log(1 - sigma(s)) = softplus(s)
        return F.softplus(-s_target).sum() + F.softplus(s_noise).sum()

    def loss_limit(self, outputs):
        return (self.samples + 1) * super().loss_limit(outputs)

    def config(self):
        return {"objective": self.name, "noise_samples": self.samples,
                "noise_power": self.power, "noise_per_position": self.per_position}


class FusedSharedNCE(torch.autograd.Function):
    """NCE's output layer for K noise words shared by the batch, forward and backward by
    hand: about a dozen tensor operations a step where autograd takes thirty (the step is
    small enough that their overhead is most of its time).

        s_t = z . W[w_t] + b[w_t] - log(K q(w_t))               # (B,)
        S = z W[noise]^T + b[noise] - log(K q(noise))           # (B, K)
        loss = sum softplus(-s_t) + sum softplus(S)
        dloss/ds_t = sigma(s_t) - 1;  dloss/dS = sigma(S)

    The gradients of W and b are sparse over the B + K rows gathered (or dense, scattered
    with index_add, when ``sparse`` is off).
    """

    @staticmethod
    def forward(ctx, z, weight, bias, targets, noise, log_kq, sparse: bool):
        rows = torch.cat([targets, noise])
        w = weight.index_select(0, rows)  # (B + K, k)
        shift = bias.index_select(0, rows) - log_kq.index_select(0, rows)
        B = len(targets)
        s_t = (z * w[:B]).sum(1).add_(shift[:B])  # row-wise dots (einsum takes bmm: slower)
        s_n = torch.addmm(shift[B:], z, w[B:].t())  # (B, K)
        loss = F.softplus(-s_t).sum() + F.softplus(s_n).sum()
        ctx.save_for_backward(z, w, rows, s_t, s_n)
        ctx.sparse, ctx.shapes = sparse, (weight.shape, bias.shape)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z, w, rows, s_t, s_n = ctx.saved_tensors
        B = len(s_t)
        g_t = torch.sigmoid(s_t).sub_(1).mul_(grad_loss)  # (B,)
        g_n = torch.sigmoid(s_n).mul_(grad_loss)  # (B, K)
        grad_z = torch.addmm(w[:B] * g_t[:, None], g_n, w[B:])
        grad_rows = torch.cat([z * g_t[:, None], g_n.t() @ z])  # (B + K, k)
        grad_bias_rows = torch.cat([g_t, g_n.sum(0)])
        w_shape, b_shape = ctx.shapes
        if ctx.sparse:
            idx = rows[None]
            grad_w = torch.sparse_coo_tensor(idx, grad_rows, w_shape, check_invariants=False)
            grad_b = torch.sparse_coo_tensor(idx, grad_bias_rows, b_shape,
                                             check_invariants=False)
        else:
            grad_w = grad_rows.new_zeros(w_shape).index_add_(0, rows, grad_rows)
            grad_b = grad_rows.new_zeros(b_shape).index_add_(0, rows, grad_bias_rows)
        return grad_z, grad_w, grad_b, None, None, None, None


def make_objective(name: str | TrainConfig, output_counts: np.ndarray | None = None, *,
                   noise_samples: int = 25, noise_power: float = 0.75,
                   noise_per_position: bool = False, selfnorm_alpha: float = 0.1,
                   seed: int = 0) -> Objective:
    """The objective ``name`` with its settings, or a TrainConfig's objective with its
    own (``output_counts``: NCE's noise counts)."""
    if isinstance(name, TrainConfig):
        c = name
        name, noise_samples, noise_power = c.objective, c.noise_samples, c.noise_power
        noise_per_position, selfnorm_alpha, seed = c.noise_per_position, c.selfnorm_alpha, c.seed
    if name not in OBJECTIVE_CLASSES:
        raise NnlmError(f"objective={name!r}: choose from {', '.join(OBJECTIVES)}")
    if OBJECTIVES[name].needs_counts and output_counts is None:
        raise NnlmError(f"objective={name} needs the training counts of the outputs")
    if name == "softmax":
        return FullSoftmax()
    if name == "selfnorm":
        return SelfNormalized(selfnorm_alpha)
    return NCE(output_counts, noise_samples, noise_power, noise_per_position, seed)


OBJECTIVE_CLASSES = {"softmax": FullSoftmax, "nce": NCE, "selfnorm": SelfNormalized}
