"""seqlab.nn.multihead.MultiheadAttention against torch.nn.MultiheadAttention: same weights in, same
outputs, weights and gradients out (float32, <= 1e-5), plus seqlab's own behaviour (fully masked
rows, is_causal without a mask, the fused path, the positional hooks) and its error messages."""

from __future__ import annotations

import pytest
import torch

from seqlab import cost
from seqlab.nn.masks import causal_mask
from seqlab.nn.multihead import MultiheadAttention
from seqlab.nn.positional import PositionalEncoding

TOL = 1e-5
E, H, B, L, S = 16, 4, 3, 5, 7          # width, heads, batch, queries, keys (cross-attention)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def twins(**kwargs) -> tuple[torch.nn.MultiheadAttention, MultiheadAttention]:
    """torch's module with non-zero biases, and ours loaded from its state_dict (strict)."""
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(**kwargs)
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "bias" in name:               # torch initialises biases to 0, which would hide a bias bug
                p.copy_(randn(*p.shape, seed=len(name)))
    ours = MultiheadAttention(**kwargs)
    ours.load_state_dict(reference.state_dict(), strict=True)
    return reference, ours


def run(module, query, key, value, self_attention=False, **kwargs):
    """Outputs, weights and every gradient (inputs by name, parameters by name), in float64."""
    query = query.detach().clone().requires_grad_()
    if self_attention:
        key = value = query
    else:
        key, value = key.detach().clone().requires_grad_(), value.detach().clone().requires_grad_()
    out, weights = module(query, key, value, **kwargs)
    loss = (out * randn(*out.shape, seed=11)).sum()
    if weights is not None:
        loss = loss + (weights * randn(*weights.shape, seed=12)).sum()
    loss.backward()
    results = {"output": out, "query.grad": query.grad}
    if weights is not None:
        results["weights"] = weights
    if not self_attention:
        results.update({"key.grad": key.grad, "value.grad": value.grad})
    results.update({f"{name}.grad": p.grad for name, p in module.named_parameters()})
    return {name: t.detach().double() for name, t in results.items()}


def max_errors(mine: dict, theirs: dict) -> dict:
    assert mine.keys() == theirs.keys()
    for name in mine:
        assert mine[name].shape == theirs[name].shape, (name, mine[name].shape, theirs[name].shape)
        assert torch.isfinite(mine[name]).all(), name
    return {name: (mine[name] - theirs[name]).abs().max().item() for name in mine}


def blocked(shape, seed):
    """A random boolean torch-style mask (True = blocked) that leaves key 0 open in every row."""
    mask = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < 0.4
    mask[..., 0] = False
    return mask


def additive(shape, seed):
    """A float mask: -inf where ``blocked`` blocks, small finite shifts elsewhere."""
    return (0.5 * randn(*shape, seed=seed)).masked_fill(blocked(shape, seed), float("-inf"))


def padding(seed):
    """(B, S) True at padding; every sequence keeps at least its first key."""
    lengths = torch.randint(1, S + 1, (B,), generator=torch.Generator().manual_seed(seed))
    lengths[0] = S
    return torch.arange(S)[None, :] >= lengths[:, None]


# name -> (constructor kwargs, forward kwargs, whether self-attention (L = S, query is key is value))
CASES = {
    "self": ({}, {}, True),
    "cross": ({}, {}, False),
    "no_bias": ({"bias": False}, {}, False),
    "kdim_vdim": ({"kdim": 6, "vdim": 10}, {}, False),
    "per_head_weights": ({}, {"average_attn_weights": False}, False),
    "bool_mask_2d": ({}, {"attn_mask": blocked((L, S), 1)}, False),
    "float_mask_2d": ({}, {"attn_mask": additive((L, S), 2)}, False),
    "bool_mask_3d": ({}, {"attn_mask": blocked((B * H, L, S), 3), "average_attn_weights": False}, False),
    "float_mask_3d": ({}, {"attn_mask": additive((B * H, L, S), 4)}, False),
    "padding_bool": ({}, {"key_padding_mask": padding(5)}, False),
    "padding_float": ({}, {"key_padding_mask": torch.zeros(B, S).masked_fill(padding(6), float("-inf"))}, False),
    "padding_and_mask": ({}, {"key_padding_mask": padding(7), "attn_mask": blocked((L, S), 8)}, False),
    "causal": ({}, {"attn_mask": ~causal_mask(S), "is_causal": True}, True),
    "causal_padding": ({}, {"attn_mask": ~causal_mask(S), "is_causal": True, "key_padding_mask": padding(9)}, True),
    "no_weights": ({}, {"need_weights": False, "attn_mask": blocked((L, S), 10)}, False),
    "no_weights_causal": ({}, {"need_weights": False, "attn_mask": ~causal_mask(S), "is_causal": True}, True),
    "bias_kv": ({"add_bias_kv": True}, {"attn_mask": blocked((L, S), 11)}, False),
    "zero_attn": ({"add_zero_attn": True}, {"key_padding_mask": padding(12)}, False),
    "bias_kv_zero_attn": ({"add_bias_kv": True, "add_zero_attn": True, "kdim": 6, "vdim": 10},
                          {"attn_mask": additive((B * H, L, S), 13),
                           "key_padding_mask": torch.zeros(B, S).masked_fill(padding(14), float("-inf")),
                           "average_attn_weights": False}, False),
    "eval_dropout": ({"dropout": 0.3}, {"attn_mask": blocked((L, S), 15)}, False),
}


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case, batch_first):
    init, forward, self_attention = CASES[case]
    reference, ours = twins(embed_dim=E, num_heads=H, batch_first=batch_first, **init)
    if init.get("dropout"):
        reference.eval(), ours.eval()
    n = S if self_attention else L

    def layout(x):                                   # (n, B, f) -> the module's layout
        return x.transpose(0, 1).contiguous() if batch_first else x
    query = layout(randn(n, B, E, seed=20))
    key, value = layout(randn(S, B, ours.kdim, seed=21)), layout(randn(S, B, ours.vdim, seed=22))
    mine = run(ours, query, key, value, self_attention, **forward)
    theirs = run(reference, query, key, value, self_attention, **forward)
    errors = max_errors(mine, theirs)
    assert max(errors.values()) <= TOL, errors
    if forward.get("need_weights", True):
        heads = not forward.get("average_attn_weights", True)
        extra = int(bool(init.get("add_bias_kv"))) + int(bool(init.get("add_zero_attn")))
        assert mine["weights"].shape == ((B, H, n, S + extra) if heads else (B, n, S + extra))


@pytest.mark.parametrize("init", [{}, {"add_bias_kv": True, "add_zero_attn": True}])
@pytest.mark.parametrize("masks", ["none", "padding_and_mask"])
def test_unbatched_inputs_match_torch(init, masks):
    reference, ours = twins(embed_dim=E, num_heads=H, **init)
    forward = {}
    if masks != "none":
        key_padding_mask = torch.zeros(S, dtype=torch.bool)
        key_padding_mask[-2:] = True                                 # (S,): the last two keys are padding
        forward = {"key_padding_mask": key_padding_mask, "attn_mask": blocked((H, L, S), 1)}
    args = randn(L, E, seed=1), randn(S, E, seed=2), randn(S, E, seed=3)
    mine, theirs = run(ours, *args, **forward), run(reference, *args, **forward)
    assert mine["output"].shape == (L, E)
    assert max(max_errors(mine, theirs).values()) <= TOL
    per_head = ours(*args, average_attn_weights=False, **forward)[1]
    assert per_head.shape == (H, L, S + 2 * bool(init))


@pytest.mark.parametrize("init", [{}, {"bias": False}, {"kdim": 6, "vdim": 10}, {"add_bias_kv": True}])
def test_same_seed_gives_torchs_initial_weights_and_state_dicts_load_both_ways(init):
    torch.manual_seed(3)
    reference = torch.nn.MultiheadAttention(E, H, **init)
    torch.manual_seed(3)
    ours = MultiheadAttention(E, H, **init)
    mine, theirs = ours.state_dict(), reference.state_dict()
    assert list(mine) == list(theirs)
    assert all(torch.equal(mine[name], theirs[name]) for name in mine)
    assert (ours.in_proj_bias is None) == ("bias" in init)
    # ours -> torch, strict
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(1.0)
    reference.load_state_dict(ours.state_dict(), strict=True)
    assert all(torch.equal(ours.state_dict()[name], t) for name, t in reference.state_dict().items())


def test_is_causal_without_a_mask_builds_the_causal_mask():
    """torch raises here; seqlab builds causal_mask(L, S): queries are the last L of S positions."""
    reference, ours = twins(embed_dim=E, num_heads=H, batch_first=True)
    x = randn(B, S, E, seed=1)
    mine, theirs = run(ours, x, x, x, True, is_causal=True), run(reference, x, x, x, True, attn_mask=~causal_mask(S))
    assert max(max_errors(mine, theirs).values()) <= TOL
    query, memory = randn(B, L, E, seed=2), randn(B, S, E, seed=3)            # L < S: the last L positions
    mine = run(ours, query, memory, memory, is_causal=True)
    theirs = run(reference, query, memory, memory, attn_mask=~causal_mask(L, S))
    assert max(max_errors(mine, theirs).values()) <= TOL
    assert (mine["weights"][:, 0, S - L + 1:] == 0).all() and (mine["weights"][:, 0, :S - L + 1] > 0).all()
    with pytest.raises(ValueError, match=r"needs no more queries than keys.*got L=7, S=5"):
        ours(memory, query, query, is_causal=True)
    with pytest.raises(RuntimeError):                                          # what torch does instead
        reference(x, x, x, is_causal=True)


MASKS = {"none": {}, "causal": {"is_causal": True}, "mask_and_padding": {"attn_mask": additive((L, S), 1),
                                                                           "key_padding_mask": padding(2)}}


@pytest.mark.parametrize("masks", list(MASKS))
@pytest.mark.parametrize("init", [{}, {"add_bias_kv": True, "add_zero_attn": True}])
def test_fused_path_equals_explicit(masks, init):
    _, explicit = twins(embed_dim=E, num_heads=H, batch_first=True, **init)
    fused = MultiheadAttention(E, H, batch_first=True, fused=True, **init)
    fused.load_state_dict(explicit.state_dict())
    query, memory = randn(B, L, E, seed=1), randn(B, S, E, seed=2)
    forward = dict(MASKS[masks], need_weights=False)
    mine, theirs = run(fused, query, memory, memory, **forward), run(explicit, query, memory, memory, **forward)
    assert max(max_errors(mine, theirs).values()) <= TOL
    # asking for weights runs the explicit path, fused or not, and the weights are torch's
    out, weights = fused(query, memory, memory, average_attn_weights=False, **MASKS[masks])
    out_ref, weights_ref = explicit(query, memory, memory, average_attn_weights=False, **MASKS[masks])
    assert weights is not None and torch.allclose(weights, weights_ref, atol=TOL)


@pytest.mark.parametrize("padded", [False, True], ids=["causal", "causal_and_padding"])
@pytest.mark.parametrize("init", [{}, {"add_bias_kv": True}, {"add_zero_attn": True}])
def test_fused_causal_self_attention_equals_explicit_and_keeps_no_mask(init, padded):
    """Fused self-attention with is_causal and no other mask hands the kernel a flag, not an (S, S) mask
    (extra keys or padding: the mask is built and merged as on the explicit path)."""
    _, explicit = twins(embed_dim=E, num_heads=H, batch_first=True, **init)
    fused = MultiheadAttention(E, H, batch_first=True, fused=True, **init)
    fused.load_state_dict(explicit.state_dict())
    x = randn(B, S, E, seed=4)
    forward = {"is_causal": True, "need_weights": False, "key_padding_mask": padding(2) if padded else None}
    mine, theirs = run(fused, x, x, x, True, **forward), run(explicit, x, x, x, True, **forward)
    assert max(max_errors(mine, theirs).values()) <= TOL
    n = 256                                              # long enough that an n x n mask would show
    x = torch.randn(n, 1, E, requires_grad=True)
    plain = MultiheadAttention(E, H, fused=True)
    kept = {causal: cost.saved_bytes(lambda: plain(x, x, x, need_weights=False, is_causal=causal),
                                     exclude=[x, *plain.parameters()]) for causal in (False, True)}
    assert kept[True] == kept[False] < n * n * 4, kept


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_fully_masked_rows_and_all_padding_sequences_give_zeros_not_nan(fused):
    torch.manual_seed(0)
    mha = MultiheadAttention(E, H, batch_first=True, fused=fused)
    with torch.no_grad():
        mha.out_proj.bias.copy_(randn(E, seed=1))
    query = randn(B, L, E, seed=2).requires_grad_()
    memory = randn(B, S, E, seed=3).requires_grad_()
    attn_mask = torch.zeros(L, S, dtype=torch.bool)
    attn_mask[1] = True                                            # query 1 may attend to nothing
    key_padding_mask = torch.zeros(B, S, dtype=torch.bool)
    key_padding_mask[2] = True                                     # sequence 2 is all padding
    out, weights = mha(query, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                       need_weights=not fused, average_attn_weights=False)
    out.pow(2).sum().backward()
    # attention output zero there, so the layer's output is W^O's bias alone
    bias = mha.out_proj.bias.detach()
    assert torch.equal(out[:, 1].detach(), bias.expand(B, E)) and torch.equal(out[2].detach(), bias.expand(L, E))
    assert torch.isfinite(out).all() and torch.isfinite(query.grad).all() and torch.isfinite(memory.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())
    assert (query.grad[2] == 0).all() and (query.grad[:, 1] == 0).all() and (memory.grad[2] == 0).all()
    if not fused:
        assert (weights[:, :, 1] == 0).all() and (weights[2] == 0).all()
        assert torch.allclose(weights[0, :, 0].sum(-1), torch.ones(H))
    # float masks: the same rows, written as -inf
    out_float, _ = mha(query, memory, memory, attn_mask=torch.zeros(L, S).masked_fill(attn_mask, float("-inf")),
                       key_padding_mask=torch.zeros(B, S).masked_fill(key_padding_mask, float("-inf")))
    assert torch.allclose(out_float, out, atol=TOL)


class Recorder(PositionalEncoding):
    """A tiny positional encoding: doubles the queries in rotate, adds a fixed bias to the scores."""

    def __init__(self, bias: torch.Tensor):
        super().__init__()
        self.bias, self.calls = bias, []

    def rotate(self, q, k):
        self.calls.append(("rotate", tuple(q.shape), tuple(k.shape)))
        return 2 * q, k

    def score_bias(self, n, m, *, device=None, dtype=torch.float32):
        self.calls.append(("score_bias", n, m, device, dtype))
        return self.bias.to(device=device, dtype=dtype)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_positional_hooks_are_called_and_act_on_the_scores(fused):
    reference, ours = twins(embed_dim=E, num_heads=H, batch_first=True)
    bias = randn(H, L, S, seed=1)
    positional = Recorder(bias)
    ours.fused = fused
    # doubling q is doubling W^Q's rows (and b^Q); a score bias shared by the batch is a 3-D float mask
    with torch.no_grad():
        reference.in_proj_weight[:E] *= 2
        reference.in_proj_bias[:E] *= 2
    query, memory = randn(B, L, E, seed=2), randn(B, S, E, seed=3)
    mask = blocked((L, S), 4)
    forward = {"need_weights": not fused, "attn_mask": mask,
               **positional.attention_args(L, S, device=query.device)}          # the owner's call arguments
    mine = run(ours, query, memory, memory, **forward)
    theirs = run(reference, query, memory, memory, need_weights=not fused,
                 attn_mask=bias.repeat(B, 1, 1).masked_fill(mask, float("-inf")))
    for name in ("in_proj_weight.grad", "in_proj_bias.grad"):     # d/dW^Q = 2 d/d(2 W^Q): undo the doubling
        theirs[name][:E] *= 2
    errors = max_errors(mine, theirs)
    assert max(errors.values()) <= TOL, errors
    assert positional.calls == [("score_bias", L, S, query.device, torch.float32),
                                ("rotate", (B, H, L, E // H), (B, H, S, E // H))]


def test_dropout_only_in_training_and_the_same_draws_as_torch():
    reference, ours = twins(embed_dim=E, num_heads=H, dropout=0.5, batch_first=True)
    x = randn(B, L, E, seed=1)
    torch.manual_seed(5)
    out_ref, w_ref = reference(x, x, x, average_attn_weights=False)
    torch.manual_seed(5)
    out, w = ours(x, x, x, average_attn_weights=False)
    assert (w == 0).any() and torch.allclose(w, w_ref, atol=TOL) and torch.allclose(out, out_ref, atol=TOL)
    ours.eval()
    first, second = ours(x, x, x)[1], ours(x, x, x)[1]
    assert torch.equal(first, second) and torch.allclose(first.sum(-1), torch.ones(B, L))


def test_forward_reads_like_the_equations():
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), written out."""
    _, mha = twins(embed_dim=E, num_heads=H, bias=False, batch_first=True)
    X = randn(1, L, E, seed=1)[0]
    W_Q, W_K, W_V = (w.T for w in mha.in_proj_weight.detach().chunk(3))          # (E, E) each
    d_h = E // H
    heads = []
    for i in range(H):
        cols = slice(i * d_h, (i + 1) * d_h)
        Q_i, K_i, V_i = X @ W_Q[:, cols], X @ W_K[:, cols], X @ W_V[:, cols]
        heads.append(torch.softmax(Q_i @ K_i.T / d_h ** 0.5, dim=-1) @ V_i)
    expected = torch.cat(heads, dim=-1) @ mha.out_proj.weight.detach().T
    out, _ = mha(X[None], X[None], X[None])
    assert torch.allclose(out[0], expected, atol=TOL)


def test_errors_name_what_was_expected_and_what_came():
    with pytest.raises(ValueError, match=r"embed_dim must be divisible by num_heads \(each head gets embed_dim / "
                                         r"num_heads features\), got embed_dim=10, num_heads=4; num_heads could be "
                                         r"one of \[1, 2, 5, 10\]"):
        MultiheadAttention(10, 4)
    with pytest.raises(ValueError, match=r"positive"):
        MultiheadAttention(0, 1)
    mha = MultiheadAttention(E, H, kdim=6, vdim=10, batch_first=True)
    q, k, v = randn(B, L, E), randn(B, S, 6), randn(B, S, 10)
    with pytest.raises(ValueError, match=r"query must have shape \(B, L, 16\) \(16 = embed_dim\), got \(3, 5, 8\)"):
        mha(randn(B, L, 8), k, v)
    with pytest.raises(ValueError, match=r"key must have shape \(B, S, 6\) \(6 = kdim\), got \(3, 7, 16\)"):
        mha(q, randn(B, S, E), v)
    with pytest.raises(ValueError, match=r"value must have shape \(B, S, 10\) \(10 = vdim\), got \(3, 7, 6\)"):
        mha(q, k, randn(B, S, 6))
    with pytest.raises(ValueError, match=r"query must be 3-D \(B, L, 16\) or 2-D \(L, 16\).*got shape \(16,\)"):
        mha(randn(E), k, v)
    with pytest.raises(ValueError, match=r"same batch size \(dimension 0\), got 3, 2 and 3"):
        mha(q, randn(2, S, 6), v)
    with pytest.raises(ValueError, match=r"same length S .*got key \(3, 7, 6\) and value \(3, 6, 10\)"):
        mha(q, k, randn(B, 6, 10))
    with pytest.raises(TypeError, match=r"query has dtype torch.float64 but the parameters have torch.float32"):
        mha(q.double(), k, v)
    with pytest.raises(ValueError, match=r"attn_mask must have shape \(5, 7\) or \(12, 5, 7\) .*got \(7, 5\)"):
        mha(q, k, v, attn_mask=torch.zeros(S, L, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"attn_mask must be boolean or floating point .*got torch.int64"):
        mha(q, k, v, attn_mask=torch.zeros(L, S, dtype=torch.long))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(3, 7\) .*got \(3, 5\)"):
        mha(q, k, v, key_padding_mask=torch.zeros(B, L, dtype=torch.bool))
    seq_first = MultiheadAttention(E, H)
    with pytest.raises(ValueError, match=r"query must have shape \(L, B, 16\)"):
        seq_first(randn(L, B, 4), randn(S, B, E), randn(S, B, E))
    with pytest.raises(ValueError, match=r"score_bias must be a float tensor of shape \(4, 5, 7\).*got torch.float32 "
                                         r"of shape \(4, 5, 5\)"):
        MultiheadAttention(E, H, batch_first=True)(q, randn(B, S, E), randn(B, S, E), score_bias=randn(H, L, L))


# -- the KV cache (seqlab's extension; without a cache the module is torch's twin, tested above) -------
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
def test_cache_in_pieces_equals_causal_attention_over_the_whole_sequence(batch_first, fused):
    """Feeding 3, then 1, then 3 new positions with a cache gives what one causal pass over all 7 gives."""
    from seqlab.nn.multihead import AttentionCache
    from seqlab.nn.positional import ALiBi, NoPositionalEncoding, RoPE

    for positional in (NoPositionalEncoding(), RoPE(E // H), ALiBi(H)):
        _, ours = twins(embed_dim=E, num_heads=H, batch_first=batch_first)
        ours.fused = fused
        x = randn(B, S, E, seed=4) if batch_first else randn(S, B, E, seed=4)
        full, _ = ours(x, x, x, is_causal=True, need_weights=False, **positional.attention_args(S, S))
        cache, pieces, weights = AttentionCache(), [], []
        for start, stop in [(0, 3), (3, 4), (4, S)]:
            part = x[:, start:stop] if batch_first else x[start:stop]
            out, w = ours(part, part, part, is_causal=True, cache=cache, average_attn_weights=False,
                          **positional.attention_args(stop - start, stop))
            assert cache.offset == stop and cache.keys.shape == cache.values.shape == (B, H, stop, E // H)
            assert w.shape == (B, H, stop - start, stop)                 # the new queries read every cached key
            pieces.append(out)
        assert torch.allclose(torch.cat(pieces, dim=1 if batch_first else 0), full, atol=TOL)
        assert cache.nbytes() == 2 * B * H * S * (E // H) * 4


def test_cache_errors_name_what_was_expected():
    from seqlab.nn.multihead import AttentionCache

    _, ours = twins(embed_dim=E, num_heads=H, batch_first=True)
    cache = AttentionCache()
    x = randn(B, 2, E)
    ours(x, x, x, is_causal=True, cache=cache)
    with pytest.raises(ValueError, match=r"same L new positions \(self-attention\), got 2 queries and 7 keys"):
        ours(x, randn(B, S, E), randn(B, S, E), cache=AttentionCache())
    with pytest.raises(ValueError, match=r"the cache holds keys of shape \(B, H, m, d_k\) = \(3, 4, 2, 4\)"):
        ours(x[:1], x[:1], x[:1], cache=cache)                            # another batch size
    with pytest.raises(TypeError, match="cache must be a seqlab.nn.multihead.AttentionCache"):
        ours(x, x, x, cache={})
    with pytest.raises(ValueError, match=r"attn_mask must have shape"):  # masks have offset + L key columns
        ours(x, x, x, attn_mask=torch.zeros(2, 2, dtype=torch.bool), cache=cache)
