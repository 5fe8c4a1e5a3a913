"""seqlab.models.encoder: shapes, padding, the causal flag, per-head weights straight from the layers, errors."""

from __future__ import annotations

import pytest
import torch

from seqlab.models import EncoderConfig, EncoderModel
from seqlab.nn.positional import POSITIONAL_ENCODINGS


def model(**overrides) -> EncoderModel:
    torch.manual_seed(0)
    config = dict(vocab_size=11, d_model=16, nhead=4, num_layers=2, dim_feedforward=32, max_len=12)
    return EncoderModel(EncoderConfig(**(config | overrides))).eval()


def ids(B: int = 3, n: int = 7, seed: int = 1, vocab: int = 11) -> torch.Tensor:
    return torch.randint(0, vocab, (B, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("positional", POSITIONAL_ENCODINGS)
def test_shapes_and_weights_for_every_positional_encoding(positional):
    m = model(positional=positional)
    logits, weights = m(ids(), need_weights=True)
    assert logits.shape == (3, 7, 11)
    assert weights.shape == (2, 3, 4, 7, 7)                                  # (L, B, H, n, n)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 4, 7), atol=1e-5)
    assert torch.equal(m(ids()), logits)                                     # the weights change nothing


def test_num_outputs_and_sequence_readout():
    assert model(num_outputs=5)(ids()).shape == (3, 7, 5)
    assert model(num_outputs=2, readout="sequence")(ids()).shape == (3, 2)


def test_weights_are_the_layers_own():
    """The returned weights are what the first layer's self-attention computes on the embedded input."""
    m = model(norm_first=True)
    x = ids()
    _, weights = m(x, need_weights=True)
    h = m.positional(m.embed(x))
    attn = m.encoder.layers[0].self_attn
    _, first = attn(*(m.encoder.layers[0].norm1(h),) * 3, need_weights=True, average_attn_weights=False)
    assert torch.allclose(weights[0], first, atol=1e-6)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope", "alibi"])
@pytest.mark.parametrize("causal", [False, True])
def test_padding_gives_the_outputs_of_the_unpadded_sequences(positional, causal):
    m = model(positional=positional, causal=causal)
    x = ids(3, 9)
    lengths = torch.tensor([9, 4, 6])
    padded = x.clone()
    for b, length in enumerate(lengths.tolist()):
        padded[b, length:] = torch.randint(0, 11, (9 - length,))            # junk after the end
    logits, weights = m(padded, lengths, need_weights=True)
    for b, length in enumerate(lengths.tolist()):
        alone, alone_weights = m(x[b:b + 1, :length], need_weights=True)
        assert torch.allclose(logits[b, :length], alone[0], atol=1e-5)
        assert torch.allclose(weights[:, b, :, :length, :length], alone_weights[:, 0], atol=1e-6)
        assert weights[:, b, :, :, length:].abs().sum() == 0                 # nobody reads the padding


def test_sequence_readout_averages_the_real_tokens_only():
    m = model(readout="sequence", num_outputs=3)
    x, lengths = ids(2, 8), torch.tensor([8, 3])
    padded = m(x, lengths)
    assert torch.allclose(padded[1], m(x[1:, :3])[0], atol=1e-5)
    assert torch.allclose(padded[0], m(x[:1])[0], atol=1e-5)


def test_causal_hides_the_future():
    x = ids(2, 8)
    changed = x.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 11
    causal, full = model(causal=True), model(causal=False)
    a, weights = causal(x, need_weights=True)
    assert torch.allclose(a[:, :5], causal(changed)[:, :5], atol=1e-6)       # outputs 0-4 ignore tokens 5-7
    assert not torch.allclose(a[:, 5:], causal(changed)[:, 5:], atol=1e-3)
    assert weights.triu(diagonal=1).abs().max() == 0
    assert not torch.allclose(full(x)[:, :5], full(changed)[:, :5], atol=1e-3)  # without the flag they do see them


def test_all_padding_sequence_is_finite():
    logits = model()(ids(2, 5), torch.tensor([5, 0]))
    assert torch.isfinite(logits).all()


def test_gradients_reach_every_parameter():
    m = model(positional="learned").train()
    m(ids()).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())


def test_uses_seqlabs_own_attention_not_torchs(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("torch.nn.functional.multi_head_attention_forward was called")
    monkeypatch.setattr(torch.nn.functional, "multi_head_attention_forward", refuse)
    monkeypatch.setattr(torch.nn.functional, "layer_norm", refuse)
    model(norm_first=True)(ids())
    assert not any(isinstance(mod, (torch.nn.MultiheadAttention, torch.nn.LayerNorm, torch.nn.TransformerEncoderLayer))
                   for mod in model().modules())


@pytest.mark.parametrize("bad, message", [
    (lambda: ids().float(), "dtype torch.long"),
    (lambda: ids()[0], "shape (B, T)"),
    (lambda: torch.tensor([[1, 2, 11]]), "ids must lie in 0 .. 10 (vocab_size=11), got an id of 11"),
    (lambda: torch.tensor([[1, -1, 3]]), "got an id of -1"),
    (lambda: ids(1, 13), "holds max_len=12 positions, got a sequence of 13 tokens"),
])
def test_bad_ids_are_named(bad, message):
    with pytest.raises(ValueError) as error:
        model()(bad())
    assert message in str(error.value)


def test_bad_lengths_are_named():
    with pytest.raises(ValueError, match=r"lengths of shape \(3,\)"):
        model()(ids(), torch.tensor([7, 7]))
    with pytest.raises(ValueError, match=r"lengths must lie in 0 \.\. 7"):
        model()(ids(), torch.tensor([7, 8, 1]))


def test_longer_than_max_len_is_fine_without_a_learned_table():
    assert model(positional="sinusoidal")(ids(1, 20)).shape == (1, 20, 11)


@pytest.mark.parametrize("overrides, message", [
    (dict(d_model=18, nhead=4), r"d_model must be divisible by nhead .*got d_model=18, nhead=4;"),
    (dict(d_model=16, nhead=0), r"d_model must be divisible by nhead .*got d_model=16, nhead=0;"),
    (dict(positional="relative"), r"unknown positional encoding 'relative'; expected one of \('none', "),
    (dict(readout="last"), "readout must be one of"),
])
def test_bad_configs_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        model(**overrides)


def test_fused_path_gives_the_same_logits():
    explicit, fused = model(causal=True), model(causal=True, fused=True)
    x, lengths = ids(3, 9), torch.tensor([9, 4, 6])
    assert torch.allclose(explicit(x, lengths), fused(x, lengths), atol=1e-5)
    _, weights = fused(x, lengths, need_weights=True)                     # weights asked for: the explicit path
    assert weights is not None and weights.shape == (2, 3, 4, 9, 9)


def test_pre_norm_ends_with_a_layer_norm_and_the_config_round_trips():
    m = model(norm_first=True)
    assert m.encoder.norm is not None and model().encoder.norm is None
    assert EncoderConfig(**m.config.to_dict()) == m.config


def test_the_model_owns_its_encoding_once_and_loads_state_dicts_with_per_layer_copies():
    """A learned table is saved once (issue 17); a state_dict from before, with one equal copy per layer, loads."""
    m = model(positional="learned")
    state = m.state_dict()
    assert [k for k in state if k.endswith("positional.weight")] == ["positional.weight"]
    old = dict(state) | {f"encoder.layers.{i}.positional.weight": state["positional.weight"].clone() for i in range(2)}
    fresh = model(positional="learned", vocab_size=11)
    torch.nn.init.zeros_(fresh.positional.weight)
    fresh.load_state_dict(old, strict=True)                                  # the copies are checked, then dropped
    assert torch.equal(fresh(ids()), m(ids()))
    old["encoder.layers.1.positional.weight"] = old["encoder.layers.1.positional.weight"] + 1
    with pytest.raises(ValueError, match=r"encoder.layers.1.positional.weight is not a copy of positional.weight"):
        fresh.load_state_dict(old)
