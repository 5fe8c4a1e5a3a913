"""seqlab.watch: a GPT run with the student's pieces in place of its own gives the library's numbers."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises.nb10_multihead import multi_head_attention
from seqlab.exercises.nb12_transformer import layer_norm, transformer_block
from seqlab.models.gpt import GPT, GPTConfig
from seqlab.watch import attention_params, block_params, causal_mask, gpt_logits, greedy_ids, watched_loss


def small_gpt(**overrides) -> GPT:
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=11, max_len=12, d_model=16, num_layers=2, nhead=4, **overrides)).eval()
    with torch.no_grad():                                  # biases and LayerNorms away from their initial values
        for name, p in gpt.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return gpt


@pytest.mark.parametrize("pieces", [{}, {"attention": multi_head_attention}, {"norm": layer_norm},
                                    {"block": transformer_block},
                                    {"block": transformer_block, "attention": multi_head_attention, "norm": layer_norm}],
                         ids=["none", "attention", "norm", "block", "all"])
def test_the_pieces_give_the_models_own_logits(pieces):
    gpt = small_gpt()
    ids = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(gpt_logits(gpt, ids, **pieces), gpt(ids), atol=1e-5)


def test_greedy_ids_write_what_greedy_generation_writes():
    gpt = small_gpt()
    prompt = torch.tensor([1, 2, 3])
    expected = gpt.generate(prompt, 15, temperature=0, use_cache=False)
    assert torch.equal(greedy_ids(gpt, prompt, 15, attention=multi_head_attention), expected)


def test_watched_loss_is_the_cross_entropy_and_a_mistake_raises_it():
    gpt = small_gpt()
    ids = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(2))
    batches = [(ids[:, :-1], ids[:, 1:])]
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(gpt(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).item()
    assert abs(watched_loss(gpt, batches, attention=multi_head_attention) - expected) < 1e-5


def test_params_are_the_lectures_orientation_and_the_mask_is_notebook_9s():
    gpt = small_gpt()
    block = gpt.blocks[0]
    p = attention_params(block)
    assert p["W_Q"].shape == (16, 16) and torch.equal(p["W_O"], block.self_attn.out_proj.weight.detach().T)
    assert torch.equal(block_params(block)["W_1"], block.linear1.weight.detach().T)
    assert torch.equal(causal_mask(3), torch.tensor([[True, False, False], [True, True, False], [True, True, True]]))


def test_a_gpt_of_another_design_is_refused_by_name():
    with pytest.raises(ValueError, match="norm_first=False"):
        gpt_logits(small_gpt(norm_first=False), torch.zeros(1, 3, dtype=torch.long))
