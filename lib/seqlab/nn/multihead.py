r"""Multi-head attention, a twin of ``torch.nn.MultiheadAttention``; notebook 10.

:math:`\mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W_O` with
:math:`\mathrm{head}_i = \mathrm{attend}(Q W_Q^{(i)}, K W_K^{(i)}, V W_V^{(i)})`. Sequence-first inside, as torch
(``batch_first`` input is transposed as views). Unlike torch, a query with no key gets zeros, not NaN, and
``is_causal=True`` alone builds the causal mask. Cached keys are stored before RoPE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.attention import attend
from seqlab.nn.masks import causal_mask, check_mask, from_torch, merge_masks
from seqlab.nn.transformer_checks import check_heads

#: A rotation of the split heads' queries ``(B, H, L, d_k)`` and keys ``(B, H, S, d_k)``, e.g. RoPE's.
Rotation = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


@dataclass
class AttentionCache:
    """One self-attention's ``keys``, ``values`` ``(B, H, m, d_k)`` (None when empty); ``offset`` = ``m``."""

    keys: Tensor | None = None
    values: Tensor | None = None

    @property
    def offset(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Add ``L`` new positions ``(B, H, L, d_k)``; return all ``m = offset + L`` keys and values."""
        if self.keys is not None and (keys.shape[:2] != self.keys.shape[:2] or keys.shape[-1] != self.keys.shape[-1]):
            raise ValueError(f"the cache holds keys of shape (B, H, m, d_k) = {tuple(self.keys.shape)}; new keys "
                             f"{tuple(keys.shape)} do not continue them (same B, H and d_k needed)")
        self.keys = keys if self.keys is None else torch.cat([self.keys, keys], dim=-2)
        self.values = values if self.values is None else torch.cat([self.values, values], dim=-2)
        return self.keys, self.values

    def nbytes(self) -> int:
        """Memory held by the cached keys and values, in bytes."""
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values) if t is not None)


@dataclass
class KVCache:
    """One :class:`AttentionCache` per decoder layer (``cache[l]``), all at the same ``offset``."""

    layers: list[AttentionCache] = field(default_factory=list)

    @classmethod
    def empty(cls, num_layers: int) -> KVCache:
        if num_layers < 1:
            raise ValueError(f"a KV cache needs at least one layer, got num_layers={num_layers}")
        return cls([AttentionCache() for _ in range(num_layers)])

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, layer: int) -> AttentionCache:
        return self.layers[layer]

    @property
    def offset(self) -> int:
        return self.layers[0].offset if self.layers else 0

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)


class MultiheadAttention(nn.Module):
    """``forward(query (L, B, d_model), key (S, B, kdim), value (S, B, vdim))`` -> ``(output, weights)`` as torch.

    Weights ``(B, L, S)``, per head ``(B, h, L, S)``, or None. Keyword-only extras: ``fused`` (torch's
    kernel when no weights are asked for); ``cache`` (self-attention; masks get ``S = cache.offset``
    columns); ``rotate(q, k)`` on the split heads (RoPE); ``score_bias`` ``(h, L, S)`` (ALiBi). As torch's: the
    weights returned are after dropout; ``add_bias_kv`` appends one learned key and value, ``add_zero_attn`` a zero one.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, *, fused: bool = False) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be positive, got embed_dim={embed_dim}, "
                             f"num_heads={num_heads}")
        check_heads(embed_dim, num_heads, names=("embed_dim", "num_heads"))
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1], got {dropout}")
        factory = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads                                    # d_k
        self.dropout, self.batch_first, self.fused = dropout, batch_first, fused
        # Parameters are created in torch's order: nn.Linear's own initialisation of out_proj draws
        # random numbers, so the same seed gives the same weights as torch.nn.MultiheadAttention.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim, **factory))  # [W_Q; W_K; W_V]^T
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(embed_dim, embed_dim, **factory))     # (W_Q)^T
            self.k_proj_weight = nn.Parameter(torch.empty(embed_dim, self.kdim, **factory))     # (W_K)^T
            self.v_proj_weight = nn.Parameter(torch.empty(embed_dim, self.vdim, **factory))     # (W_V)^T
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)                     # W_O
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim, **factory))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim, **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """torch's initialisation: Xavier-uniform projections, zero biases, Xavier-normal bias_k/bias_v."""
        if self._qkv_same_embed_dim:
            nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            nn.init.xavier_uniform_(self.q_proj_weight)
            nn.init.xavier_uniform_(self.k_proj_weight)
            nn.init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.constant_(self.in_proj_bias, 0.0)
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)

    def projection_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(W_Q)^T, (W_K)^T, (W_V)^T``, views of the parameters."""
        if self._qkv_same_embed_dim:
            return self.in_proj_weight.chunk(3)
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False, *, cache: AttentionCache | None = None, rotate: Rotation | None = None,
                score_bias: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        batched = self._check_inputs(query, key, value)
        if cache is not None:
            self._check_cache(query, key, cache, batched)
        if not batched:                    # one sequence: a batch of one, in torch's batch axis
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        elif self.batch_first:             # (B, n, d_model) -> (n, B, d_model) views; see the module docstring
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        L, B, d_model = query.shape
        S = key.shape[0] + (0 if cache is None else cache.offset)   # keys: the cached ones, then the new ones
        H, d_k = self.num_heads, self.head_dim
        # is_causal without attn_mask: attend() applies the causal mask, as a flag to the fused kernel when no
        # other mask is left (no (L, S) mask kept for backward, notebook 17), else merged in. Extra keys
        # (bias_k, add_zero_attn) are open to every query, so with them the mask is built here.
        causal_in_attend = (is_causal and attn_mask is None and L <= S
                            and self.bias_k is None and not self.add_zero_attn)
        mask = self._merged_mask(attn_mask, key_padding_mask, is_causal and not causal_in_attend, score_bias,
                                 batched, B, L, S, query)

        # 1-2. project and split the heads: Q W_Q^{(i)} for every head i at once
        W_q, W_k, W_v = self.projection_weights()
        b_q, b_k, b_v = (None, None, None) if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q = self._split_heads(F.linear(query, W_q, b_q))         # (B, H, L, d_k)
        k = self._split_heads(F.linear(key, W_k, b_k))           # (B, H, S, d_k)
        v = self._split_heads(F.linear(value, W_v, b_v))         # (B, H, S, d_k)
        if cache is not None:                                    # cached positions first, then the L new ones
            k, v = cache.append(k, v)                            # (B, H, S, d_k) each, S = offset + L
        if rotate is not None:
            q, k = rotate(q, k)                                  # RoPE: (B, H, L, d_k), (B, H, S, d_k)
        if self.bias_k is not None:                              # one learned key/value every query may read
            k = torch.cat([k, self.bias_k.view(1, H, 1, d_k).expand(B, H, 1, d_k)], dim=2)
            v = torch.cat([v, self.bias_v.view(1, H, 1, d_k).expand(B, H, 1, d_k)], dim=2)
        if self.add_zero_attn:                                   # one all-zero key/value
            k = torch.cat([k, k.new_zeros(B, H, 1, d_k)], dim=2)
            v = torch.cat([v, v.new_zeros(B, H, 1, d_k)], dim=2)

        # 3. attend in every head: softmax(q k^T / sqrt(d_k) + M) v
        dropout_p = self.dropout if self.training else 0.0
        fused = self.fused and not need_weights
        z, weights = attend(q, k, v, mask, dropout_p=dropout_p, fused=fused,
                            is_causal=causal_in_attend)          # (B, H, L, d_k), (B, H, L, S')

        # 4-5. concatenate the heads and mix them with W_O
        z = z.permute(2, 0, 1, 3).reshape(L, B, d_model)         # Concat(head_1..head_h), (L, B, d_model)
        attn_output = self.out_proj(z)                           # (L, B, d_model)
        if not batched:
            attn_output = attn_output.squeeze(1)
        elif self.batch_first:
            attn_output = attn_output.transpose(0, 1)            # (B, L, d_model)
        if not need_weights:
            return attn_output, None
        if average_attn_weights:
            weights = weights.mean(dim=1)                        # (B, L, S')
        return attn_output, (weights if batched else weights.squeeze(0))

    def _check_cache(self, query: Tensor, key: Tensor, cache: AttentionCache, batched: bool) -> None:
        if not isinstance(cache, AttentionCache):
            raise TypeError(f"cache must be a seqlab.nn.multihead.AttentionCache or None, got {type(cache).__name__}")
        if not self._qkv_same_embed_dim:
            raise ValueError("a KV cache is for self-attention: kdim and vdim must equal embed_dim")
        s = 1 if batched and self.batch_first else 0
        if key.shape[s] != query.shape[s]:
            raise ValueError(f"with a cache, query, key and value are the same L new positions (self-attention), "
                             f"got {query.shape[s]} queries and {key.shape[s]} keys")

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(n, B, d_model)`` -> ``(B, H, n, d_k)``: column block i of the projection is head i (a view, no
        copy)."""
        n, B, _ = x.shape
        return x.view(n, B, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _merged_mask(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool,
                     score_bias: Tensor | None, batched: bool, B: int, L: int, S: int,
                     query: Tensor) -> Tensor | None:
        """Every mask in seqlab's convention (True / 0 = may attend), merged, broadcastable to ``(B, H, L, S')``."""
        H = self.num_heads
        allowed = None
        if attn_mask is not None:
            shapes = [(L, S), (B * H, L, S)] if batched else [(L, S), (H, L, S)]
            self._check_mask("attn_mask", attn_mask, shapes, "True = may not attend, or added to the scores", query)
            allowed = from_torch(attn_mask, query.dtype)
            if allowed.dim() == 3:
                allowed = allowed.view(B, H, L, S)                # torch's (B*H, L, S) is batch-major
        elif is_causal:
            if L > S:
                raise ValueError(f"is_causal=True without attn_mask builds a causal mask, which needs no more "
                                 f"queries than keys (the queries are the last L of S positions), got L={L}, S={S}")
            allowed = causal_mask(L, S, device=query.device)      # (L, S)
        padding = None
        if key_padding_mask is not None:
            shapes = [(B, S)] if batched else [(S,)]
            self._check_mask("key_padding_mask", key_padding_mask, shapes, "True at padding, or added to the scores",
                             query)
            padding = from_torch(key_padding_mask, query.dtype).view(B, 1, 1, S)
        if score_bias is not None:
            if not isinstance(score_bias, Tensor) or not score_bias.is_floating_point() \
                    or tuple(score_bias.shape) != (H, L, S):
                got = (f"{score_bias.dtype} of shape {tuple(score_bias.shape)}" if isinstance(score_bias, Tensor)
                       else type(score_bias).__name__)
                raise ValueError(f"score_bias must be a float tensor of shape {(H, L, S)} (heads, queries, keys), "
                                 f"got {got}")
            score_bias = score_bias.to(device=query.device, dtype=query.dtype)
        mask = merge_masks(allowed, padding, score_bias)
        extra = int(self.bias_k is not None) + int(self.add_zero_attn)
        if mask is not None and extra:                           # the appended keys are open to every query
            mask = F.pad(mask, (0, extra), value=True if mask.dtype == torch.bool else 0.0)
        return mask

    @staticmethod
    def _check_mask(name: str, mask: Tensor, shapes: list[tuple[int, ...]], what: str, query: Tensor) -> None:
        check_mask(name, mask, shapes, what=what)
        if mask.device != query.device:
            raise RuntimeError(f"{name} is on {mask.device} but the query is on {query.device}")

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> bool:
        """Raise naming what was expected and what came; return whether the inputs are batched."""
        for name, x in (("query", query), ("key", key), ("value", value)):
            if not isinstance(x, Tensor):
                raise TypeError(f"{name} must be a tensor, got {type(x).__name__}")
        batched = query.dim() == 3
        layout = "(B, {n}, {f})" if self.batch_first else "({n}, B, {f})"
        if query.dim() not in (2, 3):
            raise ValueError(f"query must be 3-D {layout.format(n='L', f=self.embed_dim)} or 2-D "
                             f"(L, {self.embed_dim}) for one unbatched sequence, got shape {tuple(query.shape)}")
        for name, x, size, size_name, n in (("query", query, self.embed_dim, "embed_dim", "L"),
                                            ("key", key, self.kdim, "kdim", "S"), ("value", value, self.vdim, "vdim", "S")):
            if x.dim() != query.dim() or x.shape[-1] != size:
                expected = layout.format(n=n, f=size) if batched else f"({n}, {size})"
                raise ValueError(f"{name} must have shape {expected} ({size} = {size_name}), got {tuple(x.shape)}")
        if batched:
            b = 0 if self.batch_first else 1
            if not query.shape[b] == key.shape[b] == value.shape[b]:
                raise ValueError(f"query, key and value must have the same batch size (dimension {b}), got "
                                 f"{query.shape[b]}, {key.shape[b]} and {value.shape[b]}")
        s = 1 if batched and self.batch_first else 0
        if key.shape[s] != value.shape[s]:
            raise ValueError(f"key and value must have the same length S (one value per key, dimension {s}), "
                             f"got key {tuple(key.shape)} and value {tuple(value.shape)}")
        weight = self.out_proj.weight
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.device != weight.device:
                raise RuntimeError(f"{name} is on {x.device} but the parameters are on {weight.device}")
            if x.dtype != weight.dtype:
                raise TypeError(f"{name} has dtype {x.dtype} but the parameters have {weight.dtype}; "
                                f"convert one of them with .to()")
        return batched

    def extra_repr(self) -> str:
        extras = [f"embed_dim={self.embed_dim}", f"num_heads={self.num_heads}", f"head_dim={self.head_dim}"]
        if not self._qkv_same_embed_dim:
            extras += [f"kdim={self.kdim}", f"vdim={self.vdim}"]
        if self.dropout:
            extras.append(f"dropout={self.dropout}")
        if self.batch_first:
            extras.append("batch_first=True")
        if self.bias_k is not None:
            extras.append("add_bias_kv=True")
        if self.add_zero_attn:
            extras.append("add_zero_attn=True")
        if self.fused:
            extras.append("fused=True")
        return ", ".join(extras)
