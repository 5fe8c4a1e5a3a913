"""Notebook 15's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.models.gpt import GPT, GPTConfig

from exercise_helpers import failure_message


def test_the_references_pass():
    assert set(exercises_of("nb15_kv_cache")) == {"cached_attention_step", "kv_cache_bytes", "predict_cache_saving",
                                                 "loss_by_position"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb15_kv_cache").items() if ex.measured is None)


# -- cached_attention_step -----------------------------------------------------------------------------------
def test_the_cached_step_is_the_last_row_of_full_causal_attention():
    from seqlab.nn.attention import attend
    from seqlab.nn.masks import causal_mask

    g = torch.Generator().manual_seed(0)
    Q, K, V = (torch.randn(2, 3, 6, 4, generator=g, dtype=torch.float64) for _ in range(3))
    full, _ = attend(Q, K, V, mask=causal_mask(6))                 # (2, 3, 6, 4): every position, causally
    out, K_grown, V_grown = EXERCISES["cached_attention_step"].reference(
        Q[..., -1:, :], K[..., -1:, :], V[..., -1:, :], K[..., :-1, :], V[..., :-1, :])
    assert torch.allclose(out, full[..., -1:, :]) and torch.equal(K_grown, K) and torch.equal(V_grown, V)


def _step(append=True, front=False, scale=True, dim=-1, keep_cache=False, query_is_key=False, as_list=False):
    def f(q, k_new, v_new, K_cache, V_cache):
        K = torch.cat([k_new, K_cache] if front else [K_cache, k_new], -2)
        V = torch.cat([v_new, V_cache] if front else [V_cache, v_new], -2)
        K_read, V_read = (K, V) if append else (K_cache, V_cache)
        query = k_new if query_is_key else q
        scores = query @ K_read.transpose(-2, -1) / (q.shape[-1] ** 0.5 if scale else 1.0)
        out = torch.softmax(scores, dim=dim) @ V_read
        result = (out, K_cache, V_cache) if keep_cache else (out, K, V)
        return list(result) if as_list else result
    return f


@pytest.mark.parametrize("wrong, hint", [
    (_step(append=False), "append k_new and v_new *before* attending"),
    (_step(scale=False), "scale the scores by 1/sqrt(d_k)"),
    (_step(dim=-2), "the softmax must run over the keys (dim=-1)"),
    (_step(keep_cache=True), "return the grown cache"),
    (_step(front=True), "the new key went to the front of the cache"),
    (_step(query_is_key=True), "score q against every key"),
    (_step(as_list=True), "return three tensors (output, K, V)"),
    (lambda *args: _step()(*args)[0], "return three tensors"),
])
def test_cached_step_hints(wrong, hint):
    assert hint in failure_message("cached_attention_step", wrong)


def test_the_empty_cache_case_gets_its_own_hint():
    def ignores_empty(q, k_new, v_new, K_cache, V_cache):         # right for t > 0, wrong for an empty cache
        if K_cache.shape[-2] == 0:
            return torch.zeros_like(v_new), torch.cat([K_cache, k_new], -2), torch.cat([V_cache, v_new], -2)
        return _step()(q, k_new, v_new, K_cache, V_cache)
    text = failure_message("cached_attention_step", ignores_empty)
    assert "check 3 of 3" in text


# -- kv_cache_bytes (predict, then measure) ------------------------------------------------------------------
def test_the_measurement_is_the_models_own_cache_after_generation():
    measured = EXERCISES["kv_cache_bytes"].reference(2, 4, 32, 12, 1)
    assert measured == 2 * 2 * 12 * 32 * 4
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, max_len=12, d_model=32, num_layers=2, nhead=4)).eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache)            # a prompt of 5, then one token at a time
        for _ in range(7):
            model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
    assert cache.offset == 12 and cache.nbytes() == measured


def formula(numbers=False, one_tensor=False, per_head=False, one_layer=False, one_sequence=False, bits=False,
            squared=False):
    def f(num_layers, nhead, d_model, T, batch_size):
        if squared:
            return 8 * num_layers * batch_size * T * T
        n = (1 if one_tensor else 2) * (1 if one_layer else num_layers) * (1 if one_sequence else batch_size) * T
        n *= d_model * (nhead if per_head else 1)
        return n * (1 if numbers else 32 if bits else 4)
    return f


@pytest.mark.parametrize("wrong, hint", [
    (formula(numbers=True), "each float32 number takes 4 bytes"),
    (formula(one_tensor=True), "the keys K and the values V: count both"),
    (formula(per_head=True), "not nhead x d_model"),
    (formula(one_layer=True), "multiply by num_layers"),
    (formula(bits=True), "that is bits"),
    (formula(squared=True), "that is the attention matrix"),
    (lambda *args: formula()(*args) + 1, "off by a factor"),
    (lambda *args: str(formula()(*args)), "return a number of bytes"),
])
def test_kv_cache_hints_name_the_slip_and_both_numbers(wrong, hint):
    text = failure_message("kv_cache_bytes", wrong)
    assert hint in text
    if "return a number" not in hint:
        assert "measured 153,600" in text                                   # the first case: 2 x 3 x 50 x 128 x 4 bytes


def test_the_batch_slip_is_named_on_the_case_with_several_sequences():
    text = failure_message("kv_cache_bytes", formula(one_sequence=True))
    assert "check 2 of 3" in text and "multiply by batch_size" in text


# -- loss_by_position ---------------------------------------------------------------------------------------
def test_loss_by_position_reference_agrees_with_the_library_and_the_mean_loss():
    from seqlab.train import evaluate, lm_loss, lm_loss_by_position

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, max_len=8, d_model=16, num_layers=1, nhead=2)).eval()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(11, (3, 8), generator=g), torch.randint(11, (3, 8), generator=g)) for _ in range(2)]
    by_position = lm_loss_by_position(model, batches)
    with torch.no_grad():
        reference = torch.stack([EXERCISES["loss_by_position"].reference(model(x).double(), y) for x, y in batches]).mean(0)
    assert by_position.shape == (8,) and torch.allclose(by_position, reference, atol=1e-6)
    assert abs(by_position.mean().item() - evaluate(model, batches, lm_loss).loss) < 1e-5


def test_lm_loss_by_position_rejects_mismatched_shapes():
    model = GPT(GPTConfig(vocab_size=11, max_len=8, d_model=16, num_layers=1, nhead=2))
    with pytest.raises(ValueError, match=r"expects logits of shape \(B, T, V\) = \(2, 5, V\)"):
        from seqlab.train import lm_loss_by_position
        lm_loss_by_position(model, [(torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 5, dtype=torch.long))])


def _by_position(sign=-1, raw=False, probability=False, reduce="mean0", shift=0):
    def f(logits, targets):
        source = logits if raw else torch.softmax(logits, -1) if probability else torch.log_softmax(logits, -1)
        picked = sign * source.gather(-1, targets.roll(shift, 1).unsqueeze(-1)).squeeze(-1)
        return {"mean0": picked.mean(0), "sum0": picked.sum(0), "mean1": picked.mean(1), "none": picked,
                "all": picked.mean()}[reduce]
    return f


@pytest.mark.parametrize("wrong, hint", [
    (_by_position(sign=1), "flip the sign"),
    (_by_position(raw=True), "not the raw logits"),
    (_by_position(probability=True), "the probability itself is not the cross-entropy"),
    (_by_position(reduce="sum0"), "you summed over the windows"),
    (_by_position(reduce="mean1"), "you averaged over the positions"),
    (_by_position(reduce="none"), "average over the windows (dim=0)"),
    (_by_position(reduce="all"), "that is one number"),
    (_by_position(shift=1), "do not shift them again"),
    (lambda logits, targets: _by_position()(logits, targets).tolist(), "return a torch.Tensor"),
    (lambda logits, targets: _by_position()(logits[:, :-1], targets[:, 1:]), "should have shape (6,)"),
])
def test_loss_by_position_hints(wrong, hint):
    assert hint in failure_message("loss_by_position", wrong)


def test_the_watched_slips_are_caught_with_their_diagnosis():
    from seqlab.exercises.nb15_kv_cache import STEP_MISTAKES

    hints = {"attend, then append": "append k_new and v_new *before* attending",
             "not returned grown": "still has the"}
    for label, step in STEP_MISTAKES.items():
        (key,) = [k for k in hints if k in label]
        assert hints[key] in failure_message("cached_attention_step", step), label


# -- predict_cache_saving (predict, then measure) -------------------------------------------------------------
def _counted_flops():
    """Section 1's ``flops`` by seqlab.cost's formula for charlm-gpt's sizes (the notebook asserts the counts equal it)."""
    from seqlab.cost import decoder_flops

    sizes = dict(d=64, layers=4, vocab=65, d_ff=256)
    return {m: (decoder_flops(1, m - 1, **sizes), decoder_flops(m, **sizes)) for m in (8, 16, 32, 64)}


def test_the_uncached_step_costs_exactly_m_times_the_cached_one():
    assert all(without == m * with_ for m, (with_, without) in _counted_flops().items())


@pytest.mark.parametrize("prediction", [64, 63, 60.0, 70])
def test_a_prediction_near_m_passes(prediction):
    assert check("predict_cache_saving", lambda: prediction, measured=_counted_flops())


@pytest.mark.parametrize("prediction, says", [
    (4096, "m x m matrix"),                                      # m^2: "attention is quadratic"
    (2048, "m x m matrix"),
    (200, "and no more"),
    (1, "goes through every layer again"),
    (0.5, "above 1"),
    (32, "less than m = 64"),
    ("64", "not a str"),
    (True, "not a bool"),
])
def test_cache_saving_hints(prediction, says):
    text = failure_message("predict_cache_saving", lambda: prediction, measured=_counted_flops())
    assert says in text
    if not isinstance(prediction, (str, bool)):
        assert "measured 64.0 times" in text


def test_cache_saving_without_its_measurement_says_which_cell_to_run():
    from exercise_helpers import measurement_error

    assert "section 1's FLOPs cell" in measurement_error("predict_cache_saving", None, TypeError)
    assert "m = 64" in measurement_error("predict_cache_saving", {8: (1, 8)}, TypeError)
    assert "two positive counts" in measurement_error("predict_cache_saving", {64: (10, 5)}, ValueError)
