"""The GPT of notebook 14 top to bottom, in one listing: the teaching twin of seqlab.models.gpt.GPT.
Same parameter names, so GPT's state_dict loads into it; tests/test_gpt.py checks that both give equal logits."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):                      # LN(x) = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta
    def __init__(self, d):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))   # gamma, beta

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        sigma2 = (x - mu).pow(2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(sigma2 + 1e-5) * self.weight + self.bias


class MaskedMultiHead(nn.Module):                # Concat(head_1, ..., head_h) W_O
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))      # W_Q; W_K; W_V, stacked
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = nn.Linear(d, d)                                # W_O

    def forward(self, X):                                              # X: (B, T, d)
        B, T, d = X.shape
        d_k = d // self.h
        Q, K, V = F.linear(X, self.in_proj_weight, self.in_proj_bias).split(d, dim=-1)
        Q, K, V = (Z.view(B, T, self.h, d_k).transpose(1, 2) for Z in (Q, K, V))    # (B, h, T, d_k)
        S = Q @ K.transpose(-2, -1) / math.sqrt(d_k)                   # (B, h, T, T) scores
        M = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)             # j > i: the future
        A = S.masked_fill(M, float("-inf")).softmax(dim=-1)            # softmax(Q K^T / sqrt(d_k) + M)
        heads = (A @ V).transpose(1, 2).reshape(B, T, d)               # concatenate the h heads
        return self.out_proj(heads)


class Block(nn.Module):                          # pre-norm: X + MaskedMultiHead(LN_1(X)), X + FFN(LN_2(X))
    def __init__(self, d, h, f):
        super().__init__()
        self.norm1, self.self_attn = LayerNorm(d), MaskedMultiHead(d, h)
        self.norm2, self.linear1, self.linear2 = LayerNorm(d), nn.Linear(d, f), nn.Linear(f, d)   # W_1, W_2

    def forward(self, X):
        X = X + self.self_attn(self.norm1(X))
        return X + self.linear2(F.gelu(self.linear1(self.norm2(X))))  # FFN(x) = GELU(x W_1 + b_1) W_2 + b_2


class Positions(nn.Module):                      # P: one learned vector per position
    def __init__(self, max_len, d):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_len, d))


class ListingGPT(nn.Module):                     # ids (B, T) -> logits (B, T, V)
    def __init__(self, V, max_len, d, N, h, f=None):
        super().__init__()
        self.embed, self.positional = nn.Embedding(V, d), Positions(max_len, d)      # E, P
        self.blocks = nn.ModuleList(Block(d, h, f or 4 * d) for _ in range(N))
        self.norm, self.head = LayerNorm(d), nn.Linear(d, V)                          # final LN, read-out
        self.head.weight = self.embed.weight                                          # tied: U = E

    def forward(self, ids):
        T = ids.shape[1]
        X = self.embed(ids) + self.positional.weight[:T]              # X^(0) = E[x] + P
        for block in self.blocks:
            X = block(X)                                               # N blocks
        return self.head(self.norm(X))                                 # LN(X) E^T + b
