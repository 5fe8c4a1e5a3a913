"""seqlab.models.gpt: the decoder-only language model, its KV cache and its generation.

The cache must change nothing but the cost: cached logits equal a full forward pass, and cached
generation gives the same tokens as uncached generation (greedy and sampled, every positional
encoding, also past the context). Plus the parameter-count formula, causality, gradients, the
training utilities, and the error messages.
"""

from __future__ import annotations

import pytest
import torch

from seqlab.data import LMBatches
from seqlab.decoding import sample_next
from seqlab.models import GPT, GPTConfig, KVCache
from seqlab.train import evaluate, lm_loss, train

V, T = 13, 16
POSITIONS = ["learned", "sinusoidal", "rope", "alibi"]


def small(positional="learned", seed=0, **overrides) -> GPT:
    """A small GPT with spread-out weights, so that its logits (and so its tokens) differ from place to place."""
    torch.manual_seed(seed)
    settings = {"vocab_size": V, "max_len": T, "d_model": 16, "num_layers": 2, "nhead": 4, "positional": positional}
    model = GPT(GPTConfig(**{**settings, **overrides}))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    return model.eval()


def ids(B, n, seed=0):
    return torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))


# -- configuration ------------------------------------------------------------------------------------
def test_config_defaults_round_trip_and_validation():
    c = GPTConfig(vocab_size=84)
    assert c.dim_feedforward == 4 * c.d_model and c.norm_first and c.tie_weights and c.activation == "gelu"
    assert GPTConfig.from_dict(c.to_dict()) == c
    with pytest.raises(TypeError, match=r"unknown GPTConfig fields \['depth'\]; expected some of"):
        GPTConfig.from_dict({**c.to_dict(), "depth": 3})
    with pytest.raises(TypeError, match=r"\['n_head', 'n_layer'\]; n_head is nhead here; n_layer is num_layers here"):
        GPTConfig(vocab_size=5, n_layer=2, n_head=2)                     # nanoGPT's names: say torch.nn's
    with pytest.raises(ValueError, match=r"d_model must be divisible by nhead.*got d_model=30, nhead=4; nhead could "
                                         r"be one of \[1, 2, 3, 5, 6, 10, 15, 30\]"):
        GPTConfig(vocab_size=5, d_model=30, nhead=4)
    with pytest.raises(ValueError, match=r"unknown positional encoding 'relative'; expected one of \('none', "):
        GPTConfig(vocab_size=5, positional="relative")
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\), got 1.5"):
        GPTConfig(vocab_size=5, dropout=1.5)
    with pytest.raises(ValueError, match="GPTConfig.max_len must be an integer >= 1, got 0"):
        GPTConfig(vocab_size=5, max_len=0)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        GPTConfig(vocab_size=5, activation="swish")


@pytest.mark.parametrize("positional", ["learned", "rope", "none"])
@pytest.mark.parametrize("tie_weights", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("norm_first", [True, False])
def test_parameter_count_formula(positional, tie_weights, bias, norm_first):
    config = GPTConfig(vocab_size=V, max_len=T, d_model=24, num_layers=3, nhead=4, dim_feedforward=40,
                       positional=positional, tie_weights=tie_weights, bias=bias, norm_first=norm_first)
    model = GPT(config)
    assert model.num_parameters() == config.num_parameters()
    assert sum(p.numel() for p in model.parameters()) == config.num_parameters()
    assert (model.head.weight is model.embed.weight) == tie_weights


def test_parameter_count_of_nanogpts_baby_gpt():
    # 4 layers x (4 d^2 + 2 d 4d + biases + 2 LayerNorms) + embeddings (84 + 64 positions) x 128 + final LN + bias
    d = 128
    block = 12 * d * d + (4 * d + 4 * d + d) + 4 * d
    expected = 4 * block + (84 + 64) * d + 2 * d + 84
    assert GPTConfig(vocab_size=84).num_parameters() == expected == 812_372


# -- forward ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("positional", POSITIONS + ["none"])
def test_forward_shapes_weights_and_causality(positional):
    model = small(positional)
    x = ids(3, T)
    logits, weights = model(x, need_weights=True)
    assert logits.shape == (3, T, V) and weights.shape == (2, 3, 4, T, T)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 4, T))
    assert (weights.triu(diagonal=1) == 0).all(), "no position reads a later one"
    assert torch.equal(model(x), logits)
    changed = x.clone()
    changed[:, 9] = (changed[:, 9] + 1) % V
    after = model(changed)
    assert torch.allclose(after[:, :9], logits[:, :9], atol=1e-6), "logits before the change stay put"
    assert not torch.allclose(after[:, 9:], logits[:, 9:], atol=1e-3)


def test_fused_path_equals_explicit_path():
    explicit, fused = small("rope"), small("rope", fused=True)
    x = ids(2, T)
    assert torch.allclose(fused(x), explicit(x), atol=1e-5)


def test_gradients_reach_every_parameter_and_tied_weights_are_one():
    model = small("learned").train()
    lm_loss(model, (ids(2, T), ids(2, T, seed=1))).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert model.head.weight.grad is model.embed.weight.grad


def test_trains_with_the_course_training_loop():
    torch.manual_seed(0)
    text = torch.tensor([i % 7 for i in range(2000)])                # a cycle: easy to learn
    model = GPT(GPTConfig(vocab_size=7, max_len=16, d_model=32, num_layers=1, nhead=2))
    batches = LMBatches(text, 8, 16, seed=0)
    before = evaluate(model, batches, max_batches=5).loss
    history = train(model, batches, lm_loss, lr=3e-3, max_steps=60, progress=False, seed=0)
    after = evaluate(model, batches, max_batches=5).loss
    assert history.steps[-1] == 60 and before > 1.8 and after < 0.2 * before


# -- KV cache -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("positional", POSITIONS + ["none"])
def test_cached_logits_equal_a_full_forward_pass(positional):
    model = small(positional)
    x = ids(3, T)
    full = model(x)
    cache = model.new_cache()
    pieces = []
    for start, stop in [(0, 5), (5, 6), (6, 7), (7, 12), (12, T)]:
        pieces.append(model(x[:, start:stop], cache=cache))
        assert cache.offset == stop and len(cache) == 2
        for layer in cache.layers:                                       # (B, H, m, d_h) per layer
            assert layer.keys.shape == layer.values.shape == (3, 4, stop, 4)
        assert cache.nbytes() == 2 * 2 * 3 * 4 * stop * 4 * 4           # K and V, layers, B, H, m, d_h, float32
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)
    # the last step alone, the one generation uses
    assert torch.allclose(pieces[-1][:, -1], full[:, -1], atol=1e-5)


def test_cached_attention_weights_cover_the_cached_keys():
    model = small("alibi")
    x = ids(1, 10)
    _, full = model(x, need_weights=True)
    cache = model.new_cache()
    model(x[:, :7], cache=cache)
    _, step = model(x[:, 7:], cache=cache, need_weights=True)
    assert step.shape == (2, 1, 4, 3, 10)
    assert torch.allclose(step, full[:, :, :, 7:], atol=1e-6)


@pytest.mark.parametrize("positional", POSITIONS)
@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.8, 5)], ids=["greedy", "sampled", "top5"])
def test_cached_generation_gives_the_same_tokens(positional, temperature, top_k):
    model = small(positional)
    prompt = ids(1, 4)[0]
    n = T + 6                                                             # runs past the context
    tokens = {}
    for use_cache in (True, False):
        generator = torch.Generator().manual_seed(7)
        tokens[use_cache] = model.generate(prompt, n, temperature=temperature, top_k=top_k, generator=generator,
                                           use_cache=use_cache)
    assert tokens[True].shape == (4 + n,) and torch.equal(tokens[True][:4], prompt)
    assert torch.equal(tokens[True], tokens[False])
    if temperature > 0:
        assert len(set(tokens[True][4:].tolist())) > 2, "a model that varies its output (the test is not vacuous)"


def test_generation_conditions_on_the_last_context_tokens():
    model = small("learned")
    out = model.generate(ids(1, T)[0], 3, temperature=0.0)
    # the second generated token is the greedy choice after the last T tokens of the sequence so far
    window = out[1:T + 1]
    assert out[T + 1] == model(window[None])[0, -1].argmax()


def test_batched_generation_and_training_mode_comes_back():
    model = small("rope").train()
    prompts = ids(3, 5)
    out = model.generate(prompts, 6, temperature=0.0)
    assert out.shape == (3, 11) and model.training
    for row in range(3):
        assert torch.equal(out[row], model.generate(prompts[row], 6, temperature=0.0))


# -- errors -------------------------------------------------------------------------------------------
def test_errors_name_the_value_and_the_allowed_range():
    model = small()
    with pytest.raises(ValueError, match=f"the prompt has {T + 1} tokens but the model reads at most max_len={T}"):
        model.generate(ids(1, T + 1)[0], 2)
    with pytest.raises(ValueError, match="the prompt is empty"):
        model.generate(torch.tensor([], dtype=torch.long), 2)
    with pytest.raises(ValueError, match=rf"ids must lie in 0 .. {V - 1} \(vocab_size={V}\), got an id of {V}"):
        model.generate(torch.tensor([1, V]), 2)
    with pytest.raises(ValueError, match="got an id of -1"):
        model(torch.tensor([[1, -1]]))
    with pytest.raises(ValueError, match=rf"top_k must be in 1..{V} \(the vocabulary size\), got 0"):
        model.generate(torch.tensor([1]), 2, top_k=0)
    with pytest.raises(ValueError, match=rf"top_k must be in 1..{V}.*got {V + 1}"):
        model.generate(torch.tensor([1]), 2, top_k=V + 1)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0.*got -0.5"):
        model.generate(torch.tensor([1]), 2, temperature=-0.5)
    with pytest.raises(ValueError, match="n .* must be an integer >= 0, got -1"):
        model.generate(torch.tensor([1]), -1)
    with pytest.raises(ValueError, match="prompt must be a 1-D tensor of ids"):
        model.generate(torch.zeros(1, 2, 3, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="dtype torch.long"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=f"reads at most max_len={T} tokens, got {T + 1}"):
        model(ids(1, T + 1))
    cache = model.new_cache()
    model(ids(1, T - 2), cache=cache)
    with pytest.raises(ValueError, match=f"max_len={T} tokens, got 3 after {T - 2} cached positions"):
        model(ids(1, 3), cache=cache)
    with pytest.raises(ValueError, match="the cache has 3 layers but the model has num_layers=2"):
        model(ids(1, 2), cache=KVCache.empty(3))
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        model(ids(1, 2), cache=[])


def test_sample_next_validates_before_drawing():
    logits = torch.randn(2, 5)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0.*got nan"):
        sample_next(logits, temperature=float("nan"))
    with pytest.raises(ValueError, match=r"top_k must be an integer in 1..5 .*got 6"):
        sample_next(logits, temperature=0.0, top_k=6)                  # checked also on the greedy path
    with pytest.raises(ValueError, match=r"top_k must be an integer in 1..5 .*got 2.5"):
        sample_next(logits, top_k=2.5)
    assert torch.equal(sample_next(logits, temperature=0.0), logits.argmax(-1))
    top1 = sample_next(logits, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(top1, logits.argmax(-1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")
def test_cuda_cached_generation_matches_the_cpu():
    model = small("rope")
    prompt = ids(1, 4)[0]
    on_cpu = model.generate(prompt, 20, temperature=0.0)
    on_gpu = model.to("cuda").generate(prompt.cuda(), 20, temperature=0.0)
    assert torch.equal(on_gpu.cpu(), on_cpu)
    assert torch.equal(on_gpu, model.generate(prompt.cuda(), 20, temperature=0.0, use_cache=False))


# -- the listing of notebook 14 (seqlab.models.gpt_listing), the teaching twin -------------------------------
@pytest.mark.parametrize("num_layers, dim_feedforward", [(2, None), (3, 40)])
def test_the_listing_loads_gpts_weights_and_gives_equal_logits(num_layers, dim_feedforward):
    """The one-file listing of notebook 14 can never go stale: GPT's state_dict loads into it strictly and the two
    give the same logits (float64, to rounding), so every line of the listing is the library's model."""
    from seqlab.models.gpt_listing import ListingGPT

    gpt = small(num_layers=num_layers, dim_feedforward=dim_feedforward).double()
    c = gpt.config
    listing = ListingGPT(c.vocab_size, c.max_len, c.d_model, c.num_layers, c.nhead, c.dim_feedforward).double()
    listing.load_state_dict(gpt.state_dict())                       # strict: the same names and shapes
    assert listing.head.weight is listing.embed.weight              # tied, as the library's
    assert sum(p.numel() for p in listing.parameters()) == gpt.num_parameters()
    ids = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(listing(ids), gpt(ids), rtol=1e-10, atol=1e-10)
        assert torch.allclose(listing(ids[:, :5]), gpt(ids[:, :5]), rtol=1e-10, atol=1e-10)   # shorter windows


def test_the_listing_matches_charlm_gpt():
    """The same on the course's trained checkpoint, in float32, as notebook 14 shows it."""
    from seqlab import pretrained
    from seqlab.models.gpt_listing import ListingGPT

    gpt, _ = pretrained.load_pretrained("charlm-gpt")
    c = gpt.config
    listing = ListingGPT(c.vocab_size, c.max_len, c.d_model, c.num_layers, c.nhead, c.dim_feedforward)
    listing.load_state_dict(gpt.state_dict())
    ids = torch.randint(0, c.vocab_size, (2, c.max_len), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (listing(ids) - gpt(ids)).abs().max() < 1e-4
