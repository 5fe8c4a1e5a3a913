"""Notebook 16's experiment: which sentence pair MiniLM finds more similar."""

from __future__ import annotations

from functools import lru_cache

import torch

PAIR_A = ("I loved this film.", "I did not love this film.")
PAIR_B = ("I loved this film.", "The movie was wonderful.")


@lru_cache(maxsize=1)
def measure_pair_similarities() -> tuple[float, float]:
    """MiniLM's cosine similarity of pair A and of pair B."""
    from seqlab.minilm import load_minilm

    with torch.random.fork_rng(devices=[]):                      # building the model draws initial weights
        e = load_minilm().encode([*PAIR_A, *PAIR_B])             # (4, 384), unit length
    return float(e[0] @ e[1]), float(e[2] @ e[3])
