"""seqlab.nn.transformer against torch.nn: the same state_dicts, outputs and gradients (float32, eval mode).

Every parity test builds the torch.nn module, gives *every* parameter random values (so that
LayerNorm's gamma/beta and all biases matter), loads its state_dict into seqlab's twin with
strict=True, and compares outputs and the gradients of the inputs and of every parameter.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.multihead import MultiheadAttention
from seqlab.nn.positional import ALiBi, NoPositionalEncoding
from seqlab.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

# torch.nn.Transformer builds its encoder with the nested-tensor option on and then explains why it is unused
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")

TOL = 1e-5
D, H, FF = 16, 4, 32                       # small sizes: d_model, heads, d_ff
B, S, T = 3, 7, 5                          # batch, source length, target length


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def randomize(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (scaled like an initialisation), eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (p.shape[-1] ** -0.5 if p.dim() > 1 else 0.5))
    return module.eval()


def twin(reference: torch.nn.Module, ours: torch.nn.Module) -> torch.nn.Module:
    randomize(reference)
    ours.load_state_dict(reference.state_dict(), strict=True)
    return ours.eval()


def leaves(*tensors):
    return [None if t is None else t.detach().clone().requires_grad_(t.is_floating_point()) for t in tensors]


def outputs_and_gradients(module, inputs, kwargs, seed=99):
    """The output and the gradients of the float inputs and of every parameter, after one backward."""
    module.zero_grad(set_to_none=True)
    inputs = leaves(*inputs)
    out = module(*inputs, **kwargs)
    (out * randn(*out.shape, seed=seed)).sum().backward()
    grads = [x.grad for x in inputs if x is not None and x.requires_grad]
    return [out, *grads, *(p.grad for p in module.parameters())]


def max_error(ours, reference, inputs, ours_kwargs, reference_kwargs=None):
    mine = outputs_and_gradients(ours, inputs, ours_kwargs)
    theirs = outputs_and_gradients(reference, inputs, reference_kwargs if reference_kwargs is not None else ours_kwargs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert len(mine) == len(theirs)
    return max((a - b).abs().max().item() for a, b in zip(mine, theirs, strict=True))


def sequence(length, batch_first, seed):
    x = randn(B, length, D, seed=seed)
    return x if batch_first else x.transpose(0, 1).contiguous()


def padding(lengths, max_len):
    """torch's key_padding_mask: True at padding."""
    return torch.arange(max_len)[None, :] >= torch.tensor(lengths)[:, None]


def causal(n, boolean=False):
    mask = torch.nn.Transformer.generate_square_subsequent_mask(n)
    return mask == float("-inf") if boolean else mask


ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "callable": lambda x: x * torch.sigmoid(x)}
LAYER = {"d_model": D, "nhead": H, "dim_feedforward": FF, "dropout": 0.1}


def layer_kwargs(norm_first, activation, batch_first):
    return dict(LAYER, norm_first=norm_first, activation=ACTIVATIONS[activation], batch_first=batch_first)


# ---------------------------------------------------------------------------------------- parity with torch.nn


@pytest.mark.parametrize("masks", ["none", "bool", "float-causal"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq-first", "batch-first"])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_encoder_layer_matches_torch(norm_first, activation, batch_first, masks):
    kwargs = layer_kwargs(norm_first, activation, batch_first)
    reference = torch.nn.TransformerEncoderLayer(**kwargs)
    ours = twin(reference, TransformerEncoderLayer(**kwargs))
    call = {"none": {},
            "bool": {"src_mask": randn(S, S, seed=3) > 1.0, "src_key_padding_mask": padding([7, 4, 6], S)},
            "float-causal": {"src_mask": causal(S), "is_causal": True}}[masks]
    assert max_error(ours, reference, [sequence(S, batch_first, 1)], call) <= TOL


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq-first", "batch-first"])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_layer_matches_torch(norm_first, activation, batch_first):
    kwargs = layer_kwargs(norm_first, activation, batch_first)
    reference = torch.nn.TransformerDecoderLayer(**kwargs)
    ours = twin(reference, TransformerDecoderLayer(**kwargs))
    call = {"tgt_mask": causal(T), "tgt_is_causal": True, "memory_mask": randn(T, S, seed=4),
            "tgt_key_padding_mask": padding([5, 3, 4], T).float().masked_fill(padding([5, 3, 4], T), float("-inf")),
            "memory_key_padding_mask": padding([7, 2, 5], S).float().masked_fill(padding([7, 2, 5], S),
                                                                                float("-inf"))}
    inputs = [sequence(T, batch_first, 1), sequence(S, batch_first, 2)]
    assert max_error(ours, reference, inputs, call) <= TOL
    assert max_error(ours, reference, inputs, {}) <= TOL


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_stacks_match_torch(norm_first):
    kwargs = layer_kwargs(norm_first, "gelu", True)
    reference = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**kwargs), 2, torch.nn.LayerNorm(D),
                                            enable_nested_tensor=False)
    ours = twin(reference, TransformerEncoder(TransformerEncoderLayer(**kwargs), 2, LayerNorm(D)))
    src = sequence(S, True, 1)
    assert max_error(ours, reference, [src], {"mask": causal(S, boolean=True)}) <= TOL        # is_causal detected
    assert max_error(ours, reference, [src], {"src_key_padding_mask": padding([7, 1, 3], S)}) <= TOL

    reference = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(**kwargs), 3, torch.nn.LayerNorm(D))
    ours = twin(reference, TransformerDecoder(TransformerDecoderLayer(**kwargs), 3, LayerNorm(D)))
    call = {"tgt_mask": causal(T, boolean=True), "memory_key_padding_mask": padding([7, 1, 3], S)}
    assert max_error(ours, reference, [sequence(T, True, 2), src], call) <= TOL
    assert max_error(ours, reference, [sequence(T, True, 2), src], {"tgt_mask": causal(T), "tgt_is_causal": True}) <= TOL


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq-first", "batch-first"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_full_transformer_with_final_norms_matches_torch(norm_first, batch_first):
    kwargs = dict(d_model=D, nhead=H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF,
                  norm_first=norm_first, batch_first=batch_first)
    reference = torch.nn.Transformer(**kwargs)
    ours = twin(reference, Transformer(**kwargs))
    assert isinstance(ours.encoder.norm, LayerNorm) and isinstance(ours.decoder.norm, LayerNorm)
    src_pad, tgt_pad = padding([7, 5, 3], S), padding([5, 5, 2], T)
    call = {"tgt_mask": causal(T), "src_key_padding_mask": src_pad, "tgt_key_padding_mask": tgt_pad,
            "memory_key_padding_mask": src_pad, "src_mask": torch.zeros(S, S).masked_fill(
                randn(S, S, seed=5) > 1.5, float("-inf"))}
    call = {k: v.float().masked_fill(v, float("-inf")) if v.dtype == torch.bool else v for k, v in call.items()}
    inputs = [sequence(S, batch_first, 1), sequence(T, batch_first, 2)]
    assert max_error(ours, reference, inputs, call) <= TOL
    assert max_error(ours, reference, inputs, {"tgt_mask": causal(T), "tgt_is_causal": True}) <= TOL


def test_unbatched_input_and_bias_false_match_torch():
    reference = torch.nn.Transformer(D, H, 1, 1, FF, bias=False)
    ours = twin(reference, Transformer(D, H, 1, 1, FF, bias=False))
    assert all(not name.endswith("bias") for name, _ in ours.named_parameters())
    inputs = [randn(S, D, seed=1), randn(T, D, seed=2)]
    assert max_error(ours, reference, inputs, {"tgt_mask": causal(T), "src_key_padding_mask": padding([4], S)[0]}) <= TOL


def test_is_causal_without_a_mask_is_the_causal_mask():
    layer = randomize(TransformerDecoderLayer(**layer_kwargs(True, "relu", True)))
    tgt, memory = sequence(T, True, 1), sequence(S, True, 2)
    assert torch.equal(layer(tgt, memory, tgt_is_causal=True), layer(tgt, memory, causal(T), tgt_is_causal=True))
    assert not torch.allclose(layer(tgt, memory), layer(tgt, memory, tgt_is_causal=True))
    encoder = TransformerEncoder(TransformerEncoderLayer(**layer_kwargs(False, "relu", True)), 2).eval()
    src = sequence(S, True, 3)
    assert torch.equal(encoder(src, is_causal=True), encoder(src, causal(S, boolean=True)))


def test_torch_loads_seqlab_state_dicts_and_generates_the_same_mask():
    ours = randomize(Transformer(D, H, 1, 2, FF, batch_first=True, norm_first=True))
    reference = torch.nn.Transformer(D, H, 1, 2, FF, batch_first=True, norm_first=True)
    reference.load_state_dict(ours.state_dict(), strict=True)
    assert list(ours.state_dict()) == list(reference.state_dict())
    assert torch.equal(Transformer.generate_square_subsequent_mask(6),
                       torch.nn.Transformer.generate_square_subsequent_mask(6))
    assert Transformer.generate_square_subsequent_mask(3, dtype=torch.float64).dtype == torch.float64


# ------------------------------------------------------------------------------------------ attention weights


def test_encoder_layer_weights_are_those_of_its_attention_run_alone():
    layer = randomize(TransformerEncoderLayer(**layer_kwargs(False, "relu", True)))
    src, mask, kpm = sequence(S, True, 1), causal(S, boolean=True), padding([7, 3, 5], S)
    out, weights = layer(src, mask, kpm, need_weights=True)
    assert weights.shape == (B, H, S, S)
    assert torch.equal(out, layer(src, mask, kpm))
    _, alone = layer.self_attn(src, src, src, attn_mask=mask, key_padding_mask=kpm, need_weights=True,
                               average_attn_weights=False)
    assert torch.equal(weights, alone)
    reference = torch.nn.MultiheadAttention(D, H, batch_first=True)
    reference.load_state_dict(layer.self_attn.state_dict())
    _, torch_weights = reference.eval()(src, src, src, attn_mask=mask, key_padding_mask=kpm,
                                        average_attn_weights=False)
    assert (weights - torch_weights).abs().max() <= TOL
    assert (weights[1, :, :, 3:] == 0).all()                          # padding gets no weight


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_layer_weights_are_those_of_its_attentions_run_alone(norm_first):
    layer = randomize(TransformerDecoderLayer(**layer_kwargs(norm_first, "gelu", False)))
    tgt, memory, tgt_mask, mem_pad = sequence(T, False, 1), sequence(S, False, 2), causal(T), padding([7, 2, 4], S)
    out, weights = layer(tgt, memory, tgt_mask, memory_key_padding_mask=mem_pad, need_weights=True)
    assert set(weights) == {"self", "cross"}
    assert weights["self"].shape == (B, H, T, T) and weights["cross"].shape == (B, H, T, S)
    assert torch.equal(out, layer(tgt, memory, tgt_mask, memory_key_padding_mask=mem_pad))
    x = layer.norm1(tgt) if norm_first else tgt
    a, self_alone = layer.self_attn(x, x, x, attn_mask=tgt_mask, average_attn_weights=False)
    x = tgt + a if norm_first else layer.norm1(tgt + a)
    q = layer.norm2(x) if norm_first else x
    _, cross_alone = layer.multihead_attn(q, memory, memory, key_padding_mask=mem_pad, average_attn_weights=False)
    assert torch.allclose(weights["self"], self_alone, atol=1e-6, rtol=0)
    assert torch.allclose(weights["cross"], cross_alone, atol=1e-6, rtol=0)
    assert (weights["self"].triu(1) == 0).all() and (weights["cross"][1, :, :, 2:] == 0).all()


def test_stacks_and_transformer_return_weights_per_layer():
    model = randomize(Transformer(D, H, 2, 3, FF, batch_first=True))
    src, tgt = sequence(S, True, 1), sequence(T, True, 2)
    out, weights = model(src, tgt, tgt_mask=causal(T), need_weights=True)
    assert torch.equal(out, model(src, tgt, tgt_mask=causal(T)))
    assert weights["encoder"].shape == (2, B, H, S, S)
    assert weights["decoder_self"].shape == (3, B, H, T, T) and weights["cross"].shape == (3, B, H, T, S)
    # layer l's weights are what layer l returns on its own input
    x = src
    for l, layer in enumerate(model.encoder.layers):
        x, w = layer(x, need_weights=True)
        assert torch.equal(w, weights["encoder"][l])
    memory = model.encoder.norm(x)
    y = tgt
    for l, layer in enumerate(model.decoder.layers):
        y, w = layer(y, memory, tgt_mask=causal(T), need_weights=True)
        assert torch.equal(w["self"], weights["decoder_self"][l]) and torch.equal(w["cross"], weights["cross"][l])
    for w in weights.values():                                          # every row of every head sums to 1
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)


# ------------------------------------------------------------------------------------------ sizes and options


def test_base_model_parameter_count_is_torch_s_and_the_paper_s():
    ours = Transformer(device="meta")                                   # d_model 512, 8 heads, 6 + 6, d_ff 2048
    reference = torch.nn.Transformer(device="meta")
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in reference.parameters())
    d, d_ff = 512, 2048
    attention = 4 * d * d + 4 * d                                       # W_Q, W_K, W_V, W_O and their biases
    ffn = d * d_ff + d_ff + d_ff * d + d
    encoder_layer = attention + ffn + 2 * 2 * d                         # + two LayerNorms (gamma, beta)
    decoder_layer = 2 * attention + ffn + 3 * 2 * d
    assert count == 6 * encoder_layer + 6 * decoder_layer + 2 * 2 * d    # + the final norm of each stack
    # the paper shares one 37,000-token embedding between source, target and the pre-softmax layer
    embedding = sum(p.numel() for p in torch.nn.Embedding(37_000, d, device="meta").parameters())
    total = count + embedding
    assert (count, embedding, total) == (44_140_544, 18_944_000, 63_084_544)
    assert 0.95 < total / 65e6 < 1.0                                    # the paper's "65M": 3% more than we find


def owners(model: torch.nn.Module, positional: torch.nn.Module) -> list[str]:
    """The names under which ``model`` holds ``positional`` (named_modules lists a shared module once: walk all)."""
    return [name for name, module in model.named_modules(remove_duplicate=False) if module is positional]


def test_positional_goes_to_self_attention_only_and_is_owned_once():
    """One owner (the outermost module built with it); the attention layers hold no encoding (issue 17)."""
    p = NoPositionalEncoding()
    layer = TransformerDecoderLayer(D, H, FF, positional=p)
    assert owners(layer, p) == ["positional"]                              # a layer on its own owns it
    model = Transformer(D, H, 2, 2, FF, positional=p)
    assert owners(model, p) == ["positional"]                              # not in the stacks, layers, attentions
    assert not any(hasattr(m, "positional") for m in model.modules() if isinstance(m, MultiheadAttention))
    stack = TransformerEncoder(TransformerEncoderLayer(D, H, FF, positional=p), 3)
    assert owners(stack, p) == ["positional"]                              # taken over from the template, once
    assert all(layer.positional is None for layer in stack.layers)
    q = NoPositionalEncoding()
    stack = TransformerEncoder(TransformerEncoderLayer(D, H, FF, positional=p), 3, positional=q)
    assert owners(stack, q) == ["positional"] and owners(stack, p) == []
    reference = torch.nn.Transformer(D, H, 2, 2, FF)
    model.load_state_dict(reference.state_dict(), strict=True)           # a parameter-free encoding adds no keys


def test_alibi_biases_the_self_attention_and_moves_with_the_model():
    alibi = ALiBi(H)
    layer = randomize(TransformerDecoderLayer(**layer_kwargs(False, "relu", True), positional=alibi))
    plain = TransformerDecoderLayer(**layer_kwargs(False, "relu", True)).eval()
    plain.load_state_dict(layer.state_dict(), strict=True)
    tgt, memory = sequence(T, True, 1), sequence(S, True, 2)
    _, weights = layer(tgt, memory, need_weights=True)
    _, plain_weights = plain(tgt, memory, need_weights=True)
    _, self_alone = layer.self_attn(tgt, tgt, tgt, average_attn_weights=False, score_bias=alibi.score_bias(T, T))
    assert torch.equal(weights["self"], self_alone)
    assert not torch.allclose(weights["self"], plain_weights["self"], atol=1e-3)
    # farther keys get less weight under ALiBi than without it, on average
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs().float()
    assert (weights["self"] * distance).sum() < (plain_weights["self"] * distance).sum()
    x = layer.norm1(tgt + layer.self_attn(tgt, tgt, tgt, need_weights=False, score_bias=alibi.score_bias(T, T))[0])
    _, cross_alone = layer.multihead_attn(x, memory, memory, average_attn_weights=False)
    assert torch.allclose(weights["cross"], cross_alone, atol=1e-6, rtol=0)     # no positional in cross-attention
    model = Transformer(D, H, 1, 1, FF, positional=ALiBi(H)).double()
    assert model.positional.slopes.dtype == torch.float64                 # the owner moves it


def test_fused_attention_gives_the_same_outputs_and_gradients():
    kwargs = dict(d_model=D, nhead=H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF,
                  batch_first=True)
    explicit = randomize(Transformer(**kwargs))
    fused = Transformer(**kwargs, fused=True).eval()
    fused.load_state_dict(explicit.state_dict())
    assert all(m.fused for m in fused.modules() if isinstance(m, MultiheadAttention))
    inputs = [sequence(S, True, 1), sequence(T, True, 2)]
    call = {"tgt_mask": causal(T), "src_key_padding_mask": padding([7, 4, 2], S)}
    assert max_error(fused, explicit, inputs, call) <= TOL
    _, weights = fused(*inputs, **call, need_weights=True)              # weights asked for: still returned
    _, explicit_weights = explicit(*inputs, **call, need_weights=True)
    assert all(torch.allclose(weights[k], explicit_weights[k], atol=1e-6) for k in explicit_weights)


def test_an_all_padding_sequence_gives_a_finite_result():
    model = randomize(Transformer(D, H, 2, 2, FF, batch_first=True))
    reference = torch.nn.Transformer(D, H, 2, 2, FF, batch_first=True)
    reference.load_state_dict(model.state_dict())
    src, tgt = leaves(sequence(S, True, 1), sequence(T, True, 2))
    src_pad = padding([7, 0, 3], S)                                     # sequence 1 is nothing but padding
    out = model(src, tgt, tgt_mask=causal(T), src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(src.grad).all() and torch.isfinite(tgt.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert (src.grad[1] == 0).all()                                     # nothing reads an all-padding source
    expected = reference.eval()(src, tgt, tgt_mask=causal(T), src_key_padding_mask=src_pad,   # the other
                                memory_key_padding_mask=src_pad)                              # rows: torch's
    assert (out[[0, 2]] - expected[[0, 2]]).abs().max() <= TOL


def test_dropout_acts_in_training_only():
    layer = TransformerEncoderLayer(D, H, FF, dropout=0.5, batch_first=True)
    src = sequence(S, True, 1)
    torch.manual_seed(0)
    assert not torch.allclose(layer.train()(src), layer(src))           # two different dropout masks
    assert torch.equal(layer.eval()(src), layer(src))


def test_activation_module_adds_no_parameters():
    layer = TransformerEncoderLayer(D, H, FF, activation=torch.nn.GELU(approximate="tanh"))
    reference = torch.nn.TransformerEncoderLayer(D, H, FF, activation=torch.nn.GELU(approximate="tanh"))
    assert list(layer.state_dict()) == list(reference.state_dict())
    assert max_error(twin(reference, layer), reference, [sequence(S, False, 1)], {}) <= TOL


# ---------------------------------------------------------------------------------------------- bad input


def test_errors_name_what_was_expected_and_what_came():
    with pytest.raises(ValueError, match=r"d_model must be divisible by nhead.*got d_model=10, nhead=4; nhead could "
                                         r"be one of \[1, 2, 5, 10\]"):
        TransformerEncoderLayer(10, 4)
    with pytest.raises(ValueError, match=r"unknown activation 'tanh': expected one of \('relu', 'gelu'\) or a callable"):
        TransformerDecoderLayer(D, H, activation="tanh")
    with pytest.raises(TypeError, match=r"activation must be one of .* or a callable, got int"):
        Transformer(D, H, activation=3)
    layer = TransformerEncoderLayer(D, H, FF, batch_first=True)
    with pytest.raises(ValueError, match=r"expects src of shape \(N, L, E\).*E = d_model = 16; got \(3, 7, 8\)"):
        layer(randn(B, S, 8))
    with pytest.raises(ValueError, match=r"src_mask must have shape \(7, 7\) or \(12, 7, 7\).*got \(7, 6\)"):
        layer(sequence(S, True, 1), src_mask=torch.zeros(S, S - 1))
    with pytest.raises(ValueError, match=r"src_key_padding_mask must have shape \(3, 7\).*True at padding.*got \(7, 3\)"):
        layer(sequence(S, True, 1), src_key_padding_mask=padding([7, 7, 7], S).T)
    decoder = TransformerDecoderLayer(D, H, FF)
    with pytest.raises(ValueError, match=r"expects memory \(the encoder's output\) of shape \(S, N, E\) with "
                                         r"E = d_model = 16.*got \(7, 3, 12\)"):
        decoder(sequence(T, False, 1), randn(S, B, 12))
    with pytest.raises(ValueError, match=r"tgt \(5, 3, 16\) has batch size 3 but memory \(7, 2, 16\) has 2"):
        decoder(sequence(T, False, 1), randn(S, 2, D))
    with pytest.raises(ValueError, match=r"memory_mask must have shape \(5, 7\) or \(12, 5, 7\).*got \(7, 5\)"):
        decoder(sequence(T, False, 1), sequence(S, False, 2), memory_mask=torch.zeros(S, T))
    with pytest.raises(TypeError, match=r"tgt_mask must be boolean or floating point.*got torch.int64"):
        decoder(sequence(T, False, 1), sequence(S, False, 2), tgt_mask=torch.zeros(T, T, dtype=torch.long))
    model = Transformer(D, H, 1, 1, FF, batch_first=True)
    with pytest.raises(ValueError, match=r"src and tgt must have the same batch size: src \(3, 7, 16\) has 3, "
                                         r"tgt \(2, 5, 16\) has 2"):
        model(sequence(S, True, 1), randn(2, T, D))
    with pytest.raises(ValueError, match=r"Transformer expects tgt of shape \(N, L, E\).*= 16; got \(3, 5, 4\)"):
        model(sequence(S, True, 1), randn(B, T, 4))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_encoder_layer_with_a_kv_cache_equals_the_causal_layer(norm_first):
    """A decoder-only (GPT) block: new positions with a cache give the full causal pass's rows, masks take m columns."""
    from seqlab.nn.multihead import AttentionCache

    layer = randomize(TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first,
                                              positional=ALiBi(H)))
    x = randn(B, S, D, seed=5)
    full, full_weights = layer(x, is_causal=True, need_weights=True)
    cache = AttentionCache()
    first = layer(x[:, :4], is_causal=True, cache=cache)
    # an explicit mask over the offset + n = 7 keys (torch's meaning, True = blocked) instead of is_causal
    from seqlab.nn.masks import causal_mask

    blocked = ~causal_mask(S - 4, S)                                  # (3, 7): queries are the last 3 positions
    rest, weights = layer(x[:, 4:], src_mask=blocked, cache=cache, need_weights=True)
    assert torch.allclose(torch.cat([first, rest], dim=1), full, atol=TOL)
    assert weights.shape == (B, H, S - 4, S) and torch.allclose(weights, full_weights[:, :, 4:], atol=TOL)
    with pytest.raises(ValueError, match="src_mask"):
        layer(x[:, :1], src_mask=torch.zeros(1, 1, dtype=torch.bool), cache=cache)


# -- stacks of torch.nn's own layers, as PyTorch's tests build them (issue 17) ------------------------
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
def test_stacks_take_any_layer_module_as_torch_does(batch_first):
    """seqlab's stacks around torch.nn layers compute what torch.nn's stacks compute with the same weights."""
    torch.manual_seed(0)
    kwargs = {"dim_feedforward": FF, "dropout": 0.0, "batch_first": batch_first}
    encoder = TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, **kwargs), 2, LayerNorm(D))
    decoder = TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, **kwargs), 2, LayerNorm(D))
    torch_encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, **kwargs), 2,
                                                torch.nn.LayerNorm(D), enable_nested_tensor=False)
    torch_decoder = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, **kwargs), 2,
                                                torch.nn.LayerNorm(D))
    twin(torch_encoder, encoder).train()                  # training mode: torch's math path, no fast path
    twin(torch_decoder, decoder).train()
    torch_encoder.train(), torch_decoder.train()
    src, tgt = sequence(S, batch_first, 1), sequence(T, batch_first, 2)
    pad = padding([S, 4, 2], S)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T)
    memory = encoder(src, src_key_padding_mask=pad)
    assert torch.allclose(memory, torch_encoder(src, src_key_padding_mask=pad), atol=TOL)   # seqlab's final LayerNorm
    out = decoder(tgt, memory, tgt_mask=causal, memory_key_padding_mask=pad)
    assert torch.allclose(out, torch_decoder(tgt, memory, tgt_mask=causal, memory_key_padding_mask=pad), atol=TOL)


def test_stacks_of_torch_layers_refuse_the_seqlab_extras_and_say_what_to_pass():
    layer = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0)
    with pytest.raises(TypeError, match=r"TransformerEncoder\(positional=\.\.\.\) needs seqlab's layers "
                                        r"\(seqlab.nn.TransformerEncoderLayer\).*got a torch.nn"):
        TransformerEncoder(layer, 2, positional=ALiBi(H))
    with pytest.raises(TypeError, match=r"TransformerDecoder\(positional=\.\.\.\) needs seqlab's layers"):
        TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, FF), 2, positional=ALiBi(H))
    stack = TransformerEncoder(layer, 2)
    with pytest.raises(TypeError, match=r"\['need_weights'\] need seqlab's layers \(seqlab.nn.TransformerEncoderLayer"
                                        r"\); this stack holds torch.nn.*TransformerEncoderLayer"):
        stack(sequence(S, False, 1), need_weights=True)
    with pytest.raises(TypeError, match=r"Transformer\(positional=\.\.\.\) .*custom_encoder"):
        Transformer(D, H, custom_encoder=torch.nn.TransformerEncoder(layer, 1), positional=ALiBi(H))


def test_an_owner_gives_its_encoding_and_a_caller_cannot_give_a_second():
    """The stack's positions equal those a caller hands a bare stack; passing both is refused, naming the owner."""
    layer = randomize(TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True))
    alibi = ALiBi(H)
    owning, bare = TransformerEncoder(layer, 2, positional=alibi).eval(), TransformerEncoder(layer, 2).eval()
    x = sequence(S, True, 3)
    assert torch.equal(owning(x), bare(x, score_bias=alibi.score_bias(S, S)))
    assert not torch.allclose(owning(x), bare(x), atol=1e-3)
    with pytest.raises(ValueError, match=r"TransformerEncoder owns a positional encoding \(ALiBi\).*\['score_bias'\]"):
        owning(x, score_bias=alibi.score_bias(S, S))


def test_an_additive_mask_means_the_same_on_both_sides_of_the_torch_boundary():
    """seqlab's models hand the twins to_additive(real) (0 = may attend): no inversion, the very same numbers."""
    from seqlab.nn.masks import padding_mask, to_additive

    stack = TransformerEncoder(randomize(TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)), 2).eval()
    x, real = sequence(S, True, 4), padding_mask([S, 4, 0], S)               # sequence 2: all padding
    blocked, weights = stack(x, src_key_padding_mask=~real, is_causal=True, need_weights=True)   # torch's meaning
    additive, additive_weights = stack(x, src_key_padding_mask=to_additive(real), is_causal=True, need_weights=True)
    assert torch.equal(blocked, additive) and torch.equal(weights, additive_weights)
