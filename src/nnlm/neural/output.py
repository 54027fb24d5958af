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
    """sum_i -log softmax(b + mask + z_i weight^T)[target_i], with a light backward."""

    @staticmethod
    def forward(ctx, z, weight, bias, mask, targets, bf16: bool):
        logits = _matmul(z, weight.t(), bf16)
        logits += bias + mask  # (B, V)
        lse = torch.logsumexp(logits, dim=1)  # (B,)
        picked = logits.gather(1, targets[:, None]).squeeze(1)
        loss = (lse - picked).sum()
        # keep the softmax in the logits buffer for backward
        logits.sub_(lse[:, None]).exp_()
        ctx.save_for_backward(z, weight, logits, targets)
        ctx.bf16 = bf16
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z, weight, probs, targets = ctx.saved_tensors
        grad = probs  # softmax - onehot, in place: no new (B, V) buffer
        grad[torch.arange(len(targets)), targets] -= 1.0
        if grad_loss.item() != 1.0:
            grad.mul_(grad_loss)
        grad_z = _matmul(grad, weight, ctx.bf16) if ctx.needs_input_grad[0] else None
        grad_w = _matmul(grad.t(), z, ctx.bf16) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.needs_input_grad[2] else None
        return grad_z, grad_w, grad_b, None, None, None


def fused_output_nll(z, weight, bias, mask, targets, bf16: bool = False) -> torch.Tensor:
    return FusedOutputNLL.apply(z, weight, bias, mask, targets.long(), bf16)
