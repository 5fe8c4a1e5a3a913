"""Turning a model's scores into tokens: sampling with temperature and top-k, and greedy choice.

A language model gives logits z (one per vocabulary entry). Sampling draws the next token from

    p_i = exp(z_i / τ) / Σ_j exp(z_j / τ)

where the temperature τ sharpens (τ < 1) or flattens (τ > 1) the distribution; τ → 0 is the
greedy argmax. Top-k keeps only the k largest logits before the softmax.
"""

from __future__ import annotations

import torch


def sample_next(logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw one id per row of ``logits`` (B, V) -> (B,). ``temperature == 0`` means greedy."""
    if logits.dim() != 2:
        raise ValueError(f"sample_next expects logits of shape (B, V), got {tuple(logits.shape)}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.float() / temperature
    if top_k is not None:
        if not 1 <= top_k <= logits.shape[-1]:
            raise ValueError(f"top_k must be in 1..{logits.shape[-1]}, got {top_k}")
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    # multinomial on the CPU with an explicit generator gives the same draws on every machine
    return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(logits.device)
