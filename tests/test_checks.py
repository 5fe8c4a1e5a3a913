"""seqlab.checks: the input checks shared by the models, the data helpers and the training loop."""

import pytest
import torch
from torch import nn

from seqlab.checks import (StateDictMismatch, check_id_range, check_ids, check_lengths, first_id_outside,
                           load_state_dict_strict)
from seqlab.device import find_misplaced


def test_check_ids_wants_long_ids_of_shape_B_T_and_one_length_per_sequence():
    ids = torch.zeros(2, 3, dtype=torch.long)
    assert check_ids("M", ids, None) is None
    assert check_ids("M", ids, [3, 1]).tolist() == [3, 1]
    with pytest.raises(ValueError, match=r"M expects ids of shape \(B, T\) and dtype torch.long, got torch.float32 "
                                         r"tensor of shape \(2, 3\)"):
        check_ids("M", ids.float(), None)
    with pytest.raises(ValueError, match=r"M expects lengths of shape \(2,\), one per sequence, got \(3,\)"):
        check_ids("M", ids, [1, 2, 3])


def test_first_id_outside_reports_a_negative_id_first_and_accepts_an_empty_tensor():
    assert first_id_outside(torch.tensor([[0, 4]]), 5) is None
    assert first_id_outside(torch.tensor([[-2, 9]]), 5) == -2
    assert first_id_outside(torch.tensor([7, 5]), 5) == 7
    assert first_id_outside(torch.zeros(0, 3, dtype=torch.long), 5) is None


def test_check_id_range_names_owner_argument_and_size():
    check_id_range("M", torch.tensor([0, 4]), 5)
    with pytest.raises(ValueError, match=r"^M: token_type_ids must lie in 0 \.\. 1 \(type_vocab_size=2\), "
                                         r"got an id of 2$"):
        check_id_range("M", torch.tensor([[0, 2]]), 2, what="token_type_ids", size_name="type_vocab_size")


def test_check_lengths_bounds_by_the_padded_length_and_a_minimum():
    check_lengths("M", None, 4)
    check_lengths("M", torch.tensor([0, 4]), 4)
    with pytest.raises(ValueError, match=r"M: lengths must lie in 0 \.\. 4 \(each between 0 and the padded length 4\), "
                                         r"got \[5, 1\]"):
        check_lengths("M", torch.tensor([5, 1]), 4)
    with pytest.raises(ValueError, match=r"M: src_lengths must lie in 1 \.\. 4 \(each between 1 and the padded length 4\), "
                                         r"got \[0\]"):
        check_lengths("M", torch.tensor([0]), 4, what="src_lengths", minimum=1)


def test_strict_loading_names_every_problem_at_once_and_is_a_key_and_a_value_error():
    model = nn.Linear(3, 2)
    state = {"weight": torch.zeros(2, 4), "extra": torch.zeros(1)}           # bias missing, weight misshapen
    with pytest.raises(StateDictMismatch) as caught:
        load_state_dict_strict(model, state, source="w.safetensors")
    message = str(caught.value)
    assert message == ("cannot load w.safetensors into Linear: missing from w.safetensors (1): bias. "
                       "in w.safetensors but not in Linear (1): extra. "
                       "wrong shapes: weight: checkpoint (2, 4) vs model (2, 3)")
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
    load_state_dict_strict(model, {"weight": torch.ones(2, 3), "bias": torch.ones(2)})
    assert torch.equal(model.weight, torch.ones(2, 3))


def test_find_misplaced_names_the_first_tensor_off_the_module_device():
    model = nn.Linear(3, 2)
    here, there = torch.zeros(1), torch.zeros(1, device="meta")
    assert find_misplaced(model, [here, here]) is None
    index, tensor, expected = find_misplaced(model, [here, there])
    assert (index, tensor.device, expected) == (1, torch.device("meta"), torch.device("cpu"))
