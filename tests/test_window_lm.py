"""seqlab.models.window_lm: the fixed-window neural LM sees exactly its window, and nothing before it."""

from __future__ import annotations

import pytest
import torch

from seqlab.models.window_lm import WindowLM, WindowLMConfig
from seqlab.train import evaluate, lm_loss, train


def small_model(context=3, vocab=7, seed=0):
    torch.manual_seed(seed)
    return WindowLM(WindowLMConfig(vocab_size=vocab, context=context, embed_size=4, hidden_size=8))


def test_forward_is_the_written_out_formula():
    model = small_model(context=3)
    x = torch.tensor([[1, 2, 3, 4, 5], [6, 0, 1, 2, 3]])
    logits, state = model(x)
    assert logits.shape == (2, 5, 7) and state.tolist() == [[4, 5], [2, 3]]
    pad = model.pad_id
    for b in range(2):
        padded = [pad, pad] + x[b].tolist()
        for t in range(5):
            window = torch.tensor(padded[t:t + 3])                     # x_{t-2}, x_{t-1}, x_t
            z = model.embed(window).reshape(-1)                        # the concatenation [E[.]; E[.]; E[.]]
            a = torch.tanh(model.hidden.weight @ z + model.hidden.bias)
            expected = model.head.weight @ a + model.head.bias
            torch.testing.assert_close(logits[b, t], expected)


def test_nothing_before_the_window_reaches_the_prediction():
    model = small_model(context=3)
    x = torch.tensor([[1, 2, 3, 4, 5, 6]])
    changed = x.clone()
    changed[0, 2] = 0                                                  # 3 steps before the last position
    logits, changed_logits = model(x)[0], model(changed)[0]
    assert torch.equal(logits[0, -1], changed_logits[0, -1]), "position 2 is outside the last window"
    assert not torch.allclose(logits[0, 4], changed_logits[0, 4]), "but inside the one before"


def test_state_carries_the_window_across_calls():
    model = small_model(context=4)
    x = torch.randint(0, 7, (3, 10), generator=torch.Generator().manual_seed(1))
    whole, _ = model(x)
    first, state = model(x[:, :6])
    second, _ = model(x[:, 6:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)


def test_context_one_has_an_empty_state():
    model = small_model(context=1)
    logits, state = model(torch.tensor([[1, 2]]))
    assert logits.shape == (1, 2, 7) and state.shape == (1, 0)
    torch.testing.assert_close(model(torch.tensor([[2]]), state)[0][0, 0], logits[0, 1])


def test_parameter_count_grows_with_the_window():
    counts = {k: sum(p.numel() for p in WindowLM(WindowLMConfig(84, k, 16, 256)).parameters()) for k in (4, 8)}
    per_symbol = 16 * 256                                              # one block of W_z per window position
    assert counts[8] - counts[4] == 4 * per_symbol
    assert counts[4] == 85 * 16 + 4 * 16 * 256 + 256 + 256 * 84 + 84


def test_it_learns_a_rule_inside_its_window():
    # the next symbol is the one two steps back: a window of 2 can learn it, a window of 1 cannot
    g = torch.Generator().manual_seed(0)
    def batches():
        while True:
            x = torch.randint(0, 5, (32, 2), generator=g).repeat(1, 6)   # period 2: x_t = x_{t-2}
            yield x[:, :-1], x[:, 1:]
    results = {}
    for k in (1, 2):
        model = WindowLM(WindowLMConfig(5, k, 8, 32))
        train(model, batches(), lr=1e-2, max_steps=150, progress=False)
        results[k] = evaluate(model, batches(), max_batches=5).loss
    assert results[2] < 0.3 < 1.0 < results[1], results


@pytest.mark.parametrize("bad, message", [
    (torch.zeros(2, 3), "dtype torch.long"),
    (torch.zeros(6, dtype=torch.long), "shape (B, T)"),
    (torch.tensor([[1, 9]]), "ids must lie in [0, 7)"),
])
def test_bad_input_names_what_was_expected(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        small_model()(bad)


def test_bad_state_and_config():
    with pytest.raises(ValueError, match=r"last k - 1 = 2 ids.*got torch.int64 of shape \(1, 3\)"):
        small_model(context=3)(torch.tensor([[1]]), torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="context must be a positive int, got 0"):
        WindowLM(WindowLMConfig(vocab_size=5, context=0))


def test_trains_with_the_course_loss():
    model = small_model()
    x = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(2))
    loss = lm_loss(model, (x[:, :-1], x[:, 1:]))
    loss.backward()
    assert loss.item() > 0 and all(p.grad is not None for p in model.parameters())
