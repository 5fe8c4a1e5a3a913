"""seqlab.stepwise: generation through a GPT's own layers with a given attention step (notebook 15's watch)."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import EXERCISES
from seqlab.exercises.nb15_kv_cache import STEP_MISTAKES
from seqlab.models.gpt import GPT, GPTConfig
from seqlab.stepwise import generate_with_step


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, max_len=24, d_model=32, num_layers=2, nhead=4)).eval()


def draws():
    return torch.Generator().manual_seed(3)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_the_reference_step_and_the_uncached_run_equal_gpt_generate(gpt, temperature):
    prompt = torch.tensor([1, 2, 3])
    expected = gpt.generate(prompt, 20, temperature=temperature, generator=draws(), use_cache=False)
    step = EXERCISES["cached_attention_step"].reference
    assert torch.equal(generate_with_step(gpt, prompt, 20, step, temperature=temperature, generator=draws()), expected)
    assert torch.equal(generate_with_step(gpt, prompt, 20, None, temperature=temperature, generator=draws()), expected)


def test_the_step_sees_every_layer_and_its_own_caches(gpt):
    seen = []

    def step(q, k_new, v_new, K_cache, V_cache):
        seen.append((tuple(q.shape), K_cache.shape[-2]))
        return EXERCISES["cached_attention_step"].reference(q, k_new, v_new, K_cache, V_cache)

    generate_with_step(gpt, torch.tensor([1, 2]), 3, step, temperature=0)
    # 5 tokens fed one at a time (2 prompt + 3 generated, the last not fed), 2 layers each, caches growing 0..3
    assert [t for _, t in seen] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(shape == (1, 4, 1, 8) for shape, _ in seen)


def test_each_slip_changes_charlm_gpts_text():
    from seqlab import pretrained

    trained, _ = pretrained.load_pretrained("charlm-gpt")          # an untrained GPT barely uses its attention
    prompt = torch.tensor([1, 2, 3])
    right = generate_with_step(trained, prompt, 30, None, generator=draws())
    assert torch.equal(generate_with_step(trained, prompt, 30, EXERCISES["cached_attention_step"].reference,
                                          generator=draws()), right)
    for label, step in STEP_MISTAKES.items():
        assert not torch.equal(generate_with_step(trained, prompt, 30, step, generator=draws()), right), label


def test_it_refuses_what_it_cannot_run(gpt):
    with pytest.raises(ValueError, match="max_len = 24"):
        generate_with_step(gpt, torch.tensor([1, 2]), 23, None)
    rope = GPT(GPTConfig(vocab_size=11, max_len=24, d_model=32, num_layers=1, nhead=4, positional="rope"))
    with pytest.raises(ValueError, match="added to the embeddings"):
        generate_with_step(rope, torch.tensor([1]), 2, None)
