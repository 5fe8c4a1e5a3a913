"""seqlab.models.charlm.continue_with_cell: a trained character model run with a cell function from elsewhere."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import EXERCISES
from seqlab.models.charlm import CharLM, CharLMConfig, continue_with_cell


def small_model(cell: str, num_layers: int = 1) -> CharLM:
    torch.manual_seed(0)
    return CharLM(CharLMConfig(vocab_size=7, cell=cell, embed_size=4, hidden_size=5, num_layers=num_layers)).double()


@pytest.mark.parametrize("cell, exercise, num_layers", [("gru", "gru_cell", 1), ("gru", "gru_cell", 2),
                                                         ("lstm", "lstm_cell", 1), ("lstm", "lstm_cell", 2)])
def test_the_exercises_reference_cells_write_what_the_model_writes(cell, exercise, num_layers):
    model = small_model(cell, num_layers)
    reference = EXERCISES[exercise].reference
    prompt = torch.tensor([1, 4, 2])
    greedy = continue_with_cell(model, reference, prompt, 12)
    assert greedy.shape == (15,) and torch.equal(greedy[:3], prompt)
    assert torch.equal(greedy, model.generate(prompt, 12, temperature=0))
    sampled = [continue_with_cell(model, reference, prompt, 12, temperature=1.0,
                                  generator=torch.Generator().manual_seed(3)) for _ in range(2)]
    assert torch.equal(sampled[0], sampled[1])
    assert torch.equal(sampled[0], model.generate(prompt, 12, generator=torch.Generator().manual_seed(3)))


def test_a_wrong_cell_writes_something_else_and_a_misshapen_one_is_named():
    model = small_model("gru")
    reference = EXERCISES["gru_cell"].reference
    prompt = torch.tensor([1, 4, 2])

    def keeps_the_old_state(x, h, W_ih, W_hh, b_ih, b_hh):
        return h
    assert not torch.equal(continue_with_cell(model, keeps_the_old_state, prompt, 12),
                           continue_with_cell(model, reference, prompt, 12))
    with pytest.raises(ValueError, match=r"cell should return h, each of shape \(1, 5\).*got \[\(5,\)\]"):
        continue_with_cell(model, lambda x, h, *weights: h[0], prompt, 3)
    with pytest.raises(ValueError, match=r"cell should return h and c"):
        continue_with_cell(small_model("lstm"), lambda x, h, c, *weights: h, prompt, 3)
    with pytest.raises(ValueError, match=r"prompt should be a non-empty 1-D tensor of ids"):
        continue_with_cell(model, reference, torch.tensor([1.0, 2.0]), 3)
    with pytest.raises(TypeError, match="cell should be a function"):
        continue_with_cell(model, None, prompt, 3)


def test_the_cell_given_is_the_one_that_runs_once_per_character_read():
    model = small_model("lstm")
    prompt = torch.tensor([1, 4, 2])
    calls = []

    def counting(*args):
        calls.append(args[0].shape)
        return EXERCISES["lstm_cell"].reference(*args)

    continue_with_cell(model, counting, prompt, 5)
    assert len(calls) == 3 + 5 - 1 and all(shape == (1, 4) for shape in calls)
    frozen = continue_with_cell(model, lambda x, h, c, *weights: (h, c), prompt, 5)   # a cell that never changes
    assert len(set(frozen[3:].tolist())) == 1, "the text then depends on nothing the cell computes"
