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


def bias_columns(bias: torch.Tensor) -> torch.Tensor:
    """(|V|, 2) bfloat16 columns [b_hi, b_lo] with b_hi + b_lo = b to about 16 bits.

    Appended to a bf16 output matrix, with two columns of ones appended to z, they fold
    the bias into the product: one pass over the (B, |V|) logits fewer. -inf (the mask
    of ``<s>``) stays -inf in b_hi with b_lo = 0.
    """
    hi = bias.detach().to(torch.bfloat16)
    lo = torch.where(torch.isfinite(bias), bias.detach() - hi.float(), 0.0)
    return torch.stack([hi, lo.to(torch.bfloat16)], 1)


def with_ones(z: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[z, 1, 1] in ``dtype``: the rows that pair with ``bias_columns``."""
    out = torch.ones(len(z), z.shape[1] + 2, dtype=dtype)
    out[:, : z.shape[1]] = z
    return out


class FusedOutputNLL(torch.autograd.Function):
    """sum_i -log softmax(b + mask + z_i weight^T)[target_i], with a light backward.

    float32: passes over the (B, |V|) buffer are the product, + bias, max, exp (in
    place), sum, divide (in place: now the softmax), and in backward -1 at the targets.

    bf16: the bias is folded into one bf16 product (``bias_columns``), ``softmax`` reads
    the bf16 logits and writes bf16 probabilities, which are the gradient after -1 at the
    targets and feed both backward products as they are: the |V|-wide buffers are 2 bytes
    a value and touched about four times instead of a dozen. The loss is -log p(target)
    from those probabilities (relative precision 2^-9, unbiased), exact (from the logits
    in float32) for any row whose target probability underflows.
    """

    @staticmethod
    def forward(ctx, z, weight, bias, mask, targets, bf16: bool):
        ctx.bf16 = bf16
        if bf16:
            k = z.shape[1]
            z_ = with_ones(z, torch.bfloat16)
            w_ = torch.empty(len(weight), k + 2, dtype=torch.bfloat16)
            w_[:, :k] = weight.detach()
            w_[:, k:] = bias_columns(bias + mask)
            logits = z_ @ w_.t()  # (B, V) bf16, bias included
            probs = torch.softmax(logits, dim=1)
            picked = probs.gather(1, targets[:, None]).squeeze(1).float()
            nll = -picked.log()
            bad = ~torch.isfinite(nll)
            if bad.any():  # p(target) below bf16's range: those rows exactly
                rows = logits[bad].float()
                nll[bad] = torch.logsumexp(rows, 1) - rows.gather(1, targets[bad, None])[:, 0]
            ctx.k = k
            ctx.save_for_backward(z_, w_, probs, targets)
            return nll.sum()
        logits = z @ weight.t()
        logits += bias + mask  # (B, V)
        picked = logits.gather(1, targets[:, None]).squeeze(1)
        mx = logits.amax(dim=1)
        logits.sub_(mx[:, None]).exp_()
        total = logits.sum(dim=1)
        logits.div_(total[:, None])  # the softmax, kept for backward
        loss = (mx + total.log() - picked).sum()
        ctx.save_for_backward(z, weight, logits, targets)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z_, w_, probs, targets = ctx.saved_tensors
        grad = probs  # softmax - onehot, in place: no new (B, V) buffer
        grad[torch.arange(len(targets)), targets] -= 1.0
        if ctx.bf16:  # the loss scale goes on the small operands, never on a |V|-wide pass
            k, scale = ctx.k, grad_loss.float()
            grad_z = grad_w = grad_b = None
            if ctx.needs_input_grad[0]:
                grad_z = (grad @ w_[:, :k]).float().mul_(scale)
            if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
                # one product gives both: z's column of ones makes column k the bias
                # gradient; (B, k + 2) scaled, exact when the scale is 1/2^j
                both = (grad.t() @ (z_ * scale.to(torch.bfloat16))).float()
                grad_w, grad_b = both[:, :k], both[:, k]
            return grad_z, grad_w, grad_b, None, None, None
        if grad_loss.item() != 1.0:
            grad.mul_(grad_loss)
        grad_z = grad @ w_ if ctx.needs_input_grad[0] else None
        grad_w = grad.t() @ z_ if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.needs_input_grad[2] else None
        return grad_z, grad_w, grad_b, None, None, None


def fused_output_nll(z, weight, bias, mask, targets, bf16: bool = False) -> torch.Tensor:
    return FusedOutputNLL.apply(z, weight, bias, mask, targets.long(), bf16)
