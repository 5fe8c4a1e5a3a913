"""Generation through a GPT's own layers, one token at a time, with the attention step given as a function (notebook 15).

``step(q, k_new, v_new, K_cache, V_cache) -> (output, K, V)`` computes each layer's attention and returns
the caches; ``step=None`` is the uncached twin. Positions must be added to the embeddings.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.decoding import sample_next
from seqlab.nn.attention import attend
from seqlab.nn.masks import causal_mask

Step = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]


def full_causal_step(q: Tensor, k: Tensor, v: Tensor, K_cache: Tensor, V_cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The uncached computation: every position's query against the keys up to it (``K_cache`` is empty)."""
    out, _ = attend(q, k, v, causal_mask(q.shape[-2], device=q.device))     # (B, h, n, d_k)
    return out, k, v


def _layers(model, x: Tensor, caches: list[tuple[Tensor, Tensor]], step: Step) -> Tensor:
    """``x`` (B, n, d_model) through every block, attention by ``step``; ``caches[l]`` becomes layer ``l``'s (K, V)."""
    B, n, d = x.shape
    for layer, block in enumerate(model.blocks):
        attention = block.self_attn
        H = attention.num_heads
        W_q, W_k, W_v = attention.projection_weights()
        b_q, b_k, b_v = (None,) * 3 if attention.in_proj_bias is None else attention.in_proj_bias.chunk(3)
        h = block.norm1(x)
        q, k, v = (F.linear(h, W, b).view(B, n, H, d // H).transpose(1, 2)         # (B, h, n, d_k)
                   for W, b in ((W_q, b_q), (W_k, b_k), (W_v, b_v)))
        out, K, V = step(q, k, v, *caches[layer])
        caches[layer] = (K, V)
        x = x + attention.out_proj(out.transpose(1, 2).reshape(B, n, d))           # concat heads, W_O
        x = x + block.feed_forward(block.norm2(x))
    return model.head(model.norm(x))                                               # (B, n, V)


@torch.no_grad()
def generate_with_step(model, prompt: Tensor, n: int, step: Step | None = None, *, temperature: float = 1.0,
                       generator: torch.Generator | None = None) -> Tensor:
    """Continue ``prompt`` (ids ``(T,)``) by ``n`` ids, ``T + n <= max_len``, sampling as :meth:`GPT.generate` does.

    With ``step``: a KV cache, every token fed alone, each layer's attention by ``step``. ``None``: no cache.
    """
    c = model.config
    if not c.norm_first or "rotate" in model.positional.hooks() or "score_bias" in model.positional.hooks():
        raise ValueError("generate_with_step runs pre-norm GPTs whose positions are added to the embeddings")
    if prompt.dim() != 1 or not 1 <= len(prompt) or len(prompt) + n > c.max_len:
        raise ValueError(f"prompt must be ids (T,) with T + n <= max_len = {c.max_len}; got shape "
                         f"{tuple(prompt.shape)} and n = {n}")
    was_training = model.training
    model.eval()
    seq = prompt[None].to(model.embed.weight.device)                                # (1, T)
    d_k = c.d_model // c.nhead
    empty = seq.new_zeros(1, c.nhead, 0, d_k, dtype=model.embed.weight.dtype)
    caches = [(empty, empty)] * c.num_layers
    fed = 0                                                                         # tokens in the cache
    try:
        while seq.shape[1] < len(prompt) + n:
            if step is None:                                                        # re-read everything
                x = model.positional(model.embed(seq), 0)
                logits = _layers(model, x, [(empty, empty)] * c.num_layers, full_causal_step)
            else:                                                                   # one token at a time
                while fed < seq.shape[1]:
                    x = model.positional(model.embed(seq[:, fed:fed + 1]), fed)
                    logits = _layers(model, x, caches, step)
                    fed += 1
            next_id = sample_next(logits[:, -1], temperature=temperature, generator=generator)
            seq = torch.cat([seq, next_id[:, None]], dim=1)
    finally:
        model.train(was_training)
    return seq[0]
