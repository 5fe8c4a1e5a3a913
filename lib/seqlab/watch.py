"""The student's pieces inside the trained ``charlm-gpt``: build, then watch (notebooks 10, 12 and 14)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.models.gpt import GPT
from seqlab.nn.transformer_layers import ACTIVATIONS

__all__ = ["attention_params", "block_params", "causal_mask", "gpt_logits", "greedy_ids", "watched_loss"]

Attention = Callable[..., Tensor]      # multi_head_attention(X, p, h, mask)
Norm = Callable[..., Tensor]           # layer_norm(x, gamma, beta)
Block = Callable[..., Tensor]          # transformer_block(x, p, h, mask, attention, norm, activation)


def causal_mask(n: int) -> Tensor:
    """(n, n) bool, True where query i may attend to key j (j <= i): notebook 9's convention."""
    return torch.ones(n, n, dtype=torch.bool).tril()


def attention_params(block: torch.nn.Module) -> dict[str, Tensor]:
    """A block's attention weights as ``X @ W_Q`` reads them (detached): W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O."""
    attn = block.self_attn
    W_q, W_k, W_v = attn.projection_weights()                       # torch's (out, in) orientation
    b_q, b_k, b_v = attn.in_proj_bias.chunk(3)
    return {"W_Q": W_q.detach().T, "b_Q": b_q.detach(), "W_K": W_k.detach().T, "b_K": b_k.detach(),
            "W_V": W_v.detach().T, "b_V": b_v.detach(),
            "W_O": attn.out_proj.weight.detach().T, "b_O": attn.out_proj.bias.detach()}


def block_params(block: torch.nn.Module) -> dict[str, Tensor]:
    """:func:`attention_params` plus gamma_1, beta_1, gamma_2, beta_2 and the FFN's W_1 (d_model, d_ff), b_1, W_2, b_2."""
    return {**attention_params(block),
            "gamma_1": block.norm1.weight.detach(), "beta_1": block.norm1.bias.detach(),
            "gamma_2": block.norm2.weight.detach(), "beta_2": block.norm2.bias.detach(),
            "W_1": block.linear1.weight.detach().T, "b_1": block.linear1.bias.detach(),
            "W_2": block.linear2.weight.detach().T, "b_2": block.linear2.bias.detach()}


def _check_gpt(gpt: GPT) -> None:
    c = gpt.config
    if not (c.norm_first and c.bias and c.positional == "learned"):
        raise ValueError("gpt_logits runs a pre-norm GPT with biases and learned positions (charlm-gpt's design), "
                         f"got norm_first={c.norm_first}, bias={c.bias}, positional={c.positional!r}")


@torch.no_grad()
def gpt_logits(gpt: GPT, ids: Tensor, *, attention: Attention | None = None, norm: Norm | None = None,
               block: Block | None = None) -> Tensor:
    """Next-token logits ``(B, T, V)`` of ``gpt`` on ``ids`` ``(B, T)``, with pieces replaced (None: the library's).

    ``attention(X, p, h, mask)`` replaces each attention sublayer, ``norm(x, gamma, beta)`` every LayerNorm (the
    final one too), ``block(x, p, h, mask, attention, norm, activation)`` each whole block.
    """
    _check_gpt(gpt)
    c = gpt.config
    h, T = c.nhead, ids.shape[1]
    mask = causal_mask(T)
    activation = ACTIVATIONS[c.activation]

    def library_attention(X: Tensor, p: dict, heads: int, m: Tensor) -> Tensor:
        return blk.self_attn(X, X, X, need_weights=False, is_causal=True)[0]

    def library_norm(x: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:      # seqlab's LayerNorm, as a function
        mu = x.mean(dim=-1, keepdim=True)
        return (x - mu) * torch.rsqrt((x - mu).pow(2).mean(dim=-1, keepdim=True) + 1e-5) * gamma + beta

    ln = norm or library_norm
    x = gpt.positional(gpt.embed(ids), 0)                                 # (B, T, d_model): E[ids] + P
    for blk in gpt.blocks:
        p = block_params(blk)
        attend = attention or library_attention
        if block is not None:
            x = block(x, p, h, mask, attend, ln, activation)
        else:
            x = x + attend(ln(x, p["gamma_1"], p["beta_1"]), p, h, mask)                     # attention sublayer
            x = x + blk.feed_forward(ln(x, p["gamma_2"], p["beta_2"]))                       # FFN sublayer
    x = ln(x, gpt.norm.weight.detach(), gpt.norm.bias.detach())                              # the final LN
    return gpt.head(x)                                                                        # (B, T, V)


def watched_loss(gpt: GPT, batches: Sequence[tuple[Tensor, Tensor]], **pieces: Callable[..., Tensor]) -> float:
    """Mean cross-entropy (nats per character) of :func:`gpt_logits` with ``pieces`` over ``(ids, targets)`` batches."""
    total, count = 0.0, 0
    for ids, targets in batches:
        logits = gpt_logits(gpt, ids, **pieces)
        total += F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="sum").item()
        count += targets.numel()
    return total / count


@torch.no_grad()
def greedy_ids(gpt: GPT, prompt: Tensor, n: int, **pieces: Callable[..., Tensor]) -> Tensor:
    """``prompt`` ``(T0,)`` followed by ``n`` ids, each the argmax of :func:`gpt_logits` with ``pieces``."""
    ids = prompt.clone()
    for _ in range(n):
        window = ids[-gpt.config.max_len:][None]                                  # (1, T <= max_len)
        ids = torch.cat([ids, gpt_logits(gpt, window, **pieces)[0, -1].argmax().view(1)])
    return ids
