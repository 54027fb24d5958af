"""The |V|-wide output layer: logits, and a fused softmax + negative log-likelihood.

Training time in the NPLM is dominated by y = b + [W U] z and its gradients: three
(B x |V|)-sized matrix products per step. The fused function computes the loss and, in
backward, the gradient softmax(y) - onehot(target) in place in the buffer that held the
softmax, so the |V|-wide activations are written twice instead of five or six times as
with ``F.cross_entropy`` over materialized logits. With ``bf16`` the three products run
in bfloat16 with float32 accumulation; the softmax and loss stay in float32.
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


class FusedOutputNLL(torch.autograd.Function):
    """sum_i -log softmax(b + mask + z_i weight^T)[target_i], with a light backward.

    Passes over the (B, |V|) buffer: the product, + bias, max, exp (in place), sum,
    divide (in place: now the softmax), and in backward -1 at the targets; the bf16
    copies of weight and z made in forward are reused by backward.
    """

    @staticmethod
    def forward(ctx, z, weight, bias, mask, targets, bf16: bool):
        if bf16:
            z_, w_ = z.to(torch.bfloat16), weight.to(torch.bfloat16)
            logits = (z_ @ w_.t()).float()
        else:
            z_, w_ = z, weight
            logits = z @ weight.t()
        logits += bias + mask  # (B, V)
        picked = logits.gather(1, targets[:, None]).squeeze(1)
        mx = logits.amax(dim=1)
        logits.sub_(mx[:, None]).exp_()
        total = logits.sum(dim=1)
        logits.div_(total[:, None])  # the softmax, kept for backward
        loss = (mx + total.log() - picked).sum()
        ctx.save_for_backward(z_, w_, logits, targets)
        ctx.bf16 = bf16
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z_, w_, probs, targets = ctx.saved_tensors
        grad = probs  # softmax - onehot, in place: no new (B, V) buffer
        grad[torch.arange(len(targets)), targets] -= 1.0
        if grad_loss.item() != 1.0:
            grad.mul_(grad_loss)
        g_ = grad.to(torch.bfloat16) if ctx.bf16 else grad
        grad_z = (g_ @ w_).float() if ctx.needs_input_grad[0] else None
        grad_w = (g_.t() @ z_).float() if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.needs_input_grad[2] else None
        return grad_z, grad_w, grad_b, None, None, None


def fused_output_nll(z, weight, bias, mask, targets, bf16: bool = False) -> torch.Tensor:
    return FusedOutputNLL.apply(z, weight, bias, mask, targets.long(), bf16)
