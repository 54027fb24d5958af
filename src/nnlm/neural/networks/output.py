"""The |V|-wide output layer: logits, and a fused softmax + negative log-likelihood.

Training time in the NPLM is dominated by y = b + [W U] z and its gradients: three
(B x |V|)-sized matrix products per step. The fused function computes the loss and, in
backward, the gradient softmax(y) - onehot(target) in place in the buffer that held the
softmax, so the |V|-wide activations are written twice instead of five or six times as
with ``F.cross_entropy`` over materialized logits. With ``bf16`` the three products run
in bfloat16 with float32 accumulation, and the |V|-wide buffers are bf16 too.
"""

from __future__ import annotations

import torch


def _matmul(a: torch.Tensor, b: torch.Tensor, bf16: bool) -> torch.Tensor:
    if bf16:
        return (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).float()
    return a @ b


def output_logits(z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                  bf16: bool = False) -> torch.Tensor:
    """y = bias + z weight^T: (B, |V|) float32."""
    return torch.addmm(bias, z, weight.t()) if not bf16 else _matmul(z, weight.t(), True) + bias


ALIGN = 32  # bf16 columns: rows of 64 bytes. The bf16 output product at width 320 runs in
# three quarters of the time it takes at 292 here (oneDNN's AMX kernels like aligned rows);
# float32 products gain nothing from padding, so float32 widths are left as they are.


def _bias_slots(dtype: torch.dtype) -> int:
    return 2 if dtype == torch.bfloat16 else 1


def folded_weight(weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[weight | bias | 0 ...] in ``dtype`` (bf16: width a multiple of ALIGN): with
    ``folded_input`` one product gives z weight^T + bias, a pass over (B, |V|) fewer.

    In bf16 the bias takes two columns, b_hi + b_lo = b to about 16 bits; -inf (the mask
    of ``<s>``) stays -inf in b_hi with b_lo = 0.
    """
    k, slots = weight.shape[1], _bias_slots(dtype)
    align = ALIGN if dtype == torch.bfloat16 else 1
    width = -(-(k + slots) // align) * align
    out = torch.empty(len(weight), width, dtype=dtype, device=weight.device)
    out[:, :k] = weight.detach()
    bias = bias.detach()
    out[:, k] = bias
    if slots == 2:
        lo = torch.where(torch.isfinite(bias), bias - out[:, k].float(), 0.0)
        out[:, k + 1] = lo
    out[:, k + slots :] = 0
    return out


def folded_input(z: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """[z, 1 (, 1), 0 ...] in ``dtype``: the rows that pair with ``folded_weight``."""
    k = z.shape[1]
    out = torch.zeros(len(z), width, dtype=dtype, device=z.device)
    out[:, :k] = z
    out[:, k : k + _bias_slots(dtype)] = 1
    return out


class FusedOutputNLL(torch.autograd.Function):
    """sum_i -log softmax(b + mask + z_i weight^T)[target_i], with a light backward.

    float32: passes over the (B, |V|) buffer are the product, + bias, max, exp (in
    place), sum, divide (in place: now the softmax), and in backward -1 at the targets.

    bf16: the bias is folded into one bf16 product (``folded_weight``), ``softmax`` reads
    the bf16 logits and writes bf16 probabilities, which are the gradient after -1 at the
    targets and feed both backward products as they are: the |V|-wide buffers are 2 bytes
    a value and touched about four times instead of a dozen. The loss is -log p(target)
    from those probabilities (relative precision 2^-9); a row whose target probability
    underflows bf16 takes a float32 log-sum-exp of its logits instead.
    """

    @staticmethod
    def forward(ctx, z, weight, bias, mask, targets, bf16: bool, alpha: float = 0.0):
        ctx.bf16, ctx.alpha = bf16, alpha
        if bf16:
            k = z.shape[1]
            w_ = folded_weight(weight, bias + mask, torch.bfloat16)
            z_ = folded_input(z, w_.shape[1], torch.bfloat16)
            logits = z_ @ w_.t()  # (B, V) bf16, bias included
            probs = torch.softmax(logits, dim=1)
            picked = probs.gather(1, targets[:, None]).squeeze(1).float()
            nll = -picked.log()
            bad = ~torch.isfinite(nll)
            if nll.is_cuda:  # no host sync (a CUDA graph cannot hold one): an extra
                # pass over the bf16 logits, cheap on a GPU, used where p underflowed
                exact = torch.logsumexp(logits.float(), 1) - logits.gather(
                    1, targets[:, None])[:, 0].float()
                nll = torch.where(bad, exact, nll)
            elif bad.any():  # p(target) below bf16's range: log-sum-exp in float32
                rows = logits[bad].float()
                nll[bad] = torch.logsumexp(rows, 1) - rows.gather(1, targets[bad, None])[:, 0]
            ctx.k = k
            log_z = None
            if alpha:  # log Z = y_target - log p(target): no extra pass over (B, |V|)
                log_z = logits.gather(1, targets[:, None])[:, 0].float() + nll
            ctx.save_for_backward(z_, w_, probs, targets, log_z)
            return nll.sum() + (alpha * log_z.square().sum() if alpha else 0.0)
        logits = z @ weight.t()
        logits += bias + mask  # (B, V)
        picked = logits.gather(1, targets[:, None]).squeeze(1)
        mx = logits.amax(dim=1)
        logits.sub_(mx[:, None]).exp_()
        total = logits.sum(dim=1)
        logits.div_(total[:, None])  # the softmax, kept for backward
        log_z = mx + total.log()
        loss = (log_z - picked).sum()
        if alpha:
            loss = loss + alpha * log_z.square().sum()
        ctx.save_for_backward(z, weight, logits, targets, log_z if alpha else None)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z_, w_, probs, targets, log_z = ctx.saved_tensors
        grad = probs  # softmax - onehot, in place: no new (B, V) buffer
        if ctx.alpha:  # d/dy of alpha (log Z)^2 is 2 alpha log Z softmax
            grad.mul_((1.0 + 2.0 * ctx.alpha * log_z)[:, None].to(grad.dtype))
        grad[torch.arange(len(targets), device=targets.device), targets] -= 1.0
        if ctx.bf16:  # the loss scale goes on the small operands, never on a |V|-wide pass
            k, scale = ctx.k, grad_loss.float()
            grad_z = grad_w = grad_b = None
            if ctx.needs_input_grad[0]:  # whole w_ (a strided slice slows the product)
                grad_z = (grad @ w_)[:, :k].float().mul_(scale)
            if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
                # one product gives both: z's column of ones makes column k the bias
                # gradient; z_ (B, width) scaled, exact when the scale is 1/2^j
                both = grad.t() @ (z_ * scale.to(torch.bfloat16))
                grad_w, grad_b = both[:, :k].float(), both[:, k].float()
            return grad_z, grad_w, grad_b, None, None, None, None
        if grad.is_cuda or grad_loss.item() != 1.0:  # .item() would sync a GPU
            grad.mul_(grad_loss)
        grad_z = grad @ w_ if ctx.needs_input_grad[0] else None
        grad_w = grad.t() @ z_ if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.needs_input_grad[2] else None
        return grad_z, grad_w, grad_b, None, None, None, None


def fused_output_nll(z, weight, bias, mask, targets, bf16: bool = False,
                     alpha: float = 0.0) -> torch.Tensor:
    """sum_i [-log p(target_i) + alpha (log Z_i)^2]: the full softmax's NLL, plus the
    self-normalization penalty of Devlin et al. (2014) when ``alpha`` > 0."""
    return FusedOutputNLL.apply(z, weight, bias, mask, targets.long(), bf16, alpha)


class _SparseRows(torch.autograd.Function):
    """weight[rows] whose gradient is a sparse COO tensor over ``weight`` (any rank)."""

    @staticmethod
    def forward(ctx, weight, rows):
        ctx.save_for_backward(rows)
        ctx.shape = weight.shape
        return weight.index_select(0, rows)

    @staticmethod
    def backward(ctx, grad):
        (rows,) = ctx.saved_tensors
        return torch.sparse_coo_tensor(rows[None], grad, ctx.shape, check_invariants=False), None


def gather_rows(weight: torch.Tensor, rows: torch.Tensor, sparse: bool) -> torch.Tensor:
    """``weight[rows]``; with ``sparse`` its gradient touches only those rows."""
    return _SparseRows.apply(weight, rows) if sparse else weight.index_select(0, rows)
